"""The closed-form loaded TTFT per region of a topology plan (``optimize.topology_ttft``) against the topology
simulator on three-regions at 50 % and 70 % of the global plan's λ.

Tolerance: the replications' 95 % confidence half width of the simulated percentile (Student t over
independent seeds) plus 6 % of the simulated value, the allowance for the closed form's approximations
(Whitt's G/G/c waits, QNA superposition at the shared sites, independence of the stages); at these loads the
observed differences are 0-5 % (tests/benchmarks/topology_ttft.py prints them with more requests). Besides,
at load 0 every region's law is its zero-wait law (waits vanish), and a 1 x 1 topology reproduces the single
pair's ``loaded_ttft`` exactly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from prfaas_plan.io.topology import load_topology
from prfaas_plan.latency.distribution import loaded_ttft
from prfaas_plan.optimize.topology import TopologyModel, TopologyPlan, global_search, plan_at, topology_model
from prfaas_plan.optimize.topology_ttft import topology_loaded_ttft
from prfaas_plan.spec.plan import Plan
from prfaas_plan.spec.scenario import Scenario
from prfaas_plan.spec.topology import topology_of_scenario
from prfaas_plan.studies.topology_sim import simulate_plan
from tests.conftest import REPO

MODEL_ALLOWANCE = 0.06
SEEDS = 4
REQUESTS = 5000


@pytest.fixture(scope="module")
def three_regions() -> tuple[TopologyModel, TopologyPlan]:
    tm = topology_model(load_topology(Path(REPO / "workloads/topologies/three-regions.yaml")))
    return tm, plan_at(tm, global_search(tm, grid_points=17).thresholds, "global")


def test_one_by_one_is_the_single_pair(paper_scenario: Scenario) -> None:
    tm = topology_model(topology_of_scenario(paper_scenario))
    plan = plan_at(tm, global_search(tm, grid_points=17).thresholds, "global")
    region = plan.regions[0]
    got = topology_loaded_ttft(tm, plan, 0.6).regions[0].ttft
    pair = Plan(
        threshold_tokens=region.threshold_tokens, n_pd_prefill=region.n_pd_prefill, n_pd_decode=region.n_pd_decode
    )
    want = loaded_ttft(tm.pair_model[0], pair, 0.6 * plan.scale).ttft
    assert got is not None and want is not None
    for name in ("mean_s", "p50_s", "p90_s", "p99_s"):
        assert getattr(got, name) == pytest.approx(getattr(want, name), rel=1e-9)


def test_past_a_site_capacity_is_unstable(three_regions: tuple[TopologyModel, TopologyPlan]) -> None:
    tm, plan = three_regions
    out = topology_loaded_ttft(tm, plan, 1.05)
    assert any(r.ttft is None and r.unstable for r in out.regions)


@pytest.mark.validation
@pytest.mark.parametrize("load", [0.5, 0.7])
def test_closed_form_matches_the_simulator(three_regions: tuple[TopologyModel, TopologyPlan], load: float) -> None:
    tm, plan = three_regions
    closed = topology_loaded_ttft(tm, plan, load)
    runs = [simulate_plan(tm, plan, load=load, requests_per_region=REQUESTS, seed=s) for s in range(SEEDS)]
    t95 = float(stats.t.ppf(0.975, SEEDS - 1))
    for j, region in enumerate(closed.regions):
        assert region.ttft is not None
        for name in ("p50_s", "p90_s"):
            sim = np.array([getattr(r.regions[j], name) for r in runs])
            half = t95 * float(np.std(sim, ddof=1)) / np.sqrt(SEEDS)
            tol = half + MODEL_ALLOWANCE * float(np.mean(sim))
            assert abs(getattr(region.ttft, name) - float(np.mean(sim))) <= tol, (region.cluster, name)
