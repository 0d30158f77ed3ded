"""The processor-sharing link: each of n transfers in flight gets B/n."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.sim import link as link_module
from prfaas_plan.sim.link import SharedLink
from tests.conftest import examples


def _drain(link: SharedLink, starts: list[tuple[float, float]]) -> dict[int, float]:
    """Feed (start time, size) transfers in time order and return each one's finish time."""
    pending = sorted((t, size, i) for i, (t, size) in enumerate(starts))
    done: dict[int, float] = {}
    now = 0.0
    while pending or link.in_flight:
        finish = link.next_finish_s(now) if link.in_flight else math.inf
        if pending and pending[0][0] <= finish:
            now, size, i = pending.pop(0)
            link.start(now, size, i)
        else:
            now = finish
            for i in link.finish_due(now):
                done[i] = now
    return done


def test_one_transfer_takes_size_over_bandwidth() -> None:
    """Alone on the link, S bytes take S / B."""
    assert _drain(SharedLink(100.0, 1.0), [(0.0, 250.0)]) == {0: pytest.approx(2.5)}


def test_two_transfers_share_the_link_equally() -> None:
    """Worked example, B = 1: A (2 bytes) at 0, B (1 byte) at 1. A runs alone for 1 s (1 byte left), then
    both run at 1/2: each has 1 byte left, so both finish at 3."""
    done = _drain(SharedLink(1.0, 1.0), [(0.0, 2.0), (1.0, 1.0)])
    assert done == {0: pytest.approx(3.0), 1: pytest.approx(3.0)}


def test_staggered_finishes() -> None:
    """B = 1: sizes 1 and 3 at 0 share until the small one finishes at 2 (1 byte each), the big one has 2
    bytes left alone: it finishes at 4."""
    done = _drain(SharedLink(1.0, 1.0), [(0.0, 1.0), (0.0, 3.0)])
    assert done == {0: pytest.approx(2.0), 1: pytest.approx(4.0)}


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 10.0), st.floats(0.01, 5.0)), min_size=1, max_size=12))
def test_work_is_conserved(starts: list[tuple[float, float]]) -> None:
    """The link is never idle while a transfer waits, so the last finish is the busy-period arithmetic:
    it delivers every byte, and busy time equals total bytes / B."""
    link = SharedLink(2.0, 1.0)
    done = _drain(link, starts)
    assert len(done) == len(starts)
    total = sum(size for _, size in starts)
    assert link.delivered_bytes == pytest.approx(total, rel=1e-9)
    assert link.busy_s == pytest.approx(total / 2.0, rel=1e-9)
    for i, (t, size) in enumerate(starts):
        assert done[i] >= t + size / 2.0 - 1e-9  # never faster than the whole link


def test_bandwidth_step_and_outage() -> None:
    """4 bytes at B = 1 from 0; at 1 the link goes down (B = 0) until 3, then runs at 3: 3 bytes left take 1 s."""
    link = SharedLink(1.0, 1.0)
    link.start(0.0, 4.0, 0)
    link.set_bandwidth(1.0, 0.0)
    assert link.next_finish_s(1.0) == math.inf
    link.set_bandwidth(3.0, 3.0)
    finish = link.next_finish_s(3.0)
    assert finish == pytest.approx(4.0)
    assert link.finish_due(finish) == [0]
    assert link.bin_bytes == pytest.approx([1.0, 0.0, 0.0, 3.0])


def test_egress_bins_stay_bounded_on_a_run_of_years(monkeypatch: pytest.MonkeyPatch) -> None:
    """A transfer that takes years of simulated time (a 1 Mbit/s link) keeps at most MAX_BINS bins: they are
    merged pairwise, the width doubles, and no delivered byte is lost (evaluate --bandwidth-gbit-per-s 0.001
    ran out of memory tallying one bin per simulated second)."""
    monkeypatch.setattr(link_module, "MAX_BINS", 64)
    link = SharedLink(bandwidth_bytes_per_s=1.0, bin_s=1.0)
    link.start(0.0, 10.0, 0)
    assert link.finish_due(10.0) == [0]
    assert link.bin_s == 1.0 and link.bin_bytes == [1.0] * 10  # under the bound: one bin per second
    link.start(10.0, 1000.0, 1)
    assert link.finish_due(1010.0) == [1]
    assert len(link.bin_bytes) <= 64
    assert link.bin_s == 16.0
    assert sum(link.bin_bytes) == pytest.approx(1010.0)
    assert link.bin_bytes[0] == pytest.approx(16.0) and link.bin_bytes[-1] == pytest.approx(1010.0 - 63 * 16.0)


def test_the_default_bound_keeps_one_second_bins_for_a_month() -> None:
    assert link_module.MAX_BINS * 1.0 >= 30 * 86_400.0
