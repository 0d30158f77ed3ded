"""One simulation study, as the ``simulate`` command runs it: choose the plan, build the workload, run the
cluster, summarise the run and set the closed-form figures beside it."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InputError, Problem
from prfaas_plan.lengths import Empirical, Fixed, LengthDistribution
from prfaas_plan.optimize import PlanEvaluation
from prfaas_plan.sim.arrivals import arrival_process
from prfaas_plan.sim.cluster import ClusterConfig
from prfaas_plan.sim.prefix_cache import CacheReplay
from prfaas_plan.sim.records import SimResult
from prfaas_plan.sim.run import simulate
from prfaas_plan.sim.summary import Summary, summarize
from prfaas_plan.sim.workload import Workload, check_request_count, synthetic_workload, trace_workload
from prfaas_plan.spec.dynamics import Dynamics
from prfaas_plan.spec.trace import Trace
from prfaas_plan.studies.closed_form import ClosedForm, Traffic, closed_form
from prfaas_plan.throughput import StageModel

#: Offered load (fraction of Λ_max) when neither a rate nor a load is given for synthetic traffic.
DEFAULT_LOAD = 0.7
#: Simulated time a run may span, s (about 116 days). The link's egress is tallied in 1 s bins
#: (``ClusterConfig.egress_bin_s``), so a span bounds their memory (10 million bins, under 100 MB); it also
#: keeps float64 arrival times resolving well under a microsecond (spacing 2e-9 s at 1e7 s).
MAX_HORIZON_S = 1e7
#: Estimated share of the steady state's completions the measured window may miss before the simulated
#: throughput is reported as biased low (``Study.throughput_caveat``): a reporting bound, not a fitted figure.
THROUGHPUT_UNDERCOUNT = 0.05


def _check_horizon(model: StageModel, workload: Workload, threshold_tokens: float, n_prfaas: int) -> str | None:
    """Why the run would span more than ``MAX_HORIZON_S`` of simulated time, or None. The span is bounded
    above by the last arrival plus the offloaded requests' PrfaaS prefill work (spread over the instances)
    and their KV transfers back to back on the link."""
    if workload.n_requests == 0:
        return None
    last_s = float(workload.arrival_s[-1])
    lengths = np.asarray(workload.input_tokens)[np.asarray(workload.input_tokens) > threshold_tokens]
    work_s = 0.0
    if lengths.size and n_prfaas > 0:
        prefill_s = float(np.sum(model.prfaas_prefill(lengths))) / n_prfaas
        transfer_s = float(np.sum(model.kv_bytes(lengths))) / model.link_bandwidth_bytes_per_s
        work_s = prefill_s + transfer_s
    span_s = last_s + work_s
    if span_s <= MAX_HORIZON_S:  # also False for NaN
        return None
    return (
        f"the run would span up to {span_s:.3g} s of simulated time (arrivals until {last_s:.3g} s, then "
        f"{work_s:.3g} s of offloaded prefill and KV transfer), more than the {MAX_HORIZON_S:.0e} s (about "
        "116 days) a run may cover: egress is tallied in 1 s bins; offer a higher rate, fewer requests or a "
        "faster link"
    )


def offered_rate(plan: PlanEvaluation, rate_req_per_s: float | None, load: float | None) -> float | None:
    """The arrival rate to offer: ``rate``, or ``load`` · Λ_max, or None when neither is given."""
    if rate_req_per_s is not None and load is not None:
        raise InputError(Problem(field="rate/load", message="give one of them, not both"))
    if rate_req_per_s is not None:
        if not (math.isfinite(rate_req_per_s) and rate_req_per_s > 0):
            raise InputError(Problem(field="rate", message=f"must be a finite number > 0, got {rate_req_per_s}"))
        return rate_req_per_s
    if load is not None:
        if not (math.isfinite(load) and load > 0):
            raise InputError(Problem(field="load", message=f"must be a finite number > 0, got {load}"))
        return load * plan.throughput_req_per_s
    return None


@frozen
class ThroughputCaveat:
    """The measured window is too early or too short for a steady-state throughput (``Study.throughput_caveat``):
    requests that finished in it, the warm-up's span of arrivals (s), the window (s), the estimated share of
    the steady state's completions the window misses (None when no request completed) and about how many
    requests would bring it within ``THROUGHPUT_UNDERCOUNT`` (None when it cannot be estimated)."""

    window_completions: int
    warmup_s: float
    window_s: tuple[float, float]
    undercount_fraction: float | None
    requests_needed: int | None


@frozen(eq=False)
class Study:
    """A run beside its closed form. ``wall_s`` covers sampling the workload and the event loop."""

    model: StageModel
    plan: PlanEvaluation
    requests: int
    seed: int
    trace_source: str | None
    rate_req_per_s: float
    result: SimResult
    summary: Summary
    closed: ClosedForm
    wall_s: float

    @property
    def load(self) -> float:
        """Offered rate as a fraction of the plan's Λ_max."""
        return self.rate_req_per_s / self.plan.throughput_req_per_s

    @property
    def events_per_s(self) -> float:
        """Events fired per second of wall time."""
        return self.result.events / self.wall_s if self.wall_s > 0 else math.nan

    @property
    def requests_per_s(self) -> float:
        """Simulated requests per second of wall time."""
        return self.requests / self.wall_s if self.wall_s > 0 else math.nan

    @property
    def throughput_measured(self) -> bool:
        """Whether any request finished inside the measured window: without one, the run measured no
        throughput (its 0 req/s is the window's emptiness, not the cluster's rate)."""
        return self.summary.window_completions > 0

    def throughput_caveat(self) -> ThroughputCaveat | None:
        """Why the simulated throughput is not a steady-state figure (None: it is).

        The window runs from the first measured arrival to the last arrival, and a request finishes one time
        in system S after it arrives: a request arriving at time a (from the first arrival) is missing from
        the window's completions while a + S is past the window's opening, so the window undercounts the
        steady state by about mean(min((S - warm-up)+, span)) / span (S: the run's own times in system). When
        that exceeds ``THROUGHPUT_UNDERCOUNT`` the throughput is biased low; when the window is shorter than
        every request's stay nothing finishes in it (``throughput_measured`` False). More requests stretch the
        warm-up and the span in proportion; ``requests_needed`` is the smallest such count whose estimated
        undercount is within the bound. Past the stability limit queues grow whatever the run's length: only
        the empty window is reported there (the closed form's note covers the rest)."""
        rec = self.result.records
        lo, hi = self.summary.window_s
        done = np.isfinite(rec.finish_s)
        stay = (rec.finish_s - rec.arrival_s)[done]
        warmup_s, span_s = lo - float(rec.arrival_s[0]), hi - lo

        def undercount(k: float) -> float:
            return float(np.mean(np.clip(stay - k * warmup_s, 0.0, k * span_s))) / (k * span_s)

        short = stay.size > 0 and undercount(1.0) > THROUGHPUT_UNDERCOUNT
        if self.throughput_measured and (not self.closed.stable or not short):
            return None
        needed = None
        if stay.size and warmup_s > 0:
            k_hi = 1.0
            while undercount(k_hi) > THROUGHPUT_UNDERCOUNT and k_hi < 1e6:
                k_hi *= 2.0
            k_lo = k_hi / 2.0
            for _ in range(30):
                mid = (k_lo + k_hi) / 2.0
                k_lo, k_hi = (k_lo, mid) if undercount(mid) <= THROUGHPUT_UNDERCOUNT else (mid, k_hi)
            needed = math.ceil(self.requests * k_hi)
        return ThroughputCaveat(
            window_completions=self.summary.window_completions,
            warmup_s=warmup_s,
            window_s=self.summary.window_s,
            undercount_fraction=undercount(1.0) if stay.size else None,
            requests_needed=needed,
        )

    def relative_error(self) -> dict[str, float | None]:
        """(simulated − closed form) / closed form of every figure both sides have (None where one lacks it;
        the throughput where the window measured none)."""
        s, c = self.summary, self.closed
        throughput = s.throughput_req_per_s.value if self.throughput_measured else math.nan
        pairs: dict[str, tuple[float, float | None]] = {
            "throughput_req_per_s": (throughput, c.throughput_req_per_s),
            "ttft_mean_s": (s.ttft.mean_s.value, c.ttft_s["mean"]),
            "ttft_p50_s": (s.ttft.p50_s.value, c.ttft_s["p50"]),
            "ttft_p90_s": (s.ttft.p90_s.value, c.ttft_s["p90"]),
            "ttft_p99_s": (s.ttft.p99_s.value, c.ttft_s["p99"]),
            "egress_mean_bytes_per_s": (s.egress_mean_bytes_per_s, c.egress_mean_bytes_per_s),
        }
        for stage, value in s.utilization.items():
            pairs[f"utilization_{stage}"] = (value, c.utilization.get(stage))
        return {key: _relative(sim, closed) for key, (sim, closed) in pairs.items()}


def _relative(sim: float, closed: float | None) -> float | None:
    if closed is None or not math.isfinite(sim) or not math.isfinite(closed) or closed == 0:
        return None
    return (sim - closed) / closed


def run_study(
    model: StageModel,
    plan: PlanEvaluation,
    *,
    rate_req_per_s: float | None,
    requests: int,
    seed: int,
    output_lengths: LengthDistribution | None = None,
    trace: Trace | None = None,
    decode_kv_capacity_bytes: float | None = None,
    warmup_fraction: float = 0.1,
    progress: Callable[[int], None] | None = None,
    replay: CacheReplay | None = None,
    dynamics: Dynamics | None = None,
) -> Study:
    """Simulate ``plan`` on ``model``'s traffic (or replay ``trace``, rescaled to ``rate_req_per_s`` when
    given) and compare with the closed form at the offered rate. ``model`` must already describe the trace's
    traffic when one is given (``trace_model``). Raises InputError for counts or options out of range.

    ``replay``: a prefix-cache replay of the trace (``dynamic_study.plan_with_caches``): its incremental
    lengths, routes and load times are what the run prefills. ``dynamics``: the link profile, faults and
    scheduler to run with (its caches are the ``replay``'s business)."""
    try:
        check_request_count(requests)
    except ValueError as error:
        raise InputError(Problem(field="requests", message=str(error))) from None
    start = time.perf_counter()
    if trace is not None:
        try:
            workload: Workload = trace_workload(trace, requests, rate_req_per_s, replay=replay)
        except ValueError as error:
            raise InputError(Problem(file=trace.source, message=str(error))) from None
        if seed != 0 and replay is not None:
            raise InputError(Problem(field="seed", message="a prefix-cache replay is replayed as recorded: use seed 0"))
        if seed != 0:
            # Seed 0 replays the trace as recorded; any other seed a circular block-bootstrap resample of it
            # (``verify.bootstrap_workload``), and the closed form is set beside that same realisation.
            from prfaas_plan.studies.verify import BOOTSTRAP_BLOCKS, bootstrap_workload

            workload = bootstrap_workload(workload, np.random.default_rng(seed))
            if workload.n_requests == 0:
                raise InputError(
                    Problem(
                        file=trace.source,
                        message=f"too short for a block-bootstrap resample in {BOOTSTRAP_BLOCKS} blocks "
                        f"(seed {seed}); seed 0 replays it as recorded",
                    )
                )
            trace = Trace(
                source=f"{trace.source} (block-bootstrap resample: {BOOTSTRAP_BLOCKS} blocks, seed {seed})",
                arrival_s=np.asarray(workload.arrival_s),
                input_tokens=np.asarray(workload.input_tokens, dtype=np.int64),
                output_tokens=np.asarray(workload.output_tokens, dtype=np.int64),
            )
        offered = workload.mean_rate_req_per_s
        outputs_scv = Empirical(values=workload.output_tokens).scv
    else:
        offered = rate_req_per_s if rate_req_per_s is not None else DEFAULT_LOAD * plan.throughput_req_per_s
        outputs = output_lengths if output_lengths is not None else Fixed(tokens=model.output_tokens_mean)
        outputs_scv = outputs.scv
        rng = np.random.default_rng(seed)
        workload = synthetic_workload(rng, arrival_process(model, offered), model.lengths, outputs, requests)
    threshold = plan.threshold_tokens if plan.threshold_tokens is not None else model.lengths.upper_tokens
    config = ClusterConfig(
        model=replace(model, n_prfaas=plan.n_prfaas),
        threshold_tokens=threshold,
        n_pd_prefill=plan.n_pd_prefill,
        n_pd_decode=plan.n_pd_decode,
        decode_kv_capacity_bytes=decode_kv_capacity_bytes,
    )
    if dynamics is not None:
        # Imported here: dynamic_study builds on this module (choose_plan, trace_model).
        from prfaas_plan.studies.dynamic import dynamic_fields

        last_s = float(workload.arrival_s[-1]) if workload.n_requests else 0.0
        fields = dynamic_fields(dynamics, model, last_arrival_s=last_s, seed=seed)
        config = replace(config, **fields)  # type: ignore[arg-type]
    too_long = _check_horizon(model, workload, threshold, plan.n_prfaas)
    if too_long is not None:
        raise InputError(
            Problem(file=trace.source, message=too_long) if trace is not None else Problem(message=too_long)
        )
    result = simulate(config, workload, progress=progress)
    wall_s = time.perf_counter() - start
    try:
        summary = summarize(result, warmup_fraction=warmup_fraction)
    except ValueError as error:
        where = Problem(file=trace.source, message=str(error)) if trace is not None else None
        raise InputError(where or Problem(field="requests", message=str(error))) from None
    return Study(
        model=model,
        plan=plan,
        requests=workload.n_requests,
        seed=seed,
        trace_source=trace.source if trace is not None else None,
        rate_req_per_s=offered,
        result=result,
        summary=summary,
        closed=closed_form(
            model,
            plan,
            offered,
            decode_service_scv=outputs_scv,
            traffic=Traffic(trace=trace, output_lengths=None if trace is not None else outputs),
        ),
        wall_s=wall_s,
    )
