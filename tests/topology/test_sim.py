"""The topology simulator: nothing is dropped under any loss (site rerouted or kept local, link), and at a
light load a 1 x 1 topology's mean TTFT is the plan's unloaded mean (the closed form, latency.unloaded)."""

from __future__ import annotations

import numpy as np
import pytest

from prfaas_plan.optimize.plans import evaluate
from prfaas_plan.optimize.topology import global_search, plan_at, topology_model
from prfaas_plan.spec.scenario import Scenario
from prfaas_plan.spec.topology import topology_of_scenario
from prfaas_plan.studies.topology_sim import fault_runs, simulate_plan
from prfaas_plan.throughput import StageModel
from tests.topology.builders import grid_topology


def test_every_request_is_completed_under_every_loss(paper_scenario: Scenario) -> None:
    topo = grid_topology(
        paper_scenario,
        sites=[2, 2],
        regions=[8, 8],
        rates_req_per_s=[1.0, 1.5],
        mus=[9.9, 9.6],
        links={(0, 0): 100.0, (1, 0): 25.0, (1, 1): 100.0, (0, 1): 25.0},
    )
    tm = topology_model(topo)
    plan = plan_at(tm, global_search(tm, grid_points=17).thresholds, "global")
    runs = fault_runs(tm, plan, load=0.8, requests_per_region=600, seed=3)
    assert len(runs) == 1 + 2 * 2 + 4
    for run in runs:
        assert run.conserved, run.label
        assert all(r.arrived == 600 for r in run.regions)
    assert any(run.moved_by_faults > 0 for run in runs)


def test_light_load_mean_ttft_is_the_unloaded_mean(paper_scenario: Scenario) -> None:
    tm = topology_model(topology_of_scenario(paper_scenario))
    plan = plan_at(tm, global_search(tm).thresholds, "global")
    region = plan.regions[0]
    unloaded = evaluate(tm.local[0], region.threshold_tokens, region.n_pd_prefill).ttft_unloaded_mean_s
    run = simulate_plan(tm, plan, load=0.02, requests_per_region=4000, seed=5)
    assert run.conserved
    assert run.regions[0].mean_s == pytest.approx(unloaded, rel=0.05)
    assert np.isfinite(run.regions[0].p90_s)


def test_a_kv_handoff_delays_every_first_token_by_that_much(paper_scenario: Scenario) -> None:
    """The same handoff on every pool (local and PrfaaS) moves every simulated TTFT by exactly that: the same
    seed routes and serves every request as before, and the wait holds nothing."""
    from dataclasses import replace

    tm = topology_model(topology_of_scenario(paper_scenario))
    plan = plan_at(tm, global_search(tm).thresholds, "global")
    wait = 0.3

    def waiting(model: StageModel) -> StageModel:
        return replace(model, local_handoff_s=wait, prfaas_handoff_s=wait)

    shifted = replace(tm, local=tuple(map(waiting, tm.local)), pair_model=tuple(map(waiting, tm.pair_model)))
    before = simulate_plan(tm, plan, load=0.5, requests_per_region=800, seed=9).regions[0]
    after = simulate_plan(shifted, plan, load=0.5, requests_per_region=800, seed=9).regions[0]
    assert after.completed == before.completed == 800
    for field in ("mean_s", "p50_s", "p90_s"):
        assert getattr(after, field) - getattr(before, field) == pytest.approx(wait, abs=1e-9), field
