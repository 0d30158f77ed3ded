"""``topology size``: instance counts per cluster (and the links to buy) that carry every region's target rate (its
traffic ``rate_req_per_s``) within the P90 TTFT SLO (``slo.ttft_p90_s``) at the lowest whole price the search finds.

What is exact and what is a heuristic:

- **Feasibility of a count vector n** is two tests. (1) Fluid: the global search (``optimize.topology
  .global_search``) at n reaches λ* >= 1 (every region carries its target); the LP is exact at fixed
  thresholds, the threshold search is a heuristic with a proven bound. (2) Latency: the global plan at n,
  loaded to 1/λ* of its λ (the targets), has every region's closed-form P90 (``optimize.topology_ttft``) within
  the SLO. The plan is the throughput-maximising one, not the TTFT-minimising one, so (2) may refuse counts
  another routing would pass.
- **The search** is greedy, a heuristic: from one instance per PrfaaS site and, per PD cluster, the decode
  instances every plan needs (two at least), add one instance at a time to the cluster whose addition
  buys the most (fluid: λ* gained; latency: the worst region's P90/SLO lowered, or the utilisation of a stage
  saturated at its target) per USD/h, until feasible; then remove instances one at a time, the dearest first,
  while the counts stay feasible and the whole price (GPUs, plus the links the plan routes over and their egress
  at the targets) does not rise; then descend on that whole price, one instance more or fewer in any cluster per
  step, the best feasible move, until none lowers it (at most DESCENT_ROUNDS): fewer local instances push more
  prefill over paid links, and their egress can cost more than the GPUs saved. The result is a local minimum of
  the whole price one instance away, not the cheapest counts. Sites are kept at one instance at least (a site is
  never dropped). Before it,
  generous counts (3x and 10x the lower bound's own instances, plus one, and every PD cluster able to prefill all
  its requests itself) are probed with the fluid test: where neither carries the targets, the sizing stops there
  and names what binds (a saturated link or site). The latency test is not probed so: its P90 need not fall as
  counts grow (the throughput-maximising routing it tests changes with them). The greedy stops, naming the region
  whose P90 binds and its utilisations, once PATIENCE instances in a row (each its step's best) brought neither the
  targets nor the worst P90 nearer, or after MAX_STEPS: it found no counts, which does not prove there are none.
- **Links** bought are those the final plan routes traffic over (priced at their ports or committed bandwidth,
  plus egress at the targets' KV bytes per second). The routing LP does not see link prices.
- **The lower bound** on the GPU cost is exact for the fluid problem (necessary for any count vector to carry the
  targets with every stage's utilisation below 1, which the latency test requires), with whole PD instances and
  fractional site instances: per region j and per cell [t_a, t_b] of a grid of its length quantiles, the local
  prefill needs more than r_j E[T_j(L); L <= t_a] instances, the decode more than r_j / θ_j (each rounded up),
  and the PrfaaS prefill at least r_j E[T_k(L); L > t_b] at the cheapest
  site k it links to (instance-seconds per second; every curve non-decreasing in L, so the cell's ends are its
  most favourable); the bound is Σ_j min over cells of the priced sum. Links, egress and the latency SLO are
  left out (each only adds cost), so it bounds the whole cost from below too. (The fluid LP prices prefill at
  the mean length, T(E[L]) <= E[T(L)] for convex curves, so its test alone is weaker; the latency test's
  stability is what makes the bound hold.)
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InfeasibleError
from prfaas_plan.optimize.cost import gpu_hour_price
from prfaas_plan.optimize.topology import (
    TopologyModel,
    TopologyPlan,
    global_search,
    plan_at,
    region_grid,
    topology_model,
)
from prfaas_plan.optimize.topology_ttft import TopologyLoadedTtft, topology_loaded_ttft
from prfaas_plan.spec.topology import Topology
from prfaas_plan.studies.topology import plan_price

#: Threshold grid of the searches inside the sizing (coarser than ``topology plan``'s: each step plans anew).
SIZE_GRID_POINTS = 17
#: Instances added at most before the search gives up (infeasible).
MAX_STEPS = 400
#: Multiples of the lower bound's own instances at which the sizing first probes whether any counts can carry
#: the targets at all (the fluid test; each plus one instance per cluster, never below the search's start nor
#: below a PD cluster's all-local need); where none can, the search is not run and what binds is reported. A
#: design choice: generous enough that a count vector the greedy could reach lies below them.
PROBE_MULTIPLES = (3.0, 10.0)
#: Instances the greedy adds in a row without bringing the targets or the worst P90 nearer before it stops. A
#: design choice, not tuned on any case (where it stops, the message says the search found no counts, not that
#: none exist).
PATIENCE = 8
#: Rounds at most of the descent on the whole price (GPUs, links, egress) that follows the prune; each round tries
#: one instance more and one fewer in every cluster (2 x clusters evaluations) and takes the best feasible move.
#: A design choice bounding the time, not tuned: raised to 200 it changed no answer on the example nor on two
#: larger topologies of 7 and 10 clusters when the descent was added, so the cap was not reached there.
DESCENT_ROUNDS = 12
#: Relative saving below which a descent move is not taken (a design choice: a change of a millionth of the
#: price is the LP's rounding, not a saving).
DESCENT_GAIN = 1e-6
#: Utilisation from which a stage, site or link counts as saturated in a binding-constraint message.
_SATURATED = 0.995


@frozen
class SizedTopology:
    """The counts found, their plan and latency, their price, the lower bound and how the search went."""

    counts: dict[str, int]
    scale: float
    plan: TopologyPlan
    loaded: TopologyLoadedTtft
    gpu_usd_per_hour: float
    link_usd_per_hour: float
    egress_usd_per_hour: float
    links_bought: tuple[str, ...]
    lower_bound_gpu_usd_per_hour: float
    lower_bound_instances: dict[str, float]
    evaluations: int
    slo_p90_s: float

    @property
    def total_usd_per_hour(self) -> float:
        """GPUs + links + egress at the targets."""
        return self.gpu_usd_per_hour + self.link_usd_per_hour + self.egress_usd_per_hour

    @property
    def gap_to_bound(self) -> float:
        """GPU cost over its lower bound, minus 1."""
        return self.gpu_usd_per_hour / self.lower_bound_gpu_usd_per_hour - 1.0


def _instance_prices(topology: Topology, tm: TopologyModel) -> NDArray[np.float64]:
    """USD/h of one instance of every site, then every region (the order of ``_with_counts``)."""
    clusters = topology.by_name
    out = []
    for name in (*tm.sites, *tm.regions):
        c = clusters[name]
        price = c.gpu_usd_per_hour
        if price is None:
            price, why = gpu_hour_price(c.pool.hardware_key, c.pool.accelerator, topology.cost)
            if price is None:
                raise InfeasibleError(f"{name}: no GPU price ({why}); give gpu_usd_per_hour")
        out.append(price * c.pool.gpus_per_instance)
    return np.asarray(out, dtype=np.float64)


def _with_counts(tm: TopologyModel, counts: NDArray[np.int64]) -> TopologyModel:
    k = tm.n_sites
    local = tuple(replace(m, n_local=int(n)) for m, n in zip(tm.local, counts[k:], strict=True))
    return replace(
        tm,
        site_instances=np.asarray(counts[:k], dtype=np.float64),
        local=local,
        local_instances=np.asarray(counts[k:], dtype=np.int64),
    )


#: The greedy's latency score saturates here: a P90 ten times the SLO counts as 10, and a region whose stage is
#: saturated at its target as 10 plus that stage's utilisation (so that relieving it is a gain).
_SCORE_CAP = 10.0


@frozen
class _Eval:
    scale: float
    worst_p90_over_slo: float
    plan: TopologyPlan | None
    loaded: TopologyLoadedTtft | None

    @property
    def feasible(self) -> bool:
        return self.scale >= 1.0 and self.worst_p90_over_slo <= 1.0

    @property
    def latency_score(self) -> float:
        """What the greedy lowers once the targets are carried: the worst P90 over the SLO (capped), or, where a
        region's stage is saturated at its target, the cap plus the highest utilisation of such a region."""
        if np.isfinite(self.worst_p90_over_slo):
            return min(self.worst_p90_over_slo, _SCORE_CAP)
        if self.loaded is None:
            return np.inf
        over = [max(r.utilization.values()) for r in self.loaded.regions if r.ttft is None]
        return _SCORE_CAP + min(max(over, default=np.inf), _SCORE_CAP)


def _evaluate(tm: TopologyModel, counts: NDArray[np.int64], slo_s: float) -> _Eval:
    sized = _with_counts(tm, counts)
    found = global_search(sized, grid_points=SIZE_GRID_POINTS)
    if not found.scale > 0:
        return _Eval(scale=0.0, worst_p90_over_slo=np.inf, plan=None, loaded=None)
    plan = plan_at(sized, found.thresholds, "sized")
    if found.scale < 1.0:
        return _Eval(scale=found.scale, worst_p90_over_slo=np.inf, plan=plan, loaded=None)
    loaded = topology_loaded_ttft(sized, plan, 1.0 / found.scale)
    worst = max(np.inf if r.ttft is None else r.ttft.p90_s / slo_s for r in loaded.regions)
    return _Eval(scale=found.scale, worst_p90_over_slo=worst, plan=plan, loaded=loaded)


def lower_bound(tm: TopologyModel, prices: NDArray[np.float64]) -> tuple[float, dict[str, float]]:
    """The fluid lower bound on GPU USD/h (module docstring) and the fractional instances of its cheapest cells
    (per cluster)."""
    k = tm.n_sites
    total = 0.0
    instances = dict.fromkeys((*tm.sites, *tm.regions), 0.0)
    decode_need = _decode_need(tm)
    for j, pd in enumerate(tm.regions):
        model = tm.local[j]
        lengths = model.lengths
        rate = float(tm.rate_req_per_s[j])
        grid = region_grid(lengths, SIZE_GRID_POINTS * 4)
        ends_a, ends_b = grid[:-1], grid[1:]
        # A PD cluster's prefill and decode instances are whole numbers, each above its load (utilisation < 1).
        local_whole = _whole(_local_prefill_load(tm, j, ends_a))
        decode_whole = float(decode_need[j])
        cost = prices[k + j] * (local_whole + decode_whole)
        site_cost = np.full(ends_b.size, np.inf)
        best_site = np.full(ends_b.size, -1)
        pairs = np.flatnonzero(tm.pair_region == j)
        for q in pairs:
            site = int(tm.pair_site[q])
            need = rate * np.asarray(tm.pair_model[q].prfaas_prefill.expect(lengths, ends_b, lengths.upper_tokens))
            priced = prices[site] * need
            better = priced < site_cost
            site_cost = np.where(better, priced, site_cost)
            best_site = np.where(better, site, best_site)
        # With no link the region must prefill everything locally: only the top cell (nothing offloaded).
        offload_needed = rate * np.asarray(
            tm.pair_model[pairs[0]].prfaas_prefill.expect(lengths, ends_b, lengths.upper_tokens)
            if pairs.size
            else np.zeros(ends_b.size)
        )
        if not pairs.size:
            site_cost = np.where(offload_needed > 0, np.inf, 0.0)
        whole = cost + site_cost
        i = int(np.argmin(whole))
        total += float(whole[i])
        instances[pd] += float(local_whole[i] + decode_whole)
        if best_site[i] >= 0:
            instances[tm.sites[int(best_site[i])]] += float(site_cost[i] / prices[int(best_site[i])])
    return total, instances


def _progress(got: _Eval) -> tuple[int, float]:
    """How far counts are from feasible, larger nearer: (0, λ*) while the targets are not carried, then
    (1, minus the latency score)."""
    return (0, got.scale) if got.scale < 1.0 else (1, -got.latency_score)


def _whole(load: NDArray[np.float64] | float) -> NDArray[np.int64]:
    """The fewest whole instances that carry ``load`` (instance-seconds per second): its ceiling, a load within
    rounding of a whole number counting as that number."""
    return np.asarray(np.ceil(np.asarray(load, dtype=np.float64) * (1.0 - 1e-12)), dtype=np.int64)


def _local_prefill_load(tm: TopologyModel, j: int, ends: NDArray[np.float64] | float) -> NDArray[np.float64]:
    """Region j's local prefill load (instance-seconds per second) when it prefills every prompt up to ``ends``
    itself: r_j E[T_j(L); L <= end]."""
    model = tm.local[j]
    lengths = model.lengths
    busy = model.local_prefill.expect(lengths, lengths.lower_tokens - 1.0, ends)
    return float(tm.rate_req_per_s[j]) * np.asarray(busy, dtype=np.float64)


def _decode_need(tm: TopologyModel) -> NDArray[np.int64]:
    """Per PD cluster, the decode instances every plan needs: it decodes all of its region's requests locally,
    so more than r_j / θ_j instances, rounded up (the lower bound's own count)."""
    loads = [float(rate) / m.decode_req_per_s_per_instance for rate, m in zip(tm.rate_req_per_s, tm.local, strict=True)]
    return _whole(np.asarray(loads))


def _floor(tm: TopologyModel, c: int) -> int:
    """The fewest instances cluster ``c`` (sites first, then PD clusters) keeps in the search: a site one, a PD
    cluster two (a prefill and a decode instance)."""
    return 1 if c < tm.n_sites else 2


def _whole_price(topology: Topology, prices: NDArray[np.float64], counts: NDArray[np.int64], got: _Eval) -> float:
    """What ``counts`` cost per hour with the plan ``got`` found for them: GPUs, plus the links the plan routes
    over and their egress at the targets (the plan's egress over its λ*)."""
    assert got.plan is not None
    price = plan_price(topology, got.plan)
    return float(prices @ counts) + price.link_usd_per_hour + price.egress_usd_per_hour / got.scale


def _start(tm: TopologyModel) -> NDArray[np.int64]:
    """Where the greedy starts: one instance per site, and per PD cluster its decode need (``_decode_need``), two
    at least. Each count is one every feasible count vector holds (a plan may offload every prefill), so the start
    is below the answer, only nearer."""
    return np.concatenate([np.ones(tm.n_sites, dtype=np.int64), np.maximum(2, _decode_need(tm))])


def _binding(tm: TopologyModel, counts: NDArray[np.int64], got: _Eval, slo_s: float) -> list[str]:
    """What stops ``counts`` from carrying the targets within the SLO, in words: the share of the targets carried
    and what is saturated (links, sites, a region's own prefill), or the region whose P90 is over the SLO and the
    utilisations behind it."""
    names = (*tm.sites, *tm.regions)
    at = ", ".join(f"{n} {int(c)}" for n, c in zip(names, counts, strict=True))
    if got.plan is None:
        return [f"at {at} instances no load can be carried (a region with no capacity)"]
    plan = got.plan
    if got.scale < 1.0:
        full = [
            f"link {lk.prfaas} → {lk.pd} ({lk.bandwidth_bytes_per_s * 8e-9:,.0f} Gbit/s) at {lk.utilization:.0%}"
            for lk in plan.links
            if lk.utilization >= _SATURATED
        ]
        full += [f"site {s} at {u:.0%}" for s, u in plan.site_utilization.items() if u >= _SATURATED]
        short = ", ".join(
            f"{r.cluster} {r.carried_req_per_s:,.2f} of {r.carried_req_per_s / got.scale:,.2f}" for r in plan.regions
        )
        return [
            f"at {at} instances: the regions carry {got.scale:.0%} of their targets (req/s: {short})"
            + (f"; saturated: {'; '.join(full)}" if full else "")
        ]
    assert got.loaded is not None
    worst = max(got.loaded.regions, key=lambda r: np.inf if r.ttft is None else r.ttft.p90_s)
    busy = ", ".join(f"{name} {u:.0%}" for name, u in worst.utilization.items())
    if worst.ttft is None:
        return [f"at {at} instances: {worst.cluster}'s {worst.unstable} is saturated at its target ({busy})"]
    idle = max(worst.utilization.values(), default=0.0) < 0.5
    return [
        f"at {at} instances: {worst.cluster}'s P90 TTFT is {worst.ttft.p90_s:,.2f} s, over the SLO {slo_s:g} s, "
        f"with {worst.offload_fraction:.0%} of its requests offloaded (utilisation: {busy})"
        + (
            "; its stages are under half busy, so at this routing the P90 is mostly the requests' own prefill and "
            "KV transfer times"
            if idle
            else ""
        )
    ]


def _probe(
    tm: TopologyModel, start: NDArray[np.int64], bound_instances: dict[str, float]
) -> tuple[int, list[str] | None]:
    """Whether generous counts carry the targets at all (the fluid test alone: the latency test's P90 need not
    fall as counts grow, since the routing tested changes with them): ``PROBE_MULTIPLES`` of the bound's own
    instances plus one, each PD cluster at least what it needs to prefill everything itself beside its decode.
    (evaluations, None) where one carries them, else what binds at the largest (a saturated link or site). A
    probe past the first that would add more than MAX_STEPS instances to the start is not run (the search would
    not reach it)."""
    names = (*tm.sites, *tm.regions)
    own = np.asarray([bound_instances[n] for n in names], dtype=np.float64)
    alone = np.concatenate([start[: tm.n_sites], _decode_need(tm) + 1 + _all_local_prefill(tm)])
    reasons: list[str] | None = None
    evaluations = 0
    for multiple in PROBE_MULTIPLES:
        counts = np.maximum(np.maximum(start, alone), np.ceil(multiple * own - 1e-9).astype(np.int64) + 1)
        if evaluations and int((counts - start).sum()) > MAX_STEPS:
            break
        got = _evaluate(tm, counts, np.inf)
        evaluations += 1
        if got.scale >= 1.0:
            return evaluations, None
        reasons = _binding(tm, counts, got, np.inf)
    return evaluations, reasons


def _all_local_prefill(tm: TopologyModel) -> NDArray[np.int64]:
    """Per PD cluster, the prefill instances that carry its whole rate with nothing offloaded (r_j E[T_j(L)],
    rounded up): with them (and its decode) a region needs no link."""
    loads = [float(_local_prefill_load(tm, j, tm.local[j].lengths.upper_tokens)) for j in range(tm.n_regions)]
    return _whole(np.asarray(loads))


def size_topology(topology: Topology, slo_p90_s: float | None = None) -> SizedTopology:
    """Size ``topology`` for its regions' rates within ``slo_p90_s`` (default: the topology's ttft_p90_s)."""
    slo = slo_p90_s if slo_p90_s is not None else topology.slo.ttft_p90_s
    if slo is None:
        raise InfeasibleError("no P90 TTFT SLO: give slo.ttft_p90_s in the topology or --slo-p90")
    tm = topology_model(topology)
    prices = _instance_prices(topology, tm)
    bound, bound_instances = lower_bound(tm, prices)
    counts = _start(tm)
    evaluations, binding = _probe(tm, counts, bound_instances)
    if binding is not None:
        multiples = " and ".join(f"{m:g}x" for m in PROBE_MULTIPLES)
        raise InfeasibleError(
            [
                f"the targets cannot be carried, whatever the SLO: probed at {multiples} the lower bound's "
                "instances (+1 per cluster, each PD cluster able to prefill everything itself)",
                *binding,
            ],
            summary="the targets cannot be carried",
        )
    current = _evaluate(tm, counts, slo)
    evaluations += 1
    stalled, reached = 0, _progress(current)
    for _ in range(MAX_STEPS):
        if current.feasible:
            break
        if stalled >= PATIENCE:
            raise InfeasibleError(
                [
                    f"no counts found: the search (greedy, a heuristic) added {PATIENCE} instances in a row, each the "
                    "best of its step, and none brought the targets or the worst P90 nearer",
                    *_binding(tm, counts, current, slo),
                ],
                summary="no counts found that carry the targets within the SLO",
            )
        best: tuple[float, int, _Eval] | None = None
        for c in range(counts.size):
            trial = counts.copy()
            trial[c] += 1
            got = _evaluate(tm, trial, slo)
            evaluations += 1
            fluid = current.scale < 1.0
            gain = got.scale - current.scale if fluid else current.latency_score - got.latency_score
            value = gain / prices[c]
            if best is None or value > best[0]:
                best = (value, c, got)
        assert best is not None
        counts[best[1]] += 1
        current = best[2]
        now = _progress(current)
        if now[0] > reached[0] or now[1] > reached[1] + 1e-9:
            stalled, reached = 0, now
        else:
            stalled += 1
    if not current.feasible:
        raise InfeasibleError(
            [
                f"no counts found within {MAX_STEPS} added instances that carry the targets within the SLO",
                *_binding(tm, counts, current, slo),
            ],
            summary="no counts found that carry the targets within the SLO",
        )
    total = _whole_price(topology, prices, counts, current)
    for c in np.argsort(-prices, kind="stable"):  # prune, dearest instance first
        while counts[c] > _floor(tm, c):
            trial = counts.copy()
            trial[c] -= 1
            got = _evaluate(tm, trial, slo)
            evaluations += 1
            if not got.feasible:
                break
            priced = _whole_price(topology, prices, trial, got)
            if priced > total:
                break
            counts, current, total = trial, got, priced
    for _ in range(DESCENT_ROUNDS):  # descent on the whole price: one instance more or fewer, the best move
        move: tuple[float, NDArray[np.int64], _Eval] | None = None
        for c in range(counts.size):
            for step in (1, -1):
                if counts[c] + step < _floor(tm, c):
                    continue
                trial = counts.copy()
                trial[c] += step
                got = _evaluate(tm, trial, slo)
                evaluations += 1
                if not got.feasible:
                    continue
                priced = _whole_price(topology, prices, trial, got)
                if priced < total * (1.0 - DESCENT_GAIN) and (move is None or priced < move[0]):
                    move = (priced, trial, got)
        if move is None:
            break
        total, counts, current = move
    assert current.plan is not None and current.loaded is not None
    plan = current.plan
    price = plan_price(topology, plan)
    used = tuple(f"{lk.prfaas} → {lk.pd}" for lk in plan.links if lk.req_per_s > 0)
    return SizedTopology(
        counts={name: int(n) for name, n in zip((*tm.sites, *tm.regions), counts, strict=True)},
        scale=current.scale,
        plan=plan,
        loaded=current.loaded,
        gpu_usd_per_hour=float(prices @ counts),
        link_usd_per_hour=price.link_usd_per_hour,
        egress_usd_per_hour=price.egress_usd_per_hour / current.scale,
        links_bought=used,
        lower_bound_gpu_usd_per_hour=bound,
        lower_bound_instances=bound_instances,
        evaluations=evaluations,
        slo_p90_s=slo,
    )
