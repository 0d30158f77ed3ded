"""cli.streams: a stdout that cannot encode the tables' characters gets their ASCII spelling, not a traceback."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO


def _run_ascii(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "160", "LC_ALL": "C", "PYTHONIOENCODING": "ascii"}
    return subprocess.run(
        [sys.executable, "-m", "prfaas_plan", *args], capture_output=True, cwd=REPO, env=env, timeout=120, check=False
    )


def test_a_c_locale_with_ascii_io_prints_the_table_in_ascii() -> None:
    """``32×h200`` in the title used to end in UnicodeEncodeError (exit 1, a traceback)."""
    result = _run_ascii("optimize")
    assert result.returncode == 0, result.stderr.decode("ascii", "replace")
    out = result.stdout.decode("ascii")  # raises if any byte is not ASCII
    assert "32xh200" in out and b"Traceback" not in result.stderr


def test_help_and_errors_in_ascii_too() -> None:
    helped = _run_ascii("optimize", "--help")
    assert helped.returncode == 0 and b"Traceback" not in helped.stderr
    failed = _run_ascii("optimize", "no-such-scenario.yaml")
    assert failed.returncode == 2 and failed.stderr.decode("ascii").strip().count("\n") == 0
