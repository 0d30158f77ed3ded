"""Speed of the planner. Figures only, never pass/fail on time:

    python3 -m pytest tests/benchmarks --benchmark-enable --benchmark-columns=min,median,mean,max,rounds

Targets (issue 2): `prfaas-plan optimize` end to end under 1 s, the search alone under 50 ms with t resolved
to 10 tokens, on these 2-core machines. aiconfigurator reports 6.5-30 s per search. Issue 11: large pools
(`--n-local 100000`) searched in time and memory growing no faster than the pool; the table over pool sizes
comes from tests/benchmarks/scale.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

from pytest_benchmark.fixture import BenchmarkFixture

from prfaas_plan.optimize import compare, search
from prfaas_plan.spec.scenario import Scenario
from prfaas_plan.throughput import StageModel
from tests.conftest import REPO


def test_search_alone(benchmark: BenchmarkFixture, paper_model: StageModel) -> None:
    """The threshold x split search on the paper scenario, t resolved to 10 tokens."""
    plan = benchmark(search, paper_model, 10.0)
    assert plan.n_pd_prefill == 3


def test_search_100000_local(benchmark: BenchmarkFixture, paper_model: StageModel) -> None:
    """The search with 100,000 local instances (splits by branch and bound instead of one row each)."""
    model = replace(paper_model, n_local=100_000)
    plan = benchmark(search, model, 10.0)
    assert plan.throughput_req_per_s > 0


def test_search_with_baselines(benchmark: BenchmarkFixture, paper_scenario: Scenario, paper_model: StageModel) -> None:
    """The search plus both baselines and the unloaded TTFT of all three plans."""
    result = benchmark(compare, paper_model, paper_scenario.prfaas.gpus, paper_scenario.local.gpus_per_instance)
    assert result.homogeneous_pd.n_pd_prefill == 9


def test_optimize_end_to_end(benchmark: BenchmarkFixture) -> None:
    """`prfaas-plan optimize --json` in a fresh interpreter: start-up, imports, YAML, search, output."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def run() -> int:
        return subprocess.run(
            [sys.executable, "-m", "prfaas_plan", "optimize", "--json"],
            capture_output=True,
            env=env,
            check=False,
        ).returncode

    assert benchmark.pedantic(run, rounds=5, iterations=1) == 0


def test_search_with_roofline_pools(benchmark: BenchmarkFixture) -> None:
    """The same search when both pools are calibrated-roofline curves (tabulated, 643 knots)."""
    from prfaas_plan.io.scenario import load_scenario
    from prfaas_plan.throughput import stage_model

    model = stage_model(load_scenario(REPO / "workloads" / "paper-case-study-roofline.yaml"))
    plan = benchmark(search, model, 10.0)
    assert plan.throughput_req_per_s > 0
