"""Exact checks: stages of the simulated cluster configured as textbook queues match the exact formulas
within the 99 % confidence interval of independent replications (each 20,000 requests, 10 % warm-up)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest

from prfaas_plan.lengths import Fixed, LengthDistribution
from prfaas_plan.sim.arrivals import Poisson
from prfaas_plan.sim.cluster import ClusterConfig
from prfaas_plan.sim.records import Records
from prfaas_plan.sim.run import simulate
from prfaas_plan.sim.summary import confidence_half_width, replicate
from prfaas_plan.sim.workload import synthetic_workload
from tests.queueing_oracles import mmc_wait_mean_s
from tests.sim.helpers import MEAN_TOKENS, Exponential, all_local, all_offloaded, linear, queue_model

REPLICATIONS = 10
REQUESTS = 20_000
WARMUP = REQUESTS // 10
#: Each check also requires the interval to be narrower than this fraction of the exact value.
TIGHT = 0.15


def _replicated(
    config: ClusterConfig,
    rate: float,
    metric: Callable[[Records], np.ndarray],
    outputs: LengthDistribution | None = None,
    seed: int = 2024,
) -> tuple[float, float]:
    """Mean over replications of the per-replication mean of ``metric`` (after warm-up), and the 99 % CI
    half-width across replications."""

    def one(rng: np.random.Generator) -> float:
        arrivals = Poisson(rate_req_per_s=rate)
        workload = synthetic_workload(rng, arrivals, config.model.lengths, outputs or Fixed(tokens=1.0), REQUESTS)
        return float(np.mean(metric(simulate(config, workload).records)[WARMUP:]))

    means = replicate(one, REPLICATIONS, seed)
    return float(np.mean(means)), confidence_half_width(means, level=0.99)


def _prefill_wait(rec: Records) -> np.ndarray:
    return rec.prefill_wait_s


@pytest.mark.validation
@pytest.mark.parametrize(("servers", "rate"), [(1, 0.6), (4, 3.2)])
def test_prfaas_pool_is_mmc(servers: int, rate: float) -> None:
    """Every request offloaded, exponential service of mean 1 s on c PrfaaS servers, Poisson arrivals: the
    mean prefill wait is the M/M/c (Erlang C) W_q = C(c, a) E[S] / (c − a)."""
    config = all_offloaded(queue_model(n_prfaas=servers))
    mean, half = _replicated(config, rate, _prefill_wait)
    exact = mmc_wait_mean_s(servers, rate, 1.0)
    assert abs(mean - exact) <= half, (mean, half, exact)
    assert half < TIGHT * exact  # the interval is narrow enough to mean something


@pytest.mark.validation
def test_local_pool_is_mmc() -> None:
    """Every request local, c = 3 local prefill servers at ρ = 0.7: the local pool's wait is M/M/3's."""
    config = all_local(queue_model(), n_pd_prefill=3)
    mean, half = _replicated(config, 2.1, _prefill_wait)
    exact = mmc_wait_mean_s(3, 2.1, 1.0)
    assert abs(mean - exact) <= half, (mean, half, exact)
    assert half < TIGHT * exact


def _link_config(kv_fixed: float, kv_per_token: float) -> ClusterConfig:
    # 64 PrfaaS servers with a constant 1 ms prefill never queue at 0.7 req/s, so transfers start as a
    # Poisson stream (arrivals shifted by 1 ms). B = 10^4 bytes/s and E[S] = 10^4 bytes: E[S]/B = 1 s.
    model = queue_model(n_prfaas=64, prfaas_per_token=0.0, prfaas_fixed=1e-3, bandwidth_bytes_per_s=1e4)
    return all_offloaded(replace(model, kv_bytes=linear(kv_per_token, kv_fixed)))


def _transfer_time(rec: Records) -> np.ndarray:
    return rec.kv_ready_s - rec.transfer_start_s


@pytest.mark.validation
@pytest.mark.parametrize(("kv_fixed", "kv_per_token"), [(0.0, 1.0), (5_000.0, 0.5)], ids=["exponential", "shifted"])
def test_link_is_mg1_processor_sharing(kv_fixed: float, kv_per_token: float) -> None:
    """Transfers share the link equally: M/G/1-PS, whose mean sojourn E[S]/B / (1 − ρ) does not depend on the
    size distribution (Kleinrock 1976, Queueing Systems II, §4.4). Sizes exponential, then shifted
    exponential with SCV 1/4 (where FCFS would give 2.46 s instead of 3.33 s), at ρ = 0.7."""
    assert MEAN_TOKENS * kv_per_token + kv_fixed == pytest.approx(1e4)
    mean, half = _replicated(_link_config(kv_fixed, kv_per_token), 0.7, _transfer_time)
    exact = 1.0 / (1.0 - 0.7)
    assert abs(mean - exact) <= half, (mean, half, exact)
    assert half < TIGHT * exact


def _decode_wait(rec: Records) -> np.ndarray:
    return rec.decode_wait_s


@pytest.mark.validation
def test_decode_slots_are_mmc() -> None:
    """Two decode instances of two slots each, exponential output lengths held 10^-4 s per token (mean 1 s),
    fed by a Poisson stream (a 1 ms prefill on 64 servers, an instant link): the wait for a slot is
    M/M/4's, i.e. the N_d · BS_max slots act as one pool."""
    model = queue_model(
        n_prfaas=64, prfaas_per_token=0.0, prfaas_fixed=1e-3, decode_max_batch=2, decode_step_time_s=1e-4
    )
    config = all_offloaded(model, n_pd_decode=2)
    mean, half = _replicated(config, 3.0, _decode_wait, outputs=Exponential(mean=MEAN_TOKENS))
    exact = mmc_wait_mean_s(4, 3.0, 1.0)
    assert abs(mean - exact) <= half, (mean, half, exact)
    assert half < TIGHT * exact
