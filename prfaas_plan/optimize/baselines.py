"""The paper's two baselines (homogeneous PD on the local hardware, naive heterogeneous offload of everything)
and the comparisons that set a plan beside them."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InfeasibleError, InputError, Problem
from prfaas_plan.optimize.plans import Comparison, PlanEvaluation, evaluate
from prfaas_plan.optimize.throughput_search import search
from prfaas_plan.throughput import (
    StageModel,
    max_throughput,
    routing,
    stage_bounds,
    stage_throughputs,
)

if TYPE_CHECKING:  # annotations only (start-up time)
    from prfaas_plan.spec.plan import Plan


def homogeneous_model(model: StageModel, prfaas_gpus: int, local_gpus_per_instance: int) -> StageModel:
    """The homogeneous-PD baseline's pool: the PrfaaS GPUs become local GPUs (the paper: 32 H200 + 64 H20
    -> 96 H20 = 12 instances). GPUs that do not fill a whole local instance are dropped."""
    extra = prfaas_gpus // local_gpus_per_instance
    return replace(model, n_prfaas=0, n_local=model.n_local + extra)


def naive_threshold(model: StageModel) -> float:
    """The naive baseline's threshold: below every length, so every request is prefilled on PrfaaS (t = 0,
    or just below a distribution that starts at 0 tokens: a fully cached request, with nothing to prefill,
    is still routed to PrfaaS rather than to a local prefill pool the baseline does not have)."""
    return min(0.0, model.lengths.lower_tokens - 1.0)


def best_split_without_offload(model: StageModel, label: str) -> PlanEvaluation:
    """Best N_p for a pool that prefills everything locally (p = 0): max over N_p of min(Θ_pd-p, Θ_pd-d)."""
    t_all_local = model.lengths.upper_tokens
    n_p = np.arange(1, model.n_local)
    if n_p.size == 0:
        raise InfeasibleError("pd_prefill/pd_decode: the local pool cannot hold one prefill and one decode instance")
    route = routing(model.lengths, t_all_local)
    lam = max_throughput(stage_bounds(stage_throughputs(model, route, n_p[:, None]), route)).ravel()
    best = evaluate(model, t_all_local, int(n_p[int(np.argmax(lam))]), label=label)
    return replace(best, threshold_tokens=None)


def _with_baselines(
    model: StageModel, plan: PlanEvaluation, prfaas_gpus: int, local_gpus_per_instance: int
) -> Comparison:
    homogeneous = best_split_without_offload(
        homogeneous_model(model, prfaas_gpus, local_gpus_per_instance), label="homogeneous-pd"
    )
    naive = evaluate(model, naive_threshold(model), 0, label="naive-heterogeneous")
    return Comparison(plan=plan, homogeneous_pd=homogeneous, naive_heterogeneous=naive, sources=model.sources)


def compare(
    model: StageModel, prfaas_gpus: int, local_gpus_per_instance: int, resolution_tokens: float = 10.0
) -> Comparison:
    """The optimised plan beside homogeneous PD (no PrfaaS, same GPU count) and naive heterogeneous
    (every request prefilled on PrfaaS, every local instance decodes: t = 0, N_p = 0)."""
    return _with_baselines(model, search(model, resolution_tokens), prfaas_gpus, local_gpus_per_instance)


def evaluate_given(model: StageModel, plan: Plan) -> PlanEvaluation:
    """A given plan (t, N_p, N_d). N_p + N_d may use fewer local instances than the pool has (the rest idle),
    never more: that is an input error naming the options."""
    n_pd_prefill, n_pd_decode = plan.n_pd_prefill, plan.n_pd_decode
    if plan.n_local > model.n_local:
        raise InputError(
            Problem(
                field="n_pd_prefill + n_pd_decode",
                message=f"{n_pd_prefill} + {n_pd_decode} instances exceed the local pool's {model.n_local} "
                "(deployment.local.instances)",
            )
        )
    return evaluate(replace(model, n_local=plan.n_local), plan.threshold_tokens, n_pd_prefill, label="given")


def plan_comparison(
    model: StageModel,
    prfaas_gpus: int,
    local_gpus_per_instance: int,
    plan: Plan,
) -> Comparison:
    """A given plan (``evaluate_given``) beside the baselines."""
    return _with_baselines(model, evaluate_given(model, plan), prfaas_gpus, local_gpus_per_instance)


@frozen
class HomogeneousShape:
    """What a homogeneous-PD baseline is made of: ``instances`` local-type instances of ``gpus_per_instance``
    GPUs, and on what basis it was sized ("equal GPU count" or "equal cost")."""

    instances: int
    gpus_per_instance: int
    basis: str
    detail: str


def equal_gpu_shape(n_local: int, prfaas_gpus: int, local_gpus_per_instance: int) -> HomogeneousShape:
    """The paper's Table 6 baseline: the PrfaaS GPUs counted as local-type GPUs (32 H200 + 64 H20 -> 96 H20 =
    12 instances); GPUs that do not fill a whole instance are dropped."""
    extra = prfaas_gpus // local_gpus_per_instance
    dropped = prfaas_gpus - extra * local_gpus_per_instance
    detail = f"{n_local} local instances + {prfaas_gpus} PrfaaS GPUs counted as {extra} local-type instances" + (
        f" ({dropped} GPUs that fill no instance dropped)" if dropped else ""
    )
    return HomogeneousShape(
        instances=n_local + extra, gpus_per_instance=local_gpus_per_instance, basis="equal GPU count", detail=detail
    )


def homogeneous_at(model: StageModel, instances: int) -> PlanEvaluation:
    """Best split of a homogeneous-PD pool of ``instances`` local-type instances (no PrfaaS, no link)."""
    return best_split_without_offload(replace(model, n_prfaas=0, n_local=instances), label="homogeneous-pd")


@frozen
class RatioPoint:
    """Equal-cost homogeneous PD at one price ratio r = (PrfaaS GPU-hour) / (local GPU-hour), GPUs only.

    Instances ``homogeneous_instances`` = floor(N_local + r · G_prfaas / g_local) cover every r in
    [``ratio_low``, ``ratio_high``).
    """

    ratio_low: float
    ratio_high: float
    homogeneous_instances: int
    homogeneous_throughput_req_per_s: float
    gain: float


def equal_cost_ratio_table(
    model: StageModel,
    plan_throughput_req_per_s: float,
    prfaas_gpus: int,
    local_gpus_per_instance: int,
    ratios: tuple[float, float] = (0.5, 4.0),
) -> tuple[RatioPoint, ...]:
    """Λ_max gain of the plan over homogeneous PD of the same GPU cost, for price ratios in ``ratios``.

    The budget is N_local · g_local + r · G_prfaas local-GPU-hours (GPUs only: the link is left out, as the
    paper's equal-cost sentence prices GPUs only), and the baseline buys the whole instances it affords.
    """
    per_ratio = prfaas_gpus / local_gpus_per_instance  # local instances bought per unit of r
    if per_ratio <= 0:
        return ()
    first = model.n_local + math.floor(ratios[0] * per_ratio)
    last = model.n_local + math.floor(ratios[1] * per_ratio)
    points = []
    for n in range(max(first, 2), last + 1):
        low, high = max(ratios[0], (n - model.n_local) / per_ratio), min(ratios[1], (n + 1 - model.n_local) / per_ratio)
        if not low < high:
            continue
        homog = homogeneous_at(model, n)
        points.append(
            RatioPoint(
                ratio_low=low,
                ratio_high=high,
                homogeneous_instances=n,
                homogeneous_throughput_req_per_s=homog.throughput_req_per_s,
                gain=plan_throughput_req_per_s / homog.throughput_req_per_s - 1.0,
            )
        )
    return tuple(points)
