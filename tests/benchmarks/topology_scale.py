"""Topology scale (issue 23): 10 PrfaaS and 20 PD clusters with a full link matrix, planned globally.

The topology is built from the paper case study's measured pools (H200 PrfaaS, H20 PD) with random instance
counts (1-8 per site, 4-16 per PD cluster), rates (0.5-5 req/s), lognormal input lengths (mu 9.0-10.5) and
link sizes (10-100 Gbit/s), one fixed seed per row (``tests/topology/builders.random_full_matrix``). Each row
is planned in a fresh interpreter, so its peak resident set (``ru_maxrss`` of the child: interpreter, numpy,
SciPy and HiGHS included) is its own.

Timed, per row (wall seconds, and in brackets the process's CPU seconds: on a shared machine the wall time
includes waiting for a core): pricing the topology (``topology_model``), the global search alone (``global_search``: the
bound LP, then the coordinate search), and the whole comparison (``compare``: both alternatives, then the
global search seeded with their thresholds). A script, not a test: it prints a Markdown table and never
asserts on time.

Example::

    python3 tests/benchmarks/topology_scale.py
    python3 tests/benchmarks/topology_scale.py --sites 10 --regions 20 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

_CHILD = """
import json, resource, sys, time
sys.path.insert(0, {repo!r})
from pathlib import Path
from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.optimize.topology import global_search, topology_model
from prfaas_plan.optimize.topology_compare import compare
from tests.topology.builders import random_full_matrix
import scipy.optimize  # imported before the clock starts: its import is start-up, not planning
scenario = load_scenario(Path({repo!r}) / "workloads" / "paper-case-study.yaml")
topo = random_full_matrix(scenario, {sites}, {regions}, {seed})
t0, c0 = time.perf_counter(), time.process_time()
tm = topology_model(topo)
t1, c1 = time.perf_counter(), time.process_time()
found = global_search(tm)
t2, c2 = time.perf_counter(), time.process_time()
result = compare(tm)
t3, c3 = time.perf_counter(), time.process_time()
print(json.dumps({{
    "model_s": t1 - t0, "global_s": t2 - t1, "compare_s": t3 - t2,
    "model_cpu_s": c1 - c0, "global_cpu_s": c2 - c1, "compare_cpu_s": c3 - c2,
    "scale": found.scale, "bound": found.bound, "lp_solves": found.lp_solves,
    "compare_scale": result.plan.scale, "nearest": result.nearest.plan.scale,
    "no_sharing": result.no_sharing.plan.scale, "gap": result.search.gap,
    "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}}))
"""


def run(sites: int, regions: int, seed: int) -> dict[str, float]:
    code = _CHILD.format(repo=str(REPO_ROOT), sites=sites, regions=regions, seed=seed)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    row: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sites", type=int, default=10)
    parser.add_argument("--regions", type=int, default=20)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    print(f"{args.sites} PrfaaS x {args.regions} PD clusters, full link matrix ({args.sites * args.regions} links)\n")
    print(
        "| seed | price s (CPU) | global search s (CPU) | LPs | compare s (CPU) | λ global | λ nearest "
        "| λ no sharing | gap | peak RSS MiB |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for seed in args.seeds:
        r = run(args.sites, args.regions, seed)
        print(
            f"| {seed} | {r['model_s']:.2f} ({r['model_cpu_s']:.2f}) | {r['global_s']:.2f} ({r['global_cpu_s']:.2f}) "
            f"| {r['lp_solves']:.0f} | {r['compare_s']:.2f} ({r['compare_cpu_s']:.2f}) | "
            f"{r['compare_scale']:.4f} | {r['nearest']:.4f} | {r['no_sharing']:.4f} | {r['gap']:.1%} | "
            f"{r['peak_rss_mib']:.0f} |"
        )


if __name__ == "__main__":
    main()
