"""Our cluster against ciw, an independent discrete-event queueing library, on an M/G/4 prefill pool and an
M/G/1-PS link (``tests/validation/independent_sim.py`` says what is compared and how). Every statistic must
agree within 4 standard errors of the difference between the two simulators' replication means (nine
statistics: a 4-sigma gap has a chance of about 6e-4 if the two simulate the same queue), and on the link
our mean sojourn and mean sojourn over transfer time must hold the M/G/1-PS closed form 1/(1 - ρ) within
4 standard errors of ours. The printed table with 20 replications of 20,000 requests:
``python3 -m tests.benchmarks.independent_sim_table``.
"""

from __future__ import annotations

import math

import pytest

from tests.validation.independent_sim import compare, format_table

pytest.importorskip("ciw")

REPLICATIONS = 8
CUSTOMERS = 8000


@pytest.mark.validation
def test_pool_and_link_agree_with_ciw() -> None:
    rows = compare(REPLICATIONS, CUSTOMERS, seed=21)
    table = format_table(rows)
    for row in rows:
        assert abs(row.z) < 4.0, f"{row.case} {row.statistic}: ours and ciw differ\n{table}"
        if math.isfinite(row.closed_form):
            # half-width / t_{0.975, 7} (2.365) is one standard error
            assert abs(row.ours - row.closed_form) < 4.0 * row.ours_half_width / 2.365, f"{row.statistic}\n{table}"
