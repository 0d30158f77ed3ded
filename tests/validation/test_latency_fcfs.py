"""The composed TTFT law against an exact FCFS recursion of the paper plans' prefill pools.

Each case draws 300,000 requests (Poisson or gamma renewal arrivals; lengths from the paper's log-normal),
routes them by the plan's threshold, and runs each prefill pool as an exact FCFS G/G/c queue with the real
length-dependent service times (Kiefer-Wolfowitz recursion), dropping the first 10 % as warm-up. TTFT =
pool wait + the route's zero-wait latency with the model's link stretch. The decode-slot wait and the
link's queueing are left to the model (both are milliseconds here: decode slots run at <= 75 % of 100 or
more slots, the link at <= 12 %), so this checks the G/G/c pool approximations and the composition.

Measured (seed 7/11, 400,000 requests; closed form vs recursion; SE = 20-batch standard error):

| plan          | ca² | load | mean  sim / cf | P50  sim / cf | P90  sim (SE) / cf    |
|---------------|-----|------|----------------|---------------|-----------------------|
| PrfaaS-PD     | 1   | 50 % | 2.40 / 2.41    | 2.11 / 2.10   | 3.94 (0.01) / 3.98    |
| PrfaaS-PD     | 1   | 70 % | 2.87 / 2.87    | 2.48 / 2.45   | 5.03 (0.02) / 5.08    |
| PrfaaS-PD     | 1   | 90 % | 5.97 / 5.90    | 4.57 / 4.49   | 11.91 (0.33) / 11.87  |
| homogeneous   | 1   | 50 % | 4.49 / 4.50    | 3.14 / 3.14   | 9.77 (0.02) / 9.79    |
| homogeneous   | 1   | 70 % | 4.91 / 4.93    | 3.59 / 3.60   | 10.41 (0.03) / 10.47  |
| homogeneous   | 1   | 90 % | 10.10 / 10.09  | 7.90 / 8.00   | 20.88 (0.96) / 20.69  |
| naive         | 1   | 50 % | 1.87 / 1.88    | 1.41 / 1.41   | 3.75 (0.01) / 3.77    |
| naive         | 1   | 70 % | 2.31 / 2.32    | 1.79 / 1.80   | 4.66 (0.03) / 4.69    |
| naive         | 1   | 90 % | 6.15 / 6.09    | 4.64 / 4.62   | 12.94 (0.67) / 12.83  |
| PrfaaS-PD     | 2   | 50 % | 2.57 / 2.48    | 2.24 / 2.14   | 4.38 (0.01) / 4.25    |
| PrfaaS-PD     | 2   | 70 % | 3.25 / 3.14    | 2.72 / 2.56   | 5.91 (0.04) / 5.83    |
| PrfaaS-PD     | 2   | 90 % | 7.17 / 7.42    | 5.49 / 5.42   | 14.59 (0.58) / 15.69  |
| PrfaaS-PD     | 4   | 50 % | 2.96 / 2.63    | 2.50 / 2.18   | 5.31 (0.02) / 4.75    |
| PrfaaS-PD     | 4   | 70 % | 4.07 / 3.68    | 3.25 / 2.72   | 7.68 (0.10) / 7.31    |
| PrfaaS-PD     | 4   | 90 % | 9.95 / 10.46   | 7.55 / 7.22   | 20.67 (0.97) / 23.38  |

Poisson arrivals (the paper's case): every figure within 2 % (P99 within 5 %). Bursty arrivals inherit the
G/G/c errors that tests/latency/test_stages.py tabulates: Erlang C understates P(W > 0) for non-Poisson arrivals
into several servers, so at ca² = 4 the closed form is low by 11 % (mean, P90) at half load and high by
13 % (P90) at 90 %. Tolerances: Poisson 4 % + 3 SE (claimed); ca² = 2 and 4: 15 % + 3 SE (a regression
guard sized to the measured error, not an accuracy claim).
"""

from __future__ import annotations

import heapq
from dataclasses import replace

import numpy as np
import pytest

from prfaas_plan.latency import route_moments, stage_state
from prfaas_plan.latency.unloaded import route_latency
from prfaas_plan.optimize import Comparison, PlanEvaluation, compare, loaded_plan
from prfaas_plan.spec.scenario import Scenario
from prfaas_plan.throughput import StageModel

pytestmark = pytest.mark.validation

_REQUESTS = 300_000
_BATCHES = 20


@pytest.fixture(scope="module")
def plans(paper_scenario: Scenario, paper_model: StageModel) -> Comparison:
    return compare(paper_model, paper_scenario.prfaas.gpus, paper_scenario.local.gpus_per_instance)


def _fcfs_waits(arrivals_s: np.ndarray, services_s: np.ndarray, servers: int) -> np.ndarray:
    """Waits in queue of an FCFS c-server queue that starts empty (Kiefer-Wolfowitz recursion)."""
    free_at = [0.0] * servers
    waits = np.empty(arrivals_s.size)
    for i, (arrival, service) in enumerate(zip(arrivals_s.tolist(), services_s.tolist(), strict=True)):
        earliest = free_at[0]
        start = earliest if earliest > arrival else arrival
        waits[i] = start - arrival
        heapq.heapreplace(free_at, start + service)
    return waits


def _simulated_ttft(model: StageModel, plan: PlanEvaluation, rate: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    scv = model.interarrival_scv
    gaps = rng.gamma(1.0 / scv, scv / rate, _REQUESTS) if scv != 1.0 else rng.exponential(1.0 / rate, _REQUESTS)
    arrivals = np.cumsum(gaps)
    lengths = model.lengths.sample(rng, _REQUESTS)
    sized = replace(model, n_prfaas=plan.n_prfaas, n_local=plan.n_pd_prefill + plan.n_pd_decode)
    t = plan.threshold_tokens if plan.threshold_tokens is not None else model.lengths.upper_tokens
    state = stage_state(sized, route_moments(sized, np.asarray(t)), plan.n_pd_prefill, plan.n_pd_decode, rate)
    route = route_latency(sized)
    offloaded = lengths > t
    ttft = np.empty(_REQUESTS)
    if offloaded.any():
        served = lengths[offloaded]
        waits = _fcfs_waits(arrivals[offloaded], model.prfaas_prefill(served), plan.n_prfaas)
        ttft[offloaded] = waits + route.offload_s(served, float(state.link_stretch))
    if (~offloaded).any():
        served = lengths[~offloaded]
        waits = _fcfs_waits(arrivals[~offloaded], model.local_prefill(served), plan.n_pd_prefill)
        ttft[~offloaded] = waits + route.local_s(served)
    return ttft[_REQUESTS // 10 :]


def _check(model: StageModel, plan: PlanEvaluation, load: float, relative: float, seed: int) -> None:
    rate = load * plan.throughput_req_per_s
    closed = loaded_plan(model, plan, rate).ttft
    assert closed is not None
    simulated = _simulated_ttft(model, plan, rate, seed)
    batches = np.array_split(simulated, _BATCHES)
    for name, statistic, value in (
        ("mean", np.mean, closed.mean_s),
        ("p50", lambda x: np.quantile(x, 0.5), closed.p50_s),
        ("p90", lambda x: np.quantile(x, 0.9), closed.p90_s),
    ):
        estimate = float(statistic(simulated))
        se = float(np.std([statistic(b) for b in batches], ddof=1) / np.sqrt(_BATCHES))
        assert abs(value - estimate) <= relative * estimate + 3 * se, (name, value, estimate, se)


@pytest.mark.parametrize("which", ["plan", "homogeneous_pd", "naive_heterogeneous"])
@pytest.mark.parametrize("load", [0.5, 0.7, 0.9])
def test_poisson_ttft_matches_fcfs_pools(paper_model: StageModel, plans: Comparison, which: str, load: float) -> None:
    """Validation (the closed form is not fitted to this recursion): with Poisson arrivals (the paper's case),
    the closed-form TTFT mean, P50 and P90 of each plan at 50/70/90 % of its Λ_max are within 4 % + 3 batch
    standard errors of the FCFS recursion."""
    _check(paper_model, getattr(plans, which), load, 0.04, seed=7)


@pytest.mark.parametrize("scv", [2.0, 4.0])
@pytest.mark.parametrize("load", [0.5, 0.7, 0.9])
def test_bursty_ttft_regression_guard(paper_model: StageModel, plans: Comparison, scv: float, load: float) -> None:
    """Regression guard, not validation: gamma renewal arrivals with SCV 2 and 4 into the PrfaaS-PD plan are
    within 15 % + 3 batch standard errors. The band is sized to the measured G/G/c error for non-Poisson
    arrivals into several servers, so it is not an accuracy claim."""
    _check(replace(paper_model, interarrival_scv=scv), plans.plan, load, 0.15, seed=11)
