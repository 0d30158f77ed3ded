"""The searches for large pools (branch and bound over intervals of splits) against every split searched."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.latency import loaded_ttft
from prfaas_plan.latency.goodput import goodput_brackets, goodput_rates
from prfaas_plan.latency.stages import erlang_c, ggc_wait
from prfaas_plan.optimize import search
from prfaas_plan.optimize.goodput_search import _coarse_thresholds, best_goodput_plan, best_plan_at_rate, threshold_scan
from prfaas_plan.spec.plan import Plan, TtftSlo
from prfaas_plan.throughput import StageModel
from tests import queueing_oracles as queueing
from tests.conftest import examples
from tests.strategies import loaded_stage_models, stage_models

EVERY_SPLIT = 10**9


def _slo(model: StageModel, q: float, slack: float) -> TtftSlo:
    """An SLO some plan can meet: the unloaded P90 of t at the q-quantile, half the pool prefilling, x slack."""
    t = float(model.lengths.quantile(q))
    n_p = max(1, model.n_local // 2)
    unloaded = loaded_ttft(model, Plan(threshold_tokens=t, n_pd_prefill=n_p, n_pd_decode=model.n_local - n_p), 0.0).ttft
    assert unloaded is not None
    return TtftSlo(limit_s=unloaded.p90_s * slack)


@settings(max_examples=examples(15), deadline=None)
@given(loaded_stage_models(), st.integers(2, 48), st.floats(0.2, 0.9), st.floats(1.05, 3.0))
def test_goodput_split_search_matches_every_split(model: StageModel, n_local: int, q: float, slack: float) -> None:
    """On the coarse threshold grid, the branch and bound over split intervals finds a goodput at least that
    of scoring every split, to its 1e-6 optimality gap."""
    model = replace(model, n_local=n_local)
    slo = _slo(model, q, slack)
    grid = np.asarray(model.lengths.quantile(np.linspace(0.0, 1.0, 9)), dtype=np.float64)
    _, _, fast = best_goodput_plan(model, slo, thresholds=grid, exhaustive_splits=0)
    _, _, every = best_goodput_plan(model, slo, thresholds=grid, exhaustive_splits=EVERY_SPLIT)
    assert fast >= every * (1 - 1e-5)


@settings(max_examples=examples(10), deadline=None)
@given(loaded_stage_models(), st.integers(2, 48), st.floats(0.2, 0.9), st.floats(1.05, 3.0))
def test_goodput_search_for_large_pools_never_worse(model: StageModel, n_local: int, q: float, slack: float) -> None:
    """The whole goodput search (coarse grid, then refined thresholds) with split intervals is never worse
    than with every split scored, beyond the searches' tolerances."""
    model = replace(model, n_local=n_local)
    slo = _slo(model, q, slack)
    _, n_p, fast = best_goodput_plan(model, slo, exhaustive_splits=0)
    _, _, every = best_goodput_plan(model, slo, exhaustive_splits=EVERY_SPLIT)
    assert 0 <= n_p < n_local
    assert fast >= every * (1 - 1e-5)


@settings(max_examples=examples(15), deadline=None)
@given(loaded_stage_models(), st.integers(2, 48), st.floats(0.2, 0.9), st.floats(1.05, 3.0), st.floats(0.05, 1.2))
def test_fixed_rate_split_search_matches_every_split(
    model: StageModel, n_local: int, q: float, slack: float, load: float
) -> None:
    """At one rate (a fraction of the best plan's stability limit, past it too), the branch and bound over
    split intervals finds the same best SLO margin on a coarse threshold grid as scoring every split, to
    its 1e-6 gap; refined from the default coarse grid, it is never worse than every split on that grid."""
    model = replace(model, n_local=n_local)
    slo = _slo(model, q, slack)
    grid = np.asarray(model.lengths.quantile(np.linspace(0.0, 1.0, 9)), dtype=np.float64)
    _, _, top = best_goodput_plan(model, slo, thresholds=grid)
    rate = max(top, 1e-3) * load
    _, n_p, fast, zero_fast = best_plan_at_rate(model, rate, slo, thresholds=grid, exhaustive_splits=0)
    _, _, every, zero_every = best_plan_at_rate(model, rate, slo, thresholds=grid, exhaustive_splits=EVERY_SPLIT)
    assert 0 <= n_p < n_local
    assert fast == pytest.approx(every, abs=2e-6)
    assert zero_fast == pytest.approx(zero_every, abs=1e-12)
    coarse = _coarse_thresholds(model)
    _, _, coarse_every, _ = best_plan_at_rate(model, rate, slo, thresholds=coarse, exhaustive_splits=EVERY_SPLIT)
    _, _, refined_fast, _ = best_plan_at_rate(model, rate, slo, resolution_tokens=100.0, exhaustive_splits=0)
    assert refined_fast >= coarse_every - 2e-6


@settings(max_examples=examples(15), deadline=None)
@given(
    loaded_stage_models(),
    st.floats(0.0, 1.0),
    st.integers(0, 40),
    st.integers(1, 40),
    st.integers(0, 3),
    st.integers(0, 3),
    st.floats(1.05, 3.0),
)
def test_goodput_never_falls_with_more_instances(
    model: StageModel, q: float, n_p: int, n_d: int, more_p: int, more_d: int, slack: float
) -> None:
    """The bound the split search relies on: adding prefill or decode instances never lowers a plan's
    goodput: the larger plan's proven lower end is no lower, and its upper end is no lower than the smaller
    plan's proven lower end (1e-9 of the stability limit). Two upper ends are not compared: a bracket whose
    lower end meets the quantile to within the slack tolerance stops early, so its upper end is a valid bound
    but not a tight one."""
    slo = _slo(model, 0.5, slack)
    t = float(model.lengths.quantile(q))
    low, high, limit, _ = goodput_brackets(model, t, [n_p, n_p + more_p], [n_d, n_d + more_d], slo, rate_rtol=1e-12)
    assert low[1] >= low[0] - 1e-9 * limit[0]
    assert high[1] >= low[0] - 1e-9 * limit[0]


@settings(max_examples=examples(200), deadline=None)
@given(
    st.integers(1, 5000),
    st.floats(0.0, 0.999),
    st.floats(0.0, 4.0),
    st.floats(0.0, 4.0),
)
def test_wait_law_shrinks_with_servers(servers: int, rho: float, ca2: float, cs2: float) -> None:
    """At a fixed arrival rate, one more server never raises P(W > 0) nor E[W | W > 0] (so the wait falls
    stochastically), for the whole range of pool sizes."""
    rate = rho * servers
    fewer = ggc_wait(np.float64(servers), rate, 1.0, ca2, cs2)
    more = ggc_wait(np.float64(servers + 1), rate, 1.0, ca2, cs2)
    assert float(more.p_wait) <= float(fewer.p_wait) * (1 + 1e-12)
    if float(more.p_wait) > 0:
        assert float(more.conditional_mean_s) <= float(fewer.conditional_mean_s) * (1 + 1e-12)


@pytest.mark.parametrize("servers", [257, 300, 1000, 4000])
@pytest.mark.parametrize("rho", [0.05, 0.5, 0.9, 0.99, 0.9999])
def test_erlang_c_for_large_pools_matches_the_recursion(servers: int, rho: float) -> None:
    """Past the log-space sum (more than 256 servers), Erlang C from the Poisson pmf over its CDF equals the
    Erlang B recursion of the oracle to 1e-10."""
    load = rho * servers
    assert float(erlang_c(servers, load)) == pytest.approx(queueing.erlang_c(servers, load), rel=1e-10, abs=1e-300)


def test_goodput_of_large_pools_is_bounded_by_stability(paper_model: StageModel) -> None:
    """At 2,000 instances per pool the search returns a split inside the pool and a goodput no larger than
    that plan's stability limit."""
    model = replace(paper_model, n_prfaas=2000, n_local=2000)
    t, n_p, rate = best_goodput_plan(model, TtftSlo(limit_s=5.0))
    _, limit, _ = goodput_rates(model, t, n_p, TtftSlo(limit_s=5.0))
    assert 0 <= n_p < 2000 and 0 < rate <= float(limit)


@settings(max_examples=examples(25), deadline=None)
@given(stage_models(), st.integers(2, 300))
def test_split_intervals_find_the_best_throughput(model: StageModel, n_local: int) -> None:
    """The Λ_max search over split intervals reaches the Λ_max of the threshold search run for every split
    (1e-9 relative, the gap both prove)."""
    model = replace(model, n_local=n_local)
    fast = search(model, exhaustive_splits=0).throughput_req_per_s
    every = search(model, exhaustive_splits=EVERY_SPLIT).throughput_req_per_s
    assert fast == pytest.approx(every, rel=1e-9)


def test_fixed_rate_search_finds_a_window_narrower_than_the_quantile_grid(paper_model: StageModel) -> None:
    """Regression guard from a sized fleet (606 PrfaaS + 2,014 local instances, 1,880 Gbit/s, 650 req/s): the
    thresholds that carry the rate lie between two points of the usual quantile grid, where the PrfaaS pool
    is stable and the empty system still meets the SLO. The search over those thresholds finds a plan with
    slack >= 0; the usual grid alone finds no stable plan."""
    model = replace(paper_model, n_prfaas=606, n_local=2014, link_bandwidth_bytes_per_s=1880 * 1.25e8)
    _, _, slack, zero_load = best_plan_at_rate(
        model, 650.0, TtftSlo(limit_s=5.0, quantile=0.9), resolution_tokens=1024.0
    )
    assert slack >= 0.0 and zero_load >= 0.9
    _, _, coarse, _ = best_plan_at_rate(
        model, 650.0, TtftSlo(limit_s=5.0, quantile=0.9), thresholds=_coarse_thresholds(model)
    )
    assert coarse <= -0.9  # every plan of the usual grid is past its stability limit (scores at most -q)


@settings(max_examples=examples(10), deadline=None)
@given(loaded_stage_models(), st.integers(2, 96), st.floats(0.2, 0.9), st.floats(1.05, 3.0), st.floats(0.05, 1.2))
def test_a_reused_threshold_scan_changes_nothing(
    model: StageModel, n_local: int, q: float, slack: float, load: float
) -> None:
    """The fixed-rate search with a threshold scan made once for the link and SLO (as sizing reuses it across
    instance counts) returns exactly what it returns computing its own; a scan for another link is refused."""
    model = replace(model, n_local=n_local)
    slo = _slo(model, q, slack)
    _, _, top = best_goodput_plan(model, slo, thresholds=np.asarray(model.lengths.quantile(np.linspace(0, 1, 9))))
    rate = max(top, 1e-3) * load
    scan = threshold_scan(replace(model, n_local=2, n_prfaas=1), slo.limit_s)
    assert best_plan_at_rate(model, rate, slo, resolution_tokens=100.0, scan=scan) == best_plan_at_rate(
        model, rate, slo, resolution_tokens=100.0
    )
    other = replace(model, link_bandwidth_bytes_per_s=2 * model.link_bandwidth_bytes_per_s)
    with pytest.raises(ValueError, match="another link"):
        best_plan_at_rate(other, rate, slo, scan=scan)
