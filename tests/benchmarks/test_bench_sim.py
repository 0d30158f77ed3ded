"""Speed and memory of the simulator. Figures only, never pass/fail on time or memory.

CI runs them once at a small size. The issue's figures (100,000 requests of the paper scenario for speed,
1,000,000 with records streamed to disk for memory) are one environment variable away:

    PRFAAS_BENCH_SIM_REQUESTS=100000 PRFAAS_BENCH_SIM_MEMORY_REQUESTS=1000000 \\
        python3 -m pytest tests/benchmarks/test_bench_sim.py --benchmark-enable -s

Targets (issue 6): at least 50,000 simulated requests per second of wall time on one core, and under 2 GB
peak memory for the million-request run. Issue 12: above 100,000 requests/s with caches and the scheduler
off (the static fast path), and the figure with each dynamic feature on (``test_requests_per_second_with``).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from prfaas_plan.io.traces import read_trace
from prfaas_plan.lengths import Fixed
from prfaas_plan.optimize import search
from prfaas_plan.sim.arrivals import Poisson
from prfaas_plan.sim.cluster import ClusterConfig
from prfaas_plan.sim.link_profile import bandwidth_steps
from prfaas_plan.sim.prefix_cache import CacheReplay, replay_caches
from prfaas_plan.sim.records import SimResult
from prfaas_plan.sim.run import simulate
from prfaas_plan.sim.workload import synthetic_workload
from prfaas_plan.spec.dynamics import (
    ClusterCache,
    InstanceLoss,
    Outage,
    PrefixCaches,
    RandomBandwidth,
    RoleControl,
    ThresholdControl,
)
from prfaas_plan.throughput import StageModel
from tests.conftest import REPO, TRACES

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


@pytest.mark.parametrize("feature", ["faults", "random_link_and_outage", "threshold_scheduler", "both_schedulers"])
def test_requests_per_second_with(benchmark: BenchmarkFixture, paper_model: StageModel, feature: str) -> None:
    """The same run with one dynamic feature on: three instance losses (restored), a random link (1 s steps)
    with a 60 s outage, the short-term scheduler, both schedulers (default parameters)."""
    plan = search(paper_model)
    assert plan.threshold_tokens is not None
    base = ClusterConfig(
        model=paper_model,
        threshold_tokens=plan.threshold_tokens,
        n_pd_prefill=plan.n_pd_prefill,
        n_pd_decode=plan.n_pd_decode,
    )
    rate = 0.7 * plan.throughput_req_per_s
    workload = synthetic_workload(
        np.random.default_rng(0), Poisson(rate_req_per_s=rate), paper_model.lengths, Fixed(tokens=1024), SPEED_REQUESTS
    )
    last = float(workload.arrival_s[-1])
    bandwidth = paper_model.link_bandwidth_bytes_per_s
    configs = {
        "faults": replace(
            base,
            losses=(
                InstanceLoss(pool="prfaas", at_s=0.2 * last, restore_s=0.3 * last),
                InstanceLoss(pool="decode", at_s=0.4 * last, restore_s=0.5 * last),
                InstanceLoss(pool="local_prefill", at_s=0.6 * last, restore_s=0.7 * last),
            ),
        ),
        "random_link_and_outage": replace(
            base,
            bandwidth_profile=bandwidth_steps(
                RandomBandwidth(mean_bytes_per_s=bandwidth, std_bytes_per_s=0.2 * bandwidth, correlation_s=60.0),
                (Outage(start_s=0.5 * last, duration_s=60.0),),
                nominal_bytes_per_s=bandwidth,
                horizon_s=last + 3600.0,
                rng=np.random.default_rng(1),
            ),
        ),
        "threshold_scheduler": replace(base, threshold_control=ThresholdControl()),
        "both_schedulers": replace(base, threshold_control=ThresholdControl(), role_control=RoleControl()),
    }
    config = configs[feature]
    result = benchmark.pedantic(lambda: simulate(config, workload), rounds=1, iterations=1)
    assert result.arrived == result.completed + result.in_flight + result.dropped
    seconds = benchmark.stats.stats.min if benchmark.stats is not None else float("nan")
    benchmark.extra_info["requests_per_s"] = SPEED_REQUESTS / seconds


def test_cache_replay_speed(benchmark: BenchmarkFixture) -> None:
    """Replaying the Mooncake conversation trace (12,031 requests, 288,500 blocks) through two 300 GB LRU
    pools under the switch rule: requests replayed per second of wall time."""
    trace = read_trace(TRACES / "conversation_trace.jsonl")
    pool = ClusterCache(capacity_bytes=300e9, load_bandwidth_bytes_per_s=50e9)
    caches = PrefixCaches(prfaas=pool, local=pool, rule="switch")

    def run() -> CacheReplay:
        return replay_caches(trace, caches, kv_bytes_per_token=17_600.0, threshold_tokens=5_500.0)

    replay = benchmark.pedantic(run, rounds=1, iterations=1)
    assert not math.isnan(replay.hit_rates()["all"].token_hit_rate)
    seconds = benchmark.stats.stats.min if benchmark.stats is not None else float("nan")
    benchmark.extra_info["requests_per_s"] = trace.n_requests / seconds


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
