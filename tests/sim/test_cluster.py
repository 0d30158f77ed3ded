"""The simulated cluster: determinism, conservation, Little's law, and the semantics of each stage."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest

from prfaas_plan.errors import InputError
from prfaas_plan.lengths import Fixed
from prfaas_plan.optimize import PlanEvaluation, search
from prfaas_plan.sim.arrivals import Poisson
from prfaas_plan.sim.cluster import ClusterConfig
from prfaas_plan.sim.records import COLUMNS, STATES, Records, SimResult
from prfaas_plan.sim.run import simulate
from prfaas_plan.sim.summary import occupancy, state_intervals
from prfaas_plan.sim.workload import Workload, synthetic_workload
from prfaas_plan.throughput import StageModel
from tests.sim.helpers import all_local, all_offloaded, queue_model


@pytest.fixture(scope="module")
def paper_plan(paper_model: StageModel) -> PlanEvaluation:
    return search(paper_model)


def _paper_config(model: StageModel, plan: PlanEvaluation, **extra: object) -> ClusterConfig:
    assert plan.threshold_tokens is not None
    return ClusterConfig(
        model=model,
        threshold_tokens=plan.threshold_tokens,
        n_pd_prefill=plan.n_pd_prefill,
        n_pd_decode=plan.n_pd_decode,
        **extra,  # type: ignore[arg-type]
    )


def _paper_run(
    model: StageModel, plan: PlanEvaluation, seed: int, n: int = 4000, load: float = 0.7, **extra: object
) -> SimResult:
    rng = np.random.default_rng(seed)
    arrivals = Poisson(rate_req_per_s=load * plan.throughput_req_per_s)
    workload = synthetic_workload(rng, arrivals, model.lengths, Fixed(tokens=1024), n)
    horizon = extra.pop("horizon_s", math.inf)
    return simulate(_paper_config(model, plan, **extra), workload, horizon_s=horizon)  # type: ignore[arg-type]


def _same(a: Records, b: Records) -> bool:
    return all(np.array_equal(getattr(a, c), getattr(b, c), equal_nan=True) for c in COLUMNS)


def test_same_seed_same_records_different_seed_different_records(
    paper_model: StageModel, paper_plan: PlanEvaluation
) -> None:
    """Identical seeds give identical records (the engine has no other source of randomness); another seed
    gives other records."""
    first = _paper_run(paper_model, paper_plan, seed=11)
    again = _paper_run(paper_model, paper_plan, seed=11)
    other = _paper_run(paper_model, paper_plan, seed=12)
    assert _same(first.records, again.records) and first.events == again.events
    assert not _same(first.records, other.records)


def test_every_arrival_is_accounted_for_at_the_horizon(paper_model: StageModel, paper_plan: PlanEvaluation) -> None:
    """At a horizon mid-run, completed + in system (by state, from the engine's own counters) = arrivals, and
    each state's count equals the requests the records place in it at that instant."""
    full = _paper_run(paper_model, paper_plan, seed=5, load=1.3)
    horizon = 0.5 * float(full.records.arrival_s[-1])
    cut = _paper_run(paper_model, paper_plan, seed=5, load=1.3, horizon_s=horizon)
    assert cut.end_s == horizon
    assert 0 < cut.completed < cut.arrived < full.arrived
    assert cut.completed + sum(cut.in_system.values()) == cut.arrived
    assert cut.completed == int(np.count_nonzero(np.isfinite(cut.records.finish_s)))
    for name, (entry, exit_) in state_intervals(cut.records).items():
        inside = np.isfinite(entry) & ~(exit_ <= horizon)
        assert cut.in_system[name] == int(np.count_nonzero(inside)), name
    assert cut.in_system["prfaas_queue"] + cut.in_system["local_queue"] > 0  # overloaded: queues at the horizon


def test_littles_law_exactly_on_a_drained_run(paper_model: StageModel, paper_plan: PlanEvaluation) -> None:
    """Little's law in sample-path form on every state: over a run that starts and ends empty, the area under
    the engine's count of requests in a state (L·T) equals the sum of the records' sojourns in it (λT·W)."""
    result = _paper_run(paper_model, paper_plan, seed=3, load=0.9)
    assert sum(result.in_system.values()) == 0 and result.completed == result.arrived
    for name, (entry, exit_) in state_intervals(result.records).items():
        sojourn = float(np.nansum(exit_ - entry))
        assert result.state_time_s[name] == pytest.approx(sojourn, rel=1e-9, abs=1e-6), name
    area = occupancy(result.records, 0.0, result.end_s)
    for name in STATES:
        assert area[name] * result.end_s == pytest.approx(result.state_time_s[name], rel=1e-9, abs=1e-6)


def test_littles_law_in_steady_state(paper_model: StageModel, paper_plan: PlanEvaluation) -> None:
    """Over a window after warm-up, the time-average number in each state L equals λ·W, λ the rate of
    entries into the state in the window and W their mean sojourn (within 3 %: only edge effects differ)."""
    result = _paper_run(paper_model, paper_plan, seed=9, n=20_000, load=0.8)
    rec = result.records
    lo, hi = float(rec.arrival_s[2000]), float(rec.arrival_s[-1])
    average = occupancy(rec, lo, hi)
    for name, (entry, exit_) in state_intervals(rec).items():
        entered = np.isfinite(entry) & (entry >= lo) & (entry < hi)
        rate = np.count_nonzero(entered) / (hi - lo)
        mean_sojourn = float(np.mean(exit_[entered] - entry[entered])) if entered.any() else 0.0
        assert average[name] == pytest.approx(rate * mean_sojourn, rel=0.03, abs=0.005), name


def test_records_follow_each_request_through_the_stages(paper_model: StageModel, paper_plan: PlanEvaluation) -> None:
    """Times never go backwards along a request; the route follows the threshold; service takes T(L) on the
    route's curve; decode holds L_out · T_decode; each pool is FCFS and never runs more than its servers."""
    result = _paper_run(paper_model, paper_plan, seed=2, n=6000, load=0.95)
    rec = result.records
    chain = [rec.arrival_s, rec.prefill_start_s, rec.prefill_end_s, rec.kv_ready_s, rec.decode_start_s, rec.finish_s]
    for earlier, later in itertools.pairwise(chain):
        assert np.all(later >= earlier)
    assert np.array_equal(rec.offloaded, rec.input_tokens > paper_plan.threshold_tokens)
    service = np.where(
        rec.offloaded, paper_model.prfaas_prefill(rec.input_tokens), paper_model.local_prefill(rec.input_tokens)
    )
    assert np.allclose(rec.prefill_end_s - rec.prefill_start_s, service, rtol=1e-9, atol=1e-9)
    assert np.allclose(rec.finish_s - rec.decode_start_s, 1024 * paper_model.decode_step_time_s)
    assert np.array_equal(rec.first_token_s, rec.decode_start_s)  # the paper's TTFT ends at the KV hand-off
    for route, servers in ((True, paper_model.n_prfaas), (False, paper_plan.n_pd_prefill)):
        starts = rec.prefill_start_s[rec.offloaded == route]
        assert np.all(np.diff(starts) >= 0)  # FCFS over identical servers: starts in arrival order
        assert _max_concurrent(starts, rec.prefill_end_s[rec.offloaded == route]) <= servers
    assert _max_concurrent(rec.decode_start_s, rec.finish_s) <= result.decode_slots
    order = np.argsort(rec.kv_ready_s, kind="stable")
    assert np.all(np.diff(rec.decode_start_s[order]) >= 0)  # decode admission is FCFS


def _max_concurrent(start: np.ndarray, end: np.ndarray) -> int:
    events = np.concatenate([np.stack([end, -np.ones_like(end)], 1), np.stack([start, np.ones_like(start)], 1)])
    events = events[np.lexsort((events[:, 1], events[:, 0]))]  # at equal times, departures first
    return int(np.max(np.cumsum(events[:, 1])))


def _one(input_tokens: float, arrival_s: float = 0.0, output_tokens: float = 1.0) -> Workload:
    return Workload.of([arrival_s], [input_tokens], [output_tokens])


@pytest.mark.parametrize(("kv_per_token", "visible_s"), [(3e-4, 2.0), (5e-5, 0.0)])
def test_layerwise_transfer_shows_only_what_outlasts_the_prefill(kv_per_token: float, visible_s: float) -> None:
    """Pipelined layer by layer, a lone transfer runs from the prefill start at the whole bandwidth: the KV
    is ready at start + max(T, S/B). 10,000 tokens: T = 1 s; S/B = 3 s or 0.5 s."""
    model = queue_model(bandwidth_bytes_per_s=1.0, kv_per_token=kv_per_token, transfer="layerwise")
    rec = simulate(all_offloaded(model), _one(10_000)).records
    assert rec.prefill_end_s[0] == pytest.approx(1.0)
    assert rec.transfer_start_s[0] == 0.0
    assert rec.kv_ready_s[0] - rec.prefill_end_s[0] == pytest.approx(visible_s)


def test_after_prefill_transfer_starts_at_the_prefill_end() -> None:
    """Shipped after the prefill, the lone transfer adds S/B to it: 1 s + 3 s."""
    model = queue_model(bandwidth_bytes_per_s=1.0, kv_per_token=3e-4)
    rec = simulate(all_offloaded(model), _one(10_000)).records
    assert rec.transfer_start_s[0] == pytest.approx(1.0)
    assert rec.kv_ready_s[0] == pytest.approx(4.0)


def test_intra_cluster_transfer_and_first_decode_step() -> None:
    """A local request hands its KV over in S/b when b is given; TTFT then adds one decode step if counted."""
    model = replace(
        queue_model(decode_step_time_s=0.5),
        local_kv_transfer_bytes_per_s=5_000.0,
        ttft_includes_first_decode_step=True,
    )
    rec = simulate(all_local(model, n_pd_prefill=1), _one(10_000, output_tokens=4.0)).records
    assert rec.kv_ready_s[0] - rec.prefill_end_s[0] == pytest.approx(2.0)
    assert rec.first_token_s[0] - rec.decode_start_s[0] == pytest.approx(0.5)
    assert rec.finish_s[0] - rec.decode_start_s[0] == pytest.approx(2.0)


def test_bandwidth_profile_outage_delays_transfers() -> None:
    """An outage from 1.5 s to 10 s stops a transfer that started at 1 s with 2 s of work; it resumes at 10
    s at the full rate and finishes at 11.5 s; egress is tallied only while bytes move."""
    model = queue_model(bandwidth_bytes_per_s=1.0, kv_per_token=2e-4)
    config = all_offloaded(model, bandwidth_profile=((0.0, 1.0), (1.5, 0.0), (10.0, 1.0)))
    result = simulate(config, _one(10_000))
    assert result.records.kv_ready_s[0] == pytest.approx(11.5)
    assert result.link_delivered_bytes == pytest.approx(2.0)
    assert result.egress_bin_bytes.sum() == pytest.approx(2.0)


def test_kv_memory_limits_decode_admission() -> None:
    """With room for two 10,000-byte caches per decode instance, at most two requests decode per instance
    although slots are plentiful; the rest wait for memory (FCFS)."""
    model = queue_model(decode_step_time_s=1.0)
    workload = Workload.of(np.zeros(6), np.full(6, 10_000.0), np.full(6, 10.0))
    config = replace(all_local(model, n_pd_prefill=6, n_pd_decode=2), decode_kv_capacity_bytes=25_000.0)
    rec = simulate(config, workload).records
    assert _max_concurrent(rec.decode_start_s, rec.finish_s) == 4
    assert sorted(rec.decode_start_s) == pytest.approx([1.0] * 4 + [11.0] * 2)
    slots_only = simulate(replace(config, decode_kv_capacity_bytes=None), workload).records
    assert np.all(slots_only.decode_start_s == pytest.approx(1.0))


def test_impossible_plans_are_refused() -> None:
    """Offloaded traffic without PrfaaS instances, local traffic without local prefill, a cache larger than a
    decode instance's memory: InputError, naming the problem."""
    model = queue_model(n_prfaas=0)
    with pytest.raises(InputError, match="n_prfaas"):
        simulate(all_offloaded(model), _one(100))
    with pytest.raises(InputError, match="n_pd_prefill"):
        simulate(all_local(queue_model(), n_pd_prefill=0), _one(100))
    with pytest.raises(InputError, match="never be admitted"):
        simulate(replace(all_local(queue_model(), 1), decode_kv_capacity_bytes=10.0), _one(100))
