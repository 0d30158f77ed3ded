"""Searches and scoring of plans (paper §3.4.2): ``plans`` (a plan scored by Eqs. 1-8, comparisons),
``throughput_search`` (the threshold and split with the largest Λ_max), ``goodput_search`` (the most goodput, and
the best plan at a fixed rate), ``baselines`` (homogeneous PD, naive offload), ``under_load`` (closed-form TTFT at
a rate, the load curve), sizing, cost, matrix, headroom, shapes, error bands and the topology's global plan."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prfaas_plan._lazy import lazy_getattr

if TYPE_CHECKING:
    from prfaas_plan.optimize.baselines import (
        best_split_without_offload,
        compare,
        evaluate_given,
        homogeneous_model,
        plan_comparison,
    )
    from prfaas_plan.optimize.plans import Comparison, PlanEvaluation, evaluate
    from prfaas_plan.optimize.throughput_search import ThresholdSearch, best_thresholds, search
    from prfaas_plan.optimize.under_load import (
        LOAD_CURVE_FRACTIONS,
        GoodputComparison,
        GoodputEvaluation,
        compare_goodput,
        goodput_evaluation,
        loaded_comparison,
        loaded_plan,
        ttft_curve,
    )

_EXPORTS = {
    "Comparison": "prfaas_plan.optimize.plans",
    "GoodputComparison": "prfaas_plan.optimize.under_load",
    "GoodputEvaluation": "prfaas_plan.optimize.under_load",
    "LOAD_CURVE_FRACTIONS": "prfaas_plan.optimize.under_load",
    "PlanEvaluation": "prfaas_plan.optimize.plans",
    "ThresholdSearch": "prfaas_plan.optimize.throughput_search",
    "best_split_without_offload": "prfaas_plan.optimize.baselines",
    "best_thresholds": "prfaas_plan.optimize.throughput_search",
    "compare": "prfaas_plan.optimize.baselines",
    "compare_goodput": "prfaas_plan.optimize.under_load",
    "evaluate": "prfaas_plan.optimize.plans",
    "evaluate_given": "prfaas_plan.optimize.baselines",
    "goodput_evaluation": "prfaas_plan.optimize.under_load",
    "homogeneous_model": "prfaas_plan.optimize.baselines",
    "loaded_comparison": "prfaas_plan.optimize.under_load",
    "loaded_plan": "prfaas_plan.optimize.under_load",
    "plan_comparison": "prfaas_plan.optimize.baselines",
    "search": "prfaas_plan.optimize.throughput_search",
    "ttft_curve": "prfaas_plan.optimize.under_load",
}
__all__ = [
    "LOAD_CURVE_FRACTIONS",
    "Comparison",
    "GoodputComparison",
    "GoodputEvaluation",
    "PlanEvaluation",
    "ThresholdSearch",
    "best_split_without_offload",
    "best_thresholds",
    "compare",
    "compare_goodput",
    "evaluate",
    "evaluate_given",
    "goodput_evaluation",
    "homogeneous_model",
    "loaded_comparison",
    "loaded_plan",
    "plan_comparison",
    "search",
    "ttft_curve",
]
__getattr__ = lazy_getattr(__name__, _EXPORTS)
