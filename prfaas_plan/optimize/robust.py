"""Robust plans: the threshold and split that maximise goodput at a low quantile of a fluctuating link's
bandwidth, rather than at its mean, and what each choice gives at the other bandwidth.

The bandwidth's distribution over time is the profile's own:
- steps: the time-weighted distribution over the profile's span (the last step held for as long as the span
  before it, or alone when it is the only step);
- periodic: the time-weighted distribution over one period;
- random (exp of an Ornstein-Uhlenbeck process, ``sim.link_profile``): lognormal with the given mean m and
  standard deviation s, σ² = ln(1 + s²/m²) and μ = ln m − σ²/2, so the q-quantile is exp(μ + σ·Φ⁻¹(q)).
Outages are rare events handled by the simulator's fault accounting, not by the quantile (a quantile at or
below an outage's share of time would be 0: no plan carries anything).
"""

from __future__ import annotations

import math
from statistics import NormalDist

from prfaas_plan._frozen import frozen
from prfaas_plan.latency.goodput import plans_goodput
from prfaas_plan.optimize.carrier import Carried
from prfaas_plan.optimize.sizing import max_rate
from prfaas_plan.spec.dynamics import BandwidthProfile, BandwidthSteps, PeriodicBandwidth, RandomBandwidth
from prfaas_plan.spec.plan import TtftSlo
from prfaas_plan.throughput import StageModel, with_link_rate


def _weighted(steps: tuple[tuple[float, float], ...], span_s: float) -> list[tuple[float, float]]:
    """(bandwidth, seconds held) of each step over ``span_s``."""
    out = []
    for i, (start, bandwidth) in enumerate(steps):
        end = steps[i + 1][0] if i + 1 < len(steps) else span_s
        out.append((bandwidth, max(0.0, end - start)))
    return out


def _quantile_of(weighted: list[tuple[float, float]], q: float) -> float:
    total = sum(w for _, w in weighted)
    if not total > 0:
        return weighted[0][0]
    acc = 0.0
    for bandwidth, w in sorted(weighted):
        acc += w
        if acc >= q * total - 1e-12:
            return bandwidth
    return max(b for b, _ in weighted)


def _mean_of(weighted: list[tuple[float, float]]) -> float:
    total = sum(w for _, w in weighted)
    return sum(b * w for b, w in weighted) / total if total > 0 else weighted[0][0]


def bandwidth_quantile(profile: BandwidthProfile, q: float) -> tuple[float, float]:
    """(q-quantile, time mean) of the profile's bandwidth, bytes/s."""
    if not 0 < q < 1:
        raise ValueError(f"quantile must be in (0, 1), got {q}")
    if isinstance(profile, RandomBandwidth):
        m, s = profile.mean_bytes_per_s, profile.std_bytes_per_s
        sigma = math.sqrt(math.log1p((s / m) ** 2))
        mu = math.log(m) - sigma**2 / 2
        return math.exp(mu + sigma * NormalDist().inv_cdf(q)), m
    if isinstance(profile, PeriodicBandwidth):
        weighted = _weighted(profile.steps, profile.period_s)
    else:
        assert isinstance(profile, BandwidthSteps)
        steps = profile.steps
        last_start = steps[-1][0]
        span = 2 * last_start if len(steps) > 1 else 1.0
        weighted = _weighted(steps, span)
    return _quantile_of(weighted, q), _mean_of(weighted)


@frozen
class RobustPlan:
    """The goodput-optimal plan at the bandwidth quantile and at the mean, each scored at both bandwidths."""

    quantile: float
    bandwidth_at_quantile_bytes_per_s: float
    bandwidth_mean_bytes_per_s: float
    robust: Carried
    at_mean: Carried
    #: Goodput of the robust plan at the mean bandwidth, and of the mean's plan at the quantile (req/s).
    robust_goodput_at_mean_req_per_s: float
    mean_plan_goodput_at_quantile_req_per_s: float


def _score(model: StageModel, plan: Carried, slo: TtftSlo, scv: float) -> float:
    if plan.goodput_req_per_s <= 0:
        return 0.0
    (g,) = plans_goodput(model, [plan.threshold_tokens], [plan.n_pd_prefill], slo, decode_service_scv=scv)
    return g.rate_req_per_s


def robust_plan(
    model: StageModel,
    profile: BandwidthProfile,
    quantile: float,
    slo: TtftSlo,
    *,
    decode_service_scv: float = 0.0,
) -> RobustPlan:
    """Maximise goodput at the ``quantile`` of the profile's bandwidth and at its mean; score each plan at
    the other bandwidth (same instances)."""
    low, mean = bandwidth_quantile(profile, quantile)
    # The profile's rates are the path's; the transfers get what the connections deliver of each.
    at_low = with_link_rate(model, low)
    at_mean = with_link_rate(model, mean)
    options = {"decode_service_scv": decode_service_scv}
    robust = max_rate(at_low, slo, **options)
    nominal = max_rate(at_mean, slo, **options)
    return RobustPlan(
        quantile=quantile,
        bandwidth_at_quantile_bytes_per_s=low,
        bandwidth_mean_bytes_per_s=mean,
        robust=robust,
        at_mean=nominal,
        robust_goodput_at_mean_req_per_s=_score(at_mean, robust, slo, decode_service_scv),
        mean_plan_goodput_at_quantile_req_per_s=_score(at_low, nominal, slo, decode_service_scv),
    )
