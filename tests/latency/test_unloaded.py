"""Unloaded TTFT: the closed-form mean and the solved P90 agree with a direct Monte Carlo over requests."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.latency.unloaded import route_latency, unloaded_ttft
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
