"""The one verification path (``studies.verify.verify_plans``): common random numbers across plans, sequential
replications until the SLO lies on one side of the interval or the budget ends, and the figure presented as the
answer."""

from __future__ import annotations

import math
from dataclasses import replace

from prfaas_plan.spec.plan import Plan, TtftSlo
from prfaas_plan.studies.closed_form import Traffic
from prfaas_plan.studies.review import SIZING_CHECK, ReviewOptions
from prfaas_plan.studies.verify import (
    MEETS,
    MISSES,
    SOURCE_CLOSED_FORM,
    SOURCE_SIMULATION,
    UNDECIDED,
    PlanAt,
    VerifyOptions,
    verify_plans,
)
from prfaas_plan.throughput import StageModel

#: The paper's optimised plan (t about 19.4k tokens, 3 PrfaaS, 3 prefill / 5 decode) at a light load.
PLAN = PlanAt(n_prfaas=3, plan=Plan(threshold_tokens=19_400.0, n_pd_prefill=3, n_pd_decode=5), rate_req_per_s=1.0)
SMALL = VerifyOptions(replications=2, requests=3000, max_requests=30_000, max_wall_s=30.0)


def test_common_random_numbers_give_the_same_figures_to_the_same_plan(paper_model: StageModel) -> None:
    twins = verify_plans(paper_model, {"a": PLAN, "b": PLAN}, Traffic(), SMALL)
    a, b = twins["a"].simulated, twins["b"].simulated
    assert a is not None and b is not None
    assert a.figures == b.figures
    # Another plan at the same rate sees the same workloads: a different seed changes the figures.
    other = verify_plans(paper_model, {"a": PLAN}, Traffic(), replace(SMALL, seed=7))["a"].simulated
    assert other is not None and other.figures != a.figures


def test_a_wide_margin_decides_at_the_first_replications(paper_model: StageModel) -> None:
    checks = verify_plans(paper_model, {"plan": PLAN}, Traffic(), SMALL, slo=TtftSlo(limit_s=1000.0))
    d = checks["plan"].decision
    assert d is not None and d.verdict == MEETS and d.replications == SMALL.replications
    assert d.stopped_by == "decided" and d.value_s + d.half_width_s <= 1000.0
    tight = verify_plans(paper_model, {"plan": PLAN}, Traffic(), SMALL, slo=TtftSlo(limit_s=1e-3))["plan"].decision
    assert tight is not None and tight.verdict == MISSES and tight.value_s - tight.half_width_s > 1e-3


def test_an_slo_inside_the_interval_runs_to_the_budget_and_says_undecided(paper_model: StageModel) -> None:
    first = verify_plans(paper_model, {"plan": PLAN}, Traffic(), SMALL)["plan"].simulated
    assert first is not None
    p90 = first.figures["overall"]["p90"].value
    # An SLO at the simulated P90 itself cannot be decided: replications are added until the request budget.
    d = verify_plans(paper_model, {"plan": PLAN}, Traffic(), SMALL, slo=TtftSlo(limit_s=p90))["plan"].decision
    assert d is not None
    if d.verdict == UNDECIDED:
        assert "budget" in d.stopped_by or "cap" in d.stopped_by
        assert d.requests <= SMALL.max_requests
        assert d.replications > SMALL.replications
        assert abs(d.value_s - p90) <= d.half_width_s
    else:  # the added replications moved the mean off the SLO by more than the interval: it did decide
        assert d.stopped_by == "decided" and not abs(d.value_s - p90) <= d.half_width_s


def test_baselines_are_simulated_too_and_every_plan_is_decided_alone(paper_model: StageModel) -> None:
    homogeneous = PlanAt(
        n_prfaas=0,
        plan=Plan(threshold_tokens=paper_model.lengths.upper_tokens, n_pd_prefill=4, n_pd_decode=4),
        rate_req_per_s=0.5,
    )
    at_half = replace(PLAN, rate_req_per_s=0.5)
    plans = {"plan": at_half, "homogeneous_pd": homogeneous}
    checks = verify_plans(paper_model, plans, Traffic(), SMALL, slo=TtftSlo(limit_s=1000.0))
    for check in checks.values():
        assert check.simulated is not None and check.decision is not None and check.decision.verdict == MEETS
    # A baseline past its stability limit is not simulated, and misses.
    overloaded = {
        "homogeneous_pd": replace(
            homogeneous, plan=replace(homogeneous.plan, n_pd_prefill=1, n_pd_decode=7), rate_req_per_s=5.0
        )
    }
    lost = verify_plans(paper_model, overloaded, Traffic(), SMALL, slo=TtftSlo(limit_s=1000.0))["homogeneous_pd"]
    assert not lost.closed.stable and lost.simulated is None
    assert lost.decision is not None and lost.decision.verdict == MISSES and "stability" in lost.decision.stopped_by


def test_the_answer_is_the_simulation_where_the_closed_form_strays(paper_model: StageModel) -> None:
    check = verify_plans(paper_model, {"plan": PLAN}, Traffic(), SMALL)["plan"]
    assert check.simulated is not None
    strays = bool(check.beyond_tolerance) or not check.validity.in_domain
    assert check.answer_source == (SOURCE_SIMULATION if strays else SOURCE_CLOSED_FORM)
    # A zero tolerance makes every percentile stray: the simulated figure is then the answer.
    strict = replace(check, tolerance=0.0)
    assert strict.answer_source == SOURCE_SIMULATION
    sim = check.figure_simulated("overall", "p90")
    assert sim is not None and strict.answer("overall", "p90") == sim.value
    summary = strict.answer_summary()
    assert summary is not None and summary.p90_s == sim.value
    # The closed form stays available beside it.
    closed = strict.figure_closed("overall", "p90")
    assert closed is not None and math.isfinite(closed)
    unverified = verify_plans(paper_model, {"plan": PLAN}, Traffic(), replace(SMALL, verify=False))["plan"]
    assert unverified.answer_source == SOURCE_CLOSED_FORM and unverified.decision is None


def test_size_and_review_check_a_deployment_the_same_way() -> None:
    assert ReviewOptions().verify == SIZING_CHECK
