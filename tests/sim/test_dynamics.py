"""The simulator in a changing world: bandwidth over time, outages, lost instances, the dual-timescale
scheduler. Request conservation under random faults; recovery; convergence to the static optimum."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.errors import InputError
from prfaas_plan.lengths import Empirical, Fixed
from prfaas_plan.optimize import search
from prfaas_plan.sim.arrivals import Poisson
from prfaas_plan.sim.cluster import Cluster, ClusterConfig
from prfaas_plan.sim.dynamic import DynamicWorld
from prfaas_plan.sim.faults import fault_impact
from prfaas_plan.sim.link_profile import bandwidth_steps, ou_log_bandwidth, periodic, with_outages
from prfaas_plan.sim.run import simulate
from prfaas_plan.sim.scheduler import best_threshold
from prfaas_plan.sim.workload import Workload, synthetic_workload
from prfaas_plan.spec.dynamics import (
    BandwidthSteps,
    InstanceLoss,
    Outage,
    PeriodicBandwidth,
    RandomBandwidth,
    RoleControl,
    ThresholdControl,
)
from prfaas_plan.throughput import StageModel, max_throughput, routing, stage_bounds, stage_throughputs
from tests.conftest import examples
from tests.sim.helpers import queue_model


def _workload(seed: int, n: int, rate: float, model: StageModel, output: float = 1.0) -> Workload:
    rng = np.random.default_rng(seed)
    return synthetic_workload(rng, Poisson(rate_req_per_s=rate), model.lengths, Fixed(tokens=output), n)


losses = st.builds(
    InstanceLoss,
    pool=st.sampled_from(["prfaas", "local_prefill", "decode"]),
    at_s=st.floats(0.0, 40.0),
    count=st.integers(1, 3),
    restore_s=st.one_of(st.none(), st.floats(41.0, 80.0)),
)


@settings(max_examples=examples(60), deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.lists(losses, max_size=4),
    st.lists(st.tuples(st.floats(0.0, 60.0), st.floats(0.1, 30.0)), max_size=2),
    st.one_of(st.just(math.inf), st.floats(1.0, 100.0)),
    st.booleans(),
)
def test_every_request_is_accounted_for_under_random_faults(
    seed: int,
    fault_list: list[InstanceLoss],
    outage_list: list[tuple[float, float]],
    horizon_s: float,
    scheduler: bool,
) -> None:
    """arrived = completed + in flight + dropped at any horizon, with dropped = 0 (no policy drops); when
    every lost instance comes back, a run to the end completes every request."""
    model = queue_model(n_prfaas=2, n_local=4, bandwidth_bytes_per_s=2e4, kv_per_token=1.0, decode_max_batch=2)
    model = replace(model, decode_step_time_s=0.05, output_tokens_mean=10.0)
    workload = _workload(seed, 150, 2.0, model, output=10.0)
    outages = tuple(Outage(start_s=a, duration_s=d) for a, d in outage_list)
    profile = bandwidth_steps(None, outages, nominal_bytes_per_s=2e4, horizon_s=100.0, rng=np.random.default_rng(0))
    config = ClusterConfig(
        model=model,
        threshold_tokens=10_000.0,
        n_pd_prefill=2,
        n_pd_decode=2,
        bandwidth_profile=profile,
        losses=tuple(fault_list),
        threshold_control=ThresholdControl(interval_s=5.0, window_requests=60) if scheduler else None,
        role_control=RoleControl(period_s=20.0, switch_s=3.0) if scheduler else None,
    )
    result = simulate(config, workload, horizon_s=horizon_s)
    assert result.dropped == 0
    assert result.arrived == result.completed + result.in_flight + result.dropped
    assert all(v >= 0 for v in result.in_system.values())
    records = result.records
    done = ~np.isnan(records.finish_s)
    assert int(np.count_nonzero(done)) == result.completed
    assert np.all(records.first_token_s[done] <= records.finish_s[done] + 1e-9)
    restored = all(loss.restore_s is not None for loss in fault_list)
    if restored and math.isinf(horizon_s):
        assert result.completed == workload.n_requests


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(0, 2**32 - 1), st.lists(losses, min_size=1, max_size=4), st.floats(1.0, 100.0))
def test_no_instance_idles_while_its_pool_has_a_queue(
    seed: int, fault_list: list[InstanceLoss], horizon_s: float
) -> None:
    """Work conservation through faults: at any moment, a prefill pool with an idle instance has an empty
    queue, and the free decode slots never go negative."""
    model = queue_model(n_prfaas=2, n_local=4, bandwidth_bytes_per_s=2e4, kv_per_token=1.0, decode_max_batch=2)
    model = replace(model, decode_step_time_s=0.05, output_tokens_mean=10.0)
    workload = _workload(seed, 150, 2.0, model, output=10.0)
    config = ClusterConfig(
        model=model, threshold_tokens=10_000.0, n_pd_prefill=2, n_pd_decode=2, losses=tuple(fault_list)
    )
    world = DynamicWorld()
    cluster = Cluster(config, workload, None, world)
    cluster.run(horizon_s)
    for route in (0, 1):
        assert not (cluster.free[route] and cluster.queues[route])
        assert cluster.free[route] + len(world.serving[route]) <= world.alive[route]
    assert cluster.decode_free >= 0
    assert not (cluster.decode_free and cluster.decode_queue)


def test_an_aborted_prefill_restarts_at_once_on_an_idle_instance() -> None:
    """Two local instances, one busy: the loss takes the busy one (the policy's worst case); its request
    restarts at the loss on the idle one, and the next arrival waits for it."""
    model = queue_model(n_prfaas=1, n_local=3)
    workload = Workload.of([0.0, 2.0], [100_000.0, 1_000.0], [1.0, 1.0])
    config = ClusterConfig(
        model=model,
        threshold_tokens=math.inf,
        n_pd_prefill=2,
        n_pd_decode=1,
        losses=(InstanceLoss(pool="local_prefill", at_s=1.0),),
    )
    result = simulate(config, workload)
    assert result.restarted_prefills == 1
    assert result.records.prefill_start_s.tolist() == [1.0, 11.0]
    assert result.completed == 2


def _with_moves(workload: Workload, sizes: np.ndarray, to_prfaas: np.ndarray, offloaded: np.ndarray) -> Workload:
    return replace(
        workload,
        offloaded=offloaded,
        cache_transfer_bytes=np.asarray(sizes, dtype=np.float64),
        cache_transfer_to_prfaas=to_prfaas,
    )


def test_a_cache_transfer_delays_the_prefill_by_its_link_time() -> None:
    """On an idle link a prefix of S bytes towards local (PrfaaS egress) or towards PrfaaS (the reverse
    direction) delays the prefill start by S / B; the bytes are counted; nothing else changes."""
    model = queue_model(n_prfaas=1, n_local=2, bandwidth_bytes_per_s=1000.0)
    base = Workload.of([0.0, 100.0], [1_000.0, 1_000.0], [1.0, 1.0])
    moved = _with_moves(base, np.array([500.0, 2000.0]), np.array([False, True]), np.array([False, True]))
    config = ClusterConfig(model=model, threshold_tokens=math.inf, n_pd_prefill=1, n_pd_decode=1)
    result = simulate(config, moved)
    assert result.records.prefill_start_s.tolist() == pytest.approx([0.5, 102.0])
    assert result.cache_moved_bytes == 2500.0
    assert result.completed == 2


@settings(max_examples=examples(40), deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.lists(losses, max_size=3),
    st.one_of(st.just(math.inf), st.floats(1.0, 100.0)),
    st.booleans(),
)
def test_requests_waiting_for_cache_transfers_are_accounted_for(
    seed: int, fault_list: list[InstanceLoss], horizon_s: float, outage: bool
) -> None:
    """Conservation with cache transfers in both directions, faults and an outage: arrived = completed +
    in flight; with every loss restored a run to the end completes every request."""
    model = queue_model(n_prfaas=2, n_local=4, bandwidth_bytes_per_s=2e4, kv_per_token=1.0, decode_max_batch=2)
    model = replace(model, decode_step_time_s=0.05, output_tokens_mean=10.0)
    workload = _workload(seed, 150, 2.0, model, output=10.0)
    rng = np.random.default_rng(seed)
    offloaded = np.asarray(workload.input_tokens) > 10_000.0
    sizes = np.where(rng.random(150) < 0.5, rng.exponential(5e3, 150), 0.0)
    flags = np.where(rng.random(150) < 0.8, offloaded, ~offloaded)
    profile = ((0.0, 2e4), (20.0, 0.0), (50.0, 2e4)) if outage else ()
    config = ClusterConfig(
        model=model,
        threshold_tokens=10_000.0,
        n_pd_prefill=2,
        n_pd_decode=2,
        losses=tuple(fault_list),
        bandwidth_profile=profile,
    )
    result = simulate(config, _with_moves(workload, sizes, flags, offloaded), horizon_s=horizon_s)
    assert result.dropped == 0
    assert result.arrived == result.completed + result.in_flight
    if math.isinf(horizon_s) and all(loss.restore_s is not None for loss in fault_list):
        assert result.completed == workload.n_requests


def test_lost_prfaas_pool_reroutes_to_local_and_recovers() -> None:
    """Every PrfaaS instance lost for 300 s: its work is rerouted to local prefill, nothing is lost, the
    P90 TTFT spikes during the loss and returns to its baseline after the restore."""
    model = queue_model(n_prfaas=2, n_local=4)
    workload = _workload(1, 6000, 2.0, model)
    base = ClusterConfig(model=model, threshold_tokens=10_000.0, n_pd_prefill=2, n_pd_decode=2)
    faulty = replace(base, losses=(InstanceLoss(pool="prfaas", at_s=1000.0, count=2, restore_s=1300.0),))
    result = simulate(faulty, workload)
    assert result.completed == workload.n_requests
    assert result.rerouted > 0
    impact = fault_impact(result.records, fault_s=1000.0, bin_s=50.0)
    assert impact.peak_p90_s > 2 * impact.baseline_p90_s
    assert impact.peak_after_s < 300.0
    assert impact.recovery_s is not None and 300.0 <= impact.recovery_s < 600.0


def test_lost_decode_instance_resumes_its_requests() -> None:
    """A decode instance lost mid-run: its requests are re-prefilled and finish elsewhere; TTFT of a resumed
    request is its first admission."""
    model = replace(queue_model(n_prfaas=1, n_local=4, decode_max_batch=4), decode_step_time_s=0.1)
    workload = _workload(2, 400, 0.8, model, output=20.0)
    config = ClusterConfig(
        model=model,
        threshold_tokens=10_000.0,
        n_pd_prefill=2,
        n_pd_decode=2,
        losses=(InstanceLoss(pool="decode", at_s=200.0),),
    )
    result = simulate(config, workload)
    assert result.completed == workload.n_requests
    assert result.resumed_decodes > 0
    hold = workload.output_tokens * model.decode_step_time_s
    finished_late = result.records.finish_s - result.records.decode_start_s > hold + 1e-9
    assert np.any(finished_late)


def test_outage_stops_transfers_and_they_resume() -> None:
    """A 60 s outage: no byte crosses the link inside it; every request still completes."""
    model = queue_model(n_prfaas=2, n_local=2, bandwidth_bytes_per_s=1e5)
    workload = _workload(3, 500, 0.5, model)
    steps = bandwidth_steps(
        None,
        (Outage(start_s=300.0, duration_s=60.0),),
        nominal_bytes_per_s=1e5,
        horizon_s=1e3,
        rng=np.random.default_rng(0),
    )
    assert steps == ((0.0, 1e5), (300.0, 0.0), (360.0, 1e5))
    config = ClusterConfig(
        model=model,
        threshold_tokens=5_000.0,
        n_pd_prefill=1,
        n_pd_decode=1,
        bandwidth_profile=steps,
        egress_bin_s=10.0,
    )
    result = simulate(config, workload)
    assert result.completed == workload.n_requests
    assert np.all(result.egress_bin_bytes[30:36] == 0.0)


def test_profiles() -> None:
    """Periodic steps repeat; outages override and overlap; the OU process has the asked mean and spread."""
    spec = PeriodicBandwidth(period_s=10.0, steps=((0.0, 5.0), (4.0, 1.0)))
    assert periodic(spec, 25.0) == ((0.0, 5.0), (4.0, 1.0), (10.0, 5.0), (14.0, 1.0), (20.0, 5.0), (24.0, 1.0))
    merged = with_outages(((0.0, 5.0), (10.0, 7.0)), (Outage(start_s=5.0, duration_s=10.0),))
    assert merged == ((0.0, 5.0), (5.0, 0.0), (15.0, 7.0))
    assert bandwidth_steps(
        BandwidthSteps(steps=((0.0, 1.0),)), (), nominal_bytes_per_s=1.0, horizon_s=1.0, rng=np.random.default_rng(0)
    ) == ((0.0, 1.0),)
    random = RandomBandwidth(mean_bytes_per_s=100.0, std_bytes_per_s=30.0, correlation_s=5.0, step_s=1.0)
    values = np.array([b for _, b in ou_log_bandwidth(np.random.default_rng(7), random, 200_000.0)])
    # 200,000 steps with correlation time 5: about 20,000 independent samples; 5 % is many standard errors.
    assert values.mean() == pytest.approx(100.0, rel=0.05)
    assert values.std() == pytest.approx(30.0, rel=0.05)
    lag = np.corrcoef(values[:-5], values[5:])[0, 1]
    assert lag == pytest.approx(math.exp(-1.0), abs=0.05)
    same = ou_log_bandwidth(np.random.default_rng(7), random, 100.0)
    assert same == ou_log_bandwidth(np.random.default_rng(7), random, 100.0)


def test_dynamic_cluster_refuses_what_it_does_not_model() -> None:
    """Per-instance KV admission with faults, and faults with layer-wise transfers: InputError."""
    model = queue_model()
    workload = _workload(0, 10, 1.0, model)
    config = ClusterConfig(
        model=model,
        threshold_tokens=1.0,
        n_pd_prefill=1,
        n_pd_decode=1,
        decode_kv_capacity_bytes=1e12,
        losses=(InstanceLoss(pool="prfaas", at_s=1.0),),
    )
    with pytest.raises(InputError, match="slots only"):
        simulate(config, workload)


def _finite_model(**extra: object) -> StageModel:
    """queue_model with its exponential lengths replaced by 20,000 draws of them (finite support, which
    optimize.search needs)."""
    model = queue_model(**extra)  # type: ignore[arg-type]
    return replace(model, lengths=Empirical(values=model.lengths.sample(np.random.default_rng(99), 20_000)))


def _lam(model: StageModel, t: float, n_p: int) -> float:
    route = routing(model.lengths, np.array([t]))
    return float(max_throughput(stage_bounds(stage_throughputs(model, route, n_p), route))[0])


@pytest.mark.parametrize(("start", "seed"), [(0.25, 0), (4.0, 0), (0.25, 2), (4.0, 2)])
def test_adaptive_threshold_converges_to_the_static_optimum(start: float, seed: int) -> None:
    """Constant link, stationary Poisson traffic: started at a quarter or four times the static optimum t*,
    the short-term scheduler ends within 3σ of t*, where σ is the sampling error of the window's quantile at
    t*: a window of W lengths estimates p = P(L > t*) with standard error √(p(1−p)/W), which moves the
    quantile by that over the density f(t*) (exponential lengths: f = p / mean), so
    σ_t / t* = √((1−p)/(pW)) · mean / t* (about 3 % here; the EWMA over overlapping windows barely reduces
    it). Λ_max is steep beside the kink at t* (it scales as 1/p on the PrfaaS side), so its gap is bounded by
    3 relative standard errors of p, not by a fixed small percentage."""
    model = _finite_model(n_prfaas=2, n_local=6, bandwidth_bytes_per_s=4e4, kv_per_token=1.0)
    model = replace(model, decode_max_batch=1000, decode_step_time_s=1e-3)
    plan = search(model)
    t_star = plan.threshold_tokens
    assert t_star is not None
    window = 2000
    workload = _workload(seed, 20_000, 0.7 * plan.throughput_req_per_s, model)
    config = ClusterConfig(
        model=model,
        threshold_tokens=start * t_star,
        n_pd_prefill=plan.n_pd_prefill,
        n_pd_decode=plan.n_pd_decode,
        threshold_control=ThresholdControl(interval_s=20.0, window_requests=window),
    )
    result = simulate(config, workload)
    assert result.completed == workload.n_requests
    assert result.threshold_changes
    final = result.threshold_changes[-1][1]
    p = float(model.lengths.sf(t_star))
    relative_p = math.sqrt((1 - p) / (p * window))
    sigma_t = relative_p * model.lengths.mean_tokens
    assert abs(final - t_star) <= 3 * sigma_t
    assert _lam(model, final, plan.n_pd_prefill) >= (1 - 3 * relative_p) * plan.throughput_req_per_s


def test_best_threshold_matches_the_optimiser_on_the_same_window() -> None:
    """On one window the scheduler's choice scores within 0.1 % of optimize.search on that window's
    empirical distribution (the same Eq. 6, the same N_p)."""
    model = _finite_model(n_prfaas=2, n_local=6, bandwidth_bytes_per_s=4e4, kv_per_token=1.0)
    window = model.lengths.sample(np.random.default_rng(0), 5_000)
    on_window = replace(model, lengths=Empirical(values=window))
    plan = search(on_window)
    choice = best_threshold(
        model,
        window,
        n_prfaas=2,
        n_pd_prefill=plan.n_pd_prefill,
        n_pd_decode=plan.n_pd_decode,
        bandwidth_bytes_per_s=4e4,
    )
    assert _lam(on_window, choice.threshold_tokens, plan.n_pd_prefill) >= 0.999 * plan.throughput_req_per_s


def test_role_scheduler_moves_instances_towards_the_bottleneck() -> None:
    """Started with too few local prefill instances, the long-term scheduler converts decode to prefill."""
    model = queue_model(n_prfaas=1, n_local=6, bandwidth_bytes_per_s=1e18)
    model = replace(model, decode_max_batch=1000, decode_step_time_s=1e-3)
    workload = _workload(6, 6000, 1.5, model)
    config = ClusterConfig(
        model=model,
        threshold_tokens=15_000.0,
        n_pd_prefill=1,
        n_pd_decode=5,
        threshold_control=ThresholdControl(interval_s=20.0, window_requests=1000),
        role_control=RoleControl(period_s=100.0, switch_s=10.0),
    )
    result = simulate(config, workload)
    assert result.completed == workload.n_requests
    assert len(result.role_changes) > 1
    assert result.role_changes[-1][1] > 1


def test_resumed_requests_keep_their_first_pass_in_the_records() -> None:
    """A decode instance lost and restored: the requests it held are re-prefilled, yet their records keep the
    pass that gave their first token (the re-prefill used to overwrite it: prefill_end_s after first_token_s
    and a decode wait of -56 s); every request's events stay in order."""
    model = replace(queue_model(n_prfaas=2, n_local=4, decode_max_batch=4), decode_step_time_s=0.1)
    workload = _workload(3, 400, 0.8, model, output=20.0)
    threshold = float(np.median(workload.input_tokens))  # half the requests go through PrfaaS
    config = ClusterConfig(
        model=model,
        threshold_tokens=threshold,
        n_pd_prefill=2,
        n_pd_decode=2,
        losses=(InstanceLoss(pool="decode", at_s=200.0, count=1, restore_s=260.0),),
    )
    result = simulate(config, workload)
    assert result.resumed_decodes > 0 and result.completed == workload.n_requests
    rec = result.records
    chain = (rec.prefill_start_s, rec.prefill_end_s, rec.kv_ready_s, rec.decode_start_s, rec.first_token_s)
    for k, earlier in enumerate(chain):
        later = chain[k + 1] if k + 1 < len(chain) else rec.finish_s
        assert np.all(earlier <= later + 1e-9)
    assert np.all(rec.decode_wait_s >= -1e-9) and np.all(rec.prefill_wait_s >= -1e-9)
    np.testing.assert_array_equal(rec.offloaded, workload.input_tokens > threshold)
