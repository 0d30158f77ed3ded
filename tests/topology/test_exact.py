"""A 1 x 1 topology is today's scenario: the global plan reproduces ``optimize``'s Λ_max, threshold and split
(the paper's Table 6 plan for the case study) within 1e-9 relative (where Λ is flat in the threshold, a threshold
on the same plateau), and its LP is Eq. 6 at any threshold."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.io.topology import load_topology
from prfaas_plan.optimize.plans import evaluate
from prfaas_plan.optimize.throughput_search import best_plan
from prfaas_plan.optimize.topology import global_search, plan_at, routing_at, topology_model
from prfaas_plan.spec.topology import topology_of_scenario
from prfaas_plan.throughput import max_throughput, routing, stage_bounds, stage_model, stage_throughputs
from tests.conftest import REPO

SCENARIOS = ["paper-case-study", "paper-case-study-roofline", "qwen3-next-b200-h100"]


@pytest.mark.parametrize("name", SCENARIOS)
def test_one_by_one_reproduces_the_scenario_search(name: str) -> None:
    path = REPO / "workloads" / f"{name}.yaml"
    scenario = load_scenario(path)
    t_today, n_p_today, lam_today = best_plan(stage_model(scenario))
    tm = topology_model(load_topology(path))
    found = global_search(tm)
    plan = plan_at(tm, found.thresholds, "global")
    assert plan.scale == pytest.approx(lam_today, rel=1e-9)
    assert plan.regions[0].n_pd_prefill == n_p_today
    t_global = plan.regions[0].threshold_tokens
    if t_global != pytest.approx(t_today, rel=1e-6):  # a plateau: both thresholds must carry the same Λ
        at_global = evaluate(stage_model(scenario), t_global, n_p_today).throughput_req_per_s
        assert at_global == pytest.approx(lam_today, rel=1e-9)
    assert found.bound >= found.scale * (1 - 1e-9)


def test_paper_table6_plan(paper_scenario: object) -> None:
    """The paper case study's plan through the topology path: the same PlanEvaluation figures as optimize."""
    tm = topology_model(load_topology(REPO / "workloads" / "paper-case-study.yaml"))
    found = global_search(tm)
    plan = plan_at(tm, found.thresholds, "global")
    region = plan.regions[0]
    today = evaluate(tm.local[0], region.threshold_tokens, region.n_pd_prefill)
    assert plan.scale == pytest.approx(today.throughput_req_per_s, rel=1e-9)
    assert region.offload_fraction == pytest.approx(today.offload_fraction, rel=1e-12)
    assert region.n_pd_decode == today.n_pd_decode
    link = plan.links[0]
    assert link.kv_bytes_per_s == pytest.approx(today.egress_bytes_per_s, rel=1e-9)


@pytest.mark.parametrize("threshold", [0.0, 5_000.0, 19_418.0, 60_000.0, 131_072.0])
def test_lp_is_eq6_at_every_threshold(threshold: float) -> None:
    scenario = load_scenario(REPO / "workloads" / "paper-case-study.yaml")
    model = stage_model(scenario)
    route = routing(model.lengths, threshold)
    n_p = np.arange(model.n_local)
    eq6 = float(np.max(max_throughput(stage_bounds(stage_throughputs(model, route, n_p), route))))
    tm = topology_model(topology_of_scenario(scenario))
    assert routing_at(tm, np.array([threshold]))[0].scale == pytest.approx(eq6, rel=1e-9)


def test_scenario_reads_as_one_by_one(tmp_path: Path) -> None:
    topo = load_topology(REPO / "workloads" / "paper-case-study.yaml")
    assert [c.kind for c in topo.clusters] == ["prfaas", "pd"]
    assert len(topo.links) == 1 and topo.links[0].bandwidth_bytes_per_s == pytest.approx(100e9 / 8)
