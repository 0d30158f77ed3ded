"""Plans under load: TTFT at a rate (closed form), the TTFT curve over loads, and the goodput objective."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field, replace

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InfeasibleError
from prfaas_plan.latency import Goodput, LoadedTtft, loaded_ttft, plan_goodput, plans_goodput, stage_utilization
from prfaas_plan.latency.tpot import check_tpot_slo
from prfaas_plan.optimize.baselines import best_split_without_offload, homogeneous_model
from prfaas_plan.optimize.goodput_search import best_goodput_plan
from prfaas_plan.optimize.plans import Comparison, PlanEvaluation, evaluate, plan_of
from prfaas_plan.optimize.throughput_search import search
from prfaas_plan.spec.plan import Plan, TtftSlo
from prfaas_plan.throughput import (
    StageModel,
)

# --------------------------------------------------------------------------------------------------------
# Under load (prfaas_plan.latency): TTFT at a given rate, and the goodput objective
# --------------------------------------------------------------------------------------------------------

#: Loads, as fractions of a plan's Λ_max, at which ``ttft_curve`` reports TTFT.
LOAD_CURVE_FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)


def _as_scored(model: StageModel, plan: PlanEvaluation) -> tuple[StageModel, Plan]:
    """The stage model and plan a scored plan stands for: its PrfaaS count and instances; t = the top of
    the length range when nothing is offloaded (homogeneous PD reports no threshold)."""
    sized = replace(model, n_prfaas=plan.n_prfaas, n_local=plan.n_pd_prefill + plan.n_pd_decode)
    return sized, plan_of(model, plan)


def loaded_plan(
    model: StageModel, plan: PlanEvaluation, rate_req_per_s: float, decode_service_scv: float = 0.0
) -> LoadedTtft:
    """TTFT of a scored plan at arrival rate Λ (req/s); ``model`` is the one the plan was scored with, or the
    scenario's (a baseline's instance counts come from the plan itself)."""
    sized, chosen = _as_scored(model, plan)
    return loaded_ttft(sized, chosen, rate_req_per_s, decode_service_scv=decode_service_scv)


def loaded_comparison(
    model: StageModel,
    comparison: Comparison,
    *,
    rate_req_per_s: float | None = None,
    load_fraction: float | None = None,
    decode_service_scv: float = 0.0,
) -> dict[str, LoadedTtft]:
    """The plan and both baselines under load: all at one rate, or each at a fraction of its own Λ_max.

    Keys: "plan", "homogeneous_pd", "naive_heterogeneous". Exactly one of the two loads must be given.
    """
    if (rate_req_per_s is None) == (load_fraction is None):
        raise ValueError("give exactly one of rate_req_per_s and load_fraction")
    plans = {
        "plan": comparison.plan,
        "homogeneous_pd": comparison.homogeneous_pd,
        "naive_heterogeneous": comparison.naive_heterogeneous,
    }
    out = {}
    for key, plan in plans.items():
        if rate_req_per_s is not None:
            rate = rate_req_per_s
        else:
            assert load_fraction is not None
            rate = load_fraction * plan.throughput_req_per_s
        out[key] = loaded_plan(model, plan, rate, decode_service_scv)
    return out


def ttft_curve(
    model: StageModel,
    plan: PlanEvaluation,
    fractions: tuple[float, ...] = LOAD_CURVE_FRACTIONS,
    decode_service_scv: float = 0.0,
) -> list[LoadedTtft]:
    """TTFT of a plan at each fraction of its Λ_max (default 10 %..95 %)."""
    return [loaded_plan(model, plan, f * plan.throughput_req_per_s, decode_service_scv) for f in fractions]


@frozen
class GoodputEvaluation:
    """A scored plan with its goodput and every stage's utilisation at that rate."""

    plan: PlanEvaluation
    goodput: Goodput
    utilization_at_goodput: Mapping[str, float]


@frozen
class GoodputComparison:
    """The goodput-optimal PrfaaS-PD plan beside the throughput-optimal one and the two baselines, each with
    its goodput under the same TTFT SLO."""

    ttft_slo_s: float
    quantile: float
    plan: GoodputEvaluation
    throughput_plan: GoodputEvaluation
    homogeneous_pd: GoodputEvaluation
    naive_heterogeneous: GoodputEvaluation
    sources: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)

    @property
    def slo(self) -> TtftSlo:
        """The TTFT target every plan was scored under."""
        return TtftSlo(limit_s=self.ttft_slo_s, quantile=self.quantile)


def goodput_evaluation(
    model: StageModel, plan: PlanEvaluation, slo: TtftSlo, decode_service_scv: float = 0.0
) -> GoodputEvaluation:
    """The goodput of a scored plan (see ``latency.goodput``) and its utilisations at that rate."""
    sized, chosen = _as_scored(model, plan)
    goodput = plan_goodput(sized, chosen, slo, decode_service_scv=decode_service_scv)
    utilization = stage_utilization(sized, chosen, goodput.rate_req_per_s)
    return GoodputEvaluation(plan=plan, goodput=goodput, utilization_at_goodput=utilization)


def compare_goodput(
    model: StageModel,
    prfaas_gpus: int,
    local_gpus_per_instance: int,
    slo: TtftSlo,
    resolution_tokens: float = 10.0,
    decode_service_scv: float = 0.0,
) -> GoodputComparison:
    """Maximise goodput (the largest Λ with the TTFT quantile within ``slo``) over t and N_p, beside
    the throughput-optimal plan and the baselines (homogeneous PD with its split chosen for goodput).

    Raises InfeasibleError when no threshold and split meets the SLO even with no load.
    """
    options = {"decode_service_scv": decode_service_scv}
    check_tpot_slo(model)
    ttft_slo_s, quantile = slo.limit_s, slo.quantile
    t, n_p, rate = best_goodput_plan(
        model, slo, resolution_tokens=resolution_tokens, decode_service_scv=decode_service_scv
    )
    if rate <= 0:
        raise InfeasibleError(
            f"ttft_p{quantile * 100:g}: no threshold and split keeps the P{quantile * 100:g} TTFT within "
            f"{ttft_slo_s:g} s even with no load"
        )
    # The goodput-optimal, the Λ_max-optimal and the naive plan share the pools: score them together.
    same_pool = [
        evaluate(model, t, n_p, label="prfaas-pd-goodput"),
        search(model, resolution_tokens),
        evaluate(model, 0.0, 0, label="naive-heterogeneous"),
    ]
    chosen = [_as_scored(model, plan)[1] for plan in same_pool]
    thresholds = [c.threshold_tokens for c in chosen]
    splits = [c.n_pd_prefill for c in chosen]
    scored = plans_goodput(model, thresholds, splits, slo, **options)
    best, throughput, naive = (
        GoodputEvaluation(
            plan=plan,
            goodput=goodput,
            utilization_at_goodput=stage_utilization(model, c, goodput.rate_req_per_s),
        )
        for plan, goodput, c in zip(same_pool, scored, chosen, strict=True)
    )
    homogeneous = homogeneous_model(model, prfaas_gpus, local_gpus_per_instance)
    top = homogeneous.lengths.upper_tokens
    _, n_homog, homog_rate = best_goodput_plan(
        homogeneous, slo, thresholds=[top], decode_service_scv=decode_service_scv
    )
    if homog_rate > 0:
        homog_plan = replace(evaluate(homogeneous, top, n_homog, label="homogeneous-pd"), threshold_tokens=None)
    else:  # no split meets the SLO: keep the throughput-optimal split
        homog_plan = best_split_without_offload(homogeneous, label="homogeneous-pd")
    return GoodputComparison(
        ttft_slo_s=ttft_slo_s,
        quantile=quantile,
        plan=best,
        throughput_plan=throughput,
        homogeneous_pd=goodput_evaluation(model, homog_plan, slo, **options),
        naive_heterogeneous=naive,
        sources=model.sources,
    )
