"""Unloaded time to first token: the empty-system latency the paper's Table 6 reports (digest §1.9).

The paper gives no TTFT formula. Its six Table 6 figures are reproduced by a zero-queueing service-time
model evaluated over the input-length distribution (mean = expectation, P90 = 90th percentile over
requests):

    TTFT(l) = T_prfaas(l) + S_kv(l) / B_link     for l > t (offloaded; the whole link, no sharing)
    TTFT(l) = T_local(l)                          for l <= t (the intra-cluster RDMA transfer is neglected)

This is NOT a latency under load: no request waits. Queueing delay is a separate capability; every
output labels these figures "unloaded".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from prfaas_plan.lengths import LengthDistribution
from prfaas_plan.physics.curves import PolyCurve

# Route latencies are tabulated on this many lengths to invert them; both are smooth and increasing,
# so linear interpolation on a grid this fine is accurate to far below a millisecond.
_GRID_POINTS = 4097
_BRACKET_PASSES = 3
_QUANTILE = 0.9


@dataclass(frozen=True, slots=True, kw_only=True)
class UnloadedTtft:
    """Mean and a percentile of TTFT over requests with no queueing, seconds."""

    mean_s: float
    p90_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteLatency:
    """The unloaded TTFT curves of the two routes; ``offload_*`` may be None when nothing is offloaded."""

    local_prefill: PolyCurve
    offload_prefill: PolyCurve | None = None
    offload_kv_bytes: PolyCurve | None = None
    link_bandwidth_bytes_per_s: float = 1.0

    def offload_s(self, length_tokens: np.ndarray) -> np.ndarray:
        """T_prfaas(l) + S_kv(l) / B for offloaded requests, seconds."""
        assert self.offload_prefill is not None and self.offload_kv_bytes is not None
        return self.offload_prefill(length_tokens) + self.offload_kv_bytes(length_tokens) / (
            self.link_bandwidth_bytes_per_s
        )


def _mean(lengths: LengthDistribution, route: RouteLatency, threshold_tokens: float) -> float:
    lo, hi = lengths.lower_tokens, lengths.upper_tokens
    total = float(route.local_prefill.expect(lengths, lo - 1.0, threshold_tokens)) if threshold_tokens >= lo else 0.0
    if threshold_tokens < hi:
        assert route.offload_prefill is not None and route.offload_kv_bytes is not None
        t = max(threshold_tokens, lo - 1.0)
        total += float(route.offload_prefill.expect(lengths, t, hi))
        total += float(route.offload_kv_bytes.expect(lengths, t, hi)) / route.link_bandwidth_bytes_per_s
    return total


def unloaded_ttft(lengths: LengthDistribution, route: RouteLatency, threshold_tokens: float) -> UnloadedTtft:
    """Mean and P90 of the zero-load TTFT when requests with L > t are offloaded (digest §1.9).

    The mean is exact (polynomial partial moments). The quantile solves P(TTFT <= x) = 0.9 where
    P(TTFT <= x) = P(L <= min(t, T_local^-1(x))) + P(t < L <= TTFT_offload^-1(x)); both route curves are
    increasing in l (checked when profiles load), so each inverse is a monotone interpolation.
    """
    lo, hi = lengths.lower_tokens, lengths.upper_tokens
    mean_s = _mean(lengths, route, threshold_tokens)
    if hi <= lo:  # a point mass: every request sees the same latency
        return UnloadedTtft(mean_s=mean_s, p90_s=mean_s)
    grid = np.linspace(lo, hi, _GRID_POINTS)
    local_curve = route.local_prefill(grid)
    offload_curve = route.offload_s(grid) if threshold_tokens < hi else None

    def cdf(x: np.ndarray) -> np.ndarray:
        prob = np.zeros_like(x)
        if threshold_tokens >= lo:
            l_star = np.minimum(threshold_tokens, np.interp(x, local_curve, grid, left=lo - 1.0, right=hi))
            prob += np.where(l_star >= lo, lengths.cdf(l_star), 0.0)
        if offload_curve is not None:
            l_star = np.interp(x, offload_curve, grid, left=lo - 1.0, right=hi)
            mass = np.asarray(lengths.cdf(l_star)) - float(lengths.cdf(threshold_tokens))
            prob += np.where(l_star > threshold_tokens, mass, 0.0)
        return prob

    low = float(local_curve[0]) if offload_curve is None else float(min(local_curve[0], offload_curve[0]))
    high = float(local_curve[-1]) if offload_curve is None else float(max(local_curve[-1], offload_curve[-1]))
    # P(TTFT <= x) is non-decreasing in x: bracket the quantile on a grid, then on a grid inside the bracket.
    for _ in range(_BRACKET_PASSES):
        xs = np.linspace(low, high, _GRID_POINTS)
        below = np.flatnonzero(cdf(xs) < _QUANTILE)
        first_above = 0 if below.size == 0 else min(int(below[-1]) + 1, xs.size - 1)
        low, high = float(xs[max(first_above - 1, 0)]), float(xs[first_above])
    return UnloadedTtft(mean_s=mean_s, p90_s=high)
