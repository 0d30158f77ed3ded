"""Sizing: the cheapest deployment (PrfaaS instances, local instances, link bandwidth, threshold and split)
that carries a target rate within a TTFT SLO, and the questions around it (the largest rate a deployment
carries, the bandwidth knee).

A deployment *carries* Λ when its goodput (``latency.goodput``: the largest rate at which the TTFT quantile
stays within the SLO, maximised over the threshold t and the split N_p, re-scored with the link's sojourn
spread) is at least Λ. Goodput never falls when a pool gains an instance or the link gains bandwidth (every
plan of the smaller deployment is still available, with no longer waits), so the search is a monotone
staircase:

- for each link size B (ascending price) and each N_prfaas = 1, 2, ...: the smallest N_local that carries
  Λ, by galloping and bisection between the decode floor (N_d · BS_max / (T_decode · L_out) > Λ, Eq. 5)
  and the answer for N_prfaas - 1 (which is an upper bound);
- a candidate is skipped when its lower bound on cost (its GPUs at the decode floor plus its link) is no
  cheaper than the best found; the loops stop when the bound of every larger candidate is no cheaper.

Homogeneous PD (no PrfaaS pool, no link) is sized the same way over N_local alone. The answer is exact
over the search space for the goodput model; the goodput model itself is the closed form of
``latency.goodput``, whose validity and simulation check are reported by the caller.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from prfaas_plan.errors import InfeasibleError
from prfaas_plan.latency import TtftSummary, loaded_ttft
from prfaas_plan.latency.goodput import best_goodput_plan, best_plan_at_rate, plans_goodput
from prfaas_plan.latency.unloaded import local_mass_below, offload_mass_below, route_latency
from prfaas_plan.optimize.cost import (
    CostBreakdown,
    TokenCost,
    UnitPrices,
    deployment_cost,
    egress_usd_per_hour,
    link_fixed_usd_per_hour,
    link_options,
    token_cost,
)
from prfaas_plan.optimize.plans import CO_BINDING_RTOL
from prfaas_plan.optimize.search import best_plan
from prfaas_plan.spec.cost import Target
from prfaas_plan.throughput import STAGES, StageModel, egress_bytes_per_s, routing, stage_bounds, stage_throughputs

Array = NDArray[np.float64]

#: Threshold resolution (tokens) of the goodput search inside the sizing loops.
SIZING_RESOLUTION_TOKENS = 1024.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Carried:
    """The goodput-optimal plan of one deployment: its threshold, split and goodput (req/s)."""

    threshold_tokens: float
    n_pd_prefill: int
    goodput_req_per_s: float
    stability_limit_req_per_s: float
    limited_by: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Deployment:
    """A sized deployment and its goodput-optimal plan, priced at the target rate and at its goodput."""

    label: str
    n_prfaas: int
    n_local: int
    bandwidth_bytes_per_s: float
    threshold_tokens: float | None
    n_pd_prefill: int
    n_pd_decode: int
    offload_fraction: float
    goodput_req_per_s: float
    stability_limit_req_per_s: float
    egress_at_target_bytes_per_s: float
    cost_at_target: CostBreakdown
    tokens_at_target: TokenCost
    tokens_at_goodput: TokenCost

    @property
    def usd_per_hour(self) -> float:
        """Total hourly cost at the target rate."""
        return self.cost_at_target.total_usd_per_hour


@dataclass(frozen=True, slots=True, kw_only=True)
class Sizing:
    """The cheapest PrfaaS-PD deployment and the cheapest homogeneous-PD one for one target.

    ``prfaas_pd`` or ``homogeneous_pd`` is None when no deployment of that kind in the search space carries
    the target; ``reasons`` then says why. ``evaluations`` counts the deployments whose goodput was solved.
    """

    target: Target
    prfaas_pd: Deployment | None
    homogeneous_pd: Deployment | None
    bandwidths_bytes_per_s: tuple[float, ...]
    max_prfaas: int
    max_local: int
    evaluations: int
    #: None when ``prfaas_pd`` is the exact optimum of the search space; else (a large space, searched by a
    #: pattern search) a proven lower bound on that optimum's cost, USD per hour (the fluid floor).
    cost_floor_usd_per_hour: float | None = None
    reasons: tuple[str, ...] = ()
    prices_source: dict[str, str] = field(default_factory=dict, hash=False, compare=False)

    @property
    def cheapest(self) -> Deployment:
        """The cheaper of the two kinds (PrfaaS-PD on a tie)."""
        kinds = [d for d in (self.prfaas_pd, self.homogeneous_pd) if d is not None]
        if not kinds:
            raise InfeasibleError(list(self.reasons))
        return min(kinds, key=lambda d: d.usd_per_hour)


class _Carrier:
    """Goodput of deployments of one stage model (the base), solved once per (N_prfaas, N_local, B).

    ``solve`` is the search's goodput (``best_goodput_plan``: each transfer stretched by the link's mean
    stretch), which is never below the goodput under the full TTFT law (the law spreads the sojourn). A
    deployment is accepted only after ``verify``: the full law's TTFT quantile at the target rate, for the
    plan found, is within the SLO; one that fails is demoted, so the search moves on.
    """

    def __init__(self, model: StageModel, target: Target, resolution_tokens: float, decode_service_scv: float) -> None:
        self.model = model
        self.target = target
        self.resolution_tokens = resolution_tokens
        self.scv = decode_service_scv
        self.cache: dict[tuple[int, int, float], Carried] = {}
        self.verified: dict[tuple[int, int, float], bool] = {}
        self.fluid: dict[tuple[int, int, float], float] = {}

    @staticmethod
    def key(n_prfaas: int, n_local: int, bandwidth: float) -> tuple[int, int, float]:
        return (n_prfaas, n_local, bandwidth if n_prfaas > 0 else 0.0)

    def deployed(self, n_prfaas: int, n_local: int, bandwidth: float) -> StageModel:
        return replace(self.model, n_prfaas=n_prfaas, n_local=n_local, link_bandwidth_bytes_per_s=bandwidth or 1.0)

    def solve(self, n_prfaas: int, n_local: int, bandwidth: float) -> Carried:
        """Whether the deployment carries the target by the search's law: the plan with the most SLO margin at
        the target rate (``best_plan_at_rate``). ``goodput_req_per_s`` is then the target rate when it carries
        (a lower bound on the goodput), else 0 (an upper bound is not needed: only >= target is asked)."""
        key = self.key(n_prfaas, n_local, bandwidth)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        model = self.deployed(n_prfaas, n_local, bandwidth)
        slo, q, rate = self.target.ttft_slo_s, self.target.quantile, self.target.rate_req_per_s
        fixed = [model.lengths.upper_tokens] if n_prfaas == 0 else None
        t, n_p, slack, zero_load = best_plan_at_rate(
            model, rate, slo, q, resolution_tokens=self.resolution_tokens, decode_service_scv=self.scv, thresholds=fixed
        )
        carries = slack >= 0.0
        result = Carried(
            threshold_tokens=t,
            n_pd_prefill=n_p,
            goodput_req_per_s=rate if carries else 0.0,
            stability_limit_req_per_s=float("inf") if carries else 0.0,
            limited_by="unloaded" if zero_load < q else "slo",
        )
        self.cache[key] = result
        return result

    def verify(self, n_prfaas: int, n_local: int, bandwidth: float) -> bool:
        """The full TTFT law's quantile at the target rate is within the SLO for the solved plan; a failure
        demotes the deployment (its goodput is capped just below the target)."""
        key = self.key(n_prfaas, n_local, bandwidth)
        if key in self.verified:
            return self.verified[key]
        carried = self.solve(n_prfaas, n_local, bandwidth)
        rate = self.target.rate_req_per_s
        ok = False
        if carried.goodput_req_per_s >= rate and rate < carried.stability_limit_req_per_s:
            n_p = carried.n_pd_prefill
            law = loaded_ttft(
                self.deployed(n_prfaas, n_local, bandwidth),
                carried.threshold_tokens,
                n_p,
                n_local - n_p,
                rate,
                decode_service_scv=self.scv,
            ).ttft
            ok = law is not None and _quantile_of(law, self.target.quantile) <= self.target.ttft_slo_s
        self.verified[key] = ok
        if not ok:
            self.cache[key] = replace(carried, goodput_req_per_s=min(carried.goodput_req_per_s, rate * (1 - 1e-9)))
        return ok

    def rescored(self, n_prfaas: int, n_local: int, bandwidth: float) -> Carried:
        """The goodput, under the full TTFT law (``plans_goodput``), of the plan that carries the target with the
        most margin (the solved one), for reporting."""
        carried = self.solve(n_prfaas, n_local, bandwidth)
        if carried.goodput_req_per_s <= 0:
            return carried
        slo, q = self.target.ttft_slo_s, self.target.quantile
        (scored,) = plans_goodput(
            self.deployed(n_prfaas, n_local, bandwidth),
            [carried.threshold_tokens],
            [carried.n_pd_prefill],
            slo,
            q,
            decode_service_scv=self.scv,
        )
        return replace(
            carried,
            goodput_req_per_s=scored.rate_req_per_s,
            stability_limit_req_per_s=scored.stability_limit_req_per_s,
            limited_by=scored.limited_by,
        )

    def carries(self, n_prfaas: int, n_local: int, bandwidth: float) -> bool:
        """Whether the deployment carries the target. Answered without solving when a solved deployment
        dominates it (goodput is non-decreasing in N_prfaas, N_local and B): a smaller one that carries, or
        a larger one that does not."""
        b = bandwidth if n_prfaas > 0 else 0.0
        rate = self.target.rate_req_per_s
        for (p, n, c), known in self.cache.items():
            if (p > 0) != (n_prfaas > 0):
                continue  # with and without a PrfaaS pool are different systems (no link at all without one)
            ok = known.goodput_req_per_s >= rate
            if ok and p <= n_prfaas and n <= n_local and c <= b:
                return True
            if not ok and p >= n_prfaas and n >= n_local and c >= b:
                return False
        return self.solve(n_prfaas, n_local, bandwidth).goodput_req_per_s >= rate

    def fluid_limit(self, n_prfaas: int, n_local: int, bandwidth: float) -> float:
        """Λ_max of the deployment's best plan (Eq. 6, ``search``): an upper bound on its goodput, about ten
        times cheaper to find."""
        key = self.key(n_prfaas, n_local, bandwidth)
        if key not in self.fluid:
            model = self.deployed(n_prfaas, n_local, bandwidth)
            if n_prfaas == 0:
                from prfaas_plan.optimize.baselines import best_split_without_offload

                self.fluid[key] = best_split_without_offload(model, "homogeneous-pd").throughput_req_per_s
            else:
                try:
                    self.fluid[key] = best_plan(model, self.resolution_tokens)[2]
                except InfeasibleError:
                    self.fluid[key] = 0.0
        return self.fluid[key]


def _quantile_of(law: TtftSummary, quantile: float) -> float:
    levels = {0.5: law.p50_s, 0.9: law.p90_s, 0.99: law.p99_s}
    if quantile not in levels:
        raise ValueError(f"sizing supports the 0.5, 0.9 and 0.99 TTFT quantiles, got {quantile}")
    return levels[quantile]


def decode_floor(model: StageModel, rate_req_per_s: float) -> int:
    """Fewest local instances that can decode ``rate_req_per_s``: N_d with N_d · Θ_pd-d(1) > Λ (Eq. 5)."""
    return math.floor(rate_req_per_s / model.decode_req_per_s_per_instance) + 1


def _smallest_local(
    carrier: _Carrier, n_prfaas: int, bandwidth: float, low: int, high: int, guess: int | None = None
) -> int | None:
    """Smallest N_local in [low, high] that carries the target (goodput is non-decreasing in N_local), or
    None. Tries ``low`` and ``high``, then gallops from ``guess`` (default ``low``; up when it does not
    carry, down when it does) and bisects. The unloaded TTFT depends on the threshold, the hardware and the
    link, never on instance counts: a deployment that misses the SLO with no load rules out every larger
    N_local."""
    if low > high:
        return None
    if carrier.carries(n_prfaas, low, bandwidth):
        return low
    if carrier.solve(n_prfaas, low, bandwidth).limited_by == "unloaded":
        return None  # even an empty system misses the SLO: unloaded TTFT does not depend on instance counts
    if not carrier.carries(n_prfaas, high, bandwidth):
        return None  # one solve at the top of the range rules out the whole range
    lo, hi = low, high  # lo never carries, hi carries
    start = lo if guess is None else min(max(guess, lo), hi)
    if start > lo and carrier.carries(n_prfaas, start, bandwidth):
        hi, step = start, 1
        while hi - step > lo:  # gallop down
            if not carrier.carries(n_prfaas, hi - step, bandwidth):
                lo = hi - step
                break
            hi, step = hi - step, step * 2
    else:
        lo, step = start, 1
        while lo + step < hi:  # gallop up
            if carrier.carries(n_prfaas, lo + step, bandwidth):
                hi = lo + step
                break
            lo, step = lo + step, step * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if carrier.carries(n_prfaas, mid, bandwidth):
            hi = mid
        else:
            lo = mid
    return hi


def _deployment(
    carrier: _Carrier, prices: UnitPrices, n_prfaas: int, n_local: int, bandwidth: float, label: str, *, final: bool
) -> Deployment:
    """The deployment priced at the target (and at its goodput). ``final``: its goodput re-scored with the
    full TTFT law (slower; for what is reported), else the search's."""
    model, target = carrier.model, carrier.target
    carried = carrier.rescored(n_prfaas, n_local, bandwidth) if final else carrier.solve(n_prfaas, n_local, bandwidth)
    route = routing(model.lengths, carried.threshold_tokens)
    sized = replace(model, n_prfaas=n_prfaas, n_local=n_local)
    egress = float(egress_bytes_per_s(sized, route, target.rate_req_per_s)) if n_prfaas > 0 else 0.0
    egress_good = float(egress_bytes_per_s(sized, route, carried.goodput_req_per_s)) if n_prfaas > 0 else 0.0
    link = bandwidth if n_prfaas > 0 else 0.0
    at_target = deployment_cost(
        prices, n_prfaas=n_prfaas, n_local=n_local, bandwidth_bytes_per_s=link, egress_bytes_per_s=egress
    )
    at_goodput = deployment_cost(
        prices, n_prfaas=n_prfaas, n_local=n_local, bandwidth_bytes_per_s=link, egress_bytes_per_s=egress_good
    )
    tokens_in, tokens_out = model.lengths.mean_tokens, model.output_tokens_mean
    return Deployment(
        label=label,
        n_prfaas=n_prfaas,
        n_local=n_local,
        bandwidth_bytes_per_s=link,
        threshold_tokens=carried.threshold_tokens if n_prfaas > 0 else None,
        n_pd_prefill=carried.n_pd_prefill,
        n_pd_decode=n_local - carried.n_pd_prefill,
        offload_fraction=float(route.offload_fraction) if n_prfaas > 0 else 0.0,
        goodput_req_per_s=carried.goodput_req_per_s,
        stability_limit_req_per_s=carried.stability_limit_req_per_s,
        egress_at_target_bytes_per_s=egress,
        cost_at_target=at_target,
        tokens_at_target=token_cost(at_target.total_usd_per_hour, target.rate_req_per_s, tokens_in, tokens_out),
        tokens_at_goodput=token_cost(at_goodput.total_usd_per_hour, carried.goodput_req_per_s, tokens_in, tokens_out),
    )


#: Rounds of search-then-verify before sizing gives up (each round demotes one deployment the full law rejects).
_MAX_VERIFY_ROUNDS = 64


#: Threshold cells (quantile-spaced) on which the fluid floors of ``_fluid_floors`` are tabulated.
_FLOOR_CELLS = 512
# The local floor of a (B, N_prfaas) no plan can carry with (larger than any pool).
_NO_PLAN = 2**62
# Relative slack on the floors' comparisons (a relaxation: it can only lower a floor).
_FLOOR_RTOL = 1e-9


@dataclass(frozen=True, slots=True, kw_only=True)
class _Floors:
    """For every (link size, N_prfaas): the fewest local instances any plan can carry the target with, and a
    lower bound on the cost per hour (arrays of shape (len(bandwidths), max_prfaas), N_prfaas = column + 1)."""

    local: NDArray[np.int64]
    cost: Array


def _local_prefill_floor(need: Array) -> Array:
    """Fewest local prefill instances N_p with N_p > ``need`` (instances' worth of work), relaxed by
    ``_FLOOR_RTOL``; 0 where there is no local prefill work."""
    return np.where(need > 0, np.ceil(need * (1 - _FLOOR_RTOL)), 0.0)


def _fluid_floors(
    carrier: _Carrier, prices: UnitPrices, bandwidths: Sequence[float], max_prfaas: int, decode: int
) -> _Floors:
    """Lower bounds from the stability conditions alone, for every (B, N_prfaas) at once.

    A plan carries Λ only if it meets the SLO with no load and every stage is stable at Λ
    (``latency.stages``): with threshold t,
    N_prfaas > Λ · E[T_prfaas(L); L > t], B > Λ · E[S_kv(L); L > t], N_p > Λ · E[T_local(L); L <= t] and
    N_d >= ``decode`` (Eq. 5). The first two fall and the third rises with t, so over a cell [t_i, t_i+1] of a
    threshold grid each is bounded by its value at the cell's far end (the offload terms at t_i+1, the local
    term at t_i). A cell is possible for (B, N_prfaas) when both offload bounds are below them; the local floor
    is the decode floor plus the cell's fewest prefill instances, the cost floor adds the GPUs, the link's
    fixed price and the egress bound, each minimised over the possible cells. Neither floor ever exceeds the
    true minimum over the search (the grid only loosens it).
    """
    model, rate = carrier.model, carrier.target.rate_req_per_s
    lengths = model.lengths
    lo, hi = lengths.lower_tokens - 1.0, lengths.upper_tokens
    inner = np.asarray(lengths.quantile(np.linspace(0.0, 1.0, _FLOOR_CELLS + 1)), dtype=np.float64)
    t = np.unique(np.clip(np.concatenate(([lo], inner, [hi])), lo, hi))
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
    stretch = model.link_bandwidth_bytes_per_s / np.asarray(bandwidths, dtype=np.float64)[:, None]
    local_fast = np.asarray(local_mass_below(lengths, route, t, slo), dtype=np.float64)
    offload_fast = np.asarray(offload_mass_below(lengths, route, t[None, :], slo, stretch), dtype=np.float64)
    meets_slo = local_fast[None, 1:] + offload_fast[:, :-1] >= q * (1 - _FLOOR_RTOL)
    cell_local = np.maximum(decode + _local_prefill_floor(local_work[:-1]), 2.0)
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
    for i, b in enumerate(bandwidths):
        possible = (cell_egress[order] < b * (1 + _FLOOR_RTOL)) & meets_slo[i, order]
        best_local = np.minimum.accumulate(np.where(possible, cell_local[order], np.inf))
        best_cost = np.minimum.accumulate(np.where(possible, cell_cost[order], np.inf))
        none = count == 0
        at = np.maximum(count - 1, 0)
        row_local = np.where(none, np.inf, best_local[at])
        local[i] = np.where(np.isfinite(row_local), row_local, float(_NO_PLAN)).astype(np.int64)
        cost[i] = (
            np.where(none, np.inf, best_cost[at]) + prfaas_price * n_prfaas + link_fixed_usd_per_hour(prices.link, b)
        )
    return _Floors(local=local, cost=cost)


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


def _staircase(
    carrier: _Carrier,
    prices: UnitPrices,
    ascending: list[float],
    floors: _Floors,
    decode: int,
    max_prfaas: int,
    max_local: int,
) -> _Incumbent:
    """The exact cheapest (N_prfaas, N_local, B) of the search space whose search goodput carries the target.

    For each N_prfaas (ascending, while its cost bound can still win): N_0, the fewest local instances that
    carry at the largest B (galloping from the fluid floor, bounded by the previous N_prfaas's N_0); then for
    N_local = N_0, N_0 + 1, ... while an extra local instance costs less than the link it could save, the
    smallest B that carries (bisection over the sizes: carrying is monotone in B). An N_prfaas whose cost
    floor (``_fluid_floors``) is no cheaper than the best is skipped.
    """
    local_price = prices.local_usd_per_instance_hour or 0.0
    prfaas_price = prices.prfaas_usd_per_instance_hour or 0.0
    link_costs = [link_fixed_usd_per_hour(prices.link, b) for b in ascending]
    top, top_cost, cheapest_link = ascending[-1], link_costs[-1], min(link_costs)
    cheapest_floor = floors.cost.min(axis=0)
    best = _Incumbent()
    upper = max_local
    for n_prfaas in range(1, max_prfaas + 1):
        if cheapest_link + n_prfaas * prfaas_price + max(2, decode) * local_price >= best.cost:
            break
        if cheapest_floor[n_prfaas - 1] >= best.cost:
            continue
        n0 = _smallest_local(carrier, n_prfaas, top, int(floors.local[-1, n_prfaas - 1]), upper)
        if n0 is None:
            continue
        upper = n0
        n_local = n0
        while n_local <= max_local and (n_local - n0) * local_price < top_cost - cheapest_link + 1e-12:
            if cheapest_link + n_prfaas * prfaas_price + n_local * local_price >= best.cost:
                break
            lo, hi = -1, len(ascending) - 1  # ascending[hi] carries (it does at top for n >= n0)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if floors.local[mid, n_prfaas - 1] <= n_local and carrier.carries(n_prfaas, n_local, ascending[mid]):
                    hi = mid
                else:
                    lo = mid
            bandwidth = ascending[hi]
            cost = _deployment(carrier, prices, n_prfaas, n_local, bandwidth, "", final=False).usd_per_hour
            best.offer(cost, n_prfaas, n_local, bandwidth)
            if hi == 0:
                break  # already the cheapest link: more local instances only cost more
            n_local += 1
        if upper <= floors.local[-1].min():
            break  # more PrfaaS instances cannot save a local instance
    return best


def _pattern_search(
    carrier: _Carrier, prices: UnitPrices, ascending: list[float], floors: _Floors, max_local: int
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
            n_local = _smallest_local(carrier, k + 1, ascending[i], low, high, guess) if low <= high else None
            if n_local is not None:
                ratio[0] = n_local / low
                cost = _deployment(carrier, prices, k + 1, n_local, ascending[i], "", final=False).usd_per_hour
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


def _cheapest(
    carrier: _Carrier,
    prices: UnitPrices,
    bandwidths: list[float],
    decode: int,
    max_prfaas: int,
    max_local: int,
) -> tuple[tuple[int, int, float] | None, float | None]:
    """The cheapest (N_prfaas, N_local, B) whose search goodput carries the target, and None when it is the
    exact optimum of the search space, else the proven lower bound on that optimum (USD per hour): exact
    (``_staircase``) for a space of at most ``EXACT_PRFAAS`` PrfaaS counts and ``EXACT_LINKS`` link sizes;
    otherwise a pattern search from the fluid optimum (``_pattern_search``), falling back to the exact
    search when it finds nothing, and finished by the exact search over the (B, N_prfaas) whose floor is
    below its answer when those span at most ``FINISH_PRFAAS`` PrfaaS counts and ``EXACT_LINKS`` link sizes
    (then the answer is exact too)."""
    ascending = sorted(bandwidths)
    floors = _fluid_floors(carrier, prices, ascending, max_prfaas, decode)
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
            sub = _Floors(local=floors.local[:n_links, :n_prfaas], cost=floors.cost[:n_links, :n_prfaas])
            exact = _staircase(carrier, prices, ascending[:n_links], sub, decode, n_prfaas, max_local)
            if exact.found is not None:
                best.offer(exact.cost, *exact.found)
        return best.found, None
    best = _staircase(carrier, prices, ascending, floors, decode, max_prfaas, max_local)
    return best.found, None


def size(
    model: StageModel,
    prices: UnitPrices,
    target: Target,
    *,
    bandwidths_bytes_per_s: Sequence[float],
    max_prfaas: int,
    max_local: int,
    resolution_tokens: float = SIZING_RESOLUTION_TOKENS,
    decode_service_scv: float = 0.0,
    homogeneous: bool = True,
) -> Sizing:
    """The cheapest PrfaaS-PD deployment (N_prfaas in 1..max_prfaas, N_local in 2..max_local, B in
    ``bandwidths_bytes_per_s``) and the cheapest homogeneous-PD one (N_local alone) that carry ``target``.

    ``model`` gives the pools' hardware costs, the traffic and the SLO-governed decode constants; its
    instance counts and bandwidth are ignored. Raises ValueError when the pools are not priced.
    """
    if not prices.complete:
        raise ValueError("sizing needs a price for both pools")
    if not bandwidths_bytes_per_s:
        raise ValueError("sizing needs at least one link bandwidth")
    carrier = _Carrier(model, target, resolution_tokens, decode_service_scv)
    decode = decode_floor(model, target.rate_req_per_s)
    floor = max(2, decode)
    reasons: list[str] = []

    homog: Deployment | None = None
    if homogeneous:
        # Every request prefilled locally: N_p > Λ · E[T_local(L)] besides the decode floor.
        everything = target.rate_req_per_s * float(
            model.local_prefill.expect(model.lengths, model.lengths.lower_tokens - 1.0, model.lengths.upper_tokens)
        )
        low = max(floor, decode + int(_local_prefill_floor(np.asarray(everything))))
        while True:
            n = _smallest_local(carrier, 0, 0.0, low, max_local)
            if n is None or carrier.verify(0, n, 0.0):
                break
            low = n + 1  # the search's goodput carried it, the full law does not: try the next size
        if n is None:
            why = (
                "even with no load its TTFT misses the SLO (local prefill of the longest requests is too slow)"
                if floor <= max_local and carrier.solve(0, floor, 0.0).limited_by == "unloaded"
                else f"no local pool of {floor}..{max_local} instances carries it"
                if floor <= max_local
                else f"it needs at least {floor} local instances to decode, more than the {max_local} searched"
            )
            reasons.append(
                f"homogeneous_pd: {target.rate_req_per_s:g} req/s within P{target.quantile * 100:g} TTFT <= "
                f"{target.ttft_slo_s:g} s: {why}"
            )
        else:
            homog = _deployment(carrier, prices, 0, n, 0.0, "homogeneous-pd", final=True)

    bandwidths = sorted(set(float(b) for b in bandwidths_bytes_per_s), reverse=True)
    best: Deployment | None = None
    cost_floor: float | None = None
    if floor > max_local:
        reasons.append(f"pd_decode: carrying {target.rate_req_per_s:g} req/s needs at least {floor} local instances")
    else:
        for _ in range(_MAX_VERIFY_ROUNDS):
            found, cost_floor = _cheapest(carrier, prices, bandwidths, decode, max_prfaas, max_local)
            if found is None or carrier.verify(*found):
                break
        else:
            found = None
        if found is not None:
            best = _deployment(carrier, prices, *found, "prfaas-pd", final=True)
        else:
            reasons.append(
                f"prfaas_pd: no deployment with 1..{max_prfaas} PrfaaS instances, {floor}..{max_local} local "
                f"instances and the given link sizes carries {target.rate_req_per_s:g} req/s within "
                f"P{target.quantile * 100:g} TTFT <= {target.ttft_slo_s:g} s"
            )
    return Sizing(
        target=target,
        prfaas_pd=best,
        homogeneous_pd=homog,
        bandwidths_bytes_per_s=tuple(sorted(bandwidths)),
        max_prfaas=max_prfaas,
        max_local=max_local,
        evaluations=len(carrier.cache),
        cost_floor_usd_per_hour=cost_floor,
        reasons=tuple(reasons),
        prices_source=dict(prices.sources),
    )


def max_rate(
    model: StageModel,
    ttft_slo_s: float,
    quantile: float = 0.9,
    *,
    resolution_tokens: float = 10.0,
    decode_service_scv: float = 0.0,
) -> Carried:
    """The largest rate the model's deployment (its N_prfaas, N_local and link) carries within the SLO, and
    the plan that carries it."""
    fixed = [model.lengths.upper_tokens] if model.n_prfaas == 0 else None
    t, n_p, rate = best_goodput_plan(
        model,
        ttft_slo_s,
        quantile,
        resolution_tokens=resolution_tokens,
        decode_service_scv=decode_service_scv,
        thresholds=fixed,
    )
    if rate <= 0:
        return Carried(
            threshold_tokens=t,
            n_pd_prefill=n_p,
            goodput_req_per_s=0.0,
            stability_limit_req_per_s=0.0,
            limited_by="unloaded",
        )
    (scored,) = plans_goodput(model, [t], [n_p], ttft_slo_s, quantile, decode_service_scv=decode_service_scv)
    return Carried(
        threshold_tokens=t,
        n_pd_prefill=n_p,
        goodput_req_per_s=scored.rate_req_per_s,
        stability_limit_req_per_s=scored.stability_limit_req_per_s,
        limited_by=scored.limited_by,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class KneePoint:
    """One bandwidth of the knee table: Λ_max and its binding stage (and goodput when an SLO is given)."""

    bandwidth_bytes_per_s: float
    throughput_req_per_s: float
    binding: str
    goodput_req_per_s: float | None
    link_usd_per_hour: float


@dataclass(frozen=True, slots=True, kw_only=True)
class BandwidthKnee:
    """Λ_max (and goodput) against bandwidth for a fixed deployment. ``knee_bytes_per_s`` is the smallest
    bandwidth of the table at which the link no longer binds the Λ_max-optimal plan and Λ_max is within
    1 % of its value at the largest bandwidth; None when the link binds throughout."""

    points: tuple[KneePoint, ...]
    knee_bytes_per_s: float | None


def bandwidth_knee(
    model: StageModel,
    bandwidths_bytes_per_s: Sequence[float],
    prices: UnitPrices | None = None,
    *,
    ttft_slo_s: float | None = None,
    quantile: float = 0.9,
    resolution_tokens: float = SIZING_RESOLUTION_TOKENS,
    decode_service_scv: float = 0.0,
) -> BandwidthKnee:
    """Λ_max-optimal plan (and goodput under the SLO) at each bandwidth, for the model's pools: Λ_max and the
    stages within 1 % of it (as ``optimize.plans`` names them binding)."""
    points = []
    for b in sorted(set(float(x) for x in bandwidths_bytes_per_s)):
        at = replace(model, link_bandwidth_bytes_per_s=b)
        t_best, n_p_best, lam = best_plan(at, resolution_tokens)
        route = routing(at.lengths, t_best)
        bounds = stage_bounds(stage_throughputs(at, route, n_p_best), route)
        binding = [s for s in STAGES if float(bounds[s]) <= lam * (1 + CO_BINDING_RTOL)]
        goodput = None
        if ttft_slo_s is not None:
            goodput = max_rate(
                at, ttft_slo_s, quantile, resolution_tokens=resolution_tokens, decode_service_scv=decode_service_scv
            ).goodput_req_per_s
        points.append(
            KneePoint(
                bandwidth_bytes_per_s=b,
                throughput_req_per_s=lam,
                binding="+".join(binding),
                goodput_req_per_s=goodput,
                link_usd_per_hour=link_fixed_usd_per_hour(prices.link, b) if prices is not None else 0.0,
            )
        )
    top = points[-1].throughput_req_per_s if points else 0.0
    knee = next(
        (
            p.bandwidth_bytes_per_s
            for p in points
            if "prfaas_link" not in p.binding and p.throughput_req_per_s >= top * 0.99
        ),
        None,
    )
    return BandwidthKnee(points=tuple(points), knee_bytes_per_s=knee)


#: Sizing searches link sizes up to this multiple of the target's full-offload egress (Λ · E[S_kv(L)]).
BANDWIDTH_HEADROOM = 2.0
#: Default instance caps: this multiple of what prefilling everything on the pool (or decoding the target)
#: keeps busy, plus a margin.
INSTANCE_HEADROOM = 2.0
#: The largest pool sizing considers by default (the CLI's instance limit).
MAX_SIZED_INSTANCES = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchSpace:
    """Link sizes and instance caps a sizing searches."""

    bandwidths_bytes_per_s: tuple[float, ...]
    max_prfaas: int
    max_local: int


def default_search_space(
    model: StageModel,
    prices: UnitPrices,
    target: Target,
    *,
    bandwidths_bytes_per_s: Sequence[float] | None = None,
    max_prfaas: int | None = None,
    max_local: int | None = None,
) -> SearchSpace:
    """The search space ``size`` uses unless told otherwise.

    Instances: enough PrfaaS instances to prefill every request at half utilisation, and enough local ones
    to prefill and decode everything at half utilisation, plus a margin. Link: the given sizes; else the
    priced ports' multiples (or a geometric grid for committed bandwidth) from the smallest port up to
    ``BANDWIDTH_HEADROOM`` times the full-offload egress; a free link: the model's bandwidth alone.
    """
    lengths = model.lengths
    grid = np.asarray(lengths.quantile(np.linspace(0.0005, 0.9995, 2000)), dtype=np.float64)
    busy_prfaas = target.rate_req_per_s * float(np.mean(model.prfaas_prefill(grid)))
    busy_local = target.rate_req_per_s * float(np.mean(model.local_prefill(grid)))
    busy_decode = target.rate_req_per_s / model.decode_req_per_s_per_instance
    auto_prfaas = math.ceil(INSTANCE_HEADROOM * busy_prfaas) + 1
    auto_local = math.ceil(INSTANCE_HEADROOM * (busy_local + busy_decode)) + 2
    if bandwidths_bytes_per_s is not None:
        links = [float(b) for b in bandwidths_bytes_per_s]
    elif prices.link.ports or prices.link.committed_usd_per_gbit_per_s_month > 0:
        useful = float(target.rate_req_per_s * np.mean(model.kv_bytes(grid)))
        smallest = min((p.bandwidth_bytes_per_s for p in prices.link.ports), default=useful / 16)
        links = link_options(prices.link, smallest, max(BANDWIDTH_HEADROOM * useful, smallest))
    else:
        links = [model.link_bandwidth_bytes_per_s]
    return SearchSpace(
        bandwidths_bytes_per_s=tuple(links),
        max_prfaas=min(max_prfaas if max_prfaas is not None else auto_prfaas, MAX_SIZED_INSTANCES),
        max_local=min(max_local if max_local is not None else auto_local, MAX_SIZED_INSTANCES),
    )
