"""cli.sweep: worker processes past the open-file limit are one line naming --workers, exit 2."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


def _sweep_with_file_limit(limit: int, out: Path, workers: str) -> subprocess.CompletedProcess[str]:
    def lower_limit() -> None:
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))

    args = ["sweep", "--set", "slo.decode_tokens_per_s=30,40", "--workers", workers, "-o", str(out)]
    return subprocess.run(
        [sys.executable, "-m", "prfaas_plan", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
        check=False,
        preexec_fn=lower_limit,
    )


@pytest.mark.parametrize("limit", [16, 20])
def test_four_workers_under_a_small_open_file_limit_is_one_line(tmp_path: Path, limit: int) -> None:
    """ulimit -n 16 with --workers 4 ended in OSError (Too many open files) from os.pipe, with a traceback."""
    result = _sweep_with_file_limit(limit, tmp_path / "rows.csv", "4")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --workers:") and f"limit is {limit}" in lines[0]
