"""Every reader of user files, each driven through the real command line, and the hostile inputs to feed them:
shared by ``tests/hostile/test_readers.py`` and ``tests/benchmarks/hostile_readers.py``.

Special files are the test's own: FIFOs it makes, device nodes made with ``os.mknod`` (a private copy of
``/dev/null`` or ``/dev/zero``, skipped where mknod is not allowed), never the machine's own ``/dev`` entries."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO

BENCH_FIXTURES = REPO / "tests" / "fixtures" / "bench_results"
#: A run longer than this is a hang (the CLI starts in about half a second; a refusal is immediate).
HANG_S = 25.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Reader:
    """One reader: its file suffix, a valid file of its kind (text), and the command that reads ``{file}``."""

    name: str
    suffix: str
    valid: Callable[[], str]
    argv: tuple[str, ...]


def _trace_jsonl() -> str:
    rows = [{"timestamp": 500 * i, "input_length": 2000 + 37 * i, "output_length": 200} for i in range(60)]
    return "".join(json.dumps(row) + "\n" for row in rows)


def _trace_csv() -> str:
    rows = [f"2023-11-16 18:{i // 60:02d}:{i % 60:02d}.0000000,{2000 + 37 * i},200" for i in range(60)]
    return "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n"


READERS = (
    Reader(
        name="scenario",
        suffix=".yaml",
        valid=lambda: (REPO / "workloads" / "paper-case-study.yaml").read_text(),
        argv=("optimize", "{file}"),
    ),
    Reader(
        name="hardware",
        suffix=".yaml",
        valid=lambda: (REPO / "hardware_profiles" / "h200.yaml").read_text(),
        argv=("kv", "--model", "paper-1t-hybrid", "--hardware", "{file}", "--length", "1000"),
    ),
    Reader(
        name="model_card",
        suffix=".yaml",
        valid=lambda: (REPO / "workloads" / "models" / "deepseek-v3.yaml").read_text(),
        argv=("model", "show", "{file}"),
    ),
    Reader(
        name="hf_config",
        suffix=".json",
        valid=lambda: (REPO / "tests" / "fixtures" / "hf_configs" / "llama-3.1-70b.json").read_text(),
        argv=("model", "import", "{file}"),
    ),
    Reader(
        name="trace_jsonl",
        suffix=".jsonl",
        valid=_trace_jsonl,
        argv=("simulate", "--trace", "{file}", "--requests", "50"),
    ),
    Reader(
        name="trace_csv", suffix=".csv", valid=_trace_csv, argv=("simulate", "--trace", "{file}", "--requests", "50")
    ),
    Reader(
        name="sweep_grid",
        suffix=".yaml",
        valid=lambda: "set:\n  slo.decode_tokens_per_s: [30, 40]\n",
        argv=("sweep", "--grid", "{file}", "-o", "{out}"),
    ),
    Reader(
        name="engine_profile",
        suffix=".yaml",
        valid=lambda: (REPO / "hardware_profiles" / "serving" / "engines" / "vllm.yaml").read_text(),
        argv=(
            "kv",
            "--model",
            "llama-3.1-8b",
            "--hardware",
            "h100",
            "--gpus",
            "1",
            "--engine",
            "{file}",
            "--length",
            "1000",
        ),
    ),
    Reader(
        name="bench_json",
        suffix=".json",
        valid=lambda: (BENCH_FIXTURES / "vllm-bench-serve-minimax-m2.5-conc4.json").read_text(),
        argv=("calibrate", "{file}", "--model", "minimax-m2.5", "--hardware", "h200", "--gpus", "8"),
    ),
    Reader(
        name="bench_csv",
        suffix=".csv",
        valid=lambda: (BENCH_FIXTURES / "aiperf-0.1.1-profile-export-gpt-oss-20b-conc100.csv").read_text(),
        argv=("calibrate", "{file}", "--model", "gpt-oss-120b", "--hardware", "h100", "--gpus", "1"),
    ),
    Reader(
        name="dynamics",
        suffix=".yaml",
        valid=lambda: "dynamics:\n  faults:\n    - {pool: decode, at_s: 5, count: 1, restore_s: 10}\n",
        argv=("simulate", "--dynamics", "{file}", "--requests", "50"),
    ),
)


def _mknod(path: Path, minor: int) -> bool:
    """A private character device node (major 1: minor 3 is a null device, 5 a zero device); False if refused."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, minor))
    except OSError:
        return False
    return True


def _deep(reader: Reader, depth: int) -> str:
    return "[" * depth + "]" * depth + ("\n" if reader.suffix != ".json" else "")


def _long_digits(reader: Reader, digits: int) -> str:
    number = "7" * digits
    # A trace's long number is its first request: ``simulate --requests 50`` reads only the rows it replays.
    if reader.suffix == ".jsonl":
        first = json.dumps({"timestamp": 0, "input_length": 1, "output_length": 1})
        return first.replace('"input_length": 1', f'"input_length": {number}') + "\n" + _trace_jsonl()
    if reader.suffix == ".csv":
        header, rows = _trace_csv().split("\n", 1)
        return f"{header}\n2023-11-16 18:00:00.0000000,{number},5\n{rows}"
    if reader.suffix == ".json":
        return '{"hidden_size": ' + number + "}"
    return f"value: {number}\n"


#: Each case makes the hostile input at ``path`` (returns False when it cannot be made here) and names what a
#: correct run does: "refuse" (exit 2) or "any" (exit 0, 1 or 2: a well-formed variant of a valid file).
CASES: dict[str, tuple[str, Callable[[Reader, Path], bool]]] = {
    "fifo": ("refuse", lambda r, p: _done(os.mkfifo, p)),
    "device_copy": ("refuse", lambda r, p: _mknod(p, 3)),
    "directory": ("refuse", lambda r, p: _done(p.mkdir)),
    "dangling_symlink": ("refuse", lambda r, p: _done(p.symlink_to, p.with_name("never-there" + r.suffix))),
    "zero_device": ("refuse", lambda r, p: _mknod(p, 5)),
    "huge_sparse": ("refuse", lambda r, p: _done(os.truncate, _touch(p), (1 << 30) + 1)),
    "deep": ("refuse", lambda r, p: _write(p, _deep(r, 10_000))),
    "long_digits": ("refuse", lambda r, p: _write(p, _long_digits(r, 5000))),
    "nul_bytes": ("refuse", lambda r, p: _write_bytes(p, r.valid().encode()[:40] + b"\0" * 64 + b"\n")),
    "invalid_utf8": ("refuse", lambda r, p: _write_bytes(p, r.valid().encode()[:40] + b"\xff\xfe\xc0\n")),
    "crlf": ("any", lambda r, p: _write_bytes(p, r.valid().replace("\n", "\r\n").encode())),
    "empty": ("refuse", lambda r, p: _write(p, "")),
}


def _done(make: Callable[..., None], *args: object) -> bool:
    make(*args)
    return True


def _touch(path: Path) -> Path:
    path.touch()
    return path


def _write(path: Path, text: str) -> bool:
    path.write_text(text)
    return True


def _write_bytes(path: Path, data: bytes) -> bool:
    path.write_bytes(data)
    return True


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What one run did: its exit status (None: killed as a hang), whether stderr held a traceback, and stderr."""

    reader: str
    case: str
    expect: str
    status: int | None
    traceback: bool
    stderr: str
    wall_s: float

    @property
    def kind(self) -> str:
        """hang, traceback, or exit N."""
        if self.status is None:
            return "hang"
        return "traceback" if self.traceback else f"exit {self.status}"

    @property
    def ok(self) -> bool:
        """No hang, no traceback, and the exit status the case calls for."""
        if self.status is None or self.traceback:
            return False
        return self.status == 2 if self.expect == "refuse" else self.status in (0, 1, 2)


def prepare(reader: Reader, case: str, directory: Path) -> Path | None:
    """Make ``case``'s input for ``reader`` in ``directory``; None when this machine cannot make it."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"input{reader.suffix}"
    return path if CASES[case][1](reader, path) else None


def run(reader: Reader, case: str, path: Path, directory: Path) -> Outcome:
    """Run the reader's command on ``path`` in a fresh interpreter (killed after ``HANG_S``)."""
    argv = [part.format(file=path, out=directory / "rows.csv") for part in reader.argv]
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "120"}
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "prfaas_plan", *argv],
            capture_output=True,
            text=True,
            errors="replace",
            cwd=directory,
            env=env,
            timeout=HANG_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        status: int | None = done.returncode
        stderr = done.stderr
    except subprocess.TimeoutExpired as expired:
        status = None
        stderr = expired.stderr.decode("utf-8", "replace") if isinstance(expired.stderr, bytes) else ""
    return Outcome(
        reader=reader.name,
        case=case,
        expect=CASES[case][0],
        status=status,
        traceback="Traceback (most recent call last)" in stderr,
        stderr=stderr[-2000:],
        wall_s=time.perf_counter() - start,
    )


def run_row(reader: Reader, cases: list[tuple[str, Path, Path]], hang_s: int = 10) -> list[Outcome]:
    """Run ``reader`` on every (case, input, directory) in ONE fresh interpreter (``tests.hostile.cli_driver``):
    the real entry point each time, an alarm for hangs; the whole row killed after ``hang_s`` per case."""
    jobs = [
        {"argv": [part.format(file=path, out=directory / "rows.csv") for part in reader.argv], "cwd": str(directory)}
        for _, path, directory in cases
    ]
    work = cases[0][2].parent if cases else Path(".")
    jobs_path, results_path = work / f"{reader.name}-jobs.json", work / f"{reader.name}-results.json"
    jobs_path.write_text(json.dumps(jobs))
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "120"}
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "tests.hostile.cli_driver", str(jobs_path), str(results_path), str(hang_s)],
        cwd=REPO,
        env=env,
        timeout=hang_s * (len(cases) + 1),
        check=True,
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )
    wall_s = (time.perf_counter() - start) / max(len(cases), 1)
    results = json.loads(results_path.read_text())
    return [
        Outcome(
            reader=reader.name,
            case=case,
            expect=CASES[case][0],
            status=result["status"],
            traceback="Traceback (most recent call last)" in result["stderr"],
            stderr=result["stderr"],
            wall_s=wall_s,
        )
        for (case, _, _), result in zip(cases, results, strict=True)
    ]
