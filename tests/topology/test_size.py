"""``topology size`` on three-regions: the counts found are feasible (the global plan carries every region's
rate and every closed-form P90 meets the SLO), removing any one instance breaks feasibility (what the prune
step promises), the lower bound on the GPU cost is at most the cost found, and a tighter SLO is met."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from prfaas_plan.io.topology import load_topology
from prfaas_plan.optimize.topology import topology_model
from prfaas_plan.spec.topology import Topology
from prfaas_plan.studies.topology_size import SizedTopology, _evaluate, _instance_prices, size_topology
from tests.conftest import REPO


@pytest.fixture(scope="module")
def sized() -> tuple[Topology, SizedTopology]:
    topo = load_topology(Path(REPO / "workloads/topologies/three-regions.yaml"))
    return topo, size_topology(topo)


def test_counts_are_feasible_and_bounded(sized: tuple[Topology, SizedTopology]) -> None:
    topo, s = sized
    assert s.scale >= 1.0
    for r in s.loaded.regions:
        assert r.ttft is not None and r.ttft.p90_s <= s.slo_p90_s
        assert r.rate_req_per_s == pytest.approx(topo.traffic_of(r.cluster).rate_req_per_s, rel=1e-9)
    assert 0 < s.lower_bound_gpu_usd_per_hour <= s.gpu_usd_per_hour
    assert s.total_usd_per_hour >= s.gpu_usd_per_hour


def test_one_instance_fewer_anywhere_is_infeasible(sized: tuple[Topology, SizedTopology]) -> None:
    topo, s = sized
    tm = topology_model(topo)
    counts = np.array(list(s.counts.values()), dtype=np.int64)
    assert _evaluate(tm, counts, s.slo_p90_s).feasible
    floor = [1] * tm.n_sites + [2] * tm.n_regions
    for c in range(counts.size):
        if counts[c] > floor[c]:
            fewer = counts.copy()
            fewer[c] -= 1
            assert not _evaluate(tm, fewer, s.slo_p90_s).feasible


@pytest.mark.validation
def test_a_tighter_slo_is_met_and_priced_by_its_counts(sized: tuple[Topology, SizedTopology]) -> None:
    topo, s = sized
    worst = max(r.ttft.p90_s for r in s.loaded.regions if r.ttft is not None)
    tighter = size_topology(topo, slo_p90_s=0.9 * worst)
    assert max(r.ttft.p90_s for r in tighter.loaded.regions if r.ttft is not None) <= 0.9 * worst
    prices = _instance_prices(topo, topology_model(topo))
    assert float(prices @ np.array(list(tighter.counts.values()))) == pytest.approx(tighter.gpu_usd_per_hour)
