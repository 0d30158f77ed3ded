"""Sizing: the cheapest deployment (PrfaaS instances, local instances, link bandwidth, threshold and split)
that carries a target rate within a TTFT SLO, and the questions around it (the largest rate a deployment
carries, the bandwidth knee).

A deployment *carries* Λ when its goodput (``latency.goodput``: the largest rate at which the TTFT quantile
stays within the SLO, maximised over the threshold t and the split N_p, re-scored with the link's sojourn
spread) is at least Λ. Goodput never falls when a pool gains an instance or the link gains bandwidth (every
plan of the smaller deployment is still available, with no longer waits), so carrying is monotone in each of
N_prfaas, N_local and B:

- ``optimize.carrier`` answers "does this deployment carry Λ?" (the fixed-rate search of ``latency.goodput``,
  cached, with answers inferred from dominating deployments) and prices a deployment;
- ``optimize.fleet_search`` finds the cheapest (N_prfaas, N_local, B): fluid floors bound every (B,
  N_prfaas) at once; a small search space is searched exactly (a staircase over N_prfaas with N_local by
  galloping and bisection and B by bisection), a large one by a pattern search from the fluid optimum, whose
  answer is reported with the floor it cannot be further than;
- ``size`` (here) verifies the answer with the full TTFT law (a rejected deployment is demoted and the search
  runs again), sizes homogeneous PD (no PrfaaS pool, no link) over N_local alone, and prices both.

The answers are for the goodput model, the closed form of ``latency.goodput``, whose validity and simulation
check are reported by the caller.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import field

import numpy as np
from numpy.typing import NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InfeasibleError
from prfaas_plan.latency.goodput import plans_goodput
from prfaas_plan.latency.tpot import check_tpot_slo, tpot_decode_floor
from prfaas_plan.optimize.carrier import Carried, Carrier, Deployment, priced_deployment, smallest_local
from prfaas_plan.optimize.cost import (
    UnitPrices,
    link_fixed_usd_per_hour,
    link_options,
)
from prfaas_plan.optimize.fleet_search import cheapest, fluid_floors, local_prefill_floor
from prfaas_plan.optimize.goodput_search import best_goodput_plan
from prfaas_plan.optimize.plans import CO_BINDING_RTOL
from prfaas_plan.optimize.throughput_search import best_plan
from prfaas_plan.spec.cost import Target
from prfaas_plan.spec.plan import TtftSlo
from prfaas_plan.throughput import (
    STAGES,
    StageModel,
    decode_floor,
    link_bought_bytes_per_s,
    routing,
    stage_bounds,
    stage_throughputs,
    with_link_rate,
)

Array = NDArray[np.float64]

#: Threshold resolution (tokens) of the goodput search inside the sizing loops.
SIZING_RESOLUTION_TOKENS = 1024.0


@frozen
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


#: Rounds of search-then-verify before sizing gives up (each round demotes one deployment the full law rejects).
_MAX_VERIFY_ROUNDS = 64


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
    carrier = Carrier(model, target, resolution_tokens, decode_service_scv)
    check_tpot_slo(model)
    # Eq. 5's stability floor, raised to the decode instances a P90 TPOT SLO needs at the target (latency.tpot).
    decode = max(decode_floor(model, target.rate_req_per_s), tpot_decode_floor(model, target.rate_req_per_s))
    floor = max(2, decode)
    reasons: list[str] = []

    homog: Deployment | None = None
    if homogeneous:
        # Every request prefilled locally: N_p > Λ · E[T_local(L)] besides the decode floor.
        everything = target.rate_req_per_s * float(
            model.local_prefill.expect(model.lengths, model.lengths.lower_tokens - 1.0, model.lengths.upper_tokens)
        )
        low = max(floor, decode + int(local_prefill_floor(np.asarray(everything))))
        while True:
            n = smallest_local(carrier, 0, 0.0, low, max_local)
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
            homog = priced_deployment(carrier, prices, 0, n, 0.0, "homogeneous-pd", final=True)

    ascending = sorted(set(float(b) for b in bandwidths_bytes_per_s))
    best: Deployment | None = None
    cost_floor: float | None = None
    if floor > max_local:
        reasons.append(f"pd_decode: carrying {target.rate_req_per_s:g} req/s needs at least {floor} local instances")
    else:
        floors = fluid_floors(carrier, prices, ascending, max_prfaas, decode)
        for _ in range(_MAX_VERIFY_ROUNDS):
            found, cost_floor = cheapest(carrier, prices, ascending, floors, decode, max_local)
            if found is None or carrier.verify(*found):
                break
        else:
            found = None
        if found is not None:
            best = priced_deployment(carrier, prices, *found, "prfaas-pd", final=True)
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
        bandwidths_bytes_per_s=tuple(ascending),
        max_prfaas=max_prfaas,
        max_local=max_local,
        evaluations=len(carrier.cache),
        cost_floor_usd_per_hour=cost_floor,
        reasons=tuple(reasons),
        prices_source=dict(prices.sources),
    )


def max_rate(
    model: StageModel,
    slo: TtftSlo,
    *,
    resolution_tokens: float = 10.0,
    decode_service_scv: float = 0.0,
) -> Carried:
    """The largest rate the model's deployment (its N_prfaas, N_local and link) carries within the SLO, and
    the plan that carries it."""
    fixed = [model.lengths.upper_tokens] if model.n_prfaas == 0 else None
    t, n_p, rate = best_goodput_plan(
        model,
        slo,
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
    (scored,) = plans_goodput(model, [t], [n_p], slo, decode_service_scv=decode_service_scv)
    return Carried(
        threshold_tokens=t,
        n_pd_prefill=n_p,
        goodput_req_per_s=scored.rate_req_per_s,
        stability_limit_req_per_s=scored.stability_limit_req_per_s,
        limited_by=scored.limited_by,
    )


@frozen
class KneePoint:
    """One bandwidth of the knee table: Λ_max and its binding stage (and goodput when an SLO is given)."""

    bandwidth_bytes_per_s: float
    throughput_req_per_s: float
    binding: str
    goodput_req_per_s: float | None
    link_usd_per_hour: float


@frozen
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
    slo: TtftSlo | None = None,
    resolution_tokens: float = SIZING_RESOLUTION_TOKENS,
    decode_service_scv: float = 0.0,
) -> BandwidthKnee:
    """Λ_max-optimal plan (and goodput under the SLO) at each bandwidth, for the model's pools: Λ_max and the
    stages within 1 % of it (as ``optimize.plans`` names them binding)."""
    points = []
    for b in sorted(set(float(x) for x in bandwidths_bytes_per_s)):
        at = with_link_rate(model, b)  # bought at b, served at what the connections deliver
        t_best, n_p_best, lam = best_plan(at, resolution_tokens)
        route = routing(at.lengths, t_best)
        bounds = stage_bounds(stage_throughputs(at, route, n_p_best), route)
        binding = [s for s in STAGES if float(bounds[s]) <= lam * (1 + CO_BINDING_RTOL)]
        goodput = None
        if slo is not None:
            goodput = max_rate(
                at, slo, resolution_tokens=resolution_tokens, decode_service_scv=decode_service_scv
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


@frozen
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
        links = [link_bought_bytes_per_s(model)]
    return SearchSpace(
        bandwidths_bytes_per_s=tuple(links),
        max_prfaas=min(max_prfaas if max_prfaas is not None else auto_prfaas, MAX_SIZED_INSTANCES),
        max_local=min(max_local if max_local is not None else auto_local, MAX_SIZED_INSTANCES),
    )
