"""Robust plans at a bandwidth quantile (issue 12): the quantile of each profile kind, and the robust plan
never does worse than the mean's plan at the quantile's bandwidth."""

from __future__ import annotations

import math

import numpy as np
import pytest

from prfaas_plan.optimize.robust import bandwidth_quantile, robust_plan
from prfaas_plan.sim.link_profile import ou_log_bandwidth
from prfaas_plan.spec.dynamics import BandwidthSteps, PeriodicBandwidth, RandomBandwidth
from prfaas_plan.spec.plan import TtftSlo
from prfaas_plan.throughput import StageModel
from prfaas_plan.units import GBIT_PER_S


def test_lognormal_quantile_matches_the_simulated_process() -> None:
    """Consistency check: the closed-form quantile against a long sample path of the simulator's process
    (both parametrise the log-normal the same way; this checks the arithmetic, not the model)."""
    profile = RandomBandwidth(mean_bytes_per_s=100.0, std_bytes_per_s=30.0, correlation_s=10.0, step_s=1.0)
    q10, mean = bandwidth_quantile(profile, 0.1)
    assert mean == 100.0
    samples = ou_log_bandwidth(np.random.default_rng(7), profile, 400_000.0)
    values = np.asarray([b for _, b in samples], dtype=np.float64)
    assert abs(np.mean(values) / 100.0 - 1) < 0.03
    assert abs(np.quantile(values, 0.1) / q10 - 1) < 0.03


def test_step_and_periodic_quantiles_weight_time() -> None:
    periodic = PeriodicBandwidth(period_s=100.0, steps=((0.0, 10.0), (90.0, 1.0)))
    assert bandwidth_quantile(periodic, 0.05)[0] == 1.0  # 10 % of the time at 1
    assert bandwidth_quantile(periodic, 0.5)[0] == 10.0
    assert bandwidth_quantile(periodic, 0.5)[1] == pytest.approx(0.9 * 10 + 0.1 * 1)
    steps = BandwidthSteps(steps=((0.0, 5.0), (100.0, 20.0)))
    assert bandwidth_quantile(steps, 0.25)[0] == 5.0 and bandwidth_quantile(steps, 0.75)[0] == 20.0


def test_robust_plan_is_no_worse_at_its_quantile(paper_model: StageModel) -> None:
    profile = RandomBandwidth(mean_bytes_per_s=15 * GBIT_PER_S, std_bytes_per_s=6 * GBIT_PER_S, correlation_s=60.0)
    r = robust_plan(paper_model, profile, 0.1, TtftSlo(limit_s=5.0))
    assert r.bandwidth_at_quantile_bytes_per_s < r.bandwidth_mean_bytes_per_s
    assert r.robust.goodput_req_per_s >= r.mean_plan_goodput_at_quantile_req_per_s * (1 - 1e-6)
    assert r.at_mean.goodput_req_per_s >= r.robust_goodput_at_mean_req_per_s * (1 - 1e-6)
    assert math.isfinite(r.robust.threshold_tokens)
