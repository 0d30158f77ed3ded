"""Loaded TTFT: the closed form (``prfaas_plan.latency``) against the simulated cluster on hypothesis-drawn
scenarios, at 50 % and 80 % of the capacity that actually holds (the smaller of Eq. 6's Λ_max and the
mean-service stability limit: past the latter, 80 % "of Λ_max" would be an unstable system).

Domain: the closed form gives every transfer its processor-sharing *mean* stretch, so the link adds no
variance of its own; that is accurate while the link is lightly used (the paper's plan: 13 %), and the
draws are restricted to link utilisation <= 30 %. Beyond it the closed form overstates the median TTFT of
link-heavy plans (simulation: -16 % to -29 % at link utilisation 0.5-0.8), which is the closed form's
known limitation, not a tolerance to widen here.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from prfaas_plan.errors import InfeasibleError
from prfaas_plan.latency import loaded_ttft
from prfaas_plan.optimize import search
from prfaas_plan.spec.plan import Plan
from prfaas_plan.studies.simulate import run_study
from prfaas_plan.throughput import StageModel
from tests.strategies import stage_models

TOLERANCE = 0.10
LINK_DOMAIN = 0.30


@pytest.mark.validation
@settings(
    max_examples=10,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(stage_models(), st.sampled_from([0.5, 0.8]))
def test_p50_and_p90_ttft_match_the_closed_form(model: StageModel, load: float) -> None:
    """Simulated P50 and P90 TTFT (60,000 requests, 10 % warm-up) are within 10 % of the closed form, plus
    the simulation's own 95 % batch-means half-width (reported in the message)."""
    try:
        plan = search(model)
    except InfeasibleError:
        assume(False)
        return
    assert plan.threshold_tokens is not None
    chosen = Plan(threshold_tokens=plan.threshold_tokens, n_pd_prefill=plan.n_pd_prefill, n_pd_decode=plan.n_pd_decode)
    limit = loaded_ttft(model, chosen, 0.0)
    rate = load * min(limit.stability_limit_req_per_s, plan.throughput_req_per_s)
    closed_stages = loaded_ttft(model, chosen, rate)
    assume(closed_stages.utilization["prfaas_link"] <= LINK_DOMAIN)
    study = run_study(model, plan, rate_req_per_s=rate, requests=60_000, seed=1)
    for stat in ("p50", "p90"):
        simulated = getattr(study.summary.ttft, f"{stat}_s")
        closed = study.closed.ttft_s[stat]
        assert closed is not None
        error, half = simulated.value / closed - 1.0, simulated.half_width / closed
        assert abs(error) <= TOLERANCE + half, (
            f"{stat}: simulated {simulated.value:.4g} ± {simulated.half_width:.2g} s vs {closed:.4g} s ({error:+.1%})"
        )
