"""The plan and TTFT SLO value types (``spec.plan``): what they accept, what they refuse, and that the SLO a
scenario or a target states converts to the same value."""

from __future__ import annotations

import math

import numpy as np
import pytest

from prfaas_plan.spec.cost import Target
from prfaas_plan.spec.plan import Plan, TtftSlo
from prfaas_plan.spec.scenario import Slo


def test_a_plan_keeps_its_fields_and_counts_its_local_instances() -> None:
    plan = Plan(threshold_tokens=19_400.0, n_pd_prefill=3, n_pd_decode=5)
    assert (plan.threshold_tokens, plan.n_pd_prefill, plan.n_pd_decode, plan.n_local) == (19_400.0, 3, 5, 8)


@pytest.mark.parametrize("threshold", [-1.0, 0.0, math.inf])
def test_thresholds_outside_the_length_range_are_plans(threshold: float) -> None:
    """Below every length (all offloaded), zero, or past the top (nothing offloaded, as sweeps write it)."""
    assert Plan(threshold_tokens=threshold, n_pd_prefill=0, n_pd_decode=1).threshold_tokens == threshold


def test_numpy_integer_counts_are_accepted() -> None:
    plan = Plan(threshold_tokens=1.0, n_pd_prefill=np.int64(2), n_pd_decode=np.int64(6))  # type: ignore[arg-type]
    assert plan.n_local == 8


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"threshold_tokens": math.nan, "n_pd_prefill": 1, "n_pd_decode": 1}, "threshold_tokens"),
        ({"threshold_tokens": 1.0, "n_pd_prefill": -1, "n_pd_decode": 1}, "n_pd_prefill"),
        ({"threshold_tokens": 1.0, "n_pd_prefill": 1, "n_pd_decode": -2}, "n_pd_decode"),
        ({"threshold_tokens": 1.0, "n_pd_prefill": 1.5, "n_pd_decode": 1}, "n_pd_prefill must be an integer"),
    ],
)
def test_a_plan_refuses_what_is_not_one(fields: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Plan(**fields)  # type: ignore[arg-type]


def test_a_plan_is_frozen() -> None:
    plan = Plan(threshold_tokens=1.0, n_pd_prefill=1, n_pd_decode=1)
    with pytest.raises(AttributeError):
        plan.n_pd_decode = 2  # type: ignore[misc]


@pytest.mark.parametrize(
    ("limit_s", "quantile", "message"),
    [
        (0.0, 0.9, "ttft_slo_s"),
        (-1.0, 0.9, "ttft_slo_s"),
        (math.inf, 0.9, "ttft_slo_s"),
        (math.nan, 0.9, "ttft_slo_s"),
        (5.0, 0.0, "quantile"),
        (5.0, 1.0, "quantile"),
        (5.0, math.nan, "quantile"),
    ],
)
def test_an_slo_refuses_limits_and_quantiles_no_law_can_hold(limit_s: float, quantile: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TtftSlo(limit_s=limit_s, quantile=quantile)


def test_the_scenario_and_the_target_state_the_same_slo() -> None:
    assert TtftSlo(limit_s=5.0).quantile == 0.9
    assert Slo(decode_tokens_per_s=20.0, ttft_p90_s=5.0).ttft_slo == TtftSlo(limit_s=5.0, quantile=0.9)
    assert Slo(decode_tokens_per_s=20.0).ttft_slo is None
    assert Target(rate_req_per_s=2.0, ttft_slo_s=4.0, quantile=0.99).ttft_slo == TtftSlo(limit_s=4.0, quantile=0.99)
