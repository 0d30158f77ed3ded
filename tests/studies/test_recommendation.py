"""The review's decision on its own objective never names a plan that another option (a baseline included)
beats on that objective; on the Qwen3-Next / B200 / H100 scenario of issue 21 it names homogeneous PD."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

from prfaas_plan.io.names import resolve_scenario_path
from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.optimize.cost import unit_prices
from prfaas_plan.report.review_markdown import decision_paragraph
from prfaas_plan.spec.cost import Target
from prfaas_plan.studies.closed_form import Traffic
from prfaas_plan.studies.review import Recommendation, ReviewOptions, cost_frontier, recommend, review, sizing_part
from prfaas_plan.studies.verify import VerifyOptions
from prfaas_plan.throughput import stage_model

SCENARIO = "workloads/qwen3-next-b200-h100.yaml"
FAST = ReviewOptions(verify=VerifyOptions(verify=False), quick=True, sensitivity=False)


@pytest.fixture(scope="module")
def reviews() -> tuple[Any, Any]:
    """The scenario reviewed without a target (priced: the per-dollar objective), and the same review given the
    scenario's target with its sizing and frontier (the cheapest-carrier objective)."""
    spec = load_scenario(resolve_scenario_path(SCENARIO))
    plain = review(spec, target=None, ttft_slo_s=None, options=FAST)
    assert spec.target is not None
    target = Target(rate_req_per_s=spec.target.rate_req_per_s, ttft_slo_s=spec.target.ttft_slo_s)
    model, prices = stage_model(spec), unit_prices(spec)
    sized = sizing_part(model, prices, target, Traffic(output_lengths=spec.traffic.output_length), verify=FAST.verify)
    frontier = cost_frontier(model, prices, sized, None, resolution_tokens=256.0)
    targeted = replace(plain, target=target, ttft_slo_s=target.ttft_slo_s, sizing=sized, frontier=frontier)
    return plain, replace(targeted, recommendation=recommend(targeted))


def _never_beaten(rec: Recommendation, cheapest: bool) -> None:
    win = rec.winner
    for o in rec.options[1:]:
        if cheapest:
            assert win.usd_per_hour <= o.usd_per_hour, (win, o)
        else:
            ratio = (lambda x: x.figure_req_per_s / x.usd_per_hour) if math.isfinite(win.usd_per_hour) else None
            if ratio is not None:
                assert ratio(win) >= ratio(o), (win, o)
            else:
                assert win.figure_req_per_s >= o.figure_req_per_s, (win, o)


def test_the_cheapest_carrier_is_named_and_no_baseline_is_cheaper(reviews: tuple[Any, Any]) -> None:
    _, targeted = reviews
    rec = targeted.recommendation
    assert rec is not None and rec.winner.margin is not None and rec.winner.margin >= 0
    _never_beaten(rec, cheapest=True)
    sizing = targeted.sizing.sizing
    carried = [d for d in (sizing.prfaas_pd, sizing.homogeneous_pd) if d is not None]
    assert rec.winner.usd_per_hour <= min(d.usd_per_hour for d in carried)
    # On this scenario homogeneous PD is the cheaper carrier (the case of issue 21), and the paragraph says so.
    assert sizing.homogeneous_pd is not None and sizing.prfaas_pd is not None
    assert sizing.homogeneous_pd.usd_per_hour < sizing.prfaas_pd.usd_per_hour
    assert rec.winner.kind == "homogeneous PD"
    paragraph = decision_paragraph(targeted)
    assert paragraph.startswith("**Decision**") and "**homogeneous PD" in paragraph
    assert "homogeneous PD wins" in paragraph  # the equal-cost comparison, on the cost part's own numbers


def test_without_a_target_the_most_throughput_per_dollar_is_named(reviews: tuple[Any, Any]) -> None:
    plain, _ = reviews
    rec = plain.recommendation
    assert rec is not None and plain.cost is not None
    _never_beaten(rec, cheapest=False)
    # The equal-cost gain is the cost part's: negative here, so PrfaaS-PD is not the decision.
    assert rec.equal_cost_gain == plain.cost.equal_cost.gain
    if rec.equal_cost_gain < 0:
        assert rec.winner.kind != "PrfaaS-PD"
