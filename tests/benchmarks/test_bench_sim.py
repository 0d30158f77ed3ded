"""Speed and memory of the simulator. Figures only, never pass/fail on time or memory.

CI runs them once at a small size. The issue's figures (100,000 requests of the paper scenario for speed,
1,000,000 with records streamed to disk for memory) are one environment variable away:

    PRFAAS_BENCH_SIM_REQUESTS=100000 PRFAAS_BENCH_SIM_MEMORY_REQUESTS=1000000 \\
        python3 -m pytest tests/benchmarks/test_bench_sim.py --benchmark-enable -s

Targets (issue 6): at least 50,000 simulated requests per second of wall time on one core, and under 2 GB
peak memory for the million-request run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from pytest_benchmark.fixture import BenchmarkFixture

from prfaas_plan.lengths import Fixed
from prfaas_plan.optimize import search
from prfaas_plan.sim.arrivals import Poisson
from prfaas_plan.sim.cluster import ClusterConfig, simulate
from prfaas_plan.sim.records import SimResult
from prfaas_plan.sim.workload import synthetic_workload
from prfaas_plan.throughput import StageModel
from tests.conftest import REPO

SPEED_REQUESTS = int(os.environ.get("PRFAAS_BENCH_SIM_REQUESTS", "20000"))
MEMORY_REQUESTS = int(os.environ.get("PRFAAS_BENCH_SIM_MEMORY_REQUESTS", "20000"))

# The child reports its own peak resident set (ru_maxrss: KiB on Linux) after the command returns.
_MEASURE = """
import resource, sys
from prfaas_plan.cli.app import main
sys.argv = ["prfaas-plan", *sys.argv[1:]]
try:
    main()
except SystemExit as done:
    code = done.code
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
sys.exit(code)
"""


def test_requests_per_second(benchmark: BenchmarkFixture, paper_model: StageModel) -> None:
    """Sample the workload and run the paper plan at 70 % of Λ_max: simulated requests per second of wall time."""
    plan = search(paper_model)
    assert plan.threshold_tokens is not None
    config = ClusterConfig(
        model=paper_model,
        threshold_tokens=plan.threshold_tokens,
        n_pd_prefill=plan.n_pd_prefill,
        n_pd_decode=plan.n_pd_decode,
    )
    arrivals = Poisson(rate_req_per_s=0.7 * plan.throughput_req_per_s)

    def run() -> SimResult:
        rng = np.random.default_rng(0)
        workload = synthetic_workload(rng, arrivals, paper_model.lengths, Fixed(tokens=1024), SPEED_REQUESTS)
        return simulate(config, workload)

    result = benchmark.pedantic(run, rounds=3, iterations=1)
    assert result.completed == SPEED_REQUESTS
    seconds = benchmark.stats.stats.min if benchmark.stats is not None else float("nan")
    benchmark.extra_info["requests"] = SPEED_REQUESTS
    benchmark.extra_info["requests_per_s"] = SPEED_REQUESTS / seconds
    benchmark.extra_info["events_per_s"] = result.events / seconds


def test_peak_memory_with_records_on_disk(benchmark: BenchmarkFixture, tmp_path: Path) -> None:
    """`prfaas-plan simulate --requests N --records FILE --json` in a fresh interpreter: its peak RSS."""
    records = tmp_path / "runs.csv"
    args = ["simulate", "--requests", str(MEMORY_REQUESTS), "--records", str(records), "--json"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", _MEASURE, *args], capture_output=True, text=True, env=env, check=False
        )

    done = benchmark.pedantic(run, rounds=1, iterations=1)
    assert done.returncode == 0, done.stderr
    peak_kib = int(done.stderr.strip().splitlines()[-1])
    benchmark.extra_info["requests"] = MEMORY_REQUESTS
    benchmark.extra_info["peak_rss_mib"] = peak_kib / 1024
    benchmark.extra_info["records_mib"] = records.stat().st_size / 2**20
    with records.open() as rows:
        assert sum(1 for _ in rows) == MEMORY_REQUESTS + 1
