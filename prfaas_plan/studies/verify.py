"""Simulation in the loop: every loaded answer is checked by replications of the cluster simulator, until the
check decides or its budget ends.

The closed forms (``latency.loaded_ttft`` for Poisson and renewal traffic, ``latency.profile`` for traces and
bursty or drifting processes) are fast but approximate, and exact only in narrow cases. ``verify_plans`` (the
one verification path of ``optimize``, ``evaluate``, ``size`` and ``review``) sets beside each plan's
closed-form TTFT the simulator's, from several realisations of the same traffic:

- synthetic traffic (the scenario's length distribution and arrival process): replications of ``requests``
  requests each, replication r drawn from seed (seed, r). Every plan compared at one rate is simulated on the
  *same* workloads (common random numbers: the same arrival and length draws per replication index), so the
  plans' differences are not sampling noise. Each figure is the mean over replications with a Student-t 95 %
  confidence interval. With an SLO, replications are added one at a time (after ``replications``) until the
  interval of the checked figure lies on one side of the SLO (``meets`` or ``misses``), or the budget ends
  (``max_requests`` simulated requests in all, ``max_wall_s`` seconds, ``max_replications``): then the verdict
  is ``undecided within budget``, with the interval. The interval is not corrected for the sequential stopping
  (a check that stops the first time it excludes the SLO is slightly optimistic; the minimum of
  ``replications`` and the t quantile keep that small).
- a trace: realisation 0 is the trace as recorded (rescaled to the offered rate); realisations 1.. are
  circular block-bootstrap resamples of it (``BOOTSTRAP_BLOCKS`` blocks, each a random stretch of the
  recorded trace, wrapped around its end; the seed picks the stretches, the same stretches for every plan).
  The figure is the recorded trace's; the interval is ±1.96 standard deviations over the resamples: how much
  the answer depends on this particular stretch of traffic. More resamples do not narrow it, so a trace is
  checked with ``replications`` realisations and no sequential stopping.

Where a closed-form percentile differs from the simulated one by more than ``TOLERANCE`` (relative) and by
more than the interval, the check records the disagreement. The figures *presented* as the answer
(``LoadedCheck.answer``) are the simulated ones wherever a simulation ran and the closed form is out of its
validity domain or differs from it by more than the tolerance (whatever the interval); both stay available.
The verdicts (goodput, SLO met) use the simulation whenever it ran.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from prfaas_plan._frozen import frozen
from prfaas_plan.latency import LoadedTtft, TtftSummary
from prfaas_plan.latency.profile import Validity
from prfaas_plan.spec.plan import Plan, TtftSlo
from prfaas_plan.studies.verify_options import REPLICATIONS, REQUESTS
from prfaas_plan.studies.verify_options import VerifyOptions as VerifyOptions  # re-exported: its home for callers
from prfaas_plan.throughput import StageModel

if TYPE_CHECKING:
    # The simulator and the closed-form study are imported by the functions that run them, so that a command
    # that only builds VerifyOptions (``optimize`` without ``--load``) does not load them (start-up time).
    from prfaas_plan.sim.workload import Workload
    from prfaas_plan.studies.closed_form import Traffic

#: Share of each replication's first requests left out as warm-up.
WARMUP_FRACTION = 0.1
#: Blocks of a circular block-bootstrap resample of a trace.
BOOTSTRAP_BLOCKS = 10
KINDS = ("overall", "offloaded", "local")
STATS = ("mean", "p50", "p90", "p99")
#: The verdicts of a check against an SLO.
MEETS = "meets"
MISSES = "misses"
UNDECIDED = "undecided within budget"
#: Which figure is presented as the answer.
SOURCE_SIMULATION = "simulation"
SOURCE_CLOSED_FORM = "closed form"
_QUANTILE_STAT = {0.5: "p50", 0.9: "p90", 0.99: "p99"}


@frozen
class Figure:
    """A simulated figure (s) with the half-width of its 95 % interval (NaN with one realisation)."""

    value: float
    half_width: float


@frozen
class SimulatedTtft:
    """TTFT figures from simulation: ``figures[kind][stat]`` for kind in ``KINDS`` (a route with no traffic is
    absent) and stat in ``STATS``; ``realisation`` says how the replications differ; ``requests``: per
    replication (a trace: its length)."""

    figures: Mapping[str, Mapping[str, Figure]]
    replications: int
    requests: int
    seed: int
    realisation: str
    wall_s: float

    @property
    def requests_total(self) -> int:
        """Requests simulated in all for this plan."""
        return self.replications * self.requests


@frozen
class Decision:
    """A check against an SLO: ``figure`` (e.g. "overall p90") is ``value_s`` ± ``half_width_s`` (95 %);
    ``verdict`` is ``MEETS`` (the whole interval within ``slo_s``), ``MISSES`` (all of it beyond) or
    ``UNDECIDED`` (the budget ended first); ``stopped_by`` says what ended the replications."""

    figure: str
    slo_s: float
    verdict: str
    value_s: float
    half_width_s: float
    replications: int
    requests: int
    wall_s: float
    stopped_by: str

    @property
    def decided(self) -> bool:
        """Whether the interval lies on one side of the SLO."""
        return self.verdict != UNDECIDED

    def line(self) -> str:
        """One sentence: verdict, figure, interval, what it cost."""
        hw = f" ± {self.half_width_s:.2f}" if math.isfinite(self.half_width_s) else ""
        return (
            f"{self.figure.split()[-1].upper()} TTFT {self.value_s:.2f}{hw} s against the {self.slo_s:g} s SLO: "
            f"{self.verdict} ({self.replications} replications, {self.requests:,} requests, {self.wall_s:.1f} s; "
            f"{self.stopped_by})"
        )


@frozen
class LoadedCheck:
    """A plan's TTFT at one rate: the closed form (``method`` names which), its validity, the simulation
    beside it (None with ``verify=False``), where the two disagree, and (with an SLO) the ``decision``."""

    rate_req_per_s: float
    closed: LoadedTtft
    method: str
    validity: Validity
    simulated: SimulatedTtft | None
    tolerance: float
    disagreements: tuple[str, ...]
    decision: Decision | None = None

    @property
    def verdict_source(self) -> str:
        """ "simulation" when a simulation ran (verdicts then use it), else "closed form"."""
        return SOURCE_SIMULATION if self.simulated is not None else SOURCE_CLOSED_FORM

    @property
    def answer_source(self) -> str:
        """Which figures are presented as *the* answer: ``SOURCE_SIMULATION`` when a simulation ran and the
        closed form is out of its validity domain, unstable, or differs from the simulation by more than the
        tolerance at any percentile (the interval notwithstanding); else ``SOURCE_CLOSED_FORM``."""
        if self.simulated is None:
            return SOURCE_CLOSED_FORM
        if not self.validity.in_domain or not self.closed.stable or self.beyond_tolerance:
            return SOURCE_SIMULATION
        return SOURCE_CLOSED_FORM

    @property
    def beyond_tolerance(self) -> tuple[str, ...]:
        """Percentiles whose closed form differs from the simulated value by more than the tolerance."""
        if self.simulated is None:
            return ()
        out = []
        for kind, stats in self.simulated.figures.items():
            for stat in ("p50", "p90", "p99"):
                sim = stats[stat].value
                closed = self.figure_closed(kind, stat)
                if closed is None or (sim > 0 and abs(closed - sim) > self.tolerance * sim):
                    out.append(f"{kind} {stat}")
        return tuple(out)

    def figure_closed(self, kind: str, stat: str) -> float | None:
        """The closed form's figure (s; None past the stability limit or for a route with no traffic)."""
        return _closed_stat(self.closed, kind, stat)

    def figure_simulated(self, kind: str, stat: str) -> Figure | None:
        """The simulated figure with its interval (None when not simulated, or a route with no traffic)."""
        return None if self.simulated is None else self.simulated.figures.get(kind, {}).get(stat)

    def figure(self, kind: str, stat: str) -> float | None:
        """The figure a verdict should use: simulated when available, else the closed form (s)."""
        if self.simulated is not None:
            sim = self.figure_simulated(kind, stat)
            return None if sim is None else sim.value
        return _closed_stat(self.closed, kind, stat)

    def answer(self, kind: str, stat: str) -> float | None:
        """The figure presented as the answer (``answer_source`` says whose), s."""
        if self.answer_source == SOURCE_SIMULATION:
            return self.figure(kind, stat)
        return _closed_stat(self.closed, kind, stat)

    def answer_summary(self, kind: str = "overall") -> TtftSummary | None:
        """The answer's mean and percentiles for one kind, as the closed form's summary type."""
        if self.answer_source == SOURCE_CLOSED_FORM:
            return self.closed.ttft if kind == "overall" else self.closed.by_route.get(kind)
        assert self.simulated is not None
        stats = self.simulated.figures.get(kind)
        if stats is None:
            return None
        return TtftSummary(
            mean_s=stats["mean"].value, p50_s=stats["p50"].value, p90_s=stats["p90"].value, p99_s=stats["p99"].value
        )


def _closed_stat(loaded: LoadedTtft, kind: str, stat: str) -> float | None:
    summary = loaded.ttft if kind == "overall" else loaded.by_route.get(kind)
    return None if summary is None else float(getattr(summary, f"{stat}_s"))


def bootstrap_workload(workload: Workload, rng: np.random.Generator, blocks: int = BOOTSTRAP_BLOCKS) -> Workload:
    """A circular block-bootstrap resample: ``blocks`` stretches of span/blocks seconds, each starting at a
    uniform random time of the recorded workload (wrapping around its end), laid end to end."""
    arrival = np.asarray(workload.arrival_s) - float(workload.arrival_s[0])
    span = float(arrival[-1])
    if not span > 0:
        return workload
    length = span / blocks
    parts = []
    for b in range(blocks):
        start = float(rng.uniform(0.0, span))
        shifted = (arrival - start) % span
        take = np.flatnonzero(shifted < length)
        take = take[np.argsort(shifted[take], kind="stable")]
        parts.append((shifted[take] + b * length, take))
    times = np.concatenate([p[0] for p in parts])
    index = np.concatenate([p[1] for p in parts])
    from prfaas_plan.sim.workload import Workload

    return Workload.of(times, workload.input_tokens[index], workload.output_tokens[index])


@frozen
class PlanAt:
    """One plan (t, N_p, N_d) on N_prfaas PrfaaS instances at one offered rate (req/s)."""

    n_prfaas: int
    plan: Plan
    rate_req_per_s: float


def _ttft_figures(model: StageModel, at: PlanAt, workload: Workload) -> dict[str, dict[str, float]]:
    """One simulation: mean and percentiles of TTFT overall and per route, after the warm-up requests."""
    from prfaas_plan.sim.cluster import ClusterConfig
    from prfaas_plan.sim.run import simulate

    plan = at.plan
    config = ClusterConfig(
        model=model,
        threshold_tokens=plan.threshold_tokens,
        n_pd_prefill=plan.n_pd_prefill,
        n_pd_decode=plan.n_pd_decode,
    )
    records = simulate(config, workload).records
    skip = int(WARMUP_FRACTION * records.n_requests)
    ttft = records.ttft_s[skip:]
    offloaded = np.asarray(records.offloaded[skip:], dtype=bool)
    out = {}
    for kind, mask in (("overall", np.ones(ttft.size, dtype=bool)), ("offloaded", offloaded), ("local", ~offloaded)):
        values = ttft[mask & np.isfinite(ttft)]
        if values.size:
            p50, p90, p99 = np.percentile(values, (50, 90, 99))
            out[kind] = {"mean": float(values.mean()), "p50": float(p50), "p90": float(p90), "p99": float(p99)}
    return out


@dataclass(slots=True)
class _Runs:
    """Per-plan realisations gathered so far."""

    runs: list[dict[str, dict[str, float]]] = field(default_factory=list)
    wall_s: float = 0.0
    decision: Decision | None = None


def _figures(runs: list[dict[str, dict[str, float]]], trace: bool) -> dict[str, dict[str, Figure]]:
    from prfaas_plan.sim.summary import confidence_half_width

    figures: dict[str, dict[str, Figure]] = {}
    for kind in KINDS:
        if not all(kind in run for run in runs):
            continue
        figures[kind] = {}
        for stat in STATS:
            values = np.array([run[kind][stat] for run in runs])
            if trace:
                spread = 1.96 * float(np.std(values[1:], ddof=1)) if values.size > 2 else math.nan
                figures[kind][stat] = Figure(value=float(values[0]), half_width=spread)
            else:
                figures[kind][stat] = Figure(value=float(values.mean()), half_width=confidence_half_width(values))
    return figures


def _verdict(figure: Figure, slo_s: float) -> str:
    if not math.isfinite(figure.half_width):
        return UNDECIDED
    if figure.value + figure.half_width <= slo_s:
        return MEETS
    if figure.value - figure.half_width > slo_s:
        return MISSES
    return UNDECIDED


def verify_plans(
    model: StageModel,
    plans: Mapping[str, PlanAt],
    traffic: Traffic,
    options: VerifyOptions,
    *,
    slo: TtftSlo | None = None,
    simulate_keys: tuple[str, ...] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, LoadedCheck]:
    """The one verification path: each plan's closed form and validity and, for the plans in
    ``simulate_keys`` (default: all) whose closed form is stable, the simulation beside it on common random
    numbers (module docstring). With ``slo``, the overall TTFT quantile of each simulated plan is checked
    against its limit sequentially and the ``LoadedCheck.decision`` says meets, misses or undecided within
    budget. ``model``'s N_prfaas is replaced by each plan's."""
    quantile = slo.quantile if slo is not None else 0.9
    slo_s = slo.limit_s if slo is not None else None
    stat = _QUANTILE_STAT.get(quantile)
    if stat is None:
        raise ValueError(f"verification supports the 0.5, 0.9 and 0.99 quantiles, got {quantile}")
    from prfaas_plan.sim.workload import trace_workload
    from prfaas_plan.studies.closed_form import closed_loaded, workload_for

    models = {
        k: model if model.n_prfaas == p.n_prfaas else replace(model, n_prfaas=p.n_prfaas) for k, p in plans.items()
    }
    closed = {k: closed_loaded(models[k], p.plan, p.rate_req_per_s, traffic) for k, p in plans.items()}
    wanted = tuple(plans) if simulate_keys is None else simulate_keys
    active = [k for k in plans if options.verify and k in wanted and closed[k][0].stable]
    gathered = {k: _Runs() for k in active}
    trace = traffic.trace is not None
    start = time.perf_counter()
    used = 0
    recorded: dict[float, Workload] = {}
    r = 0
    stopped_by = ""
    while active:
        workloads: dict[float, Workload] = {}
        for key in active:
            plan = plans[key]
            rate = plan.rate_req_per_s
            if rate not in workloads:
                if trace:
                    assert traffic.trace is not None
                    if rate not in recorded:
                        recorded[rate] = trace_workload(traffic.trace, None, rate)
                    workloads[rate] = (
                        recorded[rate]
                        if r == 0
                        else bootstrap_workload(recorded[rate], np.random.default_rng([options.seed, r]))
                    )
                else:
                    rng = np.random.default_rng([options.seed, r])
                    workloads[rate] = workload_for(models[key], traffic, rate, options.requests, rng)
            tick = time.perf_counter()
            gathered[key].runs.append(_ttft_figures(models[key], plan, workloads[rate]))
            gathered[key].wall_s += time.perf_counter() - tick
            used += workloads[rate].n_requests
        r += 1
        if progress is not None:
            progress(f"replication {r}: {', '.join(active)}")
        if r < options.replications:
            continue
        if slo_s is None or trace:
            stopped_by = (
                "a trace: the recorded trace and its resamples (more resamples do not narrow the spread)"
                if trace
                else "no SLO to decide against: the first replications only"
            )
            break
        still = []
        for key in active:
            figure = _figures(gathered[key].runs, trace=False).get("overall", {}).get(stat)
            if figure is not None and _verdict(figure, slo_s) != UNDECIDED:
                gathered[key].decision = _decision(figure, stat, slo_s, gathered[key], options, "decided")
            else:
                still.append(key)
        active = still
        if not active:
            stopped_by = "decided"
            break
        per_round = options.requests * len(active)
        if used + per_round > options.max_requests:
            stopped_by = f"request budget ({options.max_requests:,}) reached"
        elif time.perf_counter() - start >= options.max_wall_s:
            stopped_by = f"time budget ({options.max_wall_s:g} s) reached"
        elif r >= options.max_replications:
            stopped_by = f"replication cap ({options.max_replications}) reached"
        else:
            continue
        break
    out = {}
    for key, plan in plans.items():
        loaded, method, validity = closed[key]
        simulated = None
        decision = None
        if key in gathered and gathered[key].runs:
            g = gathered[key]
            n = recorded[plan.rate_req_per_s].n_requests if trace else options.requests
            simulated = SimulatedTtft(
                figures=_figures(g.runs, trace),
                replications=len(g.runs),
                requests=n,
                seed=options.seed,
                realisation=_realisation(trace, len(g.runs), options, recorded.get(plan.rate_req_per_s)),
                wall_s=g.wall_s,
            )
            decision = g.decision
            figure = simulated.figures.get("overall", {}).get(stat)
            if decision is None and slo_s is not None and figure is not None:
                decision = _decision(figure, stat, slo_s, g, options, stopped_by or "budget")
        elif slo_s is not None and not loaded.stable and options.verify and key in wanted:
            decision = Decision(
                figure=f"overall {stat}",
                slo_s=slo_s,
                verdict=MISSES,
                value_s=math.inf,
                half_width_s=math.nan,
                replications=0,
                requests=0,
                wall_s=0.0,
                stopped_by=f"past its stability limit ({loaded.unstable_stage} saturates): no steady state to simulate",
            )
        out[key] = LoadedCheck(
            rate_req_per_s=plan.rate_req_per_s,
            closed=loaded,
            method=method,
            validity=validity,
            simulated=simulated,
            tolerance=options.tolerance,
            disagreements=disagreements(loaded, simulated, options.tolerance) if simulated is not None else (),
            decision=decision,
        )
    return out


def _decision(figure: Figure, stat: str, slo_s: float, g: _Runs, options: VerifyOptions, why: str) -> Decision:
    return Decision(
        figure=f"overall {stat}",
        slo_s=slo_s,
        verdict=_verdict(figure, slo_s),
        value_s=figure.value,
        half_width_s=figure.half_width,
        replications=len(g.runs),
        requests=len(g.runs) * options.requests,
        wall_s=g.wall_s,
        stopped_by=why,
    )


def _realisation(trace: bool, replications: int, options: VerifyOptions, recorded: Workload | None) -> str:
    if trace:
        assert recorded is not None
        if replications <= 1:
            return "the recorded trace (one realisation: no interval)"
        return (
            f"the recorded trace, and {replications - 1} circular block-bootstrap resamples of it "
            f"({BOOTSTRAP_BLOCKS} blocks of {recorded.arrival_s[-1] / BOOTSTRAP_BLOCKS:,.0f} s, seed {options.seed}) "
            "for the interval"
        )
    return (
        f"{replications} workloads of {options.requests:,} requests, seeds ({options.seed}, 0..{replications - 1}), "
        "the same for every plan at the same rate (common random numbers)"
    )


def simulate_ttft(
    model: StageModel,
    plan: Plan,
    rate_req_per_s: float,
    traffic: Traffic,
    *,
    replications: int = REPLICATIONS,
    requests: int = REQUESTS,
    seed: int = 0,
) -> SimulatedTtft:
    """TTFT of ``plan`` (t, N_p, N_d) at rate λ from exactly ``replications`` simulated realisations (no SLO, no
    sequential stopping; ``verify_plans``). N_prfaas is ``model.n_prfaas``. A trace is replayed whole."""
    at = PlanAt(n_prfaas=model.n_prfaas, plan=plan, rate_req_per_s=rate_req_per_s)
    options = VerifyOptions(replications=replications, requests=requests, seed=seed)
    check = verify_plans(model, {"plan": at}, traffic, options)["plan"]
    if check.simulated is None:
        raise ValueError(f"the plan is unstable at {rate_req_per_s:g} req/s: nothing to simulate")
    return check.simulated


def disagreements(closed: LoadedTtft, simulated: SimulatedTtft, tolerance: float) -> tuple[str, ...]:
    """Percentiles whose closed form differs from the simulation by more than ``tolerance`` (relative) and by
    more than the simulation's interval; one line each."""
    lines = []
    for kind, stats in simulated.figures.items():
        for stat in ("p50", "p90", "p99"):
            sim = stats[stat]
            value = _closed_stat(closed, kind, stat)
            if value is None:
                lines.append(f"{kind} {stat.upper()}: no closed form (unstable), simulated {sim.value:.2f} s")
                continue
            if not sim.value > 0:
                continue
            relative = (value - sim.value) / sim.value
            beyond_interval = not (abs(value - sim.value) <= sim.half_width)
            if abs(relative) > tolerance and beyond_interval:
                lines.append(
                    f"{kind} {stat.upper()}: closed form {value:.2f} s vs simulated {sim.value:.2f} "
                    f"± {sim.half_width:.2f} s ({relative:+.0%})"
                )
    return tuple(lines)


def check_loaded(
    model: StageModel,
    plan: Plan,
    rate_req_per_s: float,
    traffic: Traffic,
    *,
    options: VerifyOptions | None = None,
    slo: TtftSlo | None = None,
) -> LoadedCheck:
    """Closed form and (with ``options.verify``) simulation of ``plan`` (t, N_p, N_d) at rate λ, side by side,
    checked against ``slo`` when given (``verify_plans`` with one plan). N_prfaas is ``model.n_prfaas``."""
    at = PlanAt(n_prfaas=model.n_prfaas, plan=plan, rate_req_per_s=rate_req_per_s)
    settings = options if options is not None else VerifyOptions()
    return verify_plans(model, {"plan": at}, traffic, settings, slo=slo)["plan"]


@frozen
class GoodputCheck:
    """The closed form's goodput beside the simulated one: the largest rate whose simulated TTFT quantile
    stays within the SLO, found by bisection to ``GOODPUT_BISECTIONS`` steps, each step a sequential check
    (``verify_plans``, common random numbers at every rate; an undecided step is judged on its mean).
    ``quantile_at_closed_s``: the simulated quantile at the closed form's goodput, with its interval."""

    closed_rate_req_per_s: float
    simulated_rate_req_per_s: float
    quantile_at_closed_s: Figure | None
    replications: int
    requests: int
    realisation: str
    undecided_steps: int = 0

    @property
    def relative_difference(self) -> float:
        """(closed - simulated) / simulated goodput (NaN when the simulated goodput is 0)."""
        sim = self.simulated_rate_req_per_s
        return (self.closed_rate_req_per_s - sim) / sim if sim > 0 else math.nan


GOODPUT_BISECTIONS = 9


def simulated_goodput(
    model: StageModel,
    plan: Plan,
    slo: TtftSlo,
    closed_rate_req_per_s: float,
    rate_limit_req_per_s: float,
    traffic: Traffic,
    *,
    options: VerifyOptions | None = None,
) -> GoodputCheck:
    """Bisect the rate in (0, ``rate_limit``) for the largest one at which ``plan``'s simulated TTFT quantile
    (overall) meets ``slo``, starting from the closed form's goodput. Each step is a sequential check with the
    options' budget split evenly over the steps. N_prfaas is ``model.n_prfaas``."""
    settings = options if options is not None else VerifyOptions()
    steps = GOODPUT_BISECTIONS + 1
    per_step = replace(
        settings,
        max_requests=max(settings.max_requests // steps, settings.replications * settings.requests),
        max_wall_s=settings.max_wall_s / steps,
    )
    last: LoadedCheck | None = None
    undecided = 0

    def meets(rate: float) -> tuple[bool, Figure | None]:
        nonlocal last, undecided
        at = PlanAt(n_prfaas=model.n_prfaas, plan=plan, rate_req_per_s=rate)
        last = verify_plans(model, {"plan": at}, traffic, per_step, slo=slo)["plan"]
        figure = last.figure_simulated("overall", _QUANTILE_STAT[slo.quantile])
        if figure is None:  # unstable by the closed form: not simulated
            return False, None
        decision = last.decision
        if decision is not None and not decision.decided:
            undecided += 1
        return figure.value <= slo.limit_s, figure

    at_closed = None
    if closed_rate_req_per_s > 0:
        ok, at_closed = meets(closed_rate_req_per_s)
    else:
        ok = False
    if ok:
        lo, hi = closed_rate_req_per_s, rate_limit_req_per_s
    else:
        lo, hi = 0.0, closed_rate_req_per_s if closed_rate_req_per_s > 0 else rate_limit_req_per_s
    for _ in range(GOODPUT_BISECTIONS):
        mid = 0.5 * (lo + hi)
        if mid <= 0:
            break
        if meets(mid)[0]:
            lo = mid
        else:
            hi = mid
    sim = last.simulated if last is not None else None
    return GoodputCheck(
        closed_rate_req_per_s=closed_rate_req_per_s,
        simulated_rate_req_per_s=lo,
        quantile_at_closed_s=at_closed,
        replications=sim.replications if sim is not None else settings.replications,
        requests=sim.requests if sim is not None else settings.requests,
        realisation=sim.realisation if sim is not None else "",
        undecided_steps=undecided,
    )
