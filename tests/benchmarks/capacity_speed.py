"""Wall time and peak memory of the capacity commands, each in a fresh interpreter (a benchmark, not a test).

    python3 tests/benchmarks/capacity_speed.py [--out capacity_speed.json]

Measures, end to end through the real CLI (``python -m prfaas_plan``):
- ``size`` on the paper scenario (its target: 3 req/s, P90 TTFT <= 5 s), without and with the simulation check;
- ``matrix`` over {h200, b200, h100, mi300x} x {h20, h800, h100} (12 cells) on the paper scenario;
- ``cost`` and ``headroom`` on the paper scenario;
- ``size --no-verify`` on the paper scenario at 30 to 2,000 req/s: fleets from about a hundred to about six
  thousand local instances (the sized pools, the search used and its gap to the fluid floor are printed).
``--scale-only`` runs the last group alone.
Peak memory is the child's own maximum resident set (``getrusage(RUSAGE_SELF)`` written at its exit).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

CASES = {
    "size (paper target, --no-verify)": ["size", "--no-verify", "--json"],
    "size (paper target, simulation check)": ["size", "--json"],
    "matrix 4 x 3 (paper model)": ["matrix", "--json"],
    "cost (paper)": ["cost", "--json"],
    "headroom (paper, 2 req/s)": ["headroom", "--rate", "2", "--json"],
}
SCALE_RATES = (30, 100, 300, 650, 1000, 2000)
SCALE = {f"size at {r} req/s (--no-verify)": ["size", "--rate", str(r), "--no-verify", "--json"] for r in SCALE_RATES}


# Runs the CLI as ``-m prfaas_plan`` would and, on the way out, writes the process's own peak RSS (KiB).
_WRAPPER = """
import atexit, resource, runpy, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, 'w').write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)))
sys.argv[0] = 'prfaas_plan'
runpy.run_module('prfaas_plan', run_name='__main__', alter_sys=True)
"""


def _run(args: list[str], scratch: Path) -> tuple[float, float, int, str]:
    """(wall seconds, peak RSS MiB, exit status, stdout) of one CLI run in a fresh child process."""
    peak_file = scratch / "peak"
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _WRAPPER, str(peak_file), *args], cwd=REPO, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - start
    peak = float(peak_file.read_text()) / 1024.0 if peak_file.exists() else float("nan")
    return wall, peak, done.returncode, done.stdout


def _sized(stdout: str) -> dict[str, Any]:
    """The sized PrfaaS-PD pools of a ``size --json`` run, the search used and its gap to the floor."""
    try:
        sizing = json.loads(stdout)["sizing"]
    except (ValueError, KeyError):
        return {}
    found, space = sizing.get("prfaas_pd"), sizing["search_space"]
    if not found:
        return {"search": space.get("search")}
    floor = space.get("cost_floor_usd_per_hour")
    cost = found["cost_at_target"]["total_usd_per_hour"]
    return {
        "n_prfaas": found["n_prfaas"],
        "n_local": found["n_local"],
        "link_gbit_per_s": found["link_bandwidth_gbit_per_s"],
        "usd_per_hour": cost,
        "search": space.get("search"),
        "gap_to_floor": None if floor is None else cost / floor - 1.0,
        "deployments_solved": space.get("deployments_solved"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    parser.add_argument("--scale-only", action="store_true", help="only the sizing runs at 30-2,000 req/s")
    args = parser.parse_args()
    rows = []
    scratch = Path(tempfile.mkdtemp())
    cases = SCALE if args.scale_only else {**CASES, **SCALE}
    for name, cli in cases.items():
        wall, peak, status, stdout = _run(cli, scratch)
        sized = _sized(stdout) if cli[0] == "size" else {}
        rows.append(
            {
                "case": name,
                "command": "prfaas-plan " + " ".join(cli),
                "wall_s": wall,
                "peak_rss_mib": peak,
                "exit": status,
                **sized,
            }
        )
        extra = ""
        if "n_local" in sized:
            gap = sized["gap_to_floor"]
            extra = f"  {sized['n_prfaas']} PrfaaS + {sized['n_local']} local, {sized['search']} search" + (
                "" if gap is None else f", {100 * float(gap):.1f} % above the floor"
            )
        print(f"{name:45s} {wall:7.2f} s  {peak:7.0f} MiB  exit {status}{extra}", flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
