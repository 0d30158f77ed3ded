"""TTFT and goodput under load (``prfaas_plan.latency``): composition laws, numerics against sampling, CLI.

The queueing primitives' exactness (M/M/1, M/M/c, M/D/1, M/G/1) and the G/G/c approximation error are
tested in tests/latency/test_stages.py; these tests check how the stages are composed into one TTFT law.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from prfaas_plan.cli.app import app
from prfaas_plan.latency import loaded_ttft, plan_goodput, route_moments, stability_limit_req_per_s, stage_state
from prfaas_plan.latency.distribution import GRID_POINTS, ttft_law, ttft_quantile_at_rates
from prfaas_plan.latency.goodput import goodput_rates
from prfaas_plan.latency.link_spread import ps_alone_probability, ps_sojourn
from prfaas_plan.latency.stages import RouteMoments, StageState, erlang_c, ggc_wait
from prfaas_plan.latency.unloaded import route_latency, route_mean_s, unloaded_ttft
from prfaas_plan.optimize.goodput_search import best_goodput_plan
from prfaas_plan.report.plans import loaded_to_dict
from prfaas_plan.spec.plan import Plan, TtftSlo
from prfaas_plan.throughput import STAGES, StageModel
from tests import queueing_oracles as queueing
from tests.conftest import examples, run_cli
from tests.strategies import loaded_stage_models

EXAMPLES = settings(max_examples=examples(25), deadline=None)


def _plan(model: StageModel, q: float, split: float) -> tuple[float, int, int]:
    """A plan inside the model: t at the q-quantile of lengths, N_p a share of the local pool (>= 1 each)."""
    t = float(model.lengths.quantile(q))
    n_p = min(max(1, round(split * model.n_local)), model.n_local - 1)
    return t, n_p, model.n_local - n_p


def _p(t: float, n_p: int, n_d: int) -> Plan:
    return Plan(threshold_tokens=t, n_pd_prefill=n_p, n_pd_decode=n_d)


def _limit(model: StageModel, t: float, n_p: int, n_d: int) -> tuple[float, dict[str, float]]:
    total, by_stage = stability_limit_req_per_s(model, route_moments(model, np.asarray(t)), n_p, n_d)
    return float(total), {s: float(v) for s, v in by_stage.items()}


# --------------------------------------------------------------------------------------------------------
# The vectorised primitives are the scalar oracles of tests.queueing_oracles
# --------------------------------------------------------------------------------------------------------


@EXAMPLES
@given(
    st.integers(1, 300),
    st.floats(0.01, 0.99),
    st.floats(0.0, 4.0),
    st.floats(0.0, 4.0),
    st.floats(0.1, 10.0),
)
def test_vectorised_ggc_matches_queueing(servers: int, rho: float, ca2: float, cs2: float, mean_s: float) -> None:
    """The stage model's elementwise Erlang C and G/G/c law equal queueing.erlang_c / ggc_wait (1e-9)."""
    assume(ca2 + cs2 > 1e-3)
    rate = rho * servers / mean_s
    scalar = queueing.ggc_wait(servers, rate, mean_s, ca2, cs2)
    vector = ggc_wait(np.array([servers]), np.array([rate]), np.array([mean_s]), ca2, np.array([cs2]))
    assert float(erlang_c(servers, rho * servers)) == pytest.approx(queueing.erlang_c(servers, rho * servers), rel=1e-9)
    assert float(vector.p_wait[0]) == pytest.approx(scalar.p_wait, rel=1e-9, abs=1e-300)
    assert float(vector.conditional_mean_s[0]) == pytest.approx(scalar.conditional_mean_s, rel=1e-9)


# --------------------------------------------------------------------------------------------------------
# Composition laws
# --------------------------------------------------------------------------------------------------------


@EXAMPLES
@given(loaded_stage_models(), st.floats(0.0, 1.0), st.floats(0.1, 0.9))
def test_zero_load_is_the_unloaded_ttft_exactly(model: StageModel, q: float, split: float) -> None:
    """At Λ = 0 the loaded TTFT equals latency.unloaded.unloaded_ttft with the same settings (transfer mode,
    intra-cluster transfer, first decode step), bit for bit: mean, P50, P90 and P99."""
    t, n_p, n_d = _plan(model, q, split)
    loaded = loaded_ttft(model, _p(t, n_p, n_d), 0.0)
    unloaded = unloaded_ttft(model.lengths, route_latency(model), t)
    assert loaded.stable and loaded.ttft is not None
    assert (loaded.ttft.mean_s, loaded.ttft.p50_s, loaded.ttft.p90_s, loaded.ttft.p99_s) == (
        unloaded.mean_s,
        unloaded.p50_s,
        unloaded.p90_s,
        unloaded.p99_s,
    )


@EXAMPLES
@given(loaded_stage_models(), st.floats(0.05, 0.95), st.floats(0.1, 0.9))
def test_waiting_grows_with_load_and_is_unstable_past_the_limit(model: StageModel, q: float, split: float) -> None:
    """Every stage's mean wait and the TTFT mean and P90 never fall as Λ rises to the stability limit; at and
    past the limit the result is unstable, names the first stage to saturate, and reports no TTFT."""
    t, n_p, n_d = _plan(model, q, split)
    limit, by_stage = _limit(model, t, n_p, n_d)
    moments = route_moments(model, np.asarray(t))
    fractions = np.array([0.0, 0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.99, 0.999])
    state = stage_state(model, moments, n_p, n_d, fractions * limit)
    assert bool(np.all(state.stable))
    for wait in (state.prfaas_wait, state.local_wait, state.decode_wait):
        assert np.all(np.diff(wait.mean_s) >= -1e-12 * wait.mean_s[1:])
    assert np.all(np.diff(state.link_stretch) >= 0)
    low, high = (loaded_ttft(model, _p(t, n_p, n_d), f * limit).ttft for f in (0.5, 0.9))
    assert low is not None and high is not None
    assert high.mean_s >= low.mean_s * (1 - 1e-12) and high.p90_s >= low.p90_s * (1 - 1e-8) - 1e-8
    first = min(STAGES, key=lambda s: by_stage[s])
    for over in (1.0 + 1e-9, 1.5):
        result = loaded_ttft(model, _p(t, n_p, n_d), over * limit)
        assert not result.stable and result.unstable_stage == first and result.ttft is None
        text = json.dumps(loaded_to_dict(result), allow_nan=False)
        assert '"status": "unstable"' in text


@EXAMPLES
@given(loaded_stage_models(), st.floats(0.05, 0.95), st.floats(0.1, 0.9), st.floats(0.1, 0.9))
def test_more_servers_never_increase_waiting(model: StageModel, q: float, split: float, load: float) -> None:
    """One more PrfaaS, local prefill or decode instance never increases that stage's wait (nor the link's),
    at the same arrival rate."""
    t, n_p, n_d = _plan(model, q, split)
    rate = load * _limit(model, t, n_p, n_d)[0]
    moments = route_moments(model, np.asarray(t))
    base = stage_state(model, moments, n_p, n_d, rate)
    more_prfaas = stage_state(replace(model, n_prfaas=model.n_prfaas + 1), moments, n_p, n_d, rate)
    more_local = stage_state(model, moments, n_p + 1, n_d, rate)
    more_decode = stage_state(model, moments, n_p, n_d + 1, rate)
    assert float(more_prfaas.prfaas_wait.mean_s) <= float(base.prfaas_wait.mean_s) * (1 + 1e-12)
    assert float(more_local.local_wait.mean_s) <= float(base.local_wait.mean_s) * (1 + 1e-12)
    assert float(more_decode.decode_wait.mean_s) <= float(base.decode_wait.mean_s) * (1 + 1e-12)
    assert float(more_prfaas.link_stretch) == float(base.link_stretch)


@EXAMPLES
@given(loaded_stage_models(), st.floats(0.05, 0.95), st.floats(0.1, 0.9), st.floats(0.1, 0.9), st.floats(1.0, 4.0))
def test_burstier_arrivals_never_decrease_waiting(
    model: StageModel, q: float, split: float, load: float, factor: float
) -> None:
    """Raising the inter-arrival SCV never decreases any stage's wait, the link stretch, or the TTFT P90."""
    t, n_p, n_d = _plan(model, q, split)
    rate = load * _limit(model, t, n_p, n_d)[0]
    smooth = model
    bursty = replace(model, interarrival_scv=model.interarrival_scv * factor)
    moments = route_moments(model, np.asarray(t))
    a, b = stage_state(smooth, moments, n_p, n_d, rate), stage_state(bursty, moments, n_p, n_d, rate)
    for wait in ("prfaas_wait", "local_wait", "decode_wait"):
        assert float(getattr(b, wait).mean_s) >= float(getattr(a, wait).mean_s) * (1 - 1e-12)
    assert float(b.link_stretch) >= float(a.link_stretch)
    low = loaded_ttft(smooth, _p(t, n_p, n_d), rate).ttft
    high = loaded_ttft(bursty, _p(t, n_p, n_d), rate).ttft
    assert low is not None and high is not None
    # Quantiles are solved to ~3e-11 of a bracket up to ~100 s wide (latency.unloaded.solve_quantiles).
    assert high.p90_s >= low.p90_s * (1 - 1e-8) - 1e-8


@EXAMPLES
@given(loaded_stage_models(), st.floats(0.0, 1.0), st.floats(0.1, 0.9), st.floats(0.0, 0.97))
def test_percentiles_are_ordered(model: StageModel, q: float, split: float, load: float) -> None:
    """P50 <= P90 <= P99 overall and on each route; each route's percentiles bracket the overall ones' mixture
    (the overall P50 lies between the routes' P50s)."""
    t, n_p, n_d = _plan(model, q, split)
    result = loaded_ttft(model, _p(t, n_p, n_d), load * _limit(model, t, n_p, n_d)[0])
    assert result.ttft is not None
    summaries = [result.ttft, *(s for s in result.by_route.values() if s is not None)]
    for s in summaries:
        # Each level is solved on its own nested grid, to ~3e-11 of a bracket up to ~100 s wide.
        assert s.p50_s <= s.p90_s + 1e-8 and s.p90_s <= s.p99_s + 1e-8
        assert s.mean_s > 0
    routes = [s for s in result.by_route.values() if s is not None]
    assert min(r.p50_s for r in routes) - 1e-9 <= result.ttft.p50_s <= max(r.p50_s for r in routes) + 1e-9


# --------------------------------------------------------------------------------------------------------
# The distribution numerics against sampling from the same component laws
# --------------------------------------------------------------------------------------------------------


def _sample_offloaded(
    rng: np.random.Generator, model: StageModel, moments: RouteMoments, state: StageState, lengths: np.ndarray
) -> np.ndarray:
    """Zero-wait TTFT of offloaded requests with the transfer drawn from its sojourn law: x + Gamma(k, θ)
    with the mean and variance of ``link_spread.ps_sojourn`` (the mean stretch where the link is idle)."""
    route = route_latency(model)
    assert route.offload_prefill is not None and route.offload_kv_bytes is not None
    rho = float(state.utilization["prfaas_link"])
    if not rho > 1e-9:
        return route.offload_s(lengths, float(state.link_stretch))
    p = float(moments.offload_fraction)
    work = route.offload_kv_bytes(lengths) / route.link_bandwidth_bytes_per_s
    ca2 = p * model.interarrival_scv + (1.0 - p)
    link = (rho, float(moments.link_mean_s), float(moments.link_scv), ca2)
    mean, var = ps_sojourn(work, *link)
    alone = ps_alone_probability(work, *link)
    # With probability p0 the transfer has the link to itself (T = x); otherwise x + a gamma matched to the
    # mean and variance left once the atom is taken out.
    busy = np.maximum(1.0 - alone, 1e-300)
    extra = np.maximum(mean - work, 0.0) / busy
    second = (var + (mean - work) ** 2) / busy
    var_busy = np.maximum(second - extra**2, 0.0)
    spread = (var_busy > 0) & (extra > 0)
    shape = np.where(spread, extra**2 / np.where(spread, var_busy, 1.0), 1.0)
    scale = np.where(spread, var_busy / np.where(spread, extra, 1.0), 1.0)
    draw = np.where(spread, rng.gamma(shape, scale), extra)
    transfer = work + np.where(rng.random(work.size) < alone, 0.0, draw)
    prefill = route.offload_prefill(lengths)
    visible = prefill + transfer if model.transfer == "after_prefill" else np.maximum(prefill, transfer)
    return np.asarray(visible + route.first_decode_step_s, dtype=np.float64)


def _sample_wait(rng: np.random.Generator, p_wait: float, mean_s: float, n: int) -> np.ndarray:
    waits = rng.random(n) < p_wait
    return np.where(waits, rng.exponential(mean_s if mean_s > 0 else 1.0, n), 0.0)


@settings(max_examples=examples(15), deadline=None)
@given(loaded_stage_models(), st.floats(0.0, 1.0), st.floats(0.1, 0.9), st.floats(0.3, 0.95), st.integers(0, 2**32 - 1))
def test_ttft_law_matches_sampling_its_components(
    model: StageModel, q: float, split: float, load: float, seed: int
) -> None:
    """Sample 200,000 requests from the model's own component laws (length, route, atom-plus-exponential
    waits of the request's pool and of the decode slot, the transfer's shifted-gamma sojourn on the shared
    link with an atom at its own work when it has the link to itself) and compare: the mean within 5
    standard errors (with the route-count variance term), and the share at or below each reported percentile
    within 5 binomial standard errors (plus 1e-3 for the midpoint rule and the sojourn law's 16 slice nodes,
    which drop the variance inside each slice)."""
    t, n_p, n_d = _plan(model, q, split)
    rate = load * _limit(model, t, n_p, n_d)[0]
    result = loaded_ttft(model, _p(t, n_p, n_d), rate)
    moments = route_moments(model, np.asarray(t))
    state = stage_state(model, moments, n_p, n_d, rate)
    route = route_latency(model)
    rng = np.random.default_rng(seed)
    n = 200_000
    lengths = model.lengths.sample(rng, n)
    offloaded = lengths > t
    service = np.where(offloaded, _sample_offloaded(rng, model, moments, state, lengths), route.local_s(lengths))
    pool = np.where(
        offloaded,
        _sample_wait(rng, float(state.prfaas_wait.p_wait), float(state.prfaas_wait.conditional_mean_s), n),
        _sample_wait(rng, float(state.local_wait.p_wait), float(state.local_wait.conditional_mean_s), n),
    )
    decode = _sample_wait(rng, float(state.decode_wait.p_wait), float(state.decode_wait.conditional_mean_s), n)
    ttft = service + pool + decode
    assert result.ttft is not None
    # The route-count term p(1-p)·range² covers a route a sample can miss (a handful of expected requests).
    p = float(model.lengths.sf(t))
    variance = ttft.var() + p * (1 - p) * float(np.ptp(ttft)) ** 2
    assert abs(result.ttft.mean_s - ttft.mean()) <= 5 * math.sqrt(variance / n) + 1e-9
    for level, value in ((0.5, result.ttft.p50_s), (0.9, result.ttft.p90_s), (0.99, result.ttft.p99_s)):
        share = float(np.mean(ttft <= value))
        assert abs(share - level) <= 5 * math.sqrt(level * (1 - level) / n) + 1e-3
    for name, mask in (("offloaded", offloaded), ("local", ~offloaded)):
        summary = result.by_route[name]
        if summary is None or mask.sum() < 2_000:
            continue
        share = float(np.mean(ttft[mask] <= summary.p90_s))
        assert abs(share - 0.9) <= 5 * math.sqrt(0.09 / mask.sum()) + 1e-3


@settings(max_examples=examples(15), deadline=None)
@given(loaded_stage_models(), st.floats(0.0, 0.9), st.floats(1.0, 3.0))
def test_layerwise_mean_matches_quadrature(model: StageModel, q: float, stretch: float) -> None:
    """The closed-form E[max(T_prfaas, κ S/B); L > t] (crossing intervals + partial expectations) equals
    a dense quadrature over the length quantiles to 1e-4 relative."""
    layerwise = replace(model, transfer="layerwise", link_bandwidth_bytes_per_s=model.link_bandwidth_bytes_per_s / 30)
    t = float(model.lengths.quantile(q))
    route = route_latency(layerwise)
    _, offload = route_mean_s(layerwise.lengths, route, t, stretch)
    # Midpoint rule over a geometric grid of lengths weighted by exact CDF masses: accurate in the thin upper
    # tail, where a grid even in probability (quantiles) steps over large length spans.
    edges = np.geomspace(max(t, model.lengths.lower_tokens), model.lengths.upper_tokens, 200_001)
    masses = np.diff(np.asarray(model.lengths.cdf(edges)))
    reference = float(np.sum(route.offload_s(0.5 * (edges[1:] + edges[:-1]), stretch) * masses))
    assert offload == pytest.approx(reference, rel=1e-4)


# --------------------------------------------------------------------------------------------------------
# Goodput
# --------------------------------------------------------------------------------------------------------


@settings(max_examples=examples(10), deadline=None)
@given(loaded_stage_models(), st.floats(0.2, 0.8), st.floats(0.2, 0.8), st.floats(1.1, 3.0))
def test_p90_at_goodput_is_the_slo(model: StageModel, q: float, split: float, slack: float) -> None:
    """With an SLO above the unloaded P90, the P90 at the goodput rate equals the SLO (1e-6 relative), unless
    the SLO holds up to the stability limit; just above the goodput rate it is exceeded."""
    t, n_p, n_d = _plan(model, q, split)
    unloaded = loaded_ttft(model, _p(t, n_p, n_d), 0.0).ttft
    assert unloaded is not None
    slo = unloaded.p90_s * slack
    goodput = plan_goodput(model, _p(t, n_p, n_d), TtftSlo(limit_s=slo))
    assert goodput.limited_by in ("slo", "stability")
    if goodput.limited_by == "slo":
        at = loaded_ttft(model, _p(t, n_p, n_d), goodput.rate_req_per_s).ttft
        above = loaded_ttft(model, _p(t, n_p, n_d), goodput.rate_req_per_s * 1.001).ttft
        assert at is not None and at.p90_s == pytest.approx(slo, rel=1e-6)
        assert above is None or above.p90_s > slo


def test_goodput_search_beats_every_plan_of_a_grid(paper_model: StageModel) -> None:
    """The goodput optimiser is never worse than any (t, N_p) plan on a grid of its own search space."""
    _, _, best = best_goodput_plan(paper_model, TtftSlo(limit_s=5.0))
    grid = np.linspace(0.0, 80_000.0, 41)[:, None]
    splits = np.arange(paper_model.n_local)[None, :]
    rates, _, _ = goodput_rates(paper_model, grid, splits, TtftSlo(limit_s=5.0), grid_points=GRID_POINTS)
    assert best >= float(np.max(rates)) * (1 - 1e-5)


def test_goodput_is_zero_when_even_an_empty_system_misses_the_slo(paper_model: StageModel) -> None:
    """Homogeneous PD on the paper scenario: its unloaded P90 is 9.7 s, so a 5 s SLO admits no traffic
    (a regression guard on our own output; the 9.7 s itself reproduces Table 6's 9.73 s)."""
    homogeneous = replace(paper_model, n_prfaas=0, n_local=12)
    plan = Plan(threshold_tokens=paper_model.lengths.upper_tokens, n_pd_prefill=9, n_pd_decode=3)
    goodput = plan_goodput(homogeneous, plan, TtftSlo(limit_s=5.0))
    assert goodput.rate_req_per_s == 0.0 and goodput.limited_by == "unloaded"


def test_ttft_law_rejects_nothing_it_reports(paper_model: StageModel) -> None:
    """At 70 % of the paper plan's Λ_max the law's CDF reaches the levels it reports, and never exceeds 1."""
    moments = route_moments(paper_model, np.asarray(19_418.0))
    state = stage_state(paper_model, moments, 3, 5, 2.27)
    law = ttft_law(paper_model, moments, state)
    x = np.linspace(0.0, 200.0, 2001)
    cdf = law.local_part(x) + law.offload_part(x)
    assert np.all(np.diff(cdf) >= -1e-12) and cdf[-1] <= 1 + 1e-12 and cdf[-1] > 0.9999


@EXAMPLES
@given(loaded_stage_models(), st.floats(0.0, 1.0), st.floats(0.1, 0.9), st.sampled_from((0.5, 0.9, 0.99)))
def test_quantile_at_rates_is_loaded_ttfts_figure(model: StageModel, q: float, split: float, level: float) -> None:
    """The goodput re-scoring's P_q(Λ) (one level, the law's rate-free parts kept across rates) is the very
    number ``loaded_ttft`` reports, at zero load, along the load and past the limit (None where unstable)."""
    t, n_p, n_d = _plan(model, q, split)
    limit = _limit(model, t, n_p, n_d)[0]
    quantile_at = ttft_quantile_at_rates(model, _p(t, n_p, n_d), level, decode_service_scv=0.3)
    field = {0.5: "p50_s", 0.9: "p90_s", 0.99: "p99_s"}[level]
    for fraction in (0.0, 0.4, 0.9, 0.4, 1.2):
        rate = fraction * limit if math.isfinite(limit) else fraction
        full = loaded_ttft(model, _p(t, n_p, n_d), rate, decode_service_scv=0.3).ttft
        assert quantile_at(rate) == (None if full is None else getattr(full, field))


# --------------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------------

_runner = CliRunner()
_PLAN = ("--threshold", "19418", "--n-pd-prefill", "3", "--n-pd-decode", "5")


def _invoke(*args: str) -> tuple[int, str, str]:
    result = _runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_evaluate_load_json_schema() -> None:
    """`evaluate --load 0.7 --json` adds "loaded" (rate, utilisation per stage, TTFT percentiles overall and by
    route, stable) to the plan and to each baseline, and "curve" with --curve; no NaN or inf anywhere."""
    code, out, err = _invoke("evaluate", *_PLAN, "--load", "0.7", "--curve", "--json")
    assert code == 0, err
    payload = json.loads(out)
    json.dumps(payload, allow_nan=False)
    loaded = payload["loaded"]
    assert loaded.keys() >= {"rate_req_per_s", "utilization", "ttft_s", "ttft_by_route_s", "stable"}
    assert set(loaded["utilization"]) == set(STAGES)
    assert set(loaded["ttft_s"]) == {"mean", "p50", "p90", "p99"}
    assert set(loaded["ttft_by_route_s"]) == {"offloaded", "local"}
    assert loaded["stable"] is True and loaded["rate_req_per_s"] == pytest.approx(0.7 * 3.248, rel=1e-3)
    assert payload["baselines"]["homogeneous_pd"]["loaded"]["ttft_by_route_s"]["offloaded"] is None
    assert [round(p["load_fraction"], 2) for p in payload["curve"]] == [
        0.1,
        0.2,
        0.3,
        0.4,
        0.5,
        0.6,
        0.7,
        0.8,
        0.9,
        0.95,
    ]


def test_evaluate_past_saturation_reports_unstable() -> None:
    """At 105 % of Λ_max the plan is unstable: null TTFT figures, the saturated stage named, exit 0."""
    code, out, err = _invoke("evaluate", *_PLAN, "--load", "1.05", "--json")
    assert code == 0, err
    loaded = json.loads(out)["loaded"]
    assert loaded["stable"] is False and loaded["status"] == "unstable"
    assert loaded["unstable_stage"] in STAGES and set(loaded["ttft_s"].values()) == {None}


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("evaluate", *_PLAN, "--rate", "-1"), "--rate"),
        (("evaluate", *_PLAN, "--load", "nan"), "--load"),
        (("evaluate", *_PLAN, "--rate", "1", "--load", "0.5"), "--rate/--load"),
        (("optimize", "--objective", "latency"), "--objective"),
        (("optimize", "--objective", "goodput"), "--ttft-p90-s"),
        (("optimize", "--objective", "goodput", "--ttft-p90-s", "0"), "--ttft-p90-s"),
        (("optimize", "--ttft-p90-s", "5"), "--ttft-p90-s"),
        (("optimize", "--objective", "goodput", "--ttft-p90-s", "5", "--load", "0.5"), "--load"),
    ],
)
def test_bad_load_options_are_input_errors(args: tuple[str, ...], field: str) -> None:
    """Bad --rate/--load/--objective/--ttft-p90-s values exit with status 2 and name the option."""
    code, _, err = _invoke(*args)
    assert code == 2
    assert f"error: {field}:" in err


def test_goodput_objective_json_and_threshold_shift() -> None:
    """`optimize --objective goodput --ttft-p90-s 5 --json` (real process): the goodput plan beats the
    throughput plan's goodput, homogeneous PD gets none (its unloaded P90 exceeds 5 s), and t moves up. The
    figures are our own goodput outputs, so this is a regression guard, not a validation."""
    result = run_cli("optimize", "--objective", "goodput", "--ttft-p90-s", "5", "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["objective"] == "goodput" and payload["ttft_slo_s"] == 5.0
    best, paper = payload["plan"]["goodput"], payload["throughput_plan"]["goodput"]
    assert best["rate_req_per_s"] >= paper["rate_req_per_s"] > 0
    assert payload["baselines"]["homogeneous_pd"]["goodput"]["limited_by"] == "unloaded"
    assert payload["threshold_shift_tokens"] > 0


def test_unreachable_slo_is_infeasible() -> None:
    """A P90 SLO below every plan's unloaded P90 has no goodput anywhere: exit 1, the SLO named."""
    code, _, err = _invoke("optimize", "--objective", "goodput", "--ttft-p90-s", "0.5")
    assert code == 1 and "ttft_p90" in err
