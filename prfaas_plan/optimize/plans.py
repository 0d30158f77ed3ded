"""A plan scored by the paper's stage model (Eqs. 1-8) with its unloaded TTFT, and a comparison of a plan with
the two baselines."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from types import MappingProxyType
from typing import TYPE_CHECKING

import numpy as np

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InfeasibleError
from prfaas_plan.latency import (
    route_moments,
    stability_limit_req_per_s,
)
from prfaas_plan.latency.unloaded import route_latency, unloaded_ttft
from prfaas_plan.throughput import (
    STAGES,
    StageModel,
    egress_bytes_per_s,
    routing,
    stage_bounds,
    stage_throughputs,
)

if TYPE_CHECKING:  # annotations only: ``plan_of`` loads it (start-up time)
    from prfaas_plan.spec.plan import Plan

# Stages whose bound is within this relative distance of Λ_max are reported as binding together.
CO_BINDING_RTOL = 0.01
# Stages whose bound is within this relative distance of Λ_max are tied for the bottleneck: at an optimum the
# search balances two stages, and which of them comes out a few ulps lower depends on the platform's rounding
# (Python 3.13 with numpy 2.5 and scipy 1.18 named pd_prefill where 3.11 named prfaas_link, at the same Λ_max
# to 15 digits). The first tied stage in pipeline order (STAGES) is named.
BOTTLENECK_TIE_RTOL = 1e-9


def bottleneck_of(bounds: Mapping[str, float]) -> str:
    """The stage with the smallest bound; among stages tied within ``BOTTLENECK_TIE_RTOL``, the first in
    pipeline order, so that rounding does not decide the name."""
    lam = min(bounds[s] for s in STAGES)
    return next(s for s in STAGES if bounds[s] <= lam * (1 + BOTTLENECK_TIE_RTOL))


@frozen
class PlanEvaluation:
    """One plan scored by the stage model, with its unloaded TTFT. Rates in req/s, sizes in bytes."""

    label: str
    threshold_tokens: float | None
    n_prfaas: int
    n_pd_prefill: int
    n_pd_decode: int
    offload_fraction: float
    long_tokens: float | None
    short_tokens: float | None
    theta_prfaas_compute_req_per_s: float | None
    theta_prfaas_link_req_per_s: float | None
    theta_pd_prefill_req_per_s: float | None
    theta_pd_decode_req_per_s: float
    #: Each stage's limit on the total rate Λ (req/s), read-only.
    stage_bound_req_per_s: Mapping[str, float]
    throughput_req_per_s: float
    bottleneck: str
    binding: tuple[str, ...]
    egress_bytes_per_s: float
    link_bandwidth_bytes_per_s: float
    ttft_unloaded_mean_s: float
    ttft_unloaded_p90_s: float
    #: Where a stage's utilisation reaches 1 with each route's *mean service time* E[T(L)]: the rate a real
    #: (queueing) system saturates at. Below Λ_max, which prices T at the mean length, since T is convex.
    stability_limit_req_per_s: float = float("nan")

    @property
    def theta_prfaas_req_per_s(self) -> float | None:
        """Θ_prfaas = min(compute, link) (Eq. 3), None when nothing is offloaded."""
        if self.theta_prfaas_compute_req_per_s is None or self.theta_prfaas_link_req_per_s is None:
            return None
        return min(self.theta_prfaas_compute_req_per_s, self.theta_prfaas_link_req_per_s)

    @property
    def link_utilization(self) -> float:
        """Egress over the link's bandwidth at Λ_max."""
        return self.egress_bytes_per_s / self.link_bandwidth_bytes_per_s


@frozen
class Comparison:
    """The optimised PrfaaS-PD plan beside the paper's two baselines."""

    plan: PlanEvaluation
    homogeneous_pd: PlanEvaluation
    naive_heterogeneous: PlanEvaluation
    #: Where each input of the stage model came from (StageModel.sources).
    sources: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)


def plan_of(model: StageModel, scored: PlanEvaluation) -> Plan:
    """The plan (t, N_p, N_d) a scored plan stands for; t = the top of ``model``'s length range when nothing is
    offloaded (homogeneous PD reports no threshold)."""
    from prfaas_plan.spec.plan import Plan

    t = scored.threshold_tokens if scored.threshold_tokens is not None else model.lengths.upper_tokens
    return Plan(threshold_tokens=t, n_pd_prefill=scored.n_pd_prefill, n_pd_decode=scored.n_pd_decode)


def _optional(value: float) -> float | None:
    return None if not np.isfinite(value) else float(value)


def evaluate(model: StageModel, threshold_tokens: float, n_pd_prefill: int, label: str = "plan") -> PlanEvaluation:
    """Score one plan (t, N_p, N_d = N_local - N_p) with Eqs. 3-6 and the unloaded TTFT.

    Raises InfeasibleError when the plan cannot carry any load, naming the stage that has no capacity.
    """
    n_pd_decode = model.n_local - n_pd_prefill
    route = routing(model.lengths, threshold_tokens)
    theta = stage_throughputs(model, route, n_pd_prefill)
    bounds = {k: float(v) for k, v in stage_bounds(theta, route).items()}
    p = float(route.offload_fraction)
    reasons = []
    if n_pd_decode < 1:
        reasons.append(f"pd_decode: no decode instances (N_p = {n_pd_prefill} of {model.n_local} local instances)")
    if p < 1 and n_pd_prefill < 1:
        reasons.append(
            f"pd_prefill: no local prefill instances, but {1 - p:.1%} of requests (L <= {threshold_tokens:,.0f} "
            "tokens) are routed to local prefill"
        )
    if p > 0 and model.n_prfaas < 1:
        reasons.append(f"prfaas: no PrfaaS instances, but {p:.1%} of requests are offloaded")
    if reasons:
        raise InfeasibleError(reasons)
    lam = min(bounds.values())
    bottleneck = bottleneck_of(bounds)
    binding = tuple(s for s in STAGES if bounds[s] <= lam * (1 + CO_BINDING_RTOL))
    ttft = unloaded_ttft(model.lengths, route_latency(model), threshold_tokens)
    return PlanEvaluation(
        label=label,
        threshold_tokens=float(threshold_tokens),
        n_prfaas=model.n_prfaas if p > 0 else 0,
        n_pd_prefill=n_pd_prefill,
        n_pd_decode=n_pd_decode,
        offload_fraction=p,
        long_tokens=float(route.long_tokens) if p > 0 else None,
        short_tokens=float(route.short_tokens) if p < 1 else None,
        theta_prfaas_compute_req_per_s=_optional(float(theta.prfaas_compute)),
        theta_prfaas_link_req_per_s=_optional(float(theta.prfaas_link)),
        theta_pd_prefill_req_per_s=_optional(float(theta.pd_prefill)),
        theta_pd_decode_req_per_s=float(theta.pd_decode),
        stage_bound_req_per_s=MappingProxyType(bounds),
        throughput_req_per_s=lam,
        bottleneck=bottleneck,
        binding=binding,
        egress_bytes_per_s=float(egress_bytes_per_s(model, route, lam)),
        link_bandwidth_bytes_per_s=model.link_bandwidth_bytes_per_s,
        ttft_unloaded_mean_s=ttft.mean_s,
        ttft_unloaded_p90_s=ttft.p90_s,
        stability_limit_req_per_s=float(
            stability_limit_req_per_s(
                model, route_moments(model, np.asarray(float(threshold_tokens))), n_pd_prefill, n_pd_decode
            )[0]
        ),
    )
