"""The windowed closed form's parts (``latency.profile``): fluid carry-over, batches, shrinkage, validity."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.latency.profile import (
    DOMAIN_MAX_UTILIZATION,
    pool_profile,
    relaxation_time_s,
    validity,
)
from tests.conftest import examples


def test_batches_are_list_scheduled_on_free_servers() -> None:
    """Batches of 6 simultaneous 1-s requests every 100 s on 2 servers: the k-th of a batch starts at
    floor(k / 2) s (greedy list scheduling), and nothing else waits (the pool is idle between batches)."""
    times = np.repeat(np.arange(50) * 100.0, 6)
    profile = pool_profile(times, np.ones(times.size), 2.0, float(times[-1]) + 100.0)
    assert profile.mean_batch == pytest.approx(6.0)
    expected = np.tile([0.0, 0.0, 1.0, 1.0, 2.0, 2.0], 50)
    np.testing.assert_allclose(profile.fluid_delay_s, expected, atol=1e-9)
    assert float(np.max(profile.wait.p_wait * profile.wait.conditional_mean_s)) < 0.05


def test_sustained_overload_builds_a_fluid_backlog() -> None:
    """One server, 1-s jobs, evenly spaced: 0.5/s for 1000 s, 2/s for 200 s, 0.5/s for 1000 s. The backlog
    grows at (2 - 1) s of work per second during the surge, so the last surge arrival waits about 200 s, and
    the backlog drains at 0.5 s/s afterwards (gone about 400 s after the surge)."""
    times = np.concatenate([np.arange(0, 1000, 2.0), 1000 + np.arange(0, 200, 0.5), 1200 + np.arange(0, 1000, 2.0)])
    profile = pool_profile(times, np.ones(times.size), 1.0, 2200.0)
    end_of_surge = np.searchsorted(times, 1199.0)
    assert profile.fluid_delay_s[end_of_surge] == pytest.approx(200.0, rel=0.15)
    assert profile.fluid_delay_s[np.searchsorted(times, 1700.0)] == pytest.approx(0.0, abs=5.0)
    assert profile.fluid_delay_s[np.searchsorted(times, 500.0)] == 0.0
    assert profile.overload_fraction == pytest.approx(600.0 / 2200.0, rel=0.2)


def test_poisson_window_loads_shrink_to_the_mean() -> None:
    """Poisson arrivals at a constant rate: the window loads' spread is noise, so the empirical-Bayes factor
    is near 0, no window carries backlog, and ca² is near 1."""
    rng = np.random.default_rng(3)
    times = np.cumsum(rng.exponential(1.0, 50_000))
    profile = pool_profile(times, rng.exponential(2.4, times.size), 4.0, float(times[-1]))
    assert profile.shrinkage < 0.3
    assert profile.overload_fraction == 0.0
    assert profile.arrival_scv == pytest.approx(1.0, abs=0.15)


@settings(max_examples=examples(25), deadline=None)
@given(
    st.integers(min_value=20, max_value=400),
    st.floats(min_value=0.1, max_value=0.9),
    st.floats(min_value=1.1, max_value=3.0),
    st.integers(min_value=0, max_value=10_000),
)
def test_slower_service_never_shortens_a_wait(n: int, load: float, slowdown: float, seed: int) -> None:
    """Scaling every service time up by a factor > 1 (same arrivals) never lowers the pool's mean wait
    (fluid delay plus stochastic wait, averaged over requests)."""
    rng = np.random.default_rng(seed)
    times = np.sort(rng.uniform(0.0, 1000.0, n))
    service = rng.exponential(load * 2 * 1000.0 / n, n)

    def mean_wait(scale: float) -> float:
        p = pool_profile(times, scale * service, 2.0, 1000.0)
        return float(np.mean(p.fluid_delay_s + p.wait.p_wait * p.wait.conditional_mean_s))

    assert mean_wait(slowdown) >= mean_wait(1.0) - 1e-9


def test_relaxation_time_grows_with_load() -> None:
    """τ = ρ E[S] (1 + cs²) / (c (1 - ρ)²) increases with ρ and is capped at the 95 % load."""
    taus = [relaxation_time_s(rho, 2.0, 0.5, 4.0) for rho in (0.1, 0.5, 0.9, 0.95, 0.99)]
    assert taus == sorted(taus)
    assert taus[-1] == taus[-2]


def test_validity_flags_a_stage_above_the_validated_load() -> None:
    """A stage loaded past the validated utilisation makes the figures out of domain, with the reason named."""
    busy = validity({}, {"pd_prefill": DOMAIN_MAX_UTILIZATION + 0.01}, 3600.0)
    quiet = validity({}, {"pd_prefill": DOMAIN_MAX_UTILIZATION - 0.01}, 3600.0)
    assert not busy.in_domain and "local prefill utilisation" in busy.reasons[0]
    assert quiet.in_domain and quiet.reasons == ()
