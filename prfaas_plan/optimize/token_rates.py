"""Tokens/s per GPU against tokens/s per user: each compared plan at its goodput (the rate within every SLO),
with the decode stage's TPOT under load there (``latency.tpot``) — the trade a peer configurator plots."""

from __future__ import annotations

import math
from dataclasses import replace

from prfaas_plan._frozen import frozen
from prfaas_plan.latency.tpot import decode_capacity_req_per_s, tpot_under_load
from prfaas_plan.optimize.plans import PlanEvaluation
from prfaas_plan.optimize.under_load import GoodputComparison, GoodputEvaluation
from prfaas_plan.throughput import StageModel


@frozen
class TokenRates:
    """One plan at one rate: output tokens/s per GPU of the whole plan and per user (1 / mean TPOT)."""

    label: str
    rate_req_per_s: float
    gpus: int
    tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float
    tpot_mean_s: float
    tpot_p90_s: float
    decode_load: float


def plan_token_rates(
    model: StageModel,
    label: str,
    rate_req_per_s: float,
    plan: PlanEvaluation,
    prfaas_gpus_per_instance: int,
    local_gpus_per_instance: int,
) -> TokenRates:
    """Λ·L_out / GPUs of a scored plan's instances and the TPOT under load at Λ on its N_d instances; NaN TPOT
    at Λ = 0 or past saturation."""
    n_pd_decode = plan.n_pd_decode
    gpus = plan.n_prfaas * prfaas_gpus_per_instance + (plan.n_pd_prefill + n_pd_decode) * local_gpus_per_instance
    tokens = rate_req_per_s * model.output_tokens_mean
    tpot_mean = tpot_p90 = load = math.nan
    if n_pd_decode >= 1 and 0.0 < rate_req_per_s < decode_capacity_req_per_s(model, n_pd_decode):
        law = tpot_under_load(model, rate_req_per_s, n_pd_decode)
        tpot_mean, tpot_p90, load = law.tpot_mean_s, law.tpot_p90_s, law.load
    return TokenRates(
        label=label,
        rate_req_per_s=rate_req_per_s,
        gpus=gpus,
        tokens_per_s_per_gpu=tokens / gpus if gpus else math.nan,
        tokens_per_s_per_user=1.0 / tpot_mean if tpot_mean > 0 else math.nan,
        tpot_mean_s=tpot_mean,
        tpot_p90_s=tpot_p90,
        decode_load=load,
    )


def comparison_token_rates(
    model: StageModel, comparison: GoodputComparison, prfaas_gpus_per_instance: int, local_gpus_per_instance: int
) -> list[TokenRates]:
    """Every plan of a goodput comparison at its own goodput: the chosen plan, then its alternatives."""
    rows: list[tuple[str, GoodputEvaluation]] = [
        ("PrfaaS-PD (max goodput)", comparison.plan),
        ("PrfaaS-PD (max throughput)", comparison.throughput_plan),
        ("homogeneous PD", comparison.homogeneous_pd),
        ("naive heterogeneous", comparison.naive_heterogeneous),
    ]
    out = []
    for label, evaluation in rows:
        plan = evaluation.plan
        sized = replace(model, n_local=plan.n_pd_prefill + plan.n_pd_decode)
        out.append(
            plan_token_rates(
                sized,
                label,
                evaluation.goodput.rate_req_per_s,
                plan,
                prfaas_gpus_per_instance,
                local_gpus_per_instance,
            )
        )
    return out
