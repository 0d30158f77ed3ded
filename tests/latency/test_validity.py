"""The validated domain's rule on prefill service variability (``DOMAIN_MAX_SERVICE_SCV``), stationary and
windowed."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from prfaas_plan.latency import loaded_ttft, route_moments
from prfaas_plan.latency.profile import DOMAIN_MAX_SERVICE_SCV, profile_ttft, stationary_validity
from prfaas_plan.lengths import TruncatedLogNormal
from prfaas_plan.physics.curves import PolyCurve
from prfaas_plan.spec.plan import Plan
from prfaas_plan.throughput import StageModel
from prfaas_plan.units import GBIT_PER_S


def _curve(*coefficients: float) -> PolyCurve:
    return PolyCurve(coefficients=coefficients, provenance="assumed", source="test")


# The draw of tests/validation/test_sim_ttft.py that showed the limit: simulated P90 97.5 ± 5 s against the
# closed form's 79.9 s (+22 %) at load 0.5 on one local prefill server.
WIDE = StageModel(
    lengths=TruncatedLogNormal(mu=9.0, sigma=1.75, lower_tokens=224.0, upper_tokens=456_960.0),
    prfaas_prefill=_curve(1.0, 2e-4, 3.125e-9),
    local_prefill=_curve(1.0, 2e-4, 1.5625e-9),
    kv_bytes=_curve(0.0, 2048.0),
    decode_max_batch=20,
    decode_step_time_s=0.025,
    output_tokens_mean=800.0,
    link_bandwidth_bytes_per_s=1.0 * GBIT_PER_S,
    n_prfaas=1,
    n_local=2,
)
WIDE_PLAN = Plan(threshold_tokens=244_785.49274316887, n_pd_prefill=1, n_pd_decode=1)
WIDE_RATE_REQ_PER_S = 0.059727585204424595  # load 0.5 of the smaller of Λ_max and the stability limit


def test_the_wide_case_is_flagged_for_its_local_service_variability() -> None:
    loaded = loaded_ttft(WIDE, WIDE_PLAN, WIDE_RATE_REQ_PER_S)
    moments = route_moments(WIDE, np.asarray(WIDE_PLAN.threshold_tokens))
    assert loaded.service_scv["pd_prefill"] == float(moments.local_scv)
    assert loaded.service_scv["pd_prefill"] > DOMAIN_MAX_SERVICE_SCV
    assert loaded.utilization["pd_prefill"] < 0.9  # not flagged for its load
    verdict = stationary_validity(loaded)
    assert not verdict.in_domain
    assert any(r.startswith("local prefill service times vary more (cs² 3.95)") for r in verdict.reasons)


def test_narrow_lengths_stay_in_domain() -> None:
    """The same plan with a narrow length law: service SCV far below the limit, no flag."""
    narrow = replace(WIDE, lengths=TruncatedLogNormal(mu=9.0, sigma=0.3, lower_tokens=224.0, upper_tokens=456_960.0))
    loaded = loaded_ttft(narrow, WIDE_PLAN, WIDE_RATE_REQ_PER_S)
    assert 0.0 < loaded.service_scv["pd_prefill"] < DOMAIN_MAX_SERVICE_SCV
    assert stationary_validity(loaded).in_domain


def test_a_pool_without_traffic_is_not_judged() -> None:
    """Nothing is offloaded past the top of the length law: the PrfaaS pool carries no traffic, SCV 0."""
    plan = replace(WIDE_PLAN, threshold_tokens=500_000.0)
    loaded = loaded_ttft(WIDE, plan, 0.01)
    assert loaded.utilization["prfaas_compute"] == 0.0
    assert loaded.service_scv["prfaas_compute"] == 0.0
    assert not any(r.startswith("PrfaaS prefill service") for r in stationary_validity(loaded).reasons)


def test_the_windowed_model_flags_the_same_pool() -> None:
    """The windowed model (on a Poisson sample of the wide case) reports the sample's SCV and flags the pool
    (its rule reads the pool's own service SCV, that of its arrival units: near-simultaneous requests are one
    batch)."""
    rng = np.random.default_rng(3)
    n = 4000
    arrival = np.cumsum(rng.exponential(1.0 / WIDE_RATE_REQ_PER_S, n))
    lengths = np.asarray(WIDE.lengths.sample(rng, n), dtype=np.float64)
    profile = profile_ttft(WIDE, WIDE_PLAN, arrival, lengths, np.full(n, 800.0))
    local = lengths <= WIDE_PLAN.threshold_tokens
    service = WIDE.local_prefill(lengths[local])
    scv = float(np.var(service) / np.mean(service) ** 2)
    assert profile.loaded.service_scv["pd_prefill"] == scv
    assert scv > DOMAIN_MAX_SERVICE_SCV
    assert any(r.startswith("local prefill service times vary more") for r in profile.validity.reasons)
