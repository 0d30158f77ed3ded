"""The arrival variability a trace hands the closed form: the index of dispersion of counts."""

from __future__ import annotations

import numpy as np
import pytest

from prfaas_plan.spec.trace import Trace


def _trace(arrival_s: np.ndarray) -> Trace:
    n = arrival_s.size
    ones = np.ones(n, dtype=np.int64)
    return Trace(source="test", arrival_s=arrival_s - arrival_s[0], input_tokens=ones, output_tokens=ones)


def test_poisson_counts_have_dispersion_one() -> None:
    """Counts of a Poisson process over long windows have variance equal to their mean (IDC = 1 = gap SCV)."""
    arrivals = np.cumsum(np.random.default_rng(1).exponential(1.0, 200_000))
    trace = _trace(arrivals)
    assert trace.count_dispersion() == pytest.approx(1.0, abs=0.1)
    assert trace.interarrival_scv == pytest.approx(1.0, abs=0.05)


def test_batched_timestamps_inflate_the_gap_scv_but_not_the_dispersion_beyond_the_batch() -> None:
    """Poisson batches of 4 simultaneous requests: the gap SCV is about 7 (three zero gaps in four), while
    the counts' dispersion is the batch size, 4, the factor by which the batches really add variance."""
    batches = np.cumsum(np.random.default_rng(2).exponential(4.0, 50_000))
    trace = _trace(np.repeat(batches, 4))
    assert trace.interarrival_scv == pytest.approx(7.0, rel=0.05)
    assert trace.count_dispersion() == pytest.approx(4.0, rel=0.1)
