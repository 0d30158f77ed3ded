"""Loaded TTFT: the closed form (``prfaas_plan.latency``) against the simulated cluster on hypothesis-drawn
scenarios, at 50 % and 80 % of the capacity that actually holds (the smaller of Eq. 6's Λ_max and the
mean-service stability limit: past the latter, 80 % "of Λ_max" would be an unstable system).

Domain: the closed form gives every transfer its processor-sharing *mean* stretch, so the link adds no
variance of its own; that is accurate while the link is lightly used (the paper's plan: 13 %), and the
draws are restricted to link utilisation <= 30 %. Beyond it the closed form overstates the median TTFT of
link-heavy plans (simulation: -16 % to -29 % at link utilisation 0.5-0.8), which is the closed form's
known limitation, not a tolerance to widen here.

The tool's own validated domain (``latency.profile.stationary_validity``, as printed beside every loaded
figure) decides which draws are checked: agreement is asserted only where the tool calls its figures in
domain; a draw it flags is discarded (``assume``; counted as a hypothesis event) and nothing is asserted about
it, so hypothesis keeps drawing until it has in-domain cases. The flag that matters here is the prefill
service variability (``DOMAIN_MAX_SERVICE_SCV``): with few servers and very variable service the real wait
tail is heavier than the closed form's exponential one. The case that showed it: lengths log-normal
(mu 9, sigma 1.75, 224-456,960 tokens), one local prefill server with service SCV 3.95 at utilisation 0.50
(load 0.5): simulated P90 97.5 ± 5 s against the closed form's 79.9 s (+22 %). Its flag is checked in
tests/latency/test_validity.py; the limit's data are in tests/benchmarks/service_scv_domain.py.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from prfaas_plan.errors import InfeasibleError
from prfaas_plan.latency import loaded_ttft
from prfaas_plan.latency.profile import stationary_validity
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
    """Where the tool calls the plan in its validated domain, simulated P50 and P90 TTFT (60,000 requests,
    10 % warm-up) are within 10 % of the closed form, plus the simulation's own 95 % batch-means half-width
    (reported in the message). Flagged draws are discarded unchecked (module docstring)."""
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
    if not stationary_validity(closed_stages).in_domain:
        event("flagged out of the validated domain: agreement not checked")
        assume(False)
    study = run_study(model, plan, rate_req_per_s=rate, requests=60_000, seed=1)
    assert study.closed.validity.in_domain, study.closed.validity.reasons
    for stat in ("p50", "p90"):
        simulated = getattr(study.summary.ttft, f"{stat}_s")
        closed = study.closed.ttft_s[stat]
        assert closed is not None
        error, half = simulated.value / closed - 1.0, simulated.half_width / closed
        assert abs(error) <= TOLERANCE + half, (
            f"{stat}: simulated {simulated.value:.4g} ± {simulated.half_width:.2g} s vs {closed:.4g} s ({error:+.1%})"
        )
