"""Plans priced, and the plan set beside homogeneous PD both ways: at equal GPU count (the paper's Table 6)
and at equal cost (the paper's "approximately 15 % throughput gain at equal cost", §4.4; its prices are not
given, so the comparison is made at the scenario's prices and tabulated over the price ratio)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import field

from prfaas_plan._frozen import frozen
from prfaas_plan.optimize.baselines import (
    HomogeneousShape,
    RatioPoint,
    equal_cost_ratio_table,
    equal_gpu_shape,
    homogeneous_at,
)
from prfaas_plan.optimize.cost import CostBreakdown, TokenCost, UnitPrices, deployment_cost, token_cost
from prfaas_plan.optimize.plans import PlanEvaluation
from prfaas_plan.throughput import StageModel, link_bought_bytes_per_s


@frozen
class PlanCost:
    """A deployment's hourly cost when it carries ``tokens.rate_req_per_s`` and its cost per million tokens."""

    n_prfaas: int
    n_local: int
    breakdown: CostBreakdown
    tokens: TokenCost


def plan_cost(
    model: StageModel, prices: UnitPrices, plan: PlanEvaluation, n_prfaas: int, n_local: int, rate_req_per_s: float
) -> PlanCost:
    """Cost of running ``plan`` on N_prfaas + N_local instances (and the model's link when N_prfaas > 0) at
    ``rate_req_per_s`` (egress scales with the rate: the plan's egress at Λ_max times rate / Λ_max)."""
    scale = rate_req_per_s / plan.throughput_req_per_s if plan.throughput_req_per_s > 0 else 0.0
    breakdown = deployment_cost(
        prices,
        n_prfaas=n_prfaas,
        n_local=n_local,
        bandwidth_bytes_per_s=link_bought_bytes_per_s(model) if n_prfaas > 0 else 0.0,
        egress_bytes_per_s=plan.egress_bytes_per_s * scale,
    )
    tokens = token_cost(
        breakdown.total_usd_per_hour, rate_req_per_s, model.lengths.mean_tokens, model.output_tokens_mean
    )
    return PlanCost(n_prfaas=n_prfaas, n_local=n_local, breakdown=breakdown, tokens=tokens)


@frozen
class Priced:
    """One homogeneous baseline: its shape, best plan, cost at its Λ_max, and the plan's gain over it."""

    shape: HomogeneousShape
    plan: PlanEvaluation
    cost: PlanCost
    gain: float


@frozen
class CostComparison:
    """The PrfaaS-PD plan priced, beside homogeneous PD at equal GPU count and at equal cost.

    ``price_ratio``: PrfaaS GPU-hour / local GPU-hour at the scenario's prices. ``ratio_table``: the
    equal-cost gain (GPUs only) at every price ratio in 0.5-4, as whole-instance steps.
    """

    plan: PlanEvaluation
    plan_cost: PlanCost
    equal_gpu: Priced
    equal_cost: Priced
    price_ratio: float
    ratio_table: tuple[RatioPoint, ...]
    sources: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)


def cost_comparison(
    model: StageModel,
    prices: UnitPrices,
    plan: PlanEvaluation,
    *,
    prfaas_gpus_per_instance: int,
    local_gpus_per_instance: int,
) -> CostComparison:
    """Price ``plan`` (on the model's whole deployment, at its Λ_max) and build both homogeneous baselines.

    Equal cost: the most whole local-type instances whose GPU-hours cost no more than the PrfaaS-PD
    deployment's total (GPUs, link and egress at Λ_max). Raises ValueError when a pool has no price.
    """
    if not prices.complete:
        raise ValueError("the cost comparison needs a price for both pools")
    local_price = prices.local_usd_per_instance_hour or 0.0
    prfaas_price = prices.prfaas_usd_per_instance_hour or 0.0
    priced_plan = plan_cost(model, prices, plan, model.n_prfaas, model.n_local, plan.throughput_req_per_s)
    prfaas_gpus = model.n_prfaas * prfaas_gpus_per_instance

    def baseline(shape: HomogeneousShape) -> Priced:
        homog = homogeneous_at(model, shape.instances)
        cost = plan_cost(model, prices, homog, 0, shape.instances, homog.throughput_req_per_s)
        return Priced(
            shape=shape, plan=homog, cost=cost, gain=plan.throughput_req_per_s / homog.throughput_req_per_s - 1
        )

    budget = priced_plan.breakdown.total_usd_per_hour
    affordable = math.floor(budget / local_price * (1 + 1e-12)) if local_price > 0 else model.n_local
    equal_cost = HomogeneousShape(
        instances=max(affordable, 2),
        gpus_per_instance=local_gpus_per_instance,
        basis="equal cost",
        detail=f"the whole local-type instances ${budget:,.2f}/h buys at ${local_price:,.2f} per instance-hour",
    )
    ratio = (prfaas_price / prfaas_gpus_per_instance) / (local_price / local_gpus_per_instance)
    return CostComparison(
        plan=plan,
        plan_cost=priced_plan,
        equal_gpu=baseline(equal_gpu_shape(model.n_local, prfaas_gpus, local_gpus_per_instance)),
        equal_cost=baseline(equal_cost),
        price_ratio=ratio,
        ratio_table=equal_cost_ratio_table(model, plan.throughput_req_per_s, prfaas_gpus, local_gpus_per_instance),
        sources=dict(prices.sources),
    )
