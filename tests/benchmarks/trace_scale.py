"""How a planning run scales with the trace it reads: wall time and peak memory of ``optimize --trace FILE --load
0.7 --no-verify`` on generated Azure CSV traces of N requests (1,000 per second, lengths 1,000-5,999 tokens, 100
output tokens), the numbers behind ``io.guard.TRACE_LIMITS`` (6 million lines: about 4 GB and a minute).

A script, not a pytest test: each size runs in a fresh interpreter (its peak resident set is its own, read from
``ru_maxrss`` of the finished child). ``--root`` measures another copy of the code (a ``git archive`` of an older
commit), so before/after tables come from one script. The generated files are deleted afterwards.

Example::

    python3 -m tests.benchmarks.trace_scale --sizes 1000000 6000000
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def write_trace(path: Path, rows: int) -> None:
    """An Azure 2023 CSV of ``rows`` requests, one per millisecond."""
    with path.open("w") as handle:
        handle.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
        for i in range(rows):
            stamp = (
                f"2023-11-16 {i // 3_600_000:02d}:{i // 60_000 % 60:02d}:{i // 1000 % 60:02d}.{i % 1000 * 10_000:07d}"
            )
            handle.write(f"{stamp},{1000 + i % 5000},100\n")


def measure(root: Path, trace: Path) -> tuple[float, float, int]:
    """(seconds, peak MiB, exit status) of one run in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    argv = [sys.executable, "-m", "prfaas_plan", "optimize", "--trace", str(trace), "--load", "0.7", "--no-verify"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=root, capture_output=True, check=False)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux; the largest child so far
    return seconds, max(peak, before) / 1024.0, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--root", type=Path, default=REPO, help="the copy of the code to measure")
    args = parser.parse_args()
    print("| requests | seconds | peak MiB | exit |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        for rows in sorted(args.sizes):  # ascending: ru_maxrss of children is the largest so far
            trace = Path(scratch) / f"trace-{rows}.csv"
            write_trace(trace, rows)
            seconds, peak, status = measure(args.root, trace)
            trace.unlink()
            print(f"| {rows:,} | {seconds:.1f} | {peak:,.0f} | {status} |", flush=True)


if __name__ == "__main__":
    main()
