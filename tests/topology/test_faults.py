"""N-1 on a global plan: a site or link lost never carries more than the bound of the whole topology, a drained cluster
carries nothing, a site kept local never beats the plan it starts from, and on a 1 x 1 topology the site lost
and kept local is the local pool alone at the plan's threshold."""

from __future__ import annotations

import numpy as np
import pytest

from prfaas_plan.optimize.topology import global_search, plan_at, topology_model
from prfaas_plan.optimize.topology_faults import n_minus_one
from prfaas_plan.spec.scenario import Scenario
from prfaas_plan.throughput import routing
from tests.topology.builders import grid_topology


def test_every_loss_is_below_the_bound_and_a_drained_cluster_carries_nothing(paper_scenario: Scenario) -> None:
    topo = grid_topology(
        paper_scenario,
        sites=[3, 2],
        regions=[8, 6, 10],
        rates_req_per_s=[2.0, 1.0, 1.5],
        mus=[9.9, 9.5, 10.2],
        links={(0, 0): 100.0, (0, 1): 25.0, (1, 1): 100.0, (1, 2): 50.0, (0, 2): 10.0},
    )
    tm = topology_model(topo)
    found = global_search(tm, grid_points=17)
    plan = plan_at(tm, found.thresholds, "global")
    faults = n_minus_one(tm, plan, grid_points=17)
    kinds = [f.kind for f in faults]
    assert kinds.count("site_rerouted") == kinds.count("site_kept_local") == 2
    assert kinds.count("link") == 5 and kinds.count("pd_drained") == 3
    for fault in faults:
        if fault.kind != "pd_drained":  # a restriction of the topology: under its bound (drained: fewer regions)
            assert fault.scale <= found.bound * (1 + 1e-9), fault.fault
        if fault.kind == "site_kept_local":
            assert fault.scale <= plan.scale * (1 + 1e-9)
        if fault.kind == "pd_drained":
            drained = fault.fault.removesuffix(" drained")
            assert fault.carried_req_per_s[drained] == 0.0
            assert set(fault.carried_req_per_s) == set(tm.regions)


def test_one_by_one_site_lost_kept_local_is_the_local_pool_alone(paper_scenario: Scenario) -> None:
    topo = grid_topology(
        paper_scenario, sites=[4], regions=[8], rates_req_per_s=[1.0], mus=[9.9], links={(0, 0): 100.0}
    )
    tm = topology_model(topo)
    found = global_search(tm)
    plan = plan_at(tm, found.thresholds, "global")
    kept = next(f for f in n_minus_one(tm, plan) if f.kind == "site_kept_local")
    model = tm.local[0]
    route = routing(model.lengths, plan.regions[0].threshold_tokens)
    p = float(route.offload_fraction)
    per_request_s = (1 - p) * float(model.local_prefill(float(route.short_tokens))) + p * float(
        model.local_prefill(float(route.long_tokens))
    )
    n_p = np.arange(8)
    expected = float(np.max(np.minimum(n_p / per_request_s, (8 - n_p) * model.decode_req_per_s_per_instance)))
    assert kept.scale == pytest.approx(expected, rel=1e-12)
