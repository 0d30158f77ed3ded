"""Closed-form loaded TTFT per region (``optimize.topology_ttft``) against the topology simulator on
three-regions: the global plan at 50 % and 70 % of its λ, per region the closed-form P50/P90/P99 and the
simulated mean of P50 and P90 over independent seeds with their 95 % confidence half width (Student t).
A script, not a test: it prints a Markdown table.

Example::

    python3 tests/benchmarks/topology_ttft.py --seeds 5 --requests 20000
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from scipy import stats

from prfaas_plan.io.topology import load_topology
from prfaas_plan.optimize.topology import global_search, plan_at, topology_model
from prfaas_plan.optimize.topology_ttft import topology_loaded_ttft
from prfaas_plan.studies.topology_sim import simulate_plan

REPO_ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--loads", type=float, nargs="+", default=[0.5, 0.7])
    args = parser.parse_args()
    tm = topology_model(load_topology(REPO_ROOT / "workloads/topologies/three-regions.yaml"))
    plan = plan_at(tm, global_search(tm).thresholds, "global")
    t95 = float(stats.t.ppf(0.975, args.seeds - 1))
    print(f"three-regions, global plan λ = {plan.scale:.4g}; {args.seeds} seeds x {args.requests} requests/region\n")
    print("| load | region | CF P50 | sim P50 ± hw | CF P90 | sim P90 ± hw | P90 diff | CF P99 |")
    print("|---|---|---|---|---|---|---|---|")
    for load in args.loads:
        closed = topology_loaded_ttft(tm, plan, load)
        runs = [
            simulate_plan(tm, plan, load=load, requests_per_region=args.requests, seed=s) for s in range(args.seeds)
        ]
        for j, r in enumerate(closed.regions):
            assert r.ttft is not None
            sims = {k: np.array([getattr(run.regions[j], k) for run in runs]) for k in ("p50_s", "p90_s")}
            hw = {k: t95 * float(np.std(v, ddof=1)) / np.sqrt(args.seeds) for k, v in sims.items()}
            m = {k: float(np.mean(v)) for k, v in sims.items()}
            print(
                f"| {load:g} | {r.cluster} | {r.ttft.p50_s:.3f} | {m['p50_s']:.3f} ± {hw['p50_s']:.3f} | "
                f"{r.ttft.p90_s:.3f} | {m['p90_s']:.3f} ± {hw['p90_s']:.3f} | {r.ttft.p90_s / m['p90_s'] - 1:+.1%} | "
                f"{r.ttft.p99_s:.3f} |"
            )


if __name__ == "__main__":
    main()
