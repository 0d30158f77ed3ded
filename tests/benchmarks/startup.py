"""Start-up benchmark: `prfaas-plan optimize --json` on the built-in scenario against a bare
`python -c 'import numpy, typer, rich'`, on a normal (non-editable) install of the working tree.

    python3 tests/benchmarks/startup.py [--runs 15] [--keep VENV]

It builds a wheel of the repository, installs it without dependencies into a virtual environment that sees
this interpreter's site-packages (so numpy, scipy, typer and rich are the same builds), and times each command
end to end (process start to exit) as the median of --runs runs after one warm-up. It reports; it never
asserts (issue 19's target: optimize within 1.5x of the bare imports).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _install(venv: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    with tempfile.TemporaryDirectory() as wheels:
        subprocess.run(
            [str(python), "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", wheels, str(ROOT)],
            check=True,
        )
        wheel = next(Path(wheels).glob("prfaas_plan-*.whl"))
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(wheel)], check=True
        )
    return python


def _time(argv: list[str], runs: int, cwd: Path) -> list[float]:
    subprocess.run(argv, check=True, capture_output=True, cwd=cwd)  # warm-up (page cache, .pyc)
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, cwd=cwd)
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--keep", type=Path, default=None, help="use (or create) this virtual environment")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        venv = args.keep or Path(tmp) / "venv"
        python = venv / "bin" / "python" if (venv / "bin" / "python").exists() and args.keep else _install(venv)
        cli = venv / "bin" / "prfaas-plan"
        cases = {
            "bare: python -c 'import numpy, typer, rich'": [str(python), "-c", "import numpy, typer, rich"],
            "prfaas-plan --version": [str(cli), "--version"],
            "prfaas-plan optimize --json": [str(cli), "optimize", "--json"],
            "prfaas-plan optimize (table)": [str(cli), "optimize"],
        }
        results = {name: _time(argv, args.runs, Path(tmp)) for name, argv in cases.items()}
    bare = statistics.median(next(iter(results.values())))
    print(f"{'command':48s} {'median s':>9s} {'min s':>7s} {'x bare':>7s}")
    for name, times in results.items():
        median = statistics.median(times)
        print(f"{name:48s} {median:9.3f} {min(times):7.3f} {median / bare:7.2f}")


if __name__ == "__main__":
    main()
