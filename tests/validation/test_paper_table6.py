"""Reproduction of the PrfaaS paper's case study (arXiv 2604.15039, §4, Table 6) from the YAML inputs.

An *independent reproduction* uses no input derived from the figure it reproduces; a *consistency check*
does, so it shows only that the derivation and the model agree. Inputs, and what each was derived from
(each is disclosed in its YAML file):

- H200 prefill and KV size: measured, paper Table 5 (hardware_profiles/h200.yaml). Its lengths are read as
  1K = 1,000 tokens, picked over 1,024 because it reproduces Table 6; the Table 5 residuals are the same
  either way. Read as 1,024, Θ_prfaas (1.65), Λ_max (3.30), the naive Λ (2.52), the 1.54× and 1.16×
  gains and the P90s of the H200 route (3.42 s) miss their tolerances here.
- H20 prefill: not measured. The quadratic is solved from three Table 6 figures: homogeneous Λ = 2.11 with
  9 prefill instances, PrfaaS-PD Θ_pd-p = 1.64 with 3 instances at l_short = E[L | L <= 19.4K], and the
  homogeneous mean TTFT 4.44 s (hardware_profiles/h20.yaml, tests/validation/test_h20_derivation.py). So
  t = 19.4K, N_p = 3 and the 9/3 split went into the curve.
- Decode: BS_max = 20 is backed out of the three decode throughputs (3.91/5 = 2.35/3 = 6.25/8 = 0.78 req/s
  per instance), with the 40 tok/s SLO read as the step time (h20.yaml).
- Lengths: max_tokens = 131,072 reads "128K" so that p = 49.6 % at t = 19.4K
  (workloads/paper-case-study.yaml). With 128,000, p(19.4K) is 49.5 % and every assertion here still passes.

Hence:

- Independent reproductions: egress, the PrfaaS stage being compute-bound, the naive mean TTFT and the
  homogeneous P90 (the fitted H20 curve, evaluated for a statistic that the fit did not use). Given the
  1K = 1,000 reading, also Θ_prfaas, the naive Λ and the two H200-route P90s.
- Consistency checks: t, the 4/3/5 and 9/3 splits, Θ_pd-p, the homogeneous Λ and mean TTFT, all three Θ_pd-d,
  Λ_max, p, the gains, and part of the PrfaaS-PD mean TTFT. The naive 4/-/8 split is not a result at all:
  it is the baseline's definition.

Tolerances are the issue's: t within 300 tokens, throughputs ±1 % (naive ±1.5 %), TTFT ±0.05 s.
"""

from __future__ import annotations

import pytest

from prfaas_plan.optimize import Comparison, compare
from prfaas_plan.spec.scenario import Scenario
from prfaas_plan.throughput import StageModel
from prfaas_plan.units import GBIT_PER_S

pytestmark = pytest.mark.validation


@pytest.fixture(scope="module")
def table6(paper_scenario: Scenario, paper_model: StageModel) -> Comparison:
    return compare(paper_model, paper_scenario.prfaas.gpus, paper_scenario.local.gpus_per_instance)


def test_independent_prfaas_stage_and_egress(table6: Comparison) -> None:
    """Independent reproductions: Θ_prfaas 1.61, egress ~13 Gbit/s, PrfaaS compute-bound (§4.4).

    Θ_prfaas = 4 / T_H200(l_long) uses the measured Table 5 curve, so it depends on the 1K = 1,000 reading.
    With PrfaaS saturated, egress = 4 S_kv(l_long) / T_H200(l_long), both Table 5 columns, and it passes
    under either reading. The link alone would carry 12.9 req/s. The optimiser's t enters only through
    l_long."""
    plan = table6.plan
    assert plan.theta_prfaas_req_per_s == pytest.approx(1.61, rel=0.01)
    assert 12.0 <= plan.egress_bytes_per_s / GBIT_PER_S <= 13.0  # §4.3: "approximately 13 Gbps"
    assert plan.bottleneck in ("prfaas_compute", "pd_prefill")  # §4.4: PrfaaS is compute-bound


def test_independent_naive_throughput(table6: Comparison) -> None:
    """Independent reproduction, given the 1K = 1,000 reading: the naive Λ 2.45 = 4 / T_H200(E[L]), from the
    measured Table 5 curve and the stated length distribution (ours 2.47; no reading of the four points
    gives exactly 2.45, digest §2.9)."""
    assert table6.naive_heterogeneous.throughput_req_per_s == pytest.approx(2.45, rel=0.015)


def test_consistency_threshold_split_and_lambda(table6: Comparison) -> None:
    """Consistency checks: t = 19.4K, 4/3/5, Θ_pd-p 1.64, Λ_max 3.24, p = 49.6 %.

    The H20 curve was solved so that 3 / T_H20(E[L | L <= 19.4K]) = 1.64. That puts the PD-P bound
    Θ_pd-p / (1 - p) through 3.25 at t = 19.4K with N_p = 3 (N_d = 8 - 3). At the optimum both prefill
    bounds bind, so Λ_max = Θ_pd-p / (1 - p); the paper's 3.24 is itself about 1.64/0.504 or 1.61/0.496. The
    only unfitted content is that the measured PrfaaS bound meets the fitted one there, and that is the
    Θ_prfaas check. p is taken at this t, and max_tokens = 131,072 was chosen so that p = 49.6 %."""
    plan = table6.plan
    assert plan.threshold_tokens == pytest.approx(19_400, abs=300)
    assert (plan.n_prfaas, plan.n_pd_prefill, plan.n_pd_decode) == (4, 3, 5)
    assert plan.throughput_req_per_s == pytest.approx(3.24, rel=0.01)
    assert plan.theta_pd_prefill_req_per_s == pytest.approx(1.64, rel=0.01)
    assert plan.offload_fraction == pytest.approx(0.496, abs=0.005)  # §4.3: 49.6 % routed to PrfaaS


def test_consistency_decode_throughputs(table6: Comparison) -> None:
    """Consistency checks: Θ_pd-d 3.91 / 2.35 / 6.25. BS_max = 20 was backed out of exactly these three
    (0.78 req/s per instance x N_d), so they restate the input."""
    assert table6.plan.theta_pd_decode_req_per_s == pytest.approx(3.91, rel=0.01)
    assert table6.homogeneous_pd.theta_pd_decode_req_per_s == pytest.approx(2.35, rel=0.01)
    assert table6.naive_heterogeneous.theta_pd_decode_req_per_s == pytest.approx(6.25, rel=0.01)


def test_consistency_baseline_splits_and_homogeneous_lambda(table6: Comparison) -> None:
    """Consistency checks: homogeneous 9/3 at 2.11 req/s. The H20 curve was solved so that
    9 / T_H20(E[L]) = 2.11, and the 3 decode instances come from the backed-out BS_max. The naive 4/-/8 split
    is the baseline's definition (every local instance decodes), so it reproduces nothing."""
    homog, naive = table6.homogeneous_pd, table6.naive_heterogeneous
    assert (homog.n_prfaas, homog.n_pd_prefill, homog.n_pd_decode) == (0, 9, 3)
    assert homog.throughput_req_per_s == pytest.approx(2.11, rel=0.01)
    assert (naive.n_prfaas, naive.n_pd_prefill, naive.n_pd_decode) == (4, 0, 8)


def test_consistency_gains(table6: Comparison) -> None:
    """Consistency checks: the ratios 1.54x and 1.16x of homogeneous and +32 % over naive (§4.3). They divide by
    the fitted 2.11 or use the Λ_max above, so they add nothing beyond the Λ figures."""
    base = table6.homogeneous_pd.throughput_req_per_s
    assert table6.plan.throughput_req_per_s / base == pytest.approx(1.54, abs=0.02)
    assert table6.naive_heterogeneous.throughput_req_per_s / base == pytest.approx(1.16, abs=0.02)
    assert table6.plan.throughput_req_per_s / table6.naive_heterogeneous.throughput_req_per_s == pytest.approx(
        1.32, abs=0.02
    )


@pytest.mark.parametrize(
    ("column", "p90_s"),
    [
        pytest.param("plan", 3.51, id="plan-independent-given-1K-reading"),
        pytest.param("homogeneous_pd", 9.73, id="homogeneous-independent"),
        pytest.param("naive_heterogeneous", 3.51, id="naive-independent-given-1K-reading"),
    ],
)
def test_independent_unloaded_p90_ttft(table6: Comparison, column: str, p90_s: float) -> None:
    """Independent reproductions: Table 6 P90 TTFT as zero-load latencies (digest §1.9), within 0.05 s.

    PrfaaS-PD and naive: T_H200 + S_kv/B at the 62.4K P90 length, from measured Table 5 and the
    1K = 1,000 reading. PrfaaS-PD also relies on every local TTFT staying below it (T_H20(t) = 3.1 s).
    Homogeneous: the fitted H20 curve at 62.4K. The fit used no P90."""
    assert getattr(table6, column).ttft_unloaded_p90_s == pytest.approx(p90_s, abs=0.05)


@pytest.mark.parametrize(
    ("column", "mean_s"),
    [
        pytest.param("plan", 2.22, id="plan-partly-consistency"),
        pytest.param("homogeneous_pd", 4.44, id="homogeneous-consistency"),
        pytest.param("naive_heterogeneous", 1.74, id="naive-independent"),
    ],
)
def test_unloaded_mean_ttft(table6: Comparison, column: str, mean_s: float) -> None:
    """Table 6 mean TTFT as zero-load latencies (digest §1.9), within 0.05 s.

    - Naive: independent reproduction, E[T_H200(L) + S_kv(L)/B] from measured Table 5; it passes under
      either reading of 1K.
    - Homogeneous: consistency check, since the H20 curve was solved so that E[T_H20(L)] = 4.44 s.
    - PrfaaS-PD: partly a consistency check. 0.93 s of its 2.23 s is the local half,
      (1 - p) E[T_H20(L) | L <= t], with E[T_H20(L) | L <= t] about 3 / Θ_pd-p, the fitted 1.64. Only the
      offloaded 1.30 s (measured H200 plus the link) is independent."""
    assert getattr(table6, column).ttft_unloaded_mean_s == pytest.approx(mean_s, abs=0.05)
