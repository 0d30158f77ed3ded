"""The goodput objective checked by simulation: the plan it reports carries its reported goodput.

Through the real CLI: ``optimize --objective goodput`` finds the plan by the closed form, then finds its
goodput again by simulation. This test then simulates that plan at the reported (simulated) goodput with
fresh seeds the command did not use: a validation of the verification itself, not of a pinned figure.
"""

from __future__ import annotations

import json

import pytest

from prfaas_plan.io.names import resolve_scenario_path
from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.spec.plan import Plan
from prfaas_plan.studies.closed_form import Traffic
from prfaas_plan.studies.verify import simulate_ttft
from prfaas_plan.throughput import stage_model
from tests.conftest import run_cli

pytestmark = pytest.mark.validation

SLO_S = 5.0


def test_goodput_plan_sustains_its_reported_goodput() -> None:
    """Paper scenario, P90 SLO 5 s: the closed-form goodput is within 5 % of the simulated one, and at the
    reported goodput five fresh replications (seeds 1000-1004) give a P90 within 5 % of the SLO."""
    result = run_cli("optimize", "--objective", "goodput", "--ttft-p90-s", str(SLO_S), "--json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)["plan"]
    check = plan["goodput_verification"]
    assert check["verdict_source"] == "simulation"
    assert abs(check["relative_difference"]) <= 0.05, check
    model = stage_model(load_scenario(resolve_scenario_path(None)))
    fresh = simulate_ttft(
        model,
        Plan(
            threshold_tokens=plan["threshold_tokens"],
            n_pd_prefill=plan["n_pd_prefill"],
            n_pd_decode=plan["n_pd_decode"],
        ),
        check["simulated_rate_req_per_s"],
        Traffic(output_lengths=None),
        replications=5,
        seed=1000,
    )
    p90 = fresh.figures["overall"]["p90"]
    assert p90.value == pytest.approx(SLO_S, rel=0.05), p90
