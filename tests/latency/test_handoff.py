"""The KV handoff of a disaggregated prefill (``EngineProfile.kv_handoff_s``) in the planner: a wait before the
first token of each request its pool prefills, holding no prefill instance. The closed forms (unloaded and
loaded) and the simulator add it the same way, and it moves no capacity."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from prfaas_plan.io.engine_profile import load_named_engine
from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.latency.distribution import loaded_ttft
from prfaas_plan.latency.unloaded import route_latency, unloaded_ttft
from prfaas_plan.sim.cluster import ClusterConfig
from prfaas_plan.sim.records import Records
from prfaas_plan.sim.run import simulate
from prfaas_plan.sim.workload import Workload
from prfaas_plan.spec.plan import Plan
from prfaas_plan.throughput import StageModel, stage_model
from tests.conftest import PAPER_SCENARIO, REPO

LOCAL_S, OFFLOAD_S = 0.3, 0.7
THRESHOLD = 19_400.0


def test_unloaded_ttft_adds_each_routes_handoff() -> None:
    """Mean TTFT grows by the two handoffs weighted by the routes' shares; the offloaded P99 by the PrfaaS one."""
    plain = stage_model(load_scenario(PAPER_SCENARIO))
    shifted = replace(plain, local_handoff_s=LOCAL_S, prfaas_handoff_s=OFFLOAD_S)
    p = float(plain.lengths.sf(THRESHOLD))
    before = unloaded_ttft(plain.lengths, route_latency(plain), THRESHOLD)
    after = unloaded_ttft(shifted.lengths, route_latency(shifted), THRESHOLD)
    assert after.mean_s - before.mean_s == pytest.approx(LOCAL_S * (1 - p) + OFFLOAD_S * p, rel=1e-9)
    assert after.p99_s - before.p99_s == pytest.approx(OFFLOAD_S, rel=1e-6)


def test_loaded_ttft_shifts_by_a_common_handoff_and_keeps_the_utilisations() -> None:
    """The same handoff on both routes shifts the loaded TTFT law by exactly that and leaves every stage's
    utilisation and the stability limit alone (it holds no instance)."""
    plain = stage_model(load_scenario(PAPER_SCENARIO))
    shifted = replace(plain, local_handoff_s=LOCAL_S, prfaas_handoff_s=LOCAL_S)
    plan = Plan(threshold_tokens=THRESHOLD, n_pd_prefill=3, n_pd_decode=5)
    before = loaded_ttft(plain, plan, 1.0)
    after = loaded_ttft(shifted, plan, 1.0)
    assert before.stable and after.stable
    assert after.utilization == before.utilization
    assert after.stability_limit_req_per_s == before.stability_limit_req_per_s
    assert after.wait_mean_s == before.wait_mean_s
    assert after.ttft is not None and before.ttft is not None
    assert after.ttft.mean_s - before.ttft.mean_s == pytest.approx(LOCAL_S, rel=1e-6)
    assert after.ttft.p90_s - before.ttft.p90_s == pytest.approx(LOCAL_S, rel=1e-3)


def test_the_simulator_moves_each_first_token_by_its_routes_handoff() -> None:
    """Same arrivals, same plan: every first token comes its route's handoff later; nothing else moves."""
    model = stage_model(load_scenario(PAPER_SCENARIO))
    rng = np.random.default_rng(3)
    n = 300
    workload = Workload(
        arrival_s=np.cumsum(rng.exponential(1.0, n)),
        input_tokens=rng.uniform(1_000.0, 60_000.0, n),
        output_tokens=np.full(n, 64.0),
    )

    def run(m: StageModel) -> Records:
        config = ClusterConfig(model=m, threshold_tokens=THRESHOLD, n_pd_prefill=3, n_pd_decode=5)
        return simulate(config, workload).records

    plain = run(model)
    shifted = run(replace(model, local_handoff_s=LOCAL_S, prfaas_handoff_s=OFFLOAD_S))
    expected = np.where(plain.offloaded, OFFLOAD_S, LOCAL_S)
    done = ~np.isnan(plain.first_token_s)
    assert done.sum() > n // 2
    moved = shifted.first_token_s - plain.first_token_s
    assert np.allclose(moved[done], expected[done], rtol=0, atol=1e-9)
    assert np.array_equal(shifted.prefill_end_s, plain.prefill_end_s, equal_nan=True)
    assert np.array_equal(shifted.kv_ready_s, plain.kv_ready_s, equal_nan=True)


def test_the_stage_model_takes_each_pools_handoff_from_its_engine() -> None:
    """Roofline pools priced by SGLang carry its handoff on both routes; measured pools (the paper's) none."""
    engine = load_named_engine("sglang")
    roofline = stage_model(load_scenario(REPO / "workloads" / "qwen3-next-b200-h100.yaml"))
    assert roofline.local_handoff_s == roofline.prfaas_handoff_s == engine.kv_handoff_s > 0
    measured = stage_model(load_scenario(PAPER_SCENARIO))
    assert measured.local_handoff_s == measured.prfaas_handoff_s == 0.0
