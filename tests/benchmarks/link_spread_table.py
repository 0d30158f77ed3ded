"""Print the link-spread validation table: the model of ``latency.link_spread`` against the simulated PS link,
per scenario and work decile, with ``--scale`` times the transfers of the validation test (figures only).

    python3 -m tests.benchmarks.link_spread_table --scale 10 --jobs 2 > link_spread_table.txt
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from tests.validation.test_link_spread_sim import (
    REPLICATIONS,
    SCENARIOS,
    STATISTICS,
    TRANSFERS,
    Comparison,
    Scenario,
    compare,
    format_table,
)


def _run(args: tuple[Scenario, int]) -> Comparison:
    scenario, scale = args
    return compare(scenario, REPLICATIONS, scale * TRANSFERS[scenario.utilization], seed=7)


def main() -> None:
    """Run every scenario and print its table, then the largest |error| per arrival SCV and statistic."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=2)
    options = parser.parse_args()
    with ProcessPoolExecutor(options.jobs) as pool:
        results = list(pool.map(_run, [(s, options.scale) for s in SCENARIOS]))
    worst: dict[float, np.ndarray] = {}
    for comparison in results:
        print(format_table(comparison), flush=True)
        ca2 = comparison.scenario.arrival_scv
        error = np.abs(comparison.relative_error).max(axis=0)
        worst[ca2] = np.maximum(worst.get(ca2, error), error)
    print("largest |model/sim - 1| over scenarios and bins, per arrival SCV:")
    print("  ca2  " + " ".join(f"{name:>6}" for name in STATISTICS))
    for ca2, error in worst.items():
        print(f"  {ca2:<4g} " + " ".join(f"{100 * e:5.1f}%" for e in error))


if __name__ == "__main__":
    main()
