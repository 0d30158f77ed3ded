"""The one cluster and its strategies (``cluster.Dynamics``, ``cluster.Decoder``): a changing world in which
nothing changes is the static cluster, event for event; a strategy serves one cluster; a changing world and a
decoder of its own are not combined."""

from __future__ import annotations

import math

import numpy as np
import pytest

from prfaas_plan.lengths import Fixed
from prfaas_plan.optimize import search
from prfaas_plan.sim.arrivals import Poisson
from prfaas_plan.sim.batch_decode import BatchDecode
from prfaas_plan.sim.cluster import Cluster, ClusterConfig
from prfaas_plan.sim.dynamic import DynamicWorld
from prfaas_plan.sim.records import COLUMNS
from prfaas_plan.sim.workload import synthetic_workload
from prfaas_plan.throughput import StageModel


@pytest.mark.parametrize(("seed", "load", "steps"), [(1, 0.6, False), (2, 1.2, True)])
def test_a_world_where_nothing_changes_is_the_static_cluster(
    paper_model: StageModel, seed: int, load: float, steps: bool
) -> None:
    """``DynamicWorld`` with no loss, no scheduler and no cache to move takes every hook and routes as the
    plan does: its records, events and link tallies are the static handler path's, bit for bit (below and
    above capacity, with and without bandwidth steps, one an outage)."""
    plan = search(paper_model)
    assert plan.threshold_tokens is not None
    bandwidth = paper_model.link_bandwidth_bytes_per_s
    profile = ((0.0, bandwidth), (30.0, 0.0), (40.0, 0.5 * bandwidth)) if steps else ()
    config = ClusterConfig(
        model=paper_model,
        threshold_tokens=plan.threshold_tokens,
        n_pd_prefill=plan.n_pd_prefill,
        n_pd_decode=plan.n_pd_decode,
        bandwidth_profile=profile,
    )
    rate = load * plan.throughput_req_per_s
    workload = synthetic_workload(
        np.random.default_rng(seed), Poisson(rate_req_per_s=rate), paper_model.lengths, Fixed(tokens=512), 2000
    )
    static = Cluster(config, workload, None).run_handlers(math.inf)
    world = Cluster(config, workload, None, DynamicWorld()).run(math.inf)
    for name in COLUMNS:
        assert np.array_equal(getattr(world.records, name), getattr(static.records, name), equal_nan=True), name
    assert (world.events, world.end_s, world.completed) == (static.events, static.end_s, static.completed)
    assert world.state_time_s == static.state_time_s
    assert np.array_equal(world.egress_bin_bytes, static.egress_bin_bytes)
    assert (world.restarted_prefills, world.resumed_decodes, world.rerouted) == (0, 0, 0)


def test_a_strategy_serves_one_cluster_and_a_world_keeps_the_fixed_step_decode(paper_model: StageModel) -> None:
    """Attaching a strategy to a second cluster, or a decoder to a cluster in a changing world: ValueError."""
    workload = synthetic_workload(
        np.random.default_rng(0), Poisson(rate_req_per_s=1.0), paper_model.lengths, Fixed(tokens=8), 20
    )
    config = ClusterConfig(model=paper_model, threshold_tokens=20_000.0, n_pd_prefill=2, n_pd_decode=2)
    world, decoder = DynamicWorld(), BatchDecode()
    Cluster(config, workload, None, world)
    Cluster(config, workload, None, decoder=decoder)
    with pytest.raises(ValueError, match="one cluster"):
        Cluster(config, workload, None, world)
    with pytest.raises(ValueError, match="one cluster"):
        Cluster(config, workload, None, decoder=decoder)
    with pytest.raises(ValueError, match="no decoder"):
        Cluster(config, workload, None, DynamicWorld(), decoder=BatchDecode())
