"""Quantised timestamps in the windowed TTFT model: detection (shared stamps on a grid) and the spreading of
each bucket's requests over it (``latency.profile.quantisation_step_s`` and ``spread_buckets``)."""

from __future__ import annotations

import numpy as np
import pytest

from prfaas_plan.io.traces import read_trace
from prfaas_plan.latency.profile import quantisation_step_s, spread_buckets
from prfaas_plan.sim.arrivals import Batched, Poisson
from tests.conftest import TRACES


@pytest.mark.parametrize("step", [1.0, 3.0, 0.25])
def test_floored_poisson_times_are_detected_with_their_bucket(step: float) -> None:
    times = Poisson(rate_req_per_s=4.0).sample(np.random.default_rng(1), 5000)
    logged = np.floor(times / step) * step
    assert quantisation_step_s(logged) == pytest.approx(step)


def test_continuous_times_and_genuine_batches_are_not_quantised() -> None:
    rng = np.random.default_rng(2)
    assert quantisation_step_s(Poisson(rate_req_per_s=4.0).sample(rng, 5000)) is None
    batches = Batched(epochs=Poisson(rate_req_per_s=1.0), batch_size_mean=8.0).sample(rng, 5000)
    assert np.unique(batches).size < 0.3 * batches.size  # many shared stamps, but not on a grid
    assert quantisation_step_s(batches) is None
    # A few shared stamps on a grid are not enough.
    sparse = np.floor(Poisson(rate_req_per_s=0.05).sample(rng, 2000))
    assert quantisation_step_s(sparse) is None


def test_spreading_keeps_each_request_in_its_bucket_and_in_order() -> None:
    logged = np.array([0.0, 0.0, 0.0, 3.0, 9.0, 9.0])
    spread = spread_buckets(logged, 3.0)
    np.testing.assert_allclose(spread, [0.5, 1.5, 2.5, 4.5, 9.75, 11.25])
    rng = np.random.default_rng(3)
    many = np.floor(Poisson(rate_req_per_s=5.0).sample(rng, 4000) / 3.0) * 3.0
    out = spread_buckets(many, 3.0)
    assert np.all((out >= many) & (out < many + 3.0))
    assert np.all(np.diff(out) > 0)
    assert np.unique(out).size == out.size


def test_jittered_buckets_and_the_shipped_mooncake_trace_are_quantised() -> None:
    """Stamps a few milliseconds off their 3 s grid (as in Mooncake's conversation trace) are still buckets."""
    rng = np.random.default_rng(4)
    logged = np.floor(Poisson(rate_req_per_s=4.0).sample(rng, 5000) / 3.0) * 3.0
    buckets, index = np.unique(logged, return_inverse=True)
    jittered = (buckets + rng.uniform(-0.003, 0.003, buckets.size))[index]
    assert quantisation_step_s(jittered) == pytest.approx(3.0, abs=0.005)
    trace = read_trace(TRACES / "conversation_trace.jsonl")
    arrival = np.asarray(trace.arrival_s, dtype=np.float64)
    assert quantisation_step_s(arrival - arrival[0]) == pytest.approx(3.0, abs=0.01)
