"""TPOT under load (``latency.tpot``), the simulator's batch-following decode (``sim.batch_decode``) and the TPOT
SLO in goodput and sizing."""

from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.latency.goodput import plans_goodput
from prfaas_plan.latency.tpot import (
    decode_capacity_req_per_s,
    tpot_quantile_s,
    tpot_rate_limit,
    tpot_under_load,
)
from prfaas_plan.lengths import Fixed
from prfaas_plan.optimize import search
from prfaas_plan.optimize.goodput_search import best_goodput_plan
from prfaas_plan.sim.arrivals import Poisson
from prfaas_plan.sim.batch_decode import BatchDecode
from prfaas_plan.sim.cluster import Cluster, ClusterConfig
from prfaas_plan.sim.records import COLUMNS
from prfaas_plan.sim.run import simulate
from prfaas_plan.sim.summary import summarize
from prfaas_plan.sim.workload import synthetic_workload
from prfaas_plan.spec.plan import TtftSlo
from prfaas_plan.throughput import StageModel, stage_model
from tests.validation.tpot_law import compare

REPO = Path(__file__).resolve().parents[2]
ROOFLINE = REPO / "workloads" / "paper-case-study-roofline.yaml"


@pytest.fixture(scope="module")
def roofline_model() -> StageModel:
    return stage_model(load_scenario(ROOFLINE))


def _curved(model: StageModel, steps: list[float]) -> StageModel:
    """``model`` with the step curve ``steps`` at batches 1..len(steps) (BS_max = len(steps))."""
    return replace(
        model,
        decode_max_batch=len(steps),
        decode_step_time_s=steps[-1],
        decode_step_batches=tuple(float(b) for b in range(1, len(steps) + 1)),
        decode_step_times_s=tuple(steps),
    )


def test_flat_curve_gives_the_step_and_littles_law(paper_model: StageModel) -> None:
    """With the measured paper profile (one decode point: a flat curve) TPOT is T_decode at every load and
    percentile, and the mean batch is Λ·L_out·T_decode / N_d (Little's law on the slots)."""
    assert paper_model.decode_step_flat
    for load in (0.3, 0.6, 0.9):
        n_d = 5
        rate = load * decode_capacity_req_per_s(paper_model, n_d)
        law = tpot_under_load(paper_model, rate, n_d)
        for value in (law.tpot_mean_s, law.tpot_p50_s, law.tpot_p90_s, law.tpot_p99_s):
            assert value == pytest.approx(paper_model.decode_step_time_s, rel=1e-12)
        in_service = rate * paper_model.output_tokens_mean * paper_model.decode_step_time_s / n_d
        assert law.mean_batch == pytest.approx(in_service, rel=1e-9)
        assert law.load == pytest.approx(load, rel=1e-12)


@given(
    steps=st.lists(st.floats(1e-4, 5e-3), min_size=2, max_size=24),
    n_d=st.integers(1, 4),
    loads=st.tuples(st.floats(0.01, 0.98), st.floats(0.01, 0.98)),
)
def test_tpot_never_falls_as_load_rises(
    paper_model: StageModel, steps: list[float], n_d: int, loads: tuple[float, float]
) -> None:
    """Law: on any non-decreasing step curve, the mean and every reported percentile of TPOT are
    non-decreasing in the arrival rate."""
    model = _curved(paper_model, list(np.cumsum(steps)))
    low, high = sorted(loads)
    capacity = decode_capacity_req_per_s(model, n_d)
    a, b = tpot_under_load(model, low * capacity, n_d), tpot_under_load(model, high * capacity, n_d)
    for name in ("tpot_mean_s", "tpot_p50_s", "tpot_p90_s", "tpot_p99_s", "mean_batch"):
        assert getattr(b, name) >= getattr(a, name) * (1 - 1e-9) - 1e-15, name
    assert tpot_quantile_s(model, 0.0, n_d) <= a.tpot_p90_s * (1 + 1e-9)


def test_rate_limit_meets_the_slo_and_grows_with_decode_instances(roofline_model: StageModel) -> None:
    """At the rate limit the P90 TPOT equals the SLO; the limit rises with N_d; none without an SLO, 0 when
    one request's step already misses it."""
    slo = 0.010
    limits = tpot_rate_limit(roofline_model, [1, 2, 3, 4], slo)
    assert np.all(np.diff(limits) > 0)
    for n_d, limit in zip((1, 2, 3, 4), limits, strict=True):
        assert tpot_quantile_s(roofline_model, float(limit), n_d) == pytest.approx(slo, rel=1e-6)
    assert np.all(np.isinf(tpot_rate_limit(roofline_model, [1, 2])))  # the scenario states no TPOT SLO
    assert np.all(tpot_rate_limit(roofline_model, [1, 2], 1e-4) == 0.0)
    loose = tpot_rate_limit(roofline_model, [2], 1.0)[0]
    assert loose == pytest.approx(decode_capacity_req_per_s(roofline_model, 2), rel=1e-8)


def test_goodput_holds_the_tpot_slo(roofline_model: StageModel) -> None:
    """A TPOT SLO never raises goodput; one looser than the batch cap's step changes nothing; a tight one
    caps goodput at the rate where P90 TPOT reaches it, and says so."""
    plan = search(roofline_model)
    assert plan.threshold_tokens is not None
    args = ([plan.threshold_tokens], [plan.n_pd_prefill], TtftSlo(limit_s=5.0))
    (free,) = plans_goodput(roofline_model, *args)
    (loose,) = plans_goodput(replace(roofline_model, tpot_p90_slo_s=0.050), *args)
    assert loose.rate_req_per_s == free.rate_req_per_s
    assert loose.limited_by == free.limited_by
    slo = 0.004
    (tight,) = plans_goodput(replace(roofline_model, tpot_p90_slo_s=slo), *args)
    cap = float(tpot_rate_limit(roofline_model, [plan.n_pd_decode], slo)[0])
    assert cap < free.rate_req_per_s
    assert tight.rate_req_per_s <= cap * (1 + 1e-9)
    assert tight.rate_req_per_s == pytest.approx(cap, rel=1e-6)
    assert tight.limited_by == "tpot_slo"
    _, _, best_free = best_goodput_plan(roofline_model, TtftSlo(limit_s=5.0))
    _, _, best_tight = best_goodput_plan(replace(roofline_model, tpot_p90_slo_s=slo), TtftSlo(limit_s=5.0))
    assert best_tight <= best_free


def test_batch_decode_with_a_flat_curve_matches_the_fixed_step_cluster(paper_model: StageModel) -> None:
    """With a flat step curve the batch-following engine admits when the pooled slots do and holds each slot
    for L_out·T_decode: its records are the fixed-step cluster's (to rounding of the token clocks)."""
    plan = search(paper_model)
    assert plan.threshold_tokens is not None
    rng = np.random.default_rng(5)
    n_d = 2  # fewer decode instances than the plan's, so that the slots fill
    rate = 0.95 * decode_capacity_req_per_s(paper_model, n_d)
    workload = synthetic_workload(rng, Poisson(rate_req_per_s=rate), paper_model.lengths, Fixed(tokens=1024), 3000)
    config = ClusterConfig(
        model=paper_model, threshold_tokens=plan.threshold_tokens, n_pd_prefill=plan.n_pd_prefill, n_pd_decode=n_d
    )
    fixed = Cluster(config, workload, None).run(math.inf).records
    batch = Cluster(config, workload, None, decoder=BatchDecode()).run(math.inf).records
    assert np.any(fixed.decode_wait_s > 0)  # the slots were full at times: admission is exercised
    for column in COLUMNS:
        np.testing.assert_allclose(getattr(batch, column), getattr(fixed, column), rtol=1e-9, atol=1e-9)
    routed = simulate(config, workload).records  # a flat curve keeps the fixed-step cluster itself
    assert all(np.array_equal(getattr(routed, c), getattr(fixed, c), equal_nan=True) for c in COLUMNS)


def test_simulated_tpot_rises_with_load_and_summary_reports_percentiles(roofline_model: StageModel) -> None:
    """On the roofline step curve the simulator's TPOT rises with load; P50 <= P90 <= P99; a request's TPOT
    lies between step(1) and step(BS_max)."""
    plan = search(roofline_model)
    assert plan.threshold_tokens is not None
    config = ClusterConfig(
        model=roofline_model,
        threshold_tokens=plan.threshold_tokens,
        n_pd_prefill=plan.n_pd_prefill,
        n_pd_decode=plan.n_pd_decode,
    )
    p90s = []
    for load in (0.3, 0.8):
        rng = np.random.default_rng(3)
        arrivals = Poisson(rate_req_per_s=load * plan.throughput_req_per_s)
        result = simulate(config, synthetic_workload(rng, arrivals, roofline_model.lengths, Fixed(tokens=1024), 3000))
        summary = summarize(result)
        assert summary.tpot_p50_s <= summary.tpot_p90_s <= summary.tpot_p99_s
        rec = result.records
        tpot = (rec.finish_s - rec.decode_start_s) / rec.output_tokens
        assert np.nanmin(tpot) >= float(roofline_model.decode_step_s(1.0)) * (1 - 1e-9)
        assert np.nanmax(tpot) <= roofline_model.decode_step_time_s * (1 + 1e-9)
        p90s.append(summary.tpot_p90_s)
    assert p90s[1] > p90s[0]


def test_scenario_key_and_flag() -> None:
    """``slo: tpot_p90_ms`` is read in ms and kept beside the batch cap; a bad --tpot-p90-ms is one line, exit 2."""
    text = (REPO / "workloads" / "paper-case-study.yaml").read_text()
    assert "tpot_p90_ms" not in text
    spec = load_scenario(REPO / "workloads" / "paper-case-study.yaml")
    assert spec.slo.tpot_p90_s is None
    run = subprocess.run(
        [sys.executable, "-m", "prfaas_plan", "optimize", "--objective", "goodput", "--tpot-p90-ms", "-3"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert run.returncode == 2
    assert run.stderr.strip().count("\n") == 0 and "--tpot-p90-ms" in run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.validation
@pytest.mark.parametrize("feed", ["decode"])
def test_tpot_law_against_the_simulator(feed: str) -> None:
    """The TPOT law's mean and P90 are within 10 % of the simulated ones at 50/70/90 % load on the paper
    scenario with the roofline step curve, with Poisson arrivals at the decode stage (the law's assumption;
    ``tests/benchmarks/tpot_under_load.py`` prints the full plan's figures too)."""
    for row in compare("paper-case-study-roofline.yaml", feed, requests=8000, seeds=2):
        assert abs(row.mean_gap) <= 0.10, row
        assert abs(row.p90_gap) <= 0.10, row
