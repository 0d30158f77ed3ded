"""The closed-form figures a simulation is compared with, on the same inputs and definitions.

- Throughput: the offered rate below the plan's Λ_max (Eq. 6), Λ_max above it.
- Capacity with mean service times: the paper represents a route by T(E[L | route]); an FCFS pool that is
  never idle serves c / E[T(L) | route] requests per second instead, which is what a simulation past
  saturation settles at. T is convex, so E[T(L)] > T(E[L]) and Eq. 6 overstates capacity (by 1.4 % for the
  paper's plan, 3.6 % and 3.9 % for the naive and homogeneous baselines). Those stage limits come from the
  loaded-latency model (``latency.stability_limit_req_per_s``); ``saturated_throughput`` is what a plan
  carries when offered more than it can serve.
- TTFT and utilisation: the loaded model (``latency.loaded_ttft``): G/G/c prefill pools, a
  processor-sharing link, decode-slot admission; no TTFT past the stability limit.
- Egress: Λ · p · S_kv(l_long) at the carried rate (digest §1.8); no closed form for its peak.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from prfaas_plan.latency import loaded_ttft, route_moments, stability_limit_req_per_s
from prfaas_plan.optimize import PlanEvaluation
from prfaas_plan.throughput import StageModel

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


@dataclass(frozen=True, slots=True, kw_only=True)
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


def _stats(summary: object | None) -> dict[str, float | None]:
    return {k: None if summary is None else float(getattr(summary, f"{k}_s")) for k in _STATS}


def closed_form(
    model: StageModel, plan: PlanEvaluation, rate_req_per_s: float, decode_service_scv: float = 0.0
) -> ClosedForm:
    """The closed-form figures of ``plan`` on ``model`` when offered ``rate_req_per_s``.

    ``decode_service_scv``: SCV of the decode holding time (that of the output length; 0 when fixed).
    """
    threshold = plan.threshold_tokens if plan.threshold_tokens is not None else model.lengths.upper_tokens
    loaded = loaded_ttft(
        model, threshold, plan.n_pd_prefill, plan.n_pd_decode, rate_req_per_s, decode_service_scv=decode_service_scv
    )
    _, limits = stability_limit_req_per_s(model, route_moments(model, threshold), plan.n_pd_prefill, plan.n_pd_decode)
    stage_limits = {stage: float(np.asarray(limit).reshape(-1)[0]) for stage, limit in limits.items()}
    lam_max = plan.throughput_req_per_s
    carried = min(rate_req_per_s, lam_max)
    p = plan.offload_fraction
    egress = carried * p * float(model.kv_bytes(plan.long_tokens)) if p > 0 and plan.long_tokens else 0.0
    return ClosedForm(
        rate_req_per_s=rate_req_per_s,
        throughput_req_per_s=carried,
        max_throughput_req_per_s=lam_max,
        max_throughput_mean_service_req_per_s=loaded.stability_limit_req_per_s,
        saturated_throughput_req_per_s=saturated_throughput(stage_limits, p, rate_req_per_s),
        stable=loaded.stable,
        unstable_stage=loaded.unstable_stage,
        ttft_s=_stats(loaded.ttft),
        ttft_by_route_s={route: _stats(loaded.by_route.get(route)) for route in ("offloaded", "local")},
        egress_mean_bytes_per_s=egress,
        utilization={_STAGE_NAMES[stage]: value for stage, value in loaded.utilization.items() if math.isfinite(value)},
    )
