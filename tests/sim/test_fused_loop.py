"""Regression guard for the static cluster's fused loop (``cluster._fused_loop``).

The fused loop is an optimisation of the handler path (``Cluster.run_handlers``: every event through the engine
and the handler methods), not a different model. This guard runs both on the same workload for several seeds,
loads, traces and transfer modes, and requires every column of the records to be identical (bit for bit, NaN
where NaN), and the run's tallies identical too: events fired, end time, completions, link bytes and egress bins.
The occupancy integrals are summed per request after the fused run instead of in event order, so they agree to
rounding (1e-9 relative) rather than bit for bit. If this fails, the fused loop has drifted from the handlers.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from prfaas_plan.io.traces import read_trace
from prfaas_plan.lengths import Fixed, LengthDistribution
from prfaas_plan.optimize import PlanEvaluation, search
from prfaas_plan.sim.arrivals import Batched, OnOff, Poisson
from prfaas_plan.sim.cluster import Cluster, ClusterConfig
from prfaas_plan.sim.records import COLUMNS, SimResult
from prfaas_plan.sim.workload import Workload, synthetic_workload, trace_workload
from prfaas_plan.throughput import StageModel
from tests.conftest import TRACES


@pytest.fixture(scope="module")
def plan(paper_model: StageModel) -> PlanEvaluation:
    return search(paper_model)


def _config(model: StageModel, plan: PlanEvaluation, **extra: object) -> ClusterConfig:
    assert plan.threshold_tokens is not None
    return ClusterConfig(
        model=model,
        threshold_tokens=plan.threshold_tokens,
        n_pd_prefill=plan.n_pd_prefill,
        n_pd_decode=plan.n_pd_decode,
        **extra,  # type: ignore[arg-type]
    )


def _assert_same(fused: SimResult, reference: SimResult) -> None:
    for name in COLUMNS:
        a, b = getattr(fused.records, name), getattr(reference.records, name)
        assert np.array_equal(a, b, equal_nan=True), f"column {name} differs"
    assert fused.events == reference.events
    assert fused.end_s == reference.end_s
    assert (fused.arrived, fused.completed) == (reference.arrived, reference.completed)
    assert fused.in_system == reference.in_system
    assert fused.link_delivered_bytes == reference.link_delivered_bytes
    assert np.array_equal(fused.egress_bin_bytes, reference.egress_bin_bytes)
    for state, value in reference.state_time_s.items():
        assert fused.state_time_s[state] == pytest.approx(value, rel=1e-9, abs=1e-9), state


def _both(config: ClusterConfig, workload: Workload) -> tuple[SimResult, SimResult]:
    fused = Cluster(config, workload, None).run(math.inf)
    reference = Cluster(config, workload, None).run_handlers(math.inf)
    return fused, reference


@pytest.mark.parametrize("transfer", ["after_prefill", "layerwise"])
@pytest.mark.parametrize(("seed", "load"), [(1, 0.5), (2, 0.9), (3, 1.3)])
def test_poisson_runs_are_identical(
    paper_model: StageModel, plan: PlanEvaluation, transfer: str, seed: int, load: float
) -> None:
    """The paper plan under Poisson arrivals, below, near and above capacity, both transfer modes."""
    model = replace(paper_model, transfer=transfer)  # type: ignore[arg-type]
    rng = np.random.default_rng(seed)
    arrivals = Poisson(rate_req_per_s=load * plan.throughput_req_per_s)
    workload = synthetic_workload(rng, arrivals, model.lengths, Fixed(tokens=1024), 3000)
    _assert_same(*_both(_config(model, plan), workload))


def test_intra_cluster_transfer_first_step_and_bandwidth_steps(paper_model: StageModel, plan: PlanEvaluation) -> None:
    """Local KV over RDMA, TTFT counting a decode step, and a bandwidth profile with an outage."""
    model = replace(paper_model, local_kv_transfer_bytes_per_s=5e9, ttft_includes_first_decode_step=True)
    bandwidth = model.link_bandwidth_bytes_per_s
    profile = ((0.0, bandwidth), (30.0, 0.4 * bandwidth), (60.0, 0.0), (90.0, bandwidth))
    rng = np.random.default_rng(7)
    arrivals = OnOff(rate_req_per_s=0.8 * plan.throughput_req_per_s, on_fraction=0.5, mean_cycle_s=40.0)
    workload = synthetic_workload(rng, arrivals, model.lengths, Fixed(tokens=512), 3000)
    _assert_same(*_both(_config(model, plan, bandwidth_profile=profile, egress_bin_s=0.5), workload))


@pytest.mark.parametrize("transfer", ["after_prefill", "layerwise"])
def test_simultaneous_arrivals_and_equal_lengths(paper_model: StageModel, plan: PlanEvaluation, transfer: str) -> None:
    """Ties everywhere: batches of arrivals at one instant and a single input length, so prefills end together,
    transfers finish together and KV caches are ready together (the order of equal-time events matters)."""
    model = replace(paper_model, transfer=transfer)  # type: ignore[arg-type]
    lengths: LengthDistribution = Fixed(tokens=20_000.0)
    rng = np.random.default_rng(5)
    arrivals = Batched(epochs=Poisson(rate_req_per_s=0.7 * plan.throughput_req_per_s / 8), batch_size_mean=8.0)
    workload = synthetic_workload(rng, arrivals, lengths, Fixed(tokens=256), 2000)
    for threshold in (10_000.0, 30_000.0):
        # One decode instance of few slots, so that requests queue for decode and their order shows.
        config = replace(_config(replace(model, decode_max_batch=4), plan), threshold_tokens=threshold, n_pd_decode=1)
        _assert_same(*_both(config, workload))


@pytest.mark.parametrize("load", [0.6, 1.0])
def test_quantised_trace_is_identical(paper_model: StageModel, plan: PlanEvaluation, load: float) -> None:
    """The Mooncake conversation trace (whole-second timestamps: many requests share an arrival time)."""
    trace = read_trace(TRACES / "conversation_trace.jsonl")
    workload = trace_workload(trace, 4000, rate_req_per_s=load * plan.throughput_req_per_s)
    _assert_same(*_both(_config(paper_model, plan), workload))
