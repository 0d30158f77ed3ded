"""The entry point runs BLAS on one thread unless the environment chose a count (``cli/entry.py``).

Each case runs in a fresh interpreter: OpenBLAS reads its thread count once, when numpy (or scipy) loads it.
Threads are counted in ``/proc/self/task`` (Linux).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

_CHOICES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
_PROC = Path("/proc/self/task").is_dir()


def _env(**extra: str) -> dict[str, str]:
    """This environment without any thread choice, plus ``extra`` and the repository on the path."""
    env = {k: v for k, v in os.environ.items() if k not in _CHOICES}
    env.update(extra, PYTHONPATH=str(REPO))
    return env


def _python(code: str, **extra: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(**extra), cwd=REPO, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


_SETTING = """
import os, sys
from prfaas_plan.cli import entry
assert "numpy" not in sys.modules, "numpy was imported before the entry point could set its thread count"
entry.one_blas_thread(os.environ)
print(os.environ.get("OPENBLAS_NUM_THREADS"))
"""


def test_one_thread_is_set_where_nothing_was_chosen_and_a_choice_stands() -> None:
    assert _python(_SETTING) == "1"
    assert _python(_SETTING, OPENBLAS_NUM_THREADS="3") == "3"
    # A count chosen through the other two variables is left to OpenBLAS to read: nothing is set over it.
    assert _python(_SETTING, OMP_NUM_THREADS="2") == "None"
    assert _python(_SETTING, GOTO_NUM_THREADS="2") == "None"
    # An empty value, 0 or a word chooses nothing (OpenBLAS would start its whole pool): one thread is set.
    assert _python(_SETTING, OPENBLAS_NUM_THREADS="") == "1"
    assert _python(_SETTING, OPENBLAS_NUM_THREADS="0") == "1"
    assert _python(_SETTING, OMP_NUM_THREADS="many") == "1"
    assert _python(_SETTING, OPENBLAS_NUM_THREADS="0", OMP_NUM_THREADS="2") == "0"


# The real command, through the entry point; the thread count is printed at exit, after numpy and scipy.special
# (the goodput search imports it) are loaded and used.
_COMMAND = """
import atexit, os, sys
atexit.register(lambda: print(len(os.listdir("/proc/self/task")), file=sys.stderr))
sys.argv = ["prfaas-plan", "optimize", "--objective", "goodput", "--ttft-p90-s", "5", "--no-verify", "--json"]
from prfaas_plan.cli.entry import main
main()
"""


def _command_threads(**extra: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", _COMMAND], capture_output=True, text=True, env=_env(**extra), cwd=REPO, check=False
    )
    assert done.returncode == 0, done.stderr
    return int(done.stderr.strip().splitlines()[-1])


@pytest.mark.skipif(not _PROC, reason="threads are counted in /proc/self/task (Linux)")
def test_the_command_runs_on_one_thread() -> None:
    """On a machine of one core OpenBLAS starts no pool either way, and this cannot fail (the control below is
    skipped there)."""
    assert _command_threads() == 1


@pytest.mark.skipif(not _PROC or (os.cpu_count() or 1) < 2, reason="needs /proc and two cores to see a pool")
def test_a_chosen_count_stands_in_the_command() -> None:
    """The control: with two threads chosen, OpenBLAS starts its pool (so the count above can fail)."""
    assert _command_threads(OPENBLAS_NUM_THREADS="2") > 1
