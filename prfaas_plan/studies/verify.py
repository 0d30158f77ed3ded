"""Simulation in the loop: every loaded answer is checked by replications of the cluster simulator.

The closed forms (``latency.loaded_ttft`` for Poisson and renewal traffic, ``latency.profile`` for traces and
bursty or drifting processes) are fast but approximate, and exact only in narrow cases. ``check_loaded``
sets beside a plan's closed-form TTFT the simulator's, from several realisations of the same traffic:

- synthetic traffic (the scenario's length distribution and arrival process): ``replications`` independent
  workloads of ``requests`` requests each, seeds seed, seed + 1, ...; each figure is the mean over
  replications with a Student-t 95 % confidence interval;
- a trace: realisation 0 is the trace as recorded (rescaled to the offered rate); realisations 1.. are
  circular block-bootstrap resamples of it (``BOOTSTRAP_BLOCKS`` blocks, each a random stretch of the
  recorded trace, wrapped around its end; the seed picks the stretches). The figure is the recorded trace's;
  the interval is ±1.96 standard deviations over the resamples: how much the answer depends on this
  particular stretch of traffic.

Where a closed-form percentile differs from the simulated one by more than ``TOLERANCE`` (relative) and by
more than the interval, the check records the disagreement, and the verdicts built on it (goodput, SLO met)
use the simulation.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from prfaas_plan.latency import LoadedTtft
from prfaas_plan.latency.profile import Validity
from prfaas_plan.sim.cluster import ClusterConfig
from prfaas_plan.sim.run import simulate
from prfaas_plan.sim.summary import confidence_half_width
from prfaas_plan.sim.workload import Workload, trace_workload
from prfaas_plan.studies.closed_form import Traffic, closed_loaded, workload_for
from prfaas_plan.throughput import StageModel

#: Replications and requests per replication of a verification (CLI defaults).
REPLICATIONS = 5
REQUESTS = 20_000
#: Share of each replication's first requests left out as warm-up.
WARMUP_FRACTION = 0.1
#: Relative difference between closed form and simulation above which a percentile is flagged.
TOLERANCE = 0.2
#: Blocks of a circular block-bootstrap resample of a trace.
BOOTSTRAP_BLOCKS = 10
KINDS = ("overall", "offloaded", "local")
STATS = ("mean", "p50", "p90", "p99")


@dataclass(frozen=True, slots=True, kw_only=True)
class Figure:
    """A simulated figure (s) with the half-width of its 95 % interval (NaN with one realisation)."""

    value: float
    half_width: float


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulatedTtft:
    """TTFT figures from simulation: ``figures[kind][stat]`` for kind in ``KINDS`` (a route with no traffic is
    absent) and stat in ``STATS``; ``realisation`` says how the replications differ."""

    figures: Mapping[str, Mapping[str, Figure]]
    replications: int
    requests: int
    seed: int
    realisation: str
    wall_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedCheck:
    """A plan's TTFT at one rate: the closed form (``method`` names which), its validity, the simulation
    beside it (None with ``verify=False``) and where the two disagree."""

    rate_req_per_s: float
    closed: LoadedTtft
    method: str
    validity: Validity
    simulated: SimulatedTtft | None
    tolerance: float
    disagreements: tuple[str, ...]

    @property
    def verdict_source(self) -> str:
        """ "simulation" when a simulation ran (verdicts then use it), else "closed form"."""
        return "simulation" if self.simulated is not None else "closed form"

    def figure_closed(self, kind: str, stat: str) -> float | None:
        """The closed form's figure (s; None past the stability limit or for a route with no traffic)."""
        return _closed_stat(self.closed, kind, stat)

    def figure(self, kind: str, stat: str) -> float | None:
        """The figure a verdict should use: simulated when available, else the closed form (s)."""
        if self.simulated is not None:
            sim = self.simulated.figures.get(kind, {}).get(stat)
            return None if sim is None else sim.value
        return _closed_stat(self.closed, kind, stat)


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
    return Workload.of(times, workload.input_tokens[index], workload.output_tokens[index])


def _ttft_figures(
    model: StageModel, plan_args: tuple[float, int, int], workload: Workload
) -> dict[str, dict[str, float]]:
    """One simulation: mean and percentiles of TTFT overall and per route, after the warm-up requests."""
    threshold, n_p, n_d = plan_args
    config = ClusterConfig(model=model, threshold_tokens=threshold, n_pd_prefill=n_p, n_pd_decode=n_d)
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


def simulate_ttft(
    model: StageModel,
    threshold_tokens: float,
    n_pd_prefill: int,
    n_pd_decode: int,
    rate_req_per_s: float,
    traffic: Traffic,
    *,
    replications: int = REPLICATIONS,
    requests: int = REQUESTS,
    seed: int = 0,
) -> SimulatedTtft:
    """TTFT of plan (t, N_p, N_d) at rate λ from ``replications`` simulated realisations (module docstring).
    N_prfaas is ``model.n_prfaas``. A trace is replayed whole (``requests`` does not apply)."""
    start = time.perf_counter()
    plan_args = (threshold_tokens, n_pd_prefill, n_pd_decode)
    runs = []
    if traffic.trace is not None:
        recorded = trace_workload(traffic.trace, None, rate_req_per_s)
        runs.append(_ttft_figures(model, plan_args, recorded))
        for r in range(1, replications):
            rng = np.random.default_rng([seed, r])
            runs.append(_ttft_figures(model, plan_args, bootstrap_workload(recorded, rng)))
        realisation = (
            f"the recorded trace, and {replications - 1} circular block-bootstrap resamples of it "
            f"({BOOTSTRAP_BLOCKS} blocks of {recorded.arrival_s[-1] / BOOTSTRAP_BLOCKS:,.0f} s, seed {seed}) "
            "for the interval"
            if replications > 1
            else "the recorded trace (one realisation: no interval)"
        )
        n_requests = recorded.n_requests
    else:
        for r in range(replications):
            rng = np.random.default_rng(seed + r)
            runs.append(_ttft_figures(model, plan_args, workload_for(model, traffic, rate_req_per_s, requests, rng)))
        realisation = (
            f"{replications} independent workloads of {requests:,} requests, seeds {seed}..{seed + replications - 1}"
        )
        n_requests = requests
    figures: dict[str, dict[str, Figure]] = {}
    for kind in KINDS:
        if not all(kind in run for run in runs):
            continue
        figures[kind] = {}
        for stat in STATS:
            values = np.array([run[kind][stat] for run in runs])
            if traffic.trace is not None:
                spread = 1.96 * float(np.std(values[1:], ddof=1)) if values.size > 2 else math.nan
                figures[kind][stat] = Figure(value=float(values[0]), half_width=spread)
            else:
                figures[kind][stat] = Figure(value=float(values.mean()), half_width=confidence_half_width(values))
    return SimulatedTtft(
        figures=figures,
        replications=replications,
        requests=n_requests,
        seed=seed,
        realisation=realisation,
        wall_s=time.perf_counter() - start,
    )


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
    threshold_tokens: float,
    n_pd_prefill: int,
    n_pd_decode: int,
    rate_req_per_s: float,
    traffic: Traffic,
    *,
    verify: bool = True,
    replications: int = REPLICATIONS,
    requests: int = REQUESTS,
    seed: int = 0,
    tolerance: float = TOLERANCE,
) -> LoadedCheck:
    """Closed form and (with ``verify``) simulation of plan (t, N_p, N_d) at rate λ, side by side."""
    closed, method, validity = closed_loaded(
        model, threshold_tokens, n_pd_prefill, n_pd_decode, rate_req_per_s, traffic
    )
    simulated = None
    if verify and closed.stable:
        simulated = simulate_ttft(
            model,
            threshold_tokens,
            n_pd_prefill,
            n_pd_decode,
            rate_req_per_s,
            traffic,
            replications=replications,
            requests=requests,
            seed=seed,
        )
    return LoadedCheck(
        rate_req_per_s=rate_req_per_s,
        closed=closed,
        method=method,
        validity=validity,
        simulated=simulated,
        tolerance=tolerance,
        disagreements=disagreements(closed, simulated, tolerance) if simulated is not None else (),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class GoodputCheck:
    """The closed form's goodput beside the simulated one: the largest rate whose simulated TTFT quantile
    (mean over the replications, common random numbers at every rate) stays within the SLO, found by
    bisection to ``GOODPUT_BISECTIONS`` steps. ``quantile_at_closed_s``: the simulated quantile at the closed
    form's goodput, with its interval."""

    closed_rate_req_per_s: float
    simulated_rate_req_per_s: float
    quantile_at_closed_s: Figure | None
    replications: int
    requests: int
    realisation: str

    @property
    def relative_difference(self) -> float:
        """(closed - simulated) / simulated goodput (NaN when the simulated goodput is 0)."""
        sim = self.simulated_rate_req_per_s
        return (self.closed_rate_req_per_s - sim) / sim if sim > 0 else math.nan


GOODPUT_BISECTIONS = 9


def simulated_goodput(
    model: StageModel,
    threshold_tokens: float,
    n_pd_prefill: int,
    n_pd_decode: int,
    ttft_slo_s: float,
    quantile: float,
    closed_rate_req_per_s: float,
    rate_limit_req_per_s: float,
    traffic: Traffic,
    *,
    replications: int = 3,
    requests: int = REQUESTS,
    seed: int = 0,
) -> GoodputCheck:
    """Bisect the rate in (0, ``rate_limit``) for the largest one whose simulated TTFT ``quantile`` (overall)
    meets ``ttft_slo_s``, starting from the closed form's goodput."""
    stat = {0.5: "p50", 0.9: "p90", 0.99: "p99"}.get(quantile)
    if stat is None:
        raise ValueError(f"simulated goodput supports the 0.5, 0.9 and 0.99 quantiles, got {quantile}")
    last: SimulatedTtft | None = None

    def at(rate: float) -> Figure:
        nonlocal last
        last = simulate_ttft(
            model,
            threshold_tokens,
            n_pd_prefill,
            n_pd_decode,
            rate,
            traffic,
            replications=replications,
            requests=requests,
            seed=seed,
        )
        return last.figures["overall"][stat]

    at_closed = at(closed_rate_req_per_s) if closed_rate_req_per_s > 0 else None
    if at_closed is not None and at_closed.value <= ttft_slo_s:
        lo, hi = closed_rate_req_per_s, rate_limit_req_per_s
    else:
        lo, hi = 0.0, closed_rate_req_per_s if closed_rate_req_per_s > 0 else rate_limit_req_per_s
    for _ in range(GOODPUT_BISECTIONS):
        mid = 0.5 * (lo + hi)
        if mid <= 0:
            break
        if at(mid).value <= ttft_slo_s:
            lo = mid
        else:
            hi = mid
    assert last is not None or at_closed is None
    return GoodputCheck(
        closed_rate_req_per_s=closed_rate_req_per_s,
        simulated_rate_req_per_s=lo,
        quantile_at_closed_s=at_closed,
        replications=replications,
        requests=last.requests if last is not None else requests,
        realisation=last.realisation if last is not None else "",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyOptions:
    """How hard to check: ``verify`` False keeps the closed form alone; otherwise ``replications`` of
    ``requests`` requests each (a trace is replayed whole), seeds from ``seed``."""

    verify: bool = True
    replications: int = REPLICATIONS
    requests: int = REQUESTS
    seed: int = 0
    tolerance: float = TOLERANCE


def check_plans(
    model: StageModel,
    plans: Mapping[str, tuple[int, float, int, int, float]],
    traffic: Traffic,
    options: VerifyOptions,
    verify_keys: tuple[str, ...] = ("plan",),
) -> dict[str, LoadedCheck]:
    """``check_loaded`` for several plans, each given as (N_prfaas, t, N_p, N_d, rate); only the plans named in
    ``verify_keys`` are simulated (the others keep their closed form and its validity)."""
    out = {}
    for key, (n_prfaas, t, n_p, n_d, rate) in plans.items():
        sized = model if model.n_prfaas == n_prfaas else replace(model, n_prfaas=n_prfaas)
        out[key] = check_loaded(
            sized,
            t,
            n_p,
            n_d,
            rate,
            traffic,
            verify=options.verify and key in verify_keys,
            replications=options.replications,
            requests=options.requests,
            seed=options.seed,
            tolerance=options.tolerance,
        )
    return out
