"""Simulator speed before and after the fused loop (issue 21): requests per second of wall time on one core.

The run is what `prfaas-plan simulate --load 0.7 --requests N --json` times (its ``requests_per_s``): the paper
scenario's best plan at 70 % of its throughput, the scenario's arrival process and length distribution, outputs
fixed at the scenario's mean, and a wall clock around sampling the workload and the run. "before" is the handler
path (``Cluster.run_handlers``: every event through the engine and the handler methods, the static cluster's
only path before issue 21); "after" is the path a static run takes now (``Cluster.run``: the fused loop). Each
is run ``--repeats`` times, alternating, and the median is reported; the two runs' records are checked to be
identical. Figures only (they depend on the machine and on what else runs on it); CPU time is shown beside the
wall time because a shared machine inflates the latter.

    python3 -m tests.benchmarks.sim_speed --requests 1000000 --repeats 3
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable

import numpy as np

from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.lengths import Fixed
from prfaas_plan.optimize import search
from prfaas_plan.sim.arrivals import arrival_process
from prfaas_plan.sim.cluster import Cluster, ClusterConfig
from prfaas_plan.sim.records import COLUMNS, SimResult
from prfaas_plan.sim.workload import synthetic_workload
from prfaas_plan.throughput import stage_model
from tests.conftest import PAPER_SCENARIO

LOAD = 0.7


def _runner(requests: int, fused: bool) -> Callable[[], tuple[SimResult, float, float]]:
    model = stage_model(load_scenario(PAPER_SCENARIO))
    plan = search(model)
    assert plan.threshold_tokens is not None
    config = ClusterConfig(
        model=model,
        threshold_tokens=plan.threshold_tokens,
        n_pd_prefill=plan.n_pd_prefill,
        n_pd_decode=plan.n_pd_decode,
    )
    arrivals = arrival_process(model, LOAD * plan.throughput_req_per_s)

    def run() -> tuple[SimResult, float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        rng = np.random.default_rng(0)
        workload = synthetic_workload(rng, arrivals, model.lengths, Fixed(tokens=model.output_tokens_mean), requests)
        cluster = Cluster(config, workload, None)
        result = cluster.run(math.inf) if fused else cluster.run_handlers(math.inf)
        return result, time.perf_counter() - wall, time.process_time() - cpu

    return run


def main() -> None:
    """Time both paths, alternating, and print the medians and the speed-up."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()
    runs = {"before (handlers)": _runner(options.requests, False), "after (fused)": _runner(options.requests, True)}
    walls: dict[str, list[float]] = {name: [] for name in runs}
    cpus: dict[str, list[float]] = {name: [] for name in runs}
    results: dict[str, SimResult] = {}
    for _ in range(options.repeats):
        for name, run in runs.items():
            results[name], wall, cpu = run()
            walls[name].append(wall)
            cpus[name].append(cpu)
    before, after = (results[name] for name in runs)
    same = all(np.array_equal(getattr(before.records, c), getattr(after.records, c), equal_nan=True) for c in COLUMNS)
    print(f"{options.requests:,} requests, paper scenario at {LOAD:.0%} load, median of {options.repeats}")
    print(f"{'path':<20} {'wall s':>8} {'req/s (wall)':>14} {'req/s (cpu)':>13} {'events/s':>12}")
    for name in runs:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        n, events = options.requests, results[name].events
        print(f"{name:<20} {wall:8.2f} {n / wall:14,.0f} {n / cpu:13,.0f} {events / wall:12,.0f}")
    speedup = statistics.median(walls["before (handlers)"]) / statistics.median(walls["after (fused)"])
    print(f"speed-up (wall): {speedup:.2f}x; records identical: {same}; events {before.events:,} / {after.events:,}")


if __name__ == "__main__":
    main()
