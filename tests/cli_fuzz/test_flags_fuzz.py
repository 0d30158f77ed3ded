"""Hostile flag values on the real command line (``optimize``, ``evaluate``, ``simulate``, ``kv``): every run
exits 0, 1 or 2, never prints a traceback, never prints NaN or infinity on success, and ends in bounded time.

Set PRFAAS_FUZZ_LOG to a file to append one JSON line per case (command, arguments, exit code, mishandled)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import REPO, examples

#: Per-case wall-time limit, s: a run past it is a hang.
HANG_S = 30.0
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


def _run(args: list[str]) -> tuple[int, str, str, float]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "160"}
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "prfaas_plan", *args],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=env,
            timeout=HANG_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return -1, "", "hang", HANG_S
    return done.returncode, done.stdout, done.stderr, time.perf_counter() - started


def _check(surface: str, args: list[str]) -> None:
    code, out, err, wall_s = _run(args)
    problems = []
    if code not in (0, 1, 2):
        problems.append(f"exit {code}")
    if "Traceback" in out + err:
        problems.append("traceback")
    if code == 0 and _NON_FINITE.search(out):
        problems.append(f"non-finite value in output: {_NON_FINITE.search(out)[0]!r}")  # type: ignore[index]
    log = os.environ.get("PRFAAS_FUZZ_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            record = {"surface": surface, "args": args, "code": code, "wall_s": wall_s, "problems": problems}
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
    """Hostile optimize flags: exit 0/1/2, no traceback, no NaN/inf on success, under HANG_S."""
    _check("optimize", args)


@settings(max_examples=examples(8), deadline=None)
@given(args=_cases("evaluate"))
def test_evaluate_flags(args: list[str]) -> None:
    """Hostile evaluate flags: exit 0/1/2, no traceback, no NaN/inf on success, under HANG_S."""
    _check("evaluate", args)


@settings(max_examples=examples(8), deadline=None)
@given(args=_cases("simulate"))
def test_simulate_flags(args: list[str]) -> None:
    """Hostile simulate flags: exit 0/1/2, no traceback, no NaN/inf on success, under HANG_S."""
    _check("simulate", args)


@settings(max_examples=examples(8), deadline=None)
@given(args=_cases("kv"))
def test_kv_flags(args: list[str]) -> None:
    """Hostile kv flags: exit 0/1/2, no traceback, no NaN/inf on success, under HANG_S."""
    _check("kv", args)
