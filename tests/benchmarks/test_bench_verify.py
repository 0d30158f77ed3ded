"""End-to-end time of loaded answers checked by simulation (issue 9). Figures only, never pass/fail on time.

Targets: ``optimize --load 0.7`` with verification under 3 s end to end on the default scenario, and under
5 s for a 12k-request trace (Mooncake conversation, 12,031 requests). Measured as a fresh process, the way a
user runs it (start-up included):

    python3 -m pytest tests/benchmarks/test_bench_verify.py --benchmark-enable -s
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from tests.conftest import REPO

CASES = {
    "paper-70pct": ("optimize", "--load", "0.7", "--json"),
    "paper-70pct-no-verify": ("optimize", "--load", "0.7", "--no-verify", "--json"),
    "mooncake-conversation-70pct": ("optimize", "--load", "0.7", "--trace", "mooncake-conversation", "--json"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_verified_optimize_wall_time(benchmark: BenchmarkFixture, case: str) -> None:
    """Wall time of one CLI run (fresh interpreter), printed by pytest-benchmark."""

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "prfaas_plan", *CASES[case]],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=300,
            check=False,
        )

    result = benchmark.pedantic(run, rounds=1, iterations=1)
    assert result.returncode == 0, result.stderr
