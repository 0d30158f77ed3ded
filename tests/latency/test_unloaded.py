"""Unloaded TTFT: the closed-form mean and the solved P90 agree with a direct Monte Carlo over requests."""

from __future__ import annotations

from functools import partial

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.latency.unloaded import (
    largest_length_within,
    local_mass_below,
    offload_mass_below,
    route_latency,
    unloaded_ttft,
)
from prfaas_plan.throughput import StageModel
from tests.conftest import examples
from tests.strategies import stage_models


@settings(max_examples=examples(25), deadline=None)
@given(stage_models(), st.floats(0.0, 1.0), st.integers(0, 2**32 - 1))
def test_unloaded_ttft_matches_sampling(model: StageModel, q: float, seed: int) -> None:
    """Against 200,000 sampled requests' zero-load latencies: the mean within 4 standard errors, and the share
    of requests at or below the P90 within 4 binomial standard errors of 0.9. The variance includes the
    route-count term p(1-p)·(latency range)², which a sample can miss when one route expects a handful of
    requests (p ~ 1e-5)."""
    t = float(model.lengths.quantile(q))
    lengths = model.lengths.sample(np.random.default_rng(seed), 200_000)
    route = route_latency(model)
    offloaded = lengths > t
    ttft = np.where(offloaded, route.offload_s(lengths), route.local_s(lengths))
    result = unloaded_ttft(model.lengths, route, t)
    p = float(model.lengths.sf(t))
    ends = np.array([model.lengths.lower_tokens, model.lengths.upper_tokens])
    span = float(np.ptp(np.concatenate([route.offload_s(ends), model.local_prefill(ends)])))
    variance = ttft.var() + p * (1 - p) * span**2
    assert abs(result.mean_s - ttft.mean()) <= 4 * np.sqrt(variance / ttft.size) + 1e-9
    share_below = float(np.mean(ttft <= result.p90_s))
    assert abs(share_below - 0.9) <= 4 * np.sqrt(0.9 * 0.1 / ttft.size)


def test_paper_p90_request_goes_to_prfaas(paper_model: StageModel) -> None:
    """Digest §1.9: the P90 request (~62K tokens) is offloaded, so PrfaaS-PD and naive share the same P90."""
    route = route_latency(paper_model)
    plan = unloaded_ttft(paper_model.lengths, route, 19_400)
    naive = unloaded_ttft(paper_model.lengths, route, 0.0)
    assert abs(plan.p90_s - naive.p90_s) < 1e-3


def test_mass_below_skips_only_inversions_it_knows_the_answer_of(paper_model: StageModel) -> None:
    """local_mass_below and offload_mass_below skip the inversion where x covers the longest local length
    (the answer is min(t, hi)) or falls below the shortest offloaded latency (mass 0), and invert elsewhere.
    Against the plain formulas, P(L <= min(t, l*(x))) and P(t < L <= l*(x)) with l* from
    largest_length_within on the whole broadcast grid, at random x (off the route latencies at t themselves,
    where the inversion stops within its 1e-12 tolerance) and thresholds below, inside and above the
    support: the same numbers, bit for bit."""
    lengths = paper_model.lengths
    route = route_latency(paper_model)
    lo, hi = lengths.lower_tokens, lengths.upper_tokens
    rng = np.random.default_rng(7)
    for _ in range(40):
        t = rng.choice(np.array([lo - 1.0, lo - 500.0, lo, hi, hi + 10.0, *rng.uniform(lo, hi, 5)]), size=(4, 1))
        x = rng.uniform(0.0, 40.0, size=(1, 30))
        stretch = rng.uniform(1.0, 3.0, size=(1, 30))
        x_all, t_all = np.broadcast_arrays(x, t)
        l_local = np.minimum(t_all, largest_length_within(route.local_s, x_all, lo, hi))
        local = np.where(l_local >= lo, lengths.cdf(l_local), 0.0)
        np.testing.assert_array_equal(local_mass_below(lengths, route, t, x), local)
        s_all = np.broadcast_to(stretch, x_all.shape)
        l_offload = largest_length_within(partial(route.offload_s, link_stretch=s_all), x_all, lo, hi)
        offload = np.where(l_offload > t_all, lengths.cdf(l_offload) - lengths.cdf(t_all), 0.0)
        np.testing.assert_array_equal(offload_mass_below(lengths, route, t, x, stretch), offload)
