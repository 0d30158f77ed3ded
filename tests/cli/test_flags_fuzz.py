"""Hostile flag values on the real command line (``optimize``, ``evaluate``, ``simulate``, ``kv``): every run
exits 0, 1 or 2, never prints a traceback, never prints NaN or infinity on success, and ends in bounded time
and memory.

Set PRFAAS_FUZZ_LOG to a file to append one JSON line per case (command, arguments, exit code, wall time, peak
memory, mishandled)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import REPO, examples

#: Per-case wall-time limit, s: a run past it is a hang.
HANG_S = 30.0
#: Per-case peak resident memory limit, bytes. A bounded run (numpy, the built-in cards, a simulation of at
#: most 5,000 requests) peaks at a few hundred MiB; the unbounded allocations fuzzing looks for (an array per
#: instance of a 1e12-instance pool, a PiB batch) go far past this, or fail with MemoryError, long before.
MEMORY_LIMIT_BYTES = 2**30
#: ``python -m prfaas_plan`` with the process's peak resident memory written, on the way out, to the file named
#: by the first argument. The child measures itself because the kernel's count for a child (``wait4``,
#: RUSAGE_CHILDREN) starts from the parent's own peak when the child is spawned by vfork, as subprocess does:
#: /proc's VmHWM is the high-water mark of the executed program alone. Elsewhere than Linux it falls back to
#: ru_maxrss, an upper bound.
_MEASURED_MAIN = """
import resource, runpy, sys
peak_file = sys.argv.pop(1)
try:
    runpy.run_module("prfaas_plan", run_name="__main__", alter_sys=True)
finally:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            peak = 1024 * int(next(line.split()[1] for line in status if line.startswith("VmHWM:")))
    except (OSError, StopIteration):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    with open(peak_file, "w", encoding="ascii") as out:
        out.write(str(peak))
"""
_NON_FINITE = re.compile(r"(?<![\w.])-?(nan|inf|infinity)(?![\w])", re.IGNORECASE)

HOSTILE = (
    "nan", "inf", "-inf", "NaN", "Infinity", "0", "-0", "-1", "1e308", "1e-300", "-1e-300", "1e12", "1e9",
    "10000000000000000000000000000000", "-10000000000000000000000000000000", "abc", "", " ", "0x10", "1,5",
    "0.5", "3", "1e-9", "10001",
)  # fmt: skip
_VALUES = st.one_of(
    st.sampled_from(HOSTILE),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(10**40), max_value=10**40).map(str),
)

_PLAN = ["--threshold", "19400", "--n-pd-prefill", "3", "--n-pd-decode", "5"]
#: (base arguments, flags whose values are drawn). The base keeps a case short (small runs, no
#: verification); a drawn flag given again overrides the base's value (the last occurrence wins).
SURFACES: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "optimize": (
        ["optimize", "--no-verify"],
        (
            "--bandwidth-gbit-per-s", "--n-prfaas", "--n-local", "--resolution-tokens", "--ttft-p90-s", "--rate",
            "--load", "--replications", "--verify-requests", "--seed", "--objective",
        ),
    ),
    "evaluate": (
        ["evaluate", "--no-verify", *_PLAN],
        (
            "--threshold", "--n-pd-prefill", "--n-pd-decode", "--bandwidth-gbit-per-s", "--n-prfaas", "--rate",
            "--load", "--replications", "--verify-requests", "--seed",
        ),
    ),
    "simulate": (
        ["simulate", "--requests", "1000"],
        (
            "--rate", "--load", "--seed", "--threshold", "--n-pd-prefill", "--n-pd-decode",
            "--bandwidth-gbit-per-s", "--n-prfaas", "--n-local", "--decode-kv-gib", "--warmup", "--requests",
        ),
    ),
    "kv": (
        ["kv", "--model", "minimax-m2.5", "--hardware", "h200"],
        ("--gpus", "--length", "--compute-efficiency", "--memory-efficiency", "--overhead-s", "--method"),
    ),
}  # fmt: skip


def _bounded(flag: str, value: str) -> str:
    """Keep --requests below a long run (a valid count up to 10 million takes a minute: bounded, but slow
    for a fuzz case); every other value is passed as drawn."""
    if flag == "--requests":
        try:
            if float(value) > 5_000:
                return "5000"
        except ValueError:
            pass
    return value


def _run(args: list[str]) -> tuple[int, str, str, float, int | None]:
    """Exit code, stdout, stderr, wall time (s) and peak resident memory (bytes; None after a hang)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "160"}
    handle, name = tempfile.mkstemp(prefix="prfaas-fuzz-peak-")
    os.close(handle)
    peak_file = Path(name)
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-c", _MEASURED_MAIN, str(peak_file), *args],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=env,
            timeout=HANG_S,
            check=False,
        )
        wall_s = time.perf_counter() - started
        written = peak_file.read_text()
    except subprocess.TimeoutExpired:
        return -1, "", "hang", HANG_S, None
    finally:
        peak_file.unlink(missing_ok=True)
    return done.returncode, done.stdout, done.stderr, wall_s, int(written) if written else None


def _check(surface: str, args: list[str]) -> None:
    code, out, err, wall_s, peak_bytes = _run(args)
    problems = []
    if code not in (0, 1, 2):
        problems.append(f"exit {code}")
    if "Traceback" in out + err:
        problems.append("traceback")
    if code == 0 and _NON_FINITE.search(out):
        problems.append(f"non-finite value in output: {_NON_FINITE.search(out)[0]!r}")  # type: ignore[index]
    if code != -1 and peak_bytes is None:
        problems.append("peak memory not reported")
    if peak_bytes is not None and peak_bytes > MEMORY_LIMIT_BYTES:
        problems.append(f"peak memory {peak_bytes / 2**20:,.0f} MiB over {MEMORY_LIMIT_BYTES / 2**20:,.0f} MiB")
    log = os.environ.get("PRFAAS_FUZZ_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            record = {
                "surface": surface,
                "args": args,
                "code": code,
                "wall_s": wall_s,
                "peak_bytes": peak_bytes,
                "problems": problems,
            }
            handle.write(json.dumps(record) + "\n")
    assert not problems, f"{' '.join(args)!r}: {problems}\n{err[-2000:]}"


def _cases(surface: str) -> st.SearchStrategy[list[str]]:
    base, flags = SURFACES[surface]
    pairs = st.lists(st.tuples(st.sampled_from(flags), _VALUES), min_size=1, max_size=3)
    return st.tuples(pairs, st.booleans()).map(
        lambda drawn: [
            *base,
            *(part for flag, value in drawn[0] for part in (flag, _bounded(flag, value))),
            *(["--json"] if drawn[1] else []),
        ]
    )


@settings(max_examples=examples(8), deadline=None)
@given(args=_cases("optimize"))
def test_optimize_flags(args: list[str]) -> None:
    """Hostile optimize flags: exit 0/1/2, no traceback, no NaN/inf on success, under HANG_S and MEMORY_LIMIT_BYTES."""
    _check("optimize", args)


@settings(max_examples=examples(8), deadline=None)
@given(args=_cases("evaluate"))
def test_evaluate_flags(args: list[str]) -> None:
    """Hostile evaluate flags: exit 0/1/2, no traceback, no NaN/inf on success, under HANG_S and MEMORY_LIMIT_BYTES."""
    _check("evaluate", args)


@settings(max_examples=examples(8), deadline=None)
@given(args=_cases("simulate"))
def test_simulate_flags(args: list[str]) -> None:
    """Hostile simulate flags: exit 0/1/2, no traceback, no NaN/inf on success, under HANG_S and MEMORY_LIMIT_BYTES."""
    _check("simulate", args)


@settings(max_examples=examples(8), deadline=None)
@given(args=_cases("kv"))
def test_kv_flags(args: list[str]) -> None:
    """Hostile kv flags: exit 0/1/2, no traceback, no NaN/inf on success, under HANG_S and MEMORY_LIMIT_BYTES."""
    _check("kv", args)
