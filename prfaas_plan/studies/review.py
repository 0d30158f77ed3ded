"""A whole capacity review of one scenario in one frozen result: the best plan beside the baselines, the
paper's Fig. 5 sweeps, TTFT under load (closed form checked by simulation), goodput, sizing to the scenario's
target (and at the edges of the roofline and calibrated pools' error bands), cost, hardware alternatives,
sensitivity and N-1.

Each part is optional: it is computed when the scenario gives its inputs (an SLO, a target rate, prices) and
the options ask for it; otherwise it is None and ``Review.skipped`` says why. This module sits between
``io`` (it builds the hardware matrix's scenarios through ``io.matrix``) and ``cli``; it never prints and
writes nothing.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field, replace
from typing import TypeVar

import numpy as np

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InfeasibleError
from prfaas_plan.optimize import Comparison, GoodputComparison, compare, compare_goodput
from prfaas_plan.optimize.carrier import Carried, Deployment
from prfaas_plan.optimize.cost import UnitPrices, deployment_cost, unit_prices
from prfaas_plan.optimize.economics import CostComparison, cost_comparison
from prfaas_plan.optimize.headroom import Failure, Tornado, n_minus_one, tornado
from prfaas_plan.optimize.matrix import CellInput, HardwareMatrix, hardware_matrix, pareto
from prfaas_plan.optimize.plans import plan_of
from prfaas_plan.optimize.sizing import (
    SIZING_RESOLUTION_TOKENS,
    BandwidthKnee,
    Sizing,
    bandwidth_knee,
    default_search_space,
    max_rate,
)
from prfaas_plan.optimize.sizing import size as size_deployment
from prfaas_plan.optimize.uncertainty import EDGES, EdgeSizing, banded, size_edge, verdict
from prfaas_plan.spec.cost import Target
from prfaas_plan.spec.plan import Plan, TtftSlo
from prfaas_plan.spec.scenario import Scenario
from prfaas_plan.studies.closed_form import Traffic
from prfaas_plan.studies.uncertainty import banded_scenario
from prfaas_plan.studies.verify import MISSES, LoadedCheck, PlanAt, VerifyOptions, check_loaded, verify_plans
from prfaas_plan.throughput import (
    STAGES,
    StageModel,
    egress_bytes_per_s,
    link_bought_bytes_per_s,
    max_throughput,
    routing,
    stage_bounds,
    stage_model,
    stage_throughputs,
    with_link_rate,
)
from prfaas_plan.units import GBIT_PER_S

#: Version of the review's machine-readable layout (review.json); bumped when a key changes meaning.
SCHEMA_VERSION = "1"
#: Loads (fractions of the plan's Λ_max) of the closed-form TTFT curve: the lines of the TTFT-vs-load plot.
CURVE_FRACTIONS = tuple(round(0.05 * k, 2) for k in range(1, 20))
#: Loads at which the simulator checks the curve: the points, with 95 % intervals.
SIMULATED_FRACTIONS = (0.3, 0.5, 0.7, 0.85)
SIMULATED_FRACTIONS_QUICK = (0.5, 0.8)
#: Load at which the plan and both baselines are compared when the scenario has no target rate.
DEFAULT_LOAD_FRACTION = 0.7
#: Thresholds of the Fig. 5b and egress sweeps (quantile-spaced over the length distribution).
THRESHOLD_POINTS = 241
#: The hardware matrix's default axes: the scenario's own pair and one alternative on each side (each cell is a
#: whole sizing, about 10-20 s on two cores: see ``ReviewOptions.matrix``).
MATRIX_PREFILL = ("h200", "b200")
MATRIX_LOCAL = ("h20", "h100")
#: The given deployment's neighbours on the cost-goodput plane: (ΔN_prfaas, ΔN_local), same hardware and link.
#: Each costs one goodput search (about 0.5-1 s).
FRONTIER_NEIGHBOURS = ((-1, 0), (1, 0), (2, 0), (0, -2), (0, 2), (1, 2), (2, 4))
#: How ``sizing_part`` checks the sized deployments unless told otherwise: the ``size`` command's check and the
#: review's default (``ReviewOptions.verify``), so that both report the same check for the same deployment.
SIZING_CHECK = VerifyOptions()


@frozen
class ReviewOptions:
    """What the review computes and how hard it checks.

    ``verify``: simulation settings (``verify.verify`` False keeps the closed forms alone). ``quick``: fewer
    simulated loads, a coarser threshold resolution in the sensitivity and N-1 searches. ``matrix``: the
    (prefill, local) hardware names of the alternatives, or None to skip them. ``sensitivity``: run the
    tornado. ``tornado_step``: relative move of each input in it.
    """

    verify: VerifyOptions = field(default_factory=VerifyOptions)
    quick: bool = False
    matrix: tuple[tuple[str, ...], tuple[str, ...]] | None = None
    sensitivity: bool = True
    tornado_step: float = 0.2
    resolution_tokens: float = 10.0

    @property
    def headroom_resolution_tokens(self) -> float:
        """Threshold resolution of the tornado and N-1 re-optimisations (tokens)."""
        return 256.0 if self.quick else 64.0

    @property
    def simulated_fractions(self) -> tuple[float, ...]:
        """Loads at which the TTFT curve is simulated (fractions of Λ_max)."""
        return SIMULATED_FRACTIONS_QUICK if self.quick else SIMULATED_FRACTIONS


@frozen
class SplitSweep:
    """Fig. 5a: Λ_max and each stage's bound on Λ (req/s) against N_p at a fixed threshold t (tokens)."""

    threshold_tokens: float
    n_pd_prefill: tuple[int, ...]
    throughput_req_per_s: tuple[float, ...]
    #: stage -> bound per N_p (req/s; inf where the stage receives no traffic).
    stage_bound_req_per_s: Mapping[str, tuple[float, ...]]


@frozen
class ThresholdSweep:
    """Fig. 5b and the egress sweep: against the threshold t at a fixed split N_p, Λ_max and each stage's
    bound (req/s), the offload fraction p, the egress at Λ_max and at the target rate (bytes/s; None without
    a target, NaN where the target exceeds Λ_max) and the link's bandwidth (bytes/s)."""

    n_pd_prefill: int
    threshold_tokens: tuple[float, ...]
    throughput_req_per_s: tuple[float, ...]
    stage_bound_req_per_s: Mapping[str, tuple[float, ...]]
    offload_fraction: tuple[float, ...]
    egress_at_max_bytes_per_s: tuple[float, ...]
    egress_at_target_bytes_per_s: tuple[float, ...] | None
    link_bandwidth_bytes_per_s: float


@frozen
class LoadCurve:
    """The optimised plan's TTFT against load: closed form at ``CURVE_FRACTIONS`` (the lines) and, where
    simulation is on, closed form and simulation side by side at the simulated loads (the points)."""

    max_throughput_req_per_s: float
    closed: tuple[LoadedCheck, ...]
    simulated: tuple[LoadedCheck, ...]


@frozen
class Loaded:
    """The plan and both baselines at one offered load (``verify_plans``: every plan simulated, on common
    random numbers)."""

    basis: str
    checks: Mapping[str, LoadedCheck]


@frozen
class SizingPart:
    """Sizing to the target: the cheapest deployments, the scenario's own deployment's largest rate within the
    SLO, the link sizes' effect on the sized deployment, and the TTFT quantile at the target of the sized
    PrfaaS-PD deployment (``check``) and of the sized homogeneous PD (``baseline_check``), by simulation
    checked against the SLO (``sized_check``)."""

    sizing: Sizing
    own: Carried
    knee: BandwidthKnee | None
    check: LoadedCheck | None
    baseline_check: LoadedCheck | None = None


@frozen
class ErrorBandPart:
    """The sizing at both edges of the roofline and calibrated pools' error bands (``optimize.uncertainty``,
    the same answer as ``size --band``): ``scenario`` with its bands in place, the nominal sizing's verdict
    (``prfaas-pd``, ``homogeneous-pd`` or ``none``) and, per edge, the deployment needed there and the nominal
    deployments' goodput there."""

    scenario: Scenario
    nominal: Sizing
    nominal_verdict: str
    edges: tuple[EdgeSizing, ...]

    @property
    def verdict_holds(self) -> bool:
        """Whether the cheapest kind (PrfaaS-PD or homogeneous PD) is the same at both edges as nominal."""
        return all(e.verdict == self.nominal_verdict for e in self.edges)


@frozen
class CostPoint:
    """One deployment on the cost-goodput plane: hourly cost at the target rate (USD/h; GPUs, link and egress)
    and goodput (req/s). The label's first word is its short name (N_prfaas+N_local, or the hardware pair)."""

    label: str
    #: Where it comes from: "given" (the scenario's deployment), "scaled" (it with more or fewer instances),
    #: "sizing" or "matrix".
    source: str
    usd_per_hour: float
    goodput_req_per_s: float


@frozen
class Frontier:
    """Every priced deployment the review found and the Pareto frontier among them (indices, cheapest first)."""

    points: tuple[CostPoint, ...]
    pareto: tuple[int, ...]


@frozen
class Option:
    """One way to serve the scenario, on the recommendation's objective: ``kind`` is "PrfaaS-PD",
    "homogeneous PD" or "naive offload" (with the hardware pair for a matrix point); ``usd_per_hour`` its cost
    (at the target rate, or at its Λ_max without a target; NaN when unpriced); ``figure_req_per_s`` what the
    objective counts (goodput with a target or an SLO, else Λ_max); ``margin`` its relative margin
    (goodput / target - 1 with a target); ``verdict`` the simulation check at the target (None: not simulated)."""

    label: str
    kind: str
    usd_per_hour: float
    figure_req_per_s: float
    margin: float | None
    verdict: str | None = None


@frozen
class Recommendation:
    """The review's decision on its own objective: the ``winner`` among ``options`` (ranked, best first; the
    winner is options[0]), the ``objective`` in words, and the equal-cost comparison of PrfaaS-PD with
    homogeneous PD (``equal_cost_gain``: PrfaaS-PD's Λ_max over homogeneous PD's at the same hourly cost,
    minus 1; None unpriced)."""

    objective: str
    options: tuple[Option, ...]
    equal_cost_gain: float | None
    equal_cost_usd_per_hour: float | None
    equal_cost_homogeneous_instances: int | None

    @property
    def winner(self) -> Option:
        """The best option on the objective."""
        return self.options[0]


@frozen
class Review:
    """Everything a capacity review found; a part is None when ``skipped`` names it with the reason."""

    scenario: Scenario
    options: ReviewOptions
    target: Target | None
    ttft_slo_s: float | None
    comparison: Comparison
    split_sweep: SplitSweep
    threshold_sweep: ThresholdSweep
    loaded: Loaded
    load_curve: LoadCurve
    goodput: GoodputComparison | None
    sizing: SizingPart | None
    cost: CostComparison | None
    matrix: HardwareMatrix | None
    frontier: Frontier | None
    tornado: Tornado | None
    n_minus_one: tuple[Failure, ...] | None
    prices: UnitPrices
    #: part -> why it was not computed.
    skipped: Mapping[str, str]
    #: part -> wall-clock seconds it took.
    timings_s: Mapping[str, float]
    #: quantity -> provenance line (the stage model's sources, then the prices').
    provenance: Mapping[str, str]
    #: The decision on the review's objective (``recommend``).
    recommendation: Recommendation | None = None
    #: The sizing at the edges of the pools' error bands (None: no banded pool, or no sizing; see ``skipped``).
    error_band: ErrorBandPart | None = None


T = TypeVar("T")


def split_sweep(model: StageModel, threshold_tokens: float) -> SplitSweep:
    """Λ_max (Eq. 6) and each stage's bound for every N_p in 1..N_local-1 at threshold t (paper Fig. 5a)."""
    n_p = np.arange(1, model.n_local, dtype=np.float64)
    route = routing(model.lengths, threshold_tokens)
    bounds = stage_bounds(stage_throughputs(model, route, n_p), route)
    lam = max_throughput(bounds)
    return SplitSweep(
        threshold_tokens=float(threshold_tokens),
        n_pd_prefill=tuple(int(v) for v in n_p),
        throughput_req_per_s=tuple(float(v) for v in np.broadcast_to(lam, n_p.shape)),
        stage_bound_req_per_s={s: tuple(float(v) for v in np.broadcast_to(bounds[s], n_p.shape)) for s in STAGES},
    )


def threshold_sweep(
    model: StageModel, n_pd_prefill: int, target_rate_req_per_s: float | None, points: int = THRESHOLD_POINTS
) -> ThresholdSweep:
    """Λ_max, stage bounds, p and egress against t at split N_p (paper Fig. 5b; egress as in §4.3.1).

    The thresholds are quantiles of the length distribution (0.1 %..99.9 %, so that each part of the curve
    carries the same share of requests), with the support's ends added."""
    lengths = model.lengths
    q = np.asarray(lengths.quantile(np.linspace(0.001, 0.999, points - 2)), dtype=np.float64)
    t = np.unique(np.concatenate([[lengths.lower_tokens], q, [lengths.upper_tokens]]))
    route = routing(lengths, t)
    bounds = stage_bounds(stage_throughputs(model, route, n_pd_prefill), route)
    lam = max_throughput(bounds)
    at_max = egress_bytes_per_s(model, route, lam)
    at_target = None
    if target_rate_req_per_s is not None:
        egress = egress_bytes_per_s(model, route, target_rate_req_per_s)
        at_target = tuple(
            float(e) if target_rate_req_per_s <= m else math.nan for e, m in zip(egress, lam, strict=True)
        )
    return ThresholdSweep(
        n_pd_prefill=n_pd_prefill,
        threshold_tokens=tuple(float(v) for v in t),
        throughput_req_per_s=tuple(float(v) for v in lam),
        stage_bound_req_per_s={s: tuple(float(v) for v in np.broadcast_to(bounds[s], t.shape)) for s in STAGES},
        offload_fraction=tuple(float(v) for v in route.offload_fraction),
        egress_at_max_bytes_per_s=tuple(float(v) for v in at_max),
        egress_at_target_bytes_per_s=at_target,
        link_bandwidth_bytes_per_s=model.link_bandwidth_bytes_per_s,
    )


def load_curve(model: StageModel, comparison: Comparison, traffic: Traffic, options: ReviewOptions) -> LoadCurve:
    """The plan's TTFT at each load of ``CURVE_FRACTIONS`` (closed form) and at the simulated loads."""
    plan = comparison.plan
    assert plan.threshold_tokens is not None  # the optimised plan always has a threshold
    lam = plan.throughput_req_per_s
    verify = options.verify
    sized = replace(model, n_prfaas=plan.n_prfaas)
    chosen = plan_of(model, plan)

    def at(fraction: float, simulate: bool) -> LoadedCheck:
        return check_loaded(sized, chosen, fraction * lam, traffic, options=replace(verify, verify=simulate))

    closed = tuple(at(f, False) for f in CURVE_FRACTIONS)
    simulated = tuple(at(f, True) for f in options.simulated_fractions) if verify.verify else ()
    return LoadCurve(max_throughput_req_per_s=lam, closed=closed, simulated=simulated)


def loaded(
    model: StageModel,
    comparison: Comparison,
    traffic: Traffic,
    target: Target | None,
    options: VerifyOptions,
    slo: TtftSlo | None = None,
) -> Loaded:
    """The plan and both baselines at the target rate (all at one rate), or each at ``DEFAULT_LOAD_FRACTION``
    of its own Λ_max when there is no target; every plan simulated on the same workloads (``verify_plans``)
    and, with an SLO (the target's, else ``slo``), checked against it until decided or the budget ends."""
    plans = {
        "plan": comparison.plan,
        "homogeneous_pd": comparison.homogeneous_pd,
        "naive_heterogeneous": comparison.naive_heterogeneous,
    }
    if target is not None:
        basis = f"every plan at the target rate, {target.rate_req_per_s:g} req/s"
    else:
        basis = f"each plan at {DEFAULT_LOAD_FRACTION:.0%} of its own Λ_max"
    at = {}
    for key, plan in plans.items():
        rate = target.rate_req_per_s if target is not None else DEFAULT_LOAD_FRACTION * plan.throughput_req_per_s
        at[key] = PlanAt(n_prfaas=plan.n_prfaas, plan=plan_of(model, plan), rate_req_per_s=rate)
    checks = verify_plans(model, at, traffic, options, slo=target.ttft_slo if target is not None else slo)
    return Loaded(basis=basis, checks=checks)


def sizing_part(
    model: StageModel,
    prices: UnitPrices,
    target: Target,
    traffic: Traffic,
    *,
    decode_service_scv: float = 0.0,
    bandwidths_bytes_per_s: Sequence[float] | None = None,
    max_prfaas: int | None = None,
    max_local: int | None = None,
    resolution_tokens: float = SIZING_RESOLUTION_TOKENS,
    knee_bandwidths_bytes_per_s: Sequence[float] | None = None,
    verify: VerifyOptions = SIZING_CHECK,
) -> SizingPart:
    """The answer of the ``size`` command and of the review's sizing part, computed in one place.

    The cheapest deployments for ``target`` over ``default_search_space`` (its link sizes, bytes/s, and
    instance caps: given, or the defaults); the model's own deployment's largest rate within the SLO, its
    threshold searched at ``resolution_tokens`` (tokens); the bandwidth knee of the sized PrfaaS-PD
    deployment at ``knee_bandwidths_bytes_per_s`` (bytes/s; default: the search space's link sizes and the
    model's link) and at the sized link itself; and, with ``verify.verify``, its P90 TTFT at the target rate
    simulated as ``verify`` says. The knee and the check are None when no PrfaaS-PD deployment meets the
    target; an empty sizing is returned, not raised (``Sizing.reasons`` says why)."""
    space = default_search_space(
        model, prices, target, bandwidths_bytes_per_s=bandwidths_bytes_per_s, max_prfaas=max_prfaas, max_local=max_local
    )
    sizing = size_deployment(
        model,
        prices,
        target,
        bandwidths_bytes_per_s=space.bandwidths_bytes_per_s,
        max_prfaas=space.max_prfaas,
        max_local=space.max_local,
        decode_service_scv=decode_service_scv,
    )
    own = max_rate(
        model,
        target.ttft_slo,
        resolution_tokens=resolution_tokens,
        decode_service_scv=decode_service_scv,
    )
    best = sizing.prfaas_pd
    knee = check = baseline_check = None
    if best is not None:
        sized = with_link_rate(replace(model, n_prfaas=best.n_prfaas, n_local=best.n_local), best.bandwidth_bytes_per_s)
        links = (
            [*space.bandwidths_bytes_per_s, link_bought_bytes_per_s(model)]
            if knee_bandwidths_bytes_per_s is None
            else list(knee_bandwidths_bytes_per_s)
        )
        knee = bandwidth_knee(sized, [*links, best.bandwidth_bytes_per_s], prices)
        if verify.verify and best.threshold_tokens is not None:
            check = sized_check(sized, best, target, traffic, verify)
    homog = sizing.homogeneous_pd
    if verify.verify and homog is not None:
        alone = replace(model, n_prfaas=0, n_local=homog.n_local)
        baseline_check = sized_check(alone, homog, target, traffic, verify)
    return SizingPart(sizing=sizing, own=own, knee=knee, check=check, baseline_check=baseline_check)


def error_band_part(scenario: Scenario, prices: UnitPrices, target: Target, nominal: Sizing) -> ErrorBandPart:
    """``target`` sized again at both edges of the scenario's banded pools (``studies.uncertainty``: the
    bands ``size --band`` uses) and ``nominal``'s deployments re-scored there."""
    spec = banded_scenario(scenario)
    scv = spec.traffic.output_length.scv
    edges = tuple(size_edge(spec, prices, target, nominal, e, decode_service_scv=scv) for e in EDGES)
    return ErrorBandPart(scenario=spec, nominal=nominal, nominal_verdict=verdict(nominal), edges=edges)


def sized_check(
    model: StageModel, deployment: Deployment, target: Target, traffic: Traffic, options: VerifyOptions
) -> LoadedCheck:
    """A sized deployment's TTFT quantile at the target rate, simulated and checked against the target's SLO
    until decided or the budget ends (``verify_plans``: the one path ``size`` and ``review`` share, so the
    same deployment gets the same check). ``model`` is the deployment's (its pools and link)."""
    t = deployment.threshold_tokens if deployment.threshold_tokens is not None else model.lengths.upper_tokens
    plan = Plan(threshold_tokens=t, n_pd_prefill=deployment.n_pd_prefill, n_pd_decode=deployment.n_pd_decode)
    return check_loaded(model, plan, target.rate_req_per_s, traffic, options=options, slo=target.ttft_slo)


def _priced_point(
    model: StageModel, prices: UnitPrices, carried: Carried, target: Target, label: str, source: str
) -> CostPoint:
    """A deployment priced like the sized ones: at the target rate (at its goodput when it cannot carry the
    target), GPUs, link and egress."""
    rate = min(carried.goodput_req_per_s, target.rate_req_per_s)
    egress = 0.0
    if rate > 0 and model.n_prfaas > 0:
        egress = float(egress_bytes_per_s(model, routing(model.lengths, carried.threshold_tokens), rate))
    cost = deployment_cost(
        prices,
        n_prfaas=model.n_prfaas,
        n_local=model.n_local,
        bandwidth_bytes_per_s=model.link_bandwidth_bytes_per_s,
        egress_bytes_per_s=egress,
    )
    return CostPoint(
        label=label, source=source, usd_per_hour=cost.total_usd_per_hour, goodput_req_per_s=carried.goodput_req_per_s
    )


def cost_frontier(
    model: StageModel,
    prices: UnitPrices,
    sizing: SizingPart | None,
    matrix: HardwareMatrix | None,
    *,
    neighbours: Sequence[tuple[int, int]] = (),
    resolution_tokens: float = 64.0,
    decode_service_scv: float = 0.0,
) -> Frontier:
    """The cost-goodput plane: the scenario's deployment as given, its ``neighbours`` (the same hardware and
    link with (ΔN_prfaas, ΔN_local) more instances, each re-optimised for goodput), the sized deployments and
    every matrix point; and their Pareto frontier."""
    points = []
    if sizing is not None:
        target = sizing.sizing.target
        points.append(
            _priced_point(model, prices, sizing.own, target, f"{model.n_prfaas}+{model.n_local} (given)", "given")
        )
        for d_prfaas, d_local in neighbours:
            n_prfaas, n_local = model.n_prfaas + d_prfaas, model.n_local + d_local
            if n_prfaas < 1 or n_local < 2:
                continue
            other = replace(model, n_prfaas=n_prfaas, n_local=n_local)
            carried = max_rate(
                other,
                target.ttft_slo,
                resolution_tokens=resolution_tokens,
                decode_service_scv=decode_service_scv,
            )
            points.append(_priced_point(other, prices, carried, target, f"{n_prfaas}+{n_local}", "scaled"))
        for d in (sizing.sizing.prfaas_pd, sizing.sizing.homogeneous_pd):
            if d is not None:
                points.append(
                    CostPoint(
                        label=f"{d.n_prfaas}+{d.n_local} sized, {d.bandwidth_bytes_per_s / GBIT_PER_S:g} Gbit/s"
                        if d.n_prfaas > 0
                        else f"0+{d.n_local} sized homogeneous PD",
                        source="sizing",
                        usd_per_hour=d.usd_per_hour,
                        goodput_req_per_s=d.goodput_req_per_s,
                    )
                )
    if matrix is not None:
        seen = {(p.usd_per_hour, p.goodput_req_per_s) for p in points}
        for p in matrix.points:
            if (p.usd_per_hour, p.goodput_req_per_s) in seen:  # the scenario's own pair, already sized
                continue
            name = f"{p.prefill}+{p.local}" if p.prefill else f"{p.local}-only"
            points.append(
                CostPoint(
                    label=f"{name} ({p.kind})",
                    source="matrix",
                    usd_per_hour=p.usd_per_hour,
                    goodput_req_per_s=p.goodput_req_per_s,
                )
            )
    front = pareto([p.usd_per_hour for p in points], [p.goodput_req_per_s for p in points])
    return Frontier(points=tuple(points), pareto=front)


def _carries(verdict: str | None) -> bool:
    return verdict != MISSES


def _target_options(r: Review, rate: float) -> list[Option]:
    """Every deployment the review priced that could carry ``rate``: the sized PrfaaS-PD and homogeneous-PD
    deployments (with their simulation checks' verdicts), the given deployment and its priced neighbours, and
    the matrix points."""
    assert r.sizing is not None
    options: list[Option] = []
    sized = r.sizing.sizing
    checks = {"prfaas": r.sizing.check, "homogeneous": r.sizing.baseline_check}
    for key, d in (("prfaas", sized.prfaas_pd), ("homogeneous", sized.homogeneous_pd)):
        if d is None:
            continue
        check = checks[key]
        verdict = check.decision.verdict if check is not None and check.decision is not None else None
        link = f" on a {d.bandwidth_bytes_per_s / GBIT_PER_S:g} Gbit/s link" if d.n_prfaas else ""
        options.append(
            Option(
                label=f"{d.n_prfaas} PrfaaS + {d.n_local} local instances{link}"
                if d.n_prfaas
                else f"{d.n_local} local instances, no PrfaaS pool",
                kind="PrfaaS-PD" if d.n_prfaas else "homogeneous PD",
                usd_per_hour=d.usd_per_hour,
                figure_req_per_s=d.goodput_req_per_s,
                margin=d.goodput_req_per_s / rate - 1,
                verdict=verdict,
            )
        )
    # The given deployment (or a neighbour) that sizing also found, on the same link: listed once, as sized.
    pd = sized.prfaas_pd
    found = (
        (pd.n_prfaas, pd.n_local)
        if pd is not None and pd.bandwidth_bytes_per_s == r.scenario.link.bandwidth_bytes_per_s
        else None
    )
    for p in r.frontier.points if r.frontier is not None else ():
        if p.source not in ("given", "scaled") or p.goodput_req_per_s < rate:
            continue  # matrix points are listed below, by their hardware pair
        counts = tuple(int(n) for n in p.label.split()[0].split("+"))
        if counts != found:
            options.append(
                Option(
                    label=f"{p.label.split()[0].replace('+', ' PrfaaS + ')} local instances"
                    + (" (as given)" if p.source == "given" else ""),
                    kind="PrfaaS-PD",
                    usd_per_hour=p.usd_per_hour,
                    figure_req_per_s=p.goodput_req_per_s,
                    margin=p.goodput_req_per_s / rate - 1,
                )
            )
    for m in r.matrix.points if r.matrix is not None else ():
        if m.goodput_req_per_s >= rate:
            homog = not m.prefill
            options.append(
                Option(
                    label=f"{m.local} only" if homog else f"{m.prefill} PrfaaS + {m.local} local",
                    kind="homogeneous PD" if homog else "PrfaaS-PD",
                    usd_per_hour=m.usd_per_hour,
                    figure_req_per_s=m.goodput_req_per_s,
                    margin=m.goodput_req_per_s / rate - 1,
                )
            )
    return options


def recommend(r: Review) -> Recommendation:
    """The decision on the review's own objective, never a plan another option beats on it.

    With a target and prices: the cheapest deployment that carries the target within the SLO, among the sized
    PrfaaS-PD and homogeneous-PD deployments, the given deployment and its priced neighbours, and the matrix
    points (a deployment whose simulation check misses the SLO is left out; ranked by cost, then by margin).
    Without a target, with prices: the most requests per second per USD/h, PrfaaS-PD on the given deployment
    against homogeneous PD at equal GPU count and at equal cost (goodput under the SLO when there is one,
    else Λ_max). Unpriced: the most requests per second on the given GPUs (the paper's comparison)."""
    c = r.comparison
    gain = usd = instances = None
    if r.cost is not None:
        gain = r.cost.equal_cost.gain
        usd = r.cost.plan_cost.breakdown.total_usd_per_hour
        instances = r.cost.equal_cost.shape.instances
    options: list[Option] = []
    if r.target is not None and r.sizing is not None:
        target = r.target
        rate = target.rate_req_per_s
        options = _target_options(r, rate)
        options = [o for o in options if _carries(o.verdict)]
        options.sort(key=lambda o: (o.usd_per_hour, -(o.margin or 0.0)))
        objective = (
            f"the cheapest deployment that carries {rate:g} req/s within P{target.quantile * 100:g} TTFT <= "
            f"{target.ttft_slo_s:g} s"
        )
        if options:
            return Recommendation(
                objective=objective,
                options=_unique(options),
                equal_cost_gain=gain,
                equal_cost_usd_per_hour=usd,
                equal_cost_homogeneous_instances=instances,
            )
    g = r.goodput
    by = "goodput" if g is not None else "Λ_max"

    def figure(key: str) -> float:
        if g is not None:
            return float(getattr(g, key).goodput.rate_req_per_s)
        return float(getattr(c, key).throughput_req_per_s)

    plan_label = (
        f"{c.plan.n_prfaas} PrfaaS + {r.scenario.local.instances} local instances, t = "
        f"{c.plan.threshold_tokens or 0:,.0f}"
    )
    if r.cost is not None:
        k = r.cost
        equal = k.equal_cost
        # Requests per second per USD/h; homogeneous PD at equal cost carries its own figure at the same price.
        homog_figure = equal.plan.throughput_req_per_s
        plan_figure = c.plan.throughput_req_per_s
        if g is not None:
            plan_figure = figure("plan")
            homog_figure *= figure("homogeneous_pd") / max(c.homogeneous_pd.throughput_req_per_s, 1e-12)
        options = [
            Option(
                label=plan_label,
                kind="PrfaaS-PD",
                usd_per_hour=usd or math.nan,
                figure_req_per_s=plan_figure,
                margin=None,
            ),
            Option(
                label=f"{equal.shape.instances} local instances at equal cost",
                kind="homogeneous PD",
                usd_per_hour=equal.cost.breakdown.total_usd_per_hour,
                figure_req_per_s=homog_figure,
                margin=None,
            ),
            Option(
                label=f"{k.equal_gpu.shape.instances} local instances at equal GPU count",
                kind="homogeneous PD",
                usd_per_hour=k.equal_gpu.cost.breakdown.total_usd_per_hour,
                figure_req_per_s=k.equal_gpu.plan.throughput_req_per_s
                * (figure("homogeneous_pd") / max(c.homogeneous_pd.throughput_req_per_s, 1e-12) if g else 1.0),
                margin=None,
            ),
        ]
        options.sort(key=lambda o: -(o.figure_req_per_s / o.usd_per_hour if o.usd_per_hour > 0 else 0.0))
        objective = f"the most {by} per USD/h (req/s per USD/h)"
    else:
        options = [
            Option(
                label=plan_label, kind="PrfaaS-PD", usd_per_hour=math.nan, figure_req_per_s=figure("plan"), margin=None
            ),
            Option(
                label="the same local instances, no PrfaaS pool",
                kind="homogeneous PD",
                usd_per_hour=math.nan,
                figure_req_per_s=figure("homogeneous_pd"),
                margin=None,
            ),
            Option(
                label="every request offloaded",
                kind="naive offload",
                usd_per_hour=math.nan,
                figure_req_per_s=figure("naive_heterogeneous"),
                margin=None,
            ),
        ]
        options.sort(key=lambda o: -o.figure_req_per_s)
        objective = f"the most {by} on the given GPUs (no prices)"
    return Recommendation(
        objective=objective,
        options=tuple(options),
        equal_cost_gain=gain,
        equal_cost_usd_per_hour=usd,
        equal_cost_homogeneous_instances=instances,
    )


def _unique(options: Sequence[Option]) -> tuple[Option, ...]:
    """The options without repeats (the same kind at the same cost and figure), order kept."""
    seen: set[tuple[str, float, float]] = set()
    out = []
    for o in options:
        key = (o.kind, round(o.usd_per_hour, 6), round(o.figure_req_per_s, 6))
        if key not in seen:
            seen.add(key)
            out.append(o)
    return tuple(out)


def _missing_prices(prices: UnitPrices) -> str:
    missing = [f"{k}: {v}" for k, v in prices.sources.items() if v.startswith("no price")]
    return "no prices (" + "; ".join(missing) + ")" if missing else "no prices"


class _Parts:
    """Runs the review's parts: each is skipped with its reason, or run with its name reported to
    ``progress`` and its time kept; an infeasible part is skipped with the binding constraints."""

    def __init__(self, progress: Callable[[str], None] | None) -> None:
        self.progress = progress
        self.skipped: dict[str, str] = {}
        self.timings_s: dict[str, float] = {}

    def __call__(self, name: str, run: Callable[[], T], why_not: str | None = None) -> T | None:
        if why_not is not None:
            self.skipped[name] = why_not
            return None
        if self.progress is not None:
            self.progress(name)
        start = time.perf_counter()
        try:
            return run()
        except InfeasibleError as exc:
            self.skipped[name] = "infeasible: " + "; ".join(exc.reasons)
            return None
        finally:
            self.timings_s[name] = time.perf_counter() - start


def _why_not(
    options: ReviewOptions,
    target: Target | None,
    ttft_slo_s: float | None,
    prices: UnitPrices,
    matrix_cells: Sequence[CellInput] | None,
) -> dict[str, str | None]:
    """Why each optional part is skipped (None: it runs)."""
    no_target = "no target rate (give --rate or a `target:` section)"
    no_slo = "no TTFT SLO (give --ttft-p90-s, or `slo.ttft_p90_s` or a `target:` section)"
    unpriced = None if prices.complete else _missing_prices(prices)
    matrix = "not asked for (--matrix)" if options.matrix is None or matrix_cells is None else None
    tornado = "not asked for (--no-sensitivity)" if not options.sensitivity else None
    return {
        "goodput": None if ttft_slo_s is not None else no_slo,
        "sizing": no_target if target is None else unpriced,
        "cost": unpriced,
        "matrix": matrix or (no_target if target is None else None),
        "tornado": tornado or (no_slo if ttft_slo_s is None else unpriced),
        "n_minus_one": no_target if target is None else None,
    }


def _why_no_band(scenario: Scenario, sizing: SizingPart | None, why_no_sizing: str | None) -> str | None:
    """Why the error-band part is skipped (None: it runs): it needs a banded pool and the sizing."""
    if not banded(banded_scenario(scenario)):
        return "no roofline or calibrated pool (measured pools: their error is the profile fit's, not a band)"
    if sizing is None:
        return f"needs the sizing ({why_no_sizing or 'skipped'})"
    return None


def review(
    scenario: Scenario,
    *,
    target: Target | None,
    ttft_slo_s: float | None,
    options: ReviewOptions | None = None,
    progress: Callable[[str], None] | None = None,
    matrix_cells: Sequence[CellInput] | None = None,
) -> Review:
    """Run every part of a capacity review that the scenario gives inputs for (module docstring).

    ``target``: the rate and SLO to size for (None: sizing and N-1 are skipped); ``ttft_slo_s``: the P90 TTFT
    SLO of goodput and the tornado (None: both skipped). ``progress`` is called with each part's name before
    it runs. Raises InfeasibleError when the scenario's deployment cannot carry any load, and InputError for
    an unknown hardware name in ``options.matrix``.
    """
    options = options or ReviewOptions()
    model = stage_model(scenario)
    scv = scenario.traffic.output_length.scv
    traffic = Traffic(output_lengths=scenario.traffic.output_length)
    prices = unit_prices(scenario)
    priced = prices.complete
    part = _Parts(progress)
    skipped, timings = part.skipped, part.timings_s
    why_not = _why_not(options, target, ttft_slo_s, prices, matrix_cells)
    slo = TtftSlo(limit_s=ttft_slo_s, quantile=0.9) if ttft_slo_s is not None else None

    def stated_slo() -> TtftSlo:  # the parts that need the SLO run only when it is given (``why_not``)
        assert slo is not None
        return slo

    if progress is not None:
        progress("plan")
    start = time.perf_counter()
    comparison = compare(model, scenario.prfaas.gpus, scenario.local.gpus_per_instance, options.resolution_tokens)
    plan = comparison.plan
    assert plan.threshold_tokens is not None
    fig5a = split_sweep(model, plan.threshold_tokens)
    fig5b = threshold_sweep(model, plan.n_pd_prefill, target.rate_req_per_s if target is not None else None)
    timings["plan"] = time.perf_counter() - start

    at_load = part("loaded", lambda: loaded(model, comparison, traffic, target, options.verify, slo))
    curve = part("load_curve", lambda: load_curve(model, comparison, traffic, options))
    assert at_load is not None and curve is not None
    goodput = part(
        "goodput",
        lambda: compare_goodput(
            model,
            scenario.prfaas.gpus,
            scenario.local.gpus_per_instance,
            stated_slo(),
            resolution_tokens=options.resolution_tokens,
            decode_service_scv=scv,
        ),
        why_not["goodput"],
    )
    sizing = part(
        "sizing",
        lambda: sizing_part(
            model,
            prices,
            target,  # type: ignore[arg-type]
            traffic,
            decode_service_scv=scv,
            resolution_tokens=options.resolution_tokens,
            verify=options.verify,
        ),
        why_not["sizing"],
    )
    band = part(
        "error_band",
        lambda: error_band_part(scenario, prices, target, sizing.sizing),  # type: ignore[arg-type,union-attr]
        _why_no_band(scenario, sizing, skipped.get("sizing")),
    )
    cost = part(
        "cost",
        lambda: cost_comparison(
            model,
            prices,
            plan,
            prfaas_gpus_per_instance=scenario.prfaas.gpus_per_instance,
            local_gpus_per_instance=scenario.local.gpus_per_instance,
        ),
        why_not["cost"],
    )
    matrix = part(
        "matrix",
        lambda: hardware_matrix(
            matrix_cells or (),
            target,  # type: ignore[arg-type]
            decode_service_scv=scv,
        ),
        why_not["matrix"],
    )
    frontier = part(
        "frontier",
        lambda: cost_frontier(
            model,
            prices,
            sizing,
            matrix,
            neighbours=() if options.quick else FRONTIER_NEIGHBOURS,
            resolution_tokens=options.headroom_resolution_tokens,
            decode_service_scv=scv,
        ),
        None if priced and (sizing is not None or matrix is not None) else "needs the sizing or the matrix",
    )
    resolution = options.headroom_resolution_tokens
    bars = part(
        "tornado",
        lambda: tornado(
            model,
            prices,
            stated_slo(),
            step=options.tornado_step,
            resolution_tokens=resolution,
            decode_service_scv=scv,
        ),
        why_not["tornado"],
    )
    failures = part(
        "n_minus_one",
        lambda: n_minus_one(model, target, resolution_tokens=resolution, decode_service_scv=scv),  # type: ignore[arg-type]
        why_not["n_minus_one"],
    )
    result = Review(
        scenario=scenario,
        options=options,
        target=target,
        ttft_slo_s=ttft_slo_s,
        comparison=comparison,
        split_sweep=fig5a,
        threshold_sweep=fig5b,
        loaded=at_load,
        load_curve=curve,
        goodput=goodput,
        sizing=sizing,
        cost=cost,
        matrix=matrix,
        frontier=frontier,
        tornado=bars,
        n_minus_one=failures,
        prices=prices,
        skipped=skipped,
        timings_s=timings,
        provenance={**model.sources, **prices.sources},
        error_band=band,
    )
    return replace(result, recommendation=recommend(result))


__all__ = [
    "CURVE_FRACTIONS",
    "SCHEMA_VERSION",
    "SIZING_CHECK",
    "ErrorBandPart",
    "LoadCurve",
    "Loaded",
    "Option",
    "Recommendation",
    "Review",
    "ReviewOptions",
    "SizingPart",
    "SplitSweep",
    "ThresholdSweep",
    "error_band_part",
    "recommend",
    "review",
    "sizing_part",
    "split_sweep",
    "threshold_sweep",
]
