"""A signal while ``sweep`` starts its local worker pool (the fork server importing the evaluation code, the
first workers being forked and sent their queues): exit 128 + signal with one line, and no traceback from any
process of the run, even one printed after the parent has gone; no process, temporary directory or named
semaphore left behind.

Before the fix, SIGTERM to the parent here made a worker print a FileNotFoundError traceback (the parent's exit
had unlinked the queue semaphores it was still reading), Ctrl-C to the process group made the fork server print
a KeyboardInterrupt traceback, and SIGHUP to the group killed multiprocessing's resource tracker, whose
replacement printed a KeyError traceback per semaphore. Linux only: the run's processes are found in /proc."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, default_signals

GRID = ("--set", "deployment.local.instances=8,16,24")
#: How long after the fork server appears the signal is sent: its imports take a few tenths of a second,
#: and the first workers are forked and sent their queues right after.
WINDOW_S = 0.4

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat_text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat_text.rsplit(")", 1)[-1].split()
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def _is_fork_server(pid: int) -> bool:
    try:
        return b"multiprocessing.forkserver" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _session_alive(session: int) -> list[int]:
    alive = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if int(fields[3]) == session and fields[0] != "Z":
            alive.append(int(entry))
    return alive


def _semaphores() -> set[str]:
    try:
        return {name for name in os.listdir("/dev/shm") if name.startswith("sem.mp-")}
    except OSError:
        return set()


def _leaked(names: set[str]) -> set[str]:
    """Those of ``names`` (named semaphores in /dev/shm) that still exist and that no live process has mapped:
    left behind. (Another run on the machine may make its own while this one runs: those it still uses are
    mapped by its processes.)"""
    mapped: set[str] = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                maps = Path(f"/proc/{entry}/maps").read_text()
            except OSError:
                continue
            mapped.update(name for name in names if name in maps)
    return {name for name in names if (Path("/dev/shm") / name).exists()} - mapped


@pytest.mark.parametrize(
    ("signum", "group", "seed"),
    [
        (signal.SIGTERM, False, 1),
        (signal.SIGTERM, False, 2),
        (signal.SIGINT, True, 3),
        (signal.SIGHUP, True, 4),
    ],
    ids=["SIGTERM-parent-1", "SIGTERM-parent-2", "SIGINT-group", "SIGHUP-group"],
)
def test_a_signal_while_the_pool_starts_leaves_no_traceback_and_nothing_behind(
    tmp_path: Path, signum: int, group: bool, seed: int
) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(temp)}
    semaphores_before = _semaphores()
    err_path = tmp_path / "stderr"
    with err_path.open("wb") as err:  # a file: a process still writing after the parent exits is read too
        proc = subprocess.Popen(
            [sys.executable, "-m", "prfaas_plan", "sweep", *GRID, "-o", "rows.csv", "--workers", "2"],
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
            preexec_fn=default_signals,
        )
    try:
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            if any(_is_fork_server(child) for child in _children(proc.pid)):
                break
            time.sleep(0.002)
        assert proc.poll() is None, "the sweep ended before its fork server was seen"
        time.sleep(random.Random(seed).uniform(0.0, WINDOW_S))
        if group:
            os.killpg(proc.pid, signum)  # as a terminal does: Ctrl-C, or hanging up
        else:
            proc.send_signal(signum)  # as kill does
        code = proc.wait(timeout=60)
        deadline = time.monotonic() + 15
        while _session_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = _session_alive(proc.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    stderr = err_path.read_text(errors="replace")
    assert "Traceback" not in stderr, stderr
    assert code in (128 + signum, 0), stderr  # 0: the three points finished before the signal
    if code:
        lines = [line for line in stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("interrupted ("), stderr
    assert left == [], "processes of the run still alive 15 s after it exited"
    assert os.listdir(temp) == []
    leaked = _leaked(_semaphores() - semaphores_before)
    deadline = time.monotonic() + 10
    while leaked and time.monotonic() < deadline:  # one another run had just made, or was removing: it goes
        time.sleep(0.2)
        leaked = _leaked(leaked)
    assert leaked == set()
    assert sorted(os.listdir(work)) in ([], ["rows.csv"])
