"""The closed-form figures a simulation is compared with, on the same inputs and definitions.

- Throughput: the offered rate below the plan's Λ_max (Eq. 6), Λ_max above it.
- Capacity with mean service times: the paper represents a route by T(E[L | route]); an FCFS pool that is
  never idle serves c / E[T(L) | route] requests per second instead, which is what a simulation past
  saturation settles at. T is convex, so E[T(L)] > T(E[L]) and Eq. 6 overstates capacity (by 1.4 % for the
  paper's plan, 3.6 % and 3.9 % for the naive and homogeneous baselines). Those stage limits come from the
  loaded-latency model (``latency.stability_limit_req_per_s``); ``saturated_throughput`` is what a plan
  carries when offered more than it can serve.
- TTFT and utilisation: for Poisson or renewal arrivals the stationary loaded model
  (``latency.loaded_ttft``: G/G/c prefill pools, a processor-sharing link, decode-slot admission); for a
  trace, or a bursty or drifting arrival process, the windowed model of ``latency.profile`` driven by the
  requests themselves (``closed_loaded``). No TTFT past the stability limit. Each carries its ``validity``.
- Egress: Λ · p · S_kv(l_long) at the carried rate (the transfer term of Eq. 3; the paper's §4.3.1 reports
  about 13 Gbit/s); no closed form for its peak.
"""

from __future__ import annotations

import math
from dataclasses import field
from typing import TYPE_CHECKING

import numpy as np

from prfaas_plan._frozen import frozen
from prfaas_plan.latency import LoadedTtft, loaded_ttft, route_moments, stability_limit_req_per_s
from prfaas_plan.latency.profile import ProfileTtft, Validity, profile_ttft, stationary_validity
from prfaas_plan.optimize import PlanEvaluation
from prfaas_plan.optimize.plans import plan_of
from prfaas_plan.spec.plan import Plan
from prfaas_plan.studies.offered import Traffic as Traffic  # re-exported: its home for callers
from prfaas_plan.throughput import StageModel

if TYPE_CHECKING:
    # The simulator's workload builders are imported where a workload is drawn: commands that only carry a
    # ``Traffic`` (``optimize`` without ``--load``) do not load them (start-up time).
    from prfaas_plan.sim.workload import Workload

#: Requests sampled to drive the windowed closed form for a synthetic non-renewal process, and its seed
#: (fixed, so the closed form does not change with the verification's seed).
PROFILE_SAMPLE_REQUESTS = 100_000
PROFILE_SAMPLE_SEED = 20_260_415
#: The loaded model's stage names, as the simulator's summaries name them.
_STAGE_NAMES = {"prfaas_compute": "prfaas", "pd_prefill": "pd_prefill", "prfaas_link": "link", "pd_decode": "pd_decode"}
_STATS = ("mean", "p50", "p90", "p99")


def saturated_throughput(stage_limits: dict[str, float], offload_fraction: float, rate_req_per_s: float) -> float:
    """What a plan carries when offered λ (fluid limit, req/s), from each stage's limit on the total rate:
    each prefill route passes min(its share of λ, its capacity), the PrfaaS route the smaller of compute and
    link, and decode min(their sum, its capacity). Past saturation this exceeds Λ_max when only one route
    is overloaded (the other keeps carrying its share)."""
    p = offload_fraction
    offloaded = 0.0
    if p > 0:
        offloaded = min(p * rate_req_per_s, p * stage_limits["prfaas_compute"], p * stage_limits["prfaas_link"])
    local = min((1 - p) * rate_req_per_s, (1 - p) * stage_limits["pd_prefill"]) if p < 1 else 0.0
    return min(offloaded + local, stage_limits["pd_decode"])


@frozen
class ClosedForm:
    """Closed-form figures at one offered rate, in the simulator's units (req/s, s, bytes/s).

    ``ttft_s`` holds mean/p50/p90/p99 and ``ttft_by_route_s`` the same per route; a value is None where the
    rate is past the stability limit (``stable`` False: queues grow without bound) or a route carries no
    traffic. ``utilization`` uses the simulator's stage names (prfaas, pd_prefill, link, pd_decode).
    """

    rate_req_per_s: float
    throughput_req_per_s: float
    max_throughput_req_per_s: float
    max_throughput_mean_service_req_per_s: float
    saturated_throughput_req_per_s: float
    stable: bool
    unstable_stage: str | None
    ttft_s: dict[str, float | None]
    ttft_by_route_s: dict[str, dict[str, float | None]]
    egress_mean_bytes_per_s: float
    utilization: dict[str, float]
    method: str = "stationary (G/G/c, renewal arrivals)"
    validity: Validity = field(default_factory=lambda: Validity(in_domain=True, reasons=()))


def workload_for(
    model: StageModel, traffic: Traffic, rate_req_per_s: float, requests: int, rng: np.random.Generator
) -> Workload:
    """A synthetic workload of ``requests`` requests at rate λ from the model's lengths and arrival process."""
    from prfaas_plan.sim.arrivals import arrival_process
    from prfaas_plan.sim.workload import synthetic_workload

    return synthetic_workload(
        rng, arrival_process(model, rate_req_per_s), model.lengths, traffic.outputs(model), requests
    )


def closed_loaded(
    model: StageModel, plan: Plan, rate_req_per_s: float, traffic: Traffic
) -> tuple[LoadedTtft, str, Validity]:
    """The closed-form TTFT of a plan at rate λ on ``traffic``: the windowed model on the trace, or on a
    fixed sample of a bursty or drifting process; the stationary model for Poisson or renewal arrivals.
    Returns (figures, method, validity)."""
    if traffic.trace is not None:
        from prfaas_plan.sim.workload import trace_workload

        workload = trace_workload(traffic.trace, None, rate_req_per_s)
        profile = _profile(model, plan, workload)
        return profile.loaded, "windowed (trace)", profile.validity
    if not model.arrival.is_stationary_renewal:
        rng = np.random.default_rng(PROFILE_SAMPLE_SEED)
        workload = workload_for(model, traffic, rate_req_per_s, PROFILE_SAMPLE_REQUESTS, rng)
        profile = _profile(model, plan, workload)
        method = f"windowed ({model.arrival.process} arrivals, a fixed sample of {PROFILE_SAMPLE_REQUESTS:,} requests)"
        return profile.loaded, method, profile.validity
    scv = traffic.outputs(model).scv
    loaded = loaded_ttft(model, plan, rate_req_per_s, decode_service_scv=scv)
    return loaded, "stationary (G/G/c, renewal arrivals)", stationary_validity(loaded)


def _profile(model: StageModel, plan: Plan, workload: Workload) -> ProfileTtft:
    return profile_ttft(model, plan, workload.arrival_s, workload.input_tokens, workload.output_tokens)


def _stats(summary: object | None) -> dict[str, float | None]:
    return {k: None if summary is None else float(getattr(summary, f"{k}_s")) for k in _STATS}


def closed_form(
    model: StageModel,
    plan: PlanEvaluation,
    rate_req_per_s: float,
    decode_service_scv: float = 0.0,
    traffic: Traffic | None = None,
) -> ClosedForm:
    """The closed-form figures of ``plan`` on ``model`` when offered ``rate_req_per_s``.

    ``decode_service_scv``: SCV of the decode holding time (that of the output length; 0 when fixed), used
    by the stationary model. ``traffic``: a trace or the output lengths (``closed_loaded`` picks the model).
    """
    chosen = plan_of(model, plan)
    if traffic is None:
        loaded = loaded_ttft(model, chosen, rate_req_per_s, decode_service_scv=decode_service_scv)
        method, validity = "stationary (G/G/c, renewal arrivals)", stationary_validity(loaded)
    else:
        loaded, method, validity = closed_loaded(model, chosen, rate_req_per_s, traffic)
    threshold = chosen.threshold_tokens
    _, limits = stability_limit_req_per_s(model, route_moments(model, threshold), plan.n_pd_prefill, plan.n_pd_decode)
    stage_limits = {stage: float(np.asarray(limit).reshape(-1)[0]) for stage, limit in limits.items()}
    stationary_limit = min(stage_limits.values())
    lam_max = plan.throughput_req_per_s
    carried = min(rate_req_per_s, lam_max)
    p = plan.offload_fraction
    egress = carried * p * float(model.kv_bytes(plan.long_tokens)) if p > 0 and plan.long_tokens else 0.0
    return ClosedForm(
        rate_req_per_s=rate_req_per_s,
        throughput_req_per_s=carried,
        max_throughput_req_per_s=lam_max,
        max_throughput_mean_service_req_per_s=stationary_limit,
        saturated_throughput_req_per_s=saturated_throughput(stage_limits, p, rate_req_per_s),
        stable=loaded.stable,
        unstable_stage=loaded.unstable_stage,
        ttft_s=_stats(loaded.ttft),
        ttft_by_route_s={route: _stats(loaded.by_route.get(route)) for route in ("offloaded", "local")},
        egress_mean_bytes_per_s=egress,
        utilization={_STAGE_NAMES[stage]: value for stage, value in loaded.utilization.items() if math.isfinite(value)},
        method=method,
        validity=validity,
    )
