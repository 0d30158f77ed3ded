"""Search and scoring of plans (paper §3.4.2): ``plans`` (a plan scored by Eqs. 1-8, comparisons), ``search``
(the global threshold and split search), ``baselines`` (homogeneous PD, naive offload) and ``under_load``
(closed-form TTFT at a rate, the load curve, the goodput objective)."""

from prfaas_plan.optimize.baselines import (
    best_split_without_offload,
    compare,
    evaluate_given,
    homogeneous_model,
    plan_comparison,
)
from prfaas_plan.optimize.plans import Comparison, PlanEvaluation, evaluate
from prfaas_plan.optimize.search import ThresholdSearch, best_thresholds, search
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
