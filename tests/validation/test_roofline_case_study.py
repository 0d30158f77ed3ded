"""The case study with both pools from the calibrated roofline (workloads/paper-case-study-roofline.yaml).

The H200 roofline is calibrated on Table 5's four measured points; the H20 pool reuses those efficiencies
with its own datasheet, and decode capacity comes from first principles (memory and the 40 tok/s SLO).
It is not expected to match Table 6 (the paper's H20 curve is not measured either); the tests pin the
calibration's quality and that the plan it yields keeps the paper's qualitative result.
"""

from __future__ import annotations

import pytest

from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.optimize import compare
from prfaas_plan.physics.fits import pool_fit_reports
from prfaas_plan.throughput import stage_model
from tests.conftest import REPO

pytestmark = pytest.mark.validation
SCENARIO = REPO / "workloads" / "paper-case-study-roofline.yaml"


def test_calibrated_h200_reproduces_each_table5_point_left_out() -> None:
    """Fitted on the other three points, each Table 5 latency is predicted within 11 %; in-sample within 5 %.

    The calibration fits the GEMM efficiency and the per-request overhead; the per-layer chunk overhead and the
    attention efficiency stay at the cross-model serving defaults, whose chunk steps (1 chunk at 8K, 4 at 32K)
    the four points do not follow exactly: 1.02 / 0.95 / 1.04 / 0.99 in sample, the 1K point 1.10 held out.
    """
    scenario = load_scenario(SCENARIO)
    report = pool_fit_reports(scenario.prfaas, scenario.model, "prfaas")[0]
    for given, fitted, held_out in zip(report.given, report.fitted, report.leave_one_out, strict=True):
        assert abs(fitted / given - 1) < 0.05
        assert abs(held_out / given - 1) < 0.11


def test_roofline_case_study_keeps_the_papers_ordering() -> None:
    """PrfaaS-PD beats naive heterogeneous, which beats homogeneous PD; the link stays far from binding."""
    scenario = load_scenario(SCENARIO)
    model = stage_model(scenario)
    result = compare(model, scenario.prfaas.gpus, scenario.local.gpus_per_instance)
    plan, homog, naive = result.plan, result.homogeneous_pd, result.naive_heterogeneous
    assert plan.throughput_req_per_s > naive.throughput_req_per_s > homog.throughput_req_per_s
    assert plan.link_utilization < 0.5
    assert model.decode_max_batch >= 1 and model.decode_step_time_s <= 1 / 40
