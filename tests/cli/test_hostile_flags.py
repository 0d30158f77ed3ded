"""Hostile flags, traces, output paths and signals on the real command line: exit 2 naming the flag or the
file (never a traceback), bounded work, no file left behind, 130 on Ctrl-C and 143 on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO, default_signals, run_cli

_PLAN = ("--threshold", "19400", "--n-pd-prefill", "3", "--n-pd-decode", "5")
_HF = str(REPO / "tests" / "fixtures" / "hf_configs" / "llama-3.1-70b.json")
_KV = ("kv", "--model", "minimax-m2.5", "--hardware", "h200")


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (("optimize", "--no-verify", "--resolution-tokens", "nan"), "--resolution-tokens"),
        (("optimize", "--no-verify", "--resolution-tokens", "inf"), "--resolution-tokens"),
        (
            ("simulate", "--requests", "500", "--threshold", "nan", "--n-pd-prefill", "3", "--n-pd-decode", "5"),
            "--threshold",
        ),
        ((*_KV, "--compute-efficiency", "nan"), "--compute-efficiency"),
        ((*_KV, "--overhead-s", "inf"), "--overhead-s"),
        ((*_KV, "--overhead-s", "1e308"), "--overhead-s"),
        (("optimize", "--rate", "1e300", "--no-verify"), "--rate"),
        (
            ("evaluate", "--threshold", "1e300", "--n-pd-prefill", "3", "--n-pd-decode", "5", "--no-verify"),
            "--threshold",
        ),
        (("simulate", "--rate", "1e300", "--requests", "500"), "--rate"),
        (("simulate", "--threshold", "1e300", "--requests", "500"), "--threshold"),
        ((*_KV, "--length", "1000000000000"), "--length"),
        ((*_KV, "--gpus", "1000000000000"), "--gpus"),
        (("simulate", "--requests", "500", "--seed", "-1"), "--seed"),
        (("optimize", "--no-verify", "--n-prfaas", "1000000000000"), "--n-prfaas"),
        (("optimize", "--no-verify", "--n-local", "1000000000"), "--n-local"),
        (("simulate", "--requests", "500", "--n-local", "1000000000"), "--n-local"),
        (("evaluate", "--no-verify", *_PLAN, "--n-prfaas", "1000000000000"), "--n-prfaas"),
        (("optimize", "--no-verify", "--objective", "goodput", "--ttft-p90-s", "5", "--n-local", "10001"), "--n-local"),
        (("simulate", "--requests", "2000", "--rate", "1e-9"), "span"),
        (("simulate", "--requests", "2000", "--bandwidth-gbit-per-s", "1e-9"), "--bandwidth-gbit-per-s"),
        (("optimize", "--no-verify", "--bandwidth-gbit-per-s", "1e300"), "--bandwidth-gbit-per-s"),
        (("simulate", "--requests", "500", "--decode-kv-gib", "inf"), "--decode-kv-gib"),
        (("simulate", "--requests", "500", "--records", ""), "--records"),
        (("simulate", "--requests", "500", "--records", "/"), "--records"),
        (("simulate", "--requests", "500", "--records", "/proc/records.csv"), "--records"),
        (("simulate", "--requests", "500", "--records", "."), "--records"),
        (("simulate", "--requests", "0"), "--requests"),
        (("model", "import", _HF, "--out", "/proc/card.yaml"), "--out"),
        (("model", "import", _HF, "--out", "/"), "--out"),
        (("model", "import", _HF, "--out", ""), "--out"),
        (("model", "import", _HF, "--out", "/tmp"), "--out"),
        (("validate", "kernel", "--profile-out", "/proc/profile.yaml"), "--profile-out"),
        (("validate", "kernel", "--profile-out", "/"), "--profile-out"),
    ],
)
def test_hostile_flag_exits_2_naming_it(args: tuple[str, ...], names: str) -> None:
    """A hostile flag value exits 2 with a line naming the flag (or the bound), and no traceback."""
    result = run_cli(*args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert names in result.stderr


def test_long_simulated_span_is_refused_before_running() -> None:
    """A rate so low that the run would span years of simulated time is refused, not a MemoryError."""
    result = run_cli("simulate", "--requests", "2000", "--rate", "1e-9")
    assert result.returncode == 2
    assert "1e+07 s" in result.stderr


def test_records_directory_is_refused_before_the_run(tmp_path: Path) -> None:
    """--records naming a directory exits 2 at once, naming the flag, and writes nothing."""
    started = time.perf_counter()
    result = run_cli("simulate", "--requests", "5000000", "--records", str(tmp_path))
    assert result.returncode == 2
    assert "--records" in result.stderr and "directory" in result.stderr
    assert time.perf_counter() - started < 20  # five million requests would take far longer
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("tokens.jsonl", '{"timestamp": 0, "input_length": 1000000000000, "output_length": 10}\n', ":1 input_length"),
        (
            "span.jsonl",
            "".join(f'{{"timestamp": {t}, "input_length": 100, "output_length": 10}}\n' for t in (0, 1e15, 2e15)),
            "366 days",
        ),
        (
            "field.csv",
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68," + "1" * 140_000 + ",10\n",
            ":2",
        ),
        ("zero.jsonl", '{"timestamp": 0, "input_length": 0, "output_length": 0}\n', "0 output tokens"),
        ("empty.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n", "no requests"),
    ],
    ids=["tokens-1e12", "span-1e15-ms", "csv-field-140k", "zero-output", "empty-csv"],
)
@pytest.mark.parametrize(
    "command", [("simulate", "--requests", "200"), ("optimize", "--no-verify")], ids=["simulate", "optimize"]
)
def test_hostile_trace_names_the_file(
    tmp_path: Path, name: str, text: str, expected: str, command: tuple[str, ...]
) -> None:
    """A trace with absurd lengths, spans or fields exits 2 naming the trace file (not a flag)."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    result = run_cli(*command, "--trace", str(path))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert str(path) in result.stderr and expected in result.stderr
    assert "--requests" not in result.stderr


def _start(
    tmp_path: Path, requests: int, *extra: str, preexec: Callable[[], None] = default_signals
) -> subprocess.Popen[str]:
    """``simulate`` of ``requests`` requests writing records into ``tmp_path``, started with ``preexec``."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = ["simulate", "--requests", str(requests), "--records", str(tmp_path / "records.csv"), *extra]
    return subprocess.Popen(
        [sys.executable, "-m", "prfaas_plan", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
        preexec_fn=preexec,
    )


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_during_the_run_exits_with_one_line(tmp_path: Path, sig: signal.Signals, code: int) -> None:
    """SIGINT (Ctrl-C) exits 130 and SIGTERM 143, each with one line and no traceback, leaving no file."""
    process = _start(tmp_path, 2_000_000)
    try:
        time.sleep(1.5)
        process.send_signal(sig)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == code, err
    assert "Traceback" not in err
    assert err.strip().count("\n") == 0 and sig.name in err
    assert list(tmp_path.iterdir()) == []


def _ignore_sighup() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as nohup leaves it


def test_an_inherited_ignored_sighup_stays_ignored(tmp_path: Path) -> None:
    """Under nohup (SIGHUP ignored when the process starts) a hangup during the run changes nothing: the run
    completes, exit 0, its records written."""
    process = _start(tmp_path, 1_000_000, "--json", preexec=_ignore_sighup)
    try:
        time.sleep(1.5)
        assert process.poll() is None, "the run ended before the hangup: the check would prove nothing"
        process.send_signal(signal.SIGHUP)
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert (tmp_path / "records.csv").stat().st_size > 0


def _partial_with_data(folder: Path) -> bool:
    """Whether a temporary records file with data is in ``folder`` now (it may vanish while we look)."""
    for entry in folder.iterdir():
        try:
            if entry.name.endswith(".tmp") and entry.stat().st_size > 0:
                return True
        except FileNotFoundError:
            continue
    return False


def test_sigterm_while_writing_records_leaves_no_file(tmp_path: Path) -> None:
    """SIGTERM while the records are being written removes the temporary file and writes no records. The
    signal must land during the write: a run that finishes first is repeated with four times the requests
    (three tries), so the test never passes without having checked it."""
    for attempt, requests in enumerate((400_000, 1_600_000, 6_400_000)):
        folder = tmp_path / f"try{attempt}"
        folder.mkdir()
        process = _start(folder, requests)
        try:
            caught = False
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and process.poll() is None:
                if _partial_with_data(folder):
                    caught = True
                    process.send_signal(signal.SIGTERM)
                    break
                time.sleep(0.005)
            _, err = process.communicate(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
        if caught and process.returncode != 0:
            assert process.returncode == 143, err
            assert "Traceback" not in err
            assert list(folder.iterdir()) == []
            return
    pytest.fail("three runs finished writing their records before a SIGTERM could land during the write")


_ONE = '{"timestamp": 0, "input_length": 100, "output_length": 5}\n'
_TWO_EMPTY_INPUTS = (
    '{"timestamp": 0, "input_length": 0, "output_length": 5}\n{"timestamp": 5, "input_length": 0, "output_length": 0}\n'
)


@pytest.mark.parametrize(
    ("text", "args"),
    [
        (_ONE, ("optimize", "--no-verify", "--load", "0.5")),
        (_ONE, ("optimize", "--objective", "goodput", "--ttft-p90-s", "5", "--replications", "2")),
        (_ONE, ("evaluate", "--no-verify", *_PLAN, "--rate", "1")),
        (_TWO_EMPTY_INPUTS, ("simulate", "--requests", "100", "--seed", "3")),
    ],
    ids=["optimize-load", "optimize-goodput", "evaluate-rate", "simulate-bootstrap"],
)
def test_tiny_trace_names_the_file(tmp_path: Path, text: str, args: tuple[str, ...]) -> None:
    """A trace too short to rescale to a rate or to resample exits 2 naming the file, not a ValueError."""
    path = tmp_path / "tiny.jsonl"
    path.write_text(text, encoding="utf-8")
    result = run_cli(*args, "--trace", str(path))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert str(path) in result.stderr
