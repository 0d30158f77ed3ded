"""The search for the cheapest (N_prfaas, N_local, B) that carries a target: fluid floors, the exact
staircase for small search spaces, a pattern search for large ones.

Fluid floors (``fluid_floors``) bound, for every (link size, N_prfaas) at once, the fewest local instances and
the least cost with which any plan could carry the target, from the stability conditions and the zero-load
SLO; they never exceed the truth, so they prune the exact search and bound what the pattern search returns.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
from numpy.typing import NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.latency.unloaded import local_mass_below, offload_mass_below, route_latency
from prfaas_plan.lengths import distinct_sorted
from prfaas_plan.optimize.carrier import Carrier, priced_deployment, smallest_local
from prfaas_plan.optimize.cost import (
    UnitPrices,
    egress_usd_per_hour,
    link_fixed_usd_per_hour,
)
from prfaas_plan.physics.tcp import deliverable_bytes_per_s

Array = NDArray[np.float64]

#: Threshold cells (quantile-spaced) on which the fluid floors of ``fluid_floors`` are tabulated.
_FLOOR_CELLS = 512
# The local floor of a (B, N_prfaas) no plan can carry with (larger than any pool).
_NO_PLAN = 2**62
# Relative slack on the floors' comparisons (a relaxation: it can only lower a floor).
_FLOOR_RTOL = 1e-9


@frozen
class Floors:
    """For every (link size, N_prfaas): the fewest local instances any plan can carry the target with, and a
    lower bound on the cost per hour (arrays of shape (len(bandwidths), max_prfaas), N_prfaas = column + 1)."""

    local: NDArray[np.int64]
    cost: Array
    #: On the threshold grid the floors were taken on (ascending): the fewest local prefill instances stable
    #: with every request up to the threshold prefilled locally, and the egress price (USD/h) of the rest.
    grid_local_prefill: Array
    grid_egress_usd: Array


def local_prefill_floor(need: Array) -> Array:
    """Fewest local prefill instances N_p with N_p > ``need`` (instances' worth of work), relaxed by
    ``_FLOOR_RTOL``; 0 where there is no local prefill work."""
    return np.where(need > 0, np.ceil(need * (1 - _FLOOR_RTOL)), 0.0)


def fluid_floors(
    carrier: Carrier, prices: UnitPrices, bandwidths: Sequence[float], max_prfaas: int, decode: int
) -> Floors:
    """Lower bounds from the stability conditions and the zero-load SLO, for every (B, N_prfaas) at once.

    A plan carries Λ only if it meets the SLO with no load and every stage is stable at Λ
    (``latency.stages``): with threshold t,
    N_prfaas > Λ · E[T_prfaas(L); L > t], B > Λ · E[S_kv(L); L > t], N_p > Λ · E[T_local(L); L <= t] and
    N_d >= ``decode`` (Eq. 5). The first two fall and the third rises with t, so over a cell [t_i, t_i+1] of a
    threshold grid each is bounded by its value at the cell's far end (the offload terms at t_i+1, the local
    term at t_i). A cell is possible for (B, N_prfaas) when both offload bounds are below them; the local floor
    is the decode floor plus the cell's fewest prefill instances, the cost floor adds the GPUs, the link's
    fixed price and the egress bound, each minimised over the possible cells. The egress priced at the target
    is Λ · p · S_kv(E[L | L > t]) (``throughput.egress_bytes_per_s``), equal to Λ · E[S_kv(L); L > t] because
    S_kv is affine in every profile and card (tokens times bytes per token, plus fixed state). Neither floor
    ever exceeds the true minimum over the search (the grid only loosens it), provided the curves are
    non-negative and non-decreasing in the length, as prefill times and cache sizes are.
    """
    model, rate = carrier.model, carrier.target.rate_req_per_s
    lengths = model.lengths
    lo, hi = lengths.lower_tokens - 1.0, lengths.upper_tokens
    inner = np.asarray(lengths.quantile(np.linspace(0.0, 1.0, _FLOOR_CELLS + 1)), dtype=np.float64)
    t = distinct_sorted(np.clip(np.concatenate(([lo], inner, [hi])), lo, hi))
    top = np.full_like(t, hi)
    offload_work = rate * np.asarray(model.prfaas_prefill.expect(lengths, t, top), dtype=np.float64)
    egress = rate * np.asarray(model.kv_bytes.expect(lengths, t, top), dtype=np.float64)
    local_work = rate * np.asarray(model.local_prefill.expect(lengths, np.full_like(t, lo), t), dtype=np.float64)
    # Cells [t_i, t_i+1]: offload bounds at the right end, local bound at the left end.
    cell_offload, cell_egress = offload_work[1:], egress[1:]
    # The SLO at zero load: P(TTFT <= X) with no waiting is P(local, fast enough), non-decreasing in t, plus
    # P(offloaded, fast enough), non-increasing in t and rising with B (the transfer takes S_kv / B): at most
    # their values at the cell's right and left ends. A cell whose bound is below q holds no plan that meets
    # the SLO even unloaded.
    route = route_latency(model)
    slo, q = carrier.target.ttft_slo_s, carrier.target.quantile
    # Each size bought serves at what its connections deliver (``physics.tcp``; the size itself without a shape).
    served = np.asarray([deliverable_bytes_per_s(b, model.link_tcp) for b in bandwidths], dtype=np.float64)
    stretch = model.link_bandwidth_bytes_per_s / served[:, None]
    local_fast = np.asarray(local_mass_below(lengths, route, t, slo), dtype=np.float64)
    offload_fast = np.asarray(offload_mass_below(lengths, route, t[None, :], slo, stretch), dtype=np.float64)
    meets_slo = local_fast[None, 1:] + offload_fast[:, :-1] >= q * (1 - _FLOOR_RTOL)
    cell_local = np.maximum(decode + local_prefill_floor(local_work[:-1]), 2.0)
    local_price = prices.local_usd_per_instance_hour or 0.0
    prfaas_price = prices.prfaas_usd_per_instance_hour or 0.0
    cell_cost = local_price * cell_local + egress_usd_per_hour(prices.link, cell_egress)
    order = np.argsort(cell_offload, kind="stable")
    by_offload = cell_offload[order]
    n_prfaas = np.arange(1, max_prfaas + 1, dtype=np.float64)
    # Cells possible for N_prfaas: the first ``count`` in offload order.
    count = np.searchsorted(by_offload, n_prfaas * (1 + _FLOOR_RTOL), side="left")
    local = np.empty((len(bandwidths), max_prfaas), dtype=np.int64)
    cost = np.empty((len(bandwidths), max_prfaas), dtype=np.float64)
    none = count == 0
    at = np.maximum(count - 1, 0)
    for i, b in enumerate(bandwidths):
        possible = (cell_egress[order] < served[i] * (1 + _FLOOR_RTOL)) & meets_slo[i, order]
        best_local = np.minimum.accumulate(np.where(possible, cell_local[order], np.inf))
        best_cost = np.minimum.accumulate(np.where(possible, cell_cost[order], np.inf))
        row_local = np.where(none, np.inf, best_local[at])
        local[i] = np.where(np.isfinite(row_local), row_local, float(_NO_PLAN)).astype(np.int64)
        cost[i] = (
            np.where(none, np.inf, best_cost[at]) + prfaas_price * n_prfaas + link_fixed_usd_per_hour(prices.link, b)
        )
    egress_usd = np.asarray(egress_usd_per_hour(prices.link, egress), dtype=np.float64)
    return Floors(
        local=local, cost=cost, grid_local_prefill=local_prefill_floor(local_work), grid_egress_usd=egress_usd
    )


#: Search spaces with at most this many PrfaaS instance counts and link sizes are searched exactly
#: (``_staircase``); larger ones by a pattern search from the fluid optimum (``_pattern_search``).
EXACT_PRFAAS = 48
EXACT_LINKS = 64
#: The exact search finishes a pattern search when the PrfaaS counts whose floor is below its answer are at
#: most this many (generous caps on a small target); beyond, the floor is reported instead.
FINISH_PRFAAS = 16
#: The pattern search's first steps: this fraction of each range (the fluid optimum it starts from is within a
#: few per cent of the answer on large fleets).
_PATTERN_START = 32


@dataclass(slots=True)
class _Incumbent:
    """The cheapest (N_prfaas, N_local, B) found so far, with its cost per hour."""

    cost: float = math.inf
    found: tuple[int, int, float] | None = None

    def offer(self, cost: float, n_prfaas: int, n_local: int, bandwidth: float) -> None:
        """Keep the cheaper; ties go to fewer PrfaaS instances, then fewer local instances, the smaller link."""
        if self.found is None or (cost, n_prfaas, n_local, bandwidth) < (self.cost, *self.found):
            self.cost, self.found = cost, (n_prfaas, n_local, bandwidth)


def _carries_at(
    carrier: Carrier, floors: Floors, ascending: list[float], n_prfaas: int, n_local: int, index: int
) -> bool:
    """Whether (``n_prfaas``, ``n_local``, ``ascending[index]``) carries the target (its fluid floor first)."""
    return bool(floors.local[index, n_prfaas - 1] <= n_local) and carrier.carries(n_prfaas, n_local, ascending[index])


def _smallest_carrying(carries: Callable[[int], bool], hi: int, *, gallop: bool) -> int:
    """The smallest index i <= ``hi`` with ``carries(i)`` (``carries(hi)`` holds, and carrying is monotone in
    i): by bisection over 0..hi, or, with ``gallop`` (the answer is likely near ``hi``), by steps of 1, 2, 4, ...
    down from ``hi`` and then bisection in the last step."""
    lo = -1
    if gallop:
        step = 1
        while hi - step > lo and carries(hi - step):
            hi, step = hi - step, step * 2
        lo = max(lo, hi - step)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        hi, lo = (mid, lo) if carries(mid) else (hi, mid)
    return hi


def _egress_floors(floors: Floors, max_local: int) -> Array:
    """Per count m = 0..``max_local`` of local prefill instances, a lower bound on the egress price (USD/h) of
    any plan that carries the target with them: the local pool is stable only for thresholds t with
    Λ · E[T_local(L); L <= t] below m, so t stays below the first grid point where it is not, and the egress
    Λ · E[S_kv(L); L > t] is at least its value there (0 where every threshold is stable)."""
    need, egress = floors.grid_local_prefill, floors.grid_egress_usd
    first_unstable = np.searchsorted(need, np.arange(max_local + 1, dtype=np.float64), side="right")
    return np.where(first_unstable < need.size, egress[np.minimum(first_unstable, need.size - 1)], 0.0)


def _staircase(
    carrier: Carrier,
    prices: UnitPrices,
    ascending: list[float],
    floors: Floors,
    decode: int,
    max_prfaas: int,
    max_local: int,
) -> _Incumbent:
    """The exact cheapest (N_prfaas, N_local, B) of the search space whose search goodput carries the target
    (each priced at its goodput-maximising plan; with egress priced per byte, each (N_prfaas, N_local) is priced
    at its smallest carrying link only, and a larger one whose plan shipped less could cost less: not shown
    impossible).

    For each N_prfaas (ascending, while its cost bound can still win): N_0, the fewest local instances that
    carry at the largest B (galloping from the fluid floor, bounded by the previous N_prfaas's N_0); then for
    N_local = N_0, N_0 + 1, ... while an extra local instance costs less than what it could save (the
    link's excess over the cheapest size and, with egress priced per byte, the egress: a local instance more
    can raise the threshold its plan runs at and ship less), the smallest B that carries (bisection over the
    sizes: carrying is monotone in B). An N_prfaas whose cost floor (``fluid_floors``) is
    no cheaper than the best is skipped.
    """
    local_price = prices.local_usd_per_instance_hour or 0.0
    prfaas_price = prices.prfaas_usd_per_instance_hour or 0.0
    link_costs = [link_fixed_usd_per_hour(prices.link, b) for b in ascending]
    top, cheapest_link = ascending[-1], min(link_costs)
    cheapest_floor = floors.cost.min(axis=0)
    # What N_local local instances cost at least, the GPUs and the egress their prefill pool allows included.
    counts = np.arange(max_local + 1)
    local_floor = counts * local_price + _egress_floors(floors, max_local)[np.maximum(counts - decode, 0)]
    local_floor = np.minimum.accumulate(local_floor[::-1])[::-1]  # the least over N_local and more
    best = _Incumbent()
    upper = max_local
    for n_prfaas in range(1, max_prfaas + 1):
        if cheapest_link + n_prfaas * prfaas_price + max(2, decode) * local_price >= best.cost:
            break
        if cheapest_floor[n_prfaas - 1] >= best.cost:
            continue
        n0 = smallest_local(carrier, n_prfaas, top, int(floors.local[-1, n_prfaas - 1]), upper)
        if n0 is None:
            continue
        upper = n0
        n_local, carried_at = n0, len(ascending) - 1
        # The walk stops on the bound below (GPUs, the cheapest link and the egress floor against the best) or
        # on the rule after pricing; with no egress priced they stop it where an extra local instance costs more
        # than the link it could save.
        while n_local <= max_local:
            if cheapest_link + n_prfaas * prfaas_price + local_floor[n_local] >= best.cost:
                break
            # ascending[carried_at] carries: the top does for n >= n0, and what carried with fewer local instances
            # does; the smallest size that carries is at or below it.
            hi = _smallest_carrying(
                partial(_carries_at, carrier, floors, ascending, n_prfaas, n_local), carried_at, gallop=n_local > n0
            )
            bandwidth, carried_at = ascending[hi], hi
            priced = priced_deployment(carrier, prices, n_prfaas, n_local, bandwidth, "", final=False).cost_at_target
            best.offer(priced.total_usd_per_hour, n_prfaas, n_local, bandwidth)
            # k local instances more cost at least k x the local price and save at most this link's excess over
            # the cheapest and all of the egress: once one instance costs that much, none beats this deployment.
            if local_price >= priced.link_usd_per_hour - cheapest_link + priced.egress_usd_per_hour - 1e-12:
                break
            n_local += 1
        if upper <= floors.local[-1].min():
            break  # more PrfaaS instances cannot save a local instance
    return best


def _pattern_search(
    carrier: Carrier, prices: UnitPrices, ascending: list[float], floors: Floors, max_local: int
) -> _Incumbent:
    """A cheap (N_prfaas, N_local, B) for a large search space: a pattern search over (N_prfaas, link size),
    each point priced with its fewest carrying local instances.

    It starts at the pair of least cost floor (the fluid optimum), climbs from there in steps of more PrfaaS
    instances and link until a point carries the target, and moves to a neighbour at ±step in
    N_prfaas or in the link sizes' index whenever that is cheaper, halving the steps (from 1/``_PATTERN_START`` of
    each range) when no neighbour is; it stops at steps of 1. A point's N_local is searched by galloping from its
    fluid floor up to the most local instances that could still beat the best. Points whose floor is no
    cheaper than the best are not priced; each search starts from the floor scaled by the last point's N_local
    over its floor. The answer carries the target (as every point priced does), and
    no deployment of the search space is cheaper than the least floor, which the caller reports as the gap.
    """
    local_price = prices.local_usd_per_instance_hour or 0.0
    prfaas_price = prices.prfaas_usd_per_instance_hour or 0.0
    n_links, max_prfaas = floors.cost.shape
    best = _Incumbent()
    priced: dict[tuple[int, int], float] = {}
    # N_local over its fluid floor at the last point priced: where the next point's search starts.
    ratio = [1.0]

    def price(i: int, k: int) -> float:
        if (i, k) in priced:
            return priced[(i, k)]
        cost = math.inf
        if floors.cost[i, k] < best.cost:
            fixed = link_fixed_usd_per_hour(prices.link, ascending[i]) + prfaas_price * (k + 1)
            high = max_local
            if local_price > 0 and math.isfinite(best.cost):
                high = min(high, math.floor((best.cost - fixed) / local_price * (1 + _FLOOR_RTOL)))
            low = int(floors.local[i, k])
            guess = math.ceil(low * ratio[0]) if low <= high else None
            n_local = smallest_local(carrier, k + 1, ascending[i], low, high, guess) if low <= high else None
            if n_local is not None:
                ratio[0] = n_local / low
                cost = priced_deployment(carrier, prices, k + 1, n_local, ascending[i], "", final=False).usd_per_hour
                best.offer(cost, k + 1, n_local, ascending[i])
        priced[(i, k)] = cost
        return cost

    i, k = (int(x) for x in np.unravel_index(int(np.argmin(floors.cost)), floors.cost.shape))
    here = price(i, k)
    step_k, step_i = max(1, max_prfaas // _PATTERN_START), max(1, n_links // _PATTERN_START)
    # The fluid optimum often sits where a stage is saturated, which queueing rules out: climb (more PrfaaS
    # instances, a larger link, or both) until a point carries the target.
    while not math.isfinite(here) and (i < n_links - 1 or k < max_prfaas - 1):
        climbs = [(i, min(k + step_k, max_prfaas - 1)), (min(i + step_i, n_links - 1), k)]
        climbs.append((climbs[1][0], climbs[0][1]))
        here, i, k = min((price(a, b), a, b) for a, b in climbs)
        if not math.isfinite(here):
            i, k = climbs[2]
    while True:
        moves = [(i, k + step_k), (i, k - step_k), (i + step_i, k), (i - step_i, k)]
        options = [(price(a, b), a, b) for a, b in moves if 0 <= a < n_links and 0 <= b < max_prfaas]
        cheaper = [o for o in options if o[0] < here]
        if cheaper:
            here, i, k = min(cheaper)
        elif step_k == 1 and step_i == 1:
            break
        else:
            step_k, step_i = max(1, step_k // 2), max(1, step_i // 2)
    return best


def cheapest(
    carrier: Carrier,
    prices: UnitPrices,
    ascending: list[float],
    floors: Floors,
    decode: int,
    max_local: int,
) -> tuple[tuple[int, int, float] | None, float | None]:
    """The cheapest (N_prfaas, N_local, B) whose search goodput carries the target, and None when it is the
    exact optimum of the search space, else the proven lower bound on that optimum (USD per hour): exact
    (``_staircase``) for a space of at most ``EXACT_PRFAAS`` PrfaaS counts and ``EXACT_LINKS`` link sizes;
    otherwise a pattern search from the fluid optimum (``_pattern_search``), falling back to the exact
    search when it finds nothing, and finished by the exact search over the (B, N_prfaas) whose floor is
    below its answer when those span at most ``FINISH_PRFAAS`` PrfaaS counts and ``EXACT_LINKS`` link sizes
    (then the answer is exact too). ``ascending``: the link sizes in ascending order; ``floors``: their
    ``fluid_floors`` (unchanged between the caller's verification rounds, so computed once)."""
    max_prfaas = floors.cost.shape[1]
    if max_prfaas > EXACT_PRFAAS or len(ascending) > EXACT_LINKS:
        best = _pattern_search(carrier, prices, ascending, floors, max_local)
        if best.found is None:
            return _staircase(carrier, prices, ascending, floors, decode, max_prfaas, max_local).found, None
        # Only (B, N_prfaas) whose floor is below what was found can beat it: when they span a small space
        # (generous caps on a small target), the exact search over it proves the optimum.
        below = floors.cost < best.cost
        n_prfaas = int(np.nonzero(below.any(axis=0))[0].max(initial=-1)) + 1
        n_links = int(np.nonzero(below.any(axis=1))[0].max(initial=-1)) + 1
        if n_prfaas > FINISH_PRFAAS or n_links > EXACT_LINKS:
            return best.found, float(floors.cost.min())
        if n_prfaas > 0:
            sub = replace(floors, local=floors.local[:n_links, :n_prfaas], cost=floors.cost[:n_links, :n_prfaas])
            exact = _staircase(carrier, prices, ascending[:n_links], sub, decode, n_prfaas, max_local)
            if exact.found is not None:
                best.offer(exact.cost, *exact.found)
        return best.found, None
    best = _staircase(carrier, prices, ascending, floors, decode, max_prfaas, max_local)
    return best.found, None
