"""Time per output token under load: the decode batch, its step time and TPOT follow the offered rate.

The N_d local decode instances (BS_max = c slots each) are a batch server fed at the whole arrival rate Λ
(every request decodes locally), routed to the instance with the fewest requests (join the shortest queue,
what the simulator does). With K requests holding slots, m = min(K, N_d·c) are in service, spread as evenly
as the integers allow (r = m mod N_d instances carry q + 1, the rest q, q = m div N_d); an instance of batch
b emits one token per request every step(b) s (``StageModel.decode_step_s``: the pool's decode step curve).

**Batch law.** Tokens come out at R(K) = Σ_instances b / step(b) per second, so requests leave at
R(K) / O (O the mean output tokens): K is a birth-death process with births Λ and deaths R(K) / O, whose
stationary law is π_K ∝ Π_{j<=K} Λ·O / R(j). Below the slot cap this is a symmetric (processor-sharing)
queue, whose law does not depend on the output-length distribution beyond its mean (Kelly 1979,
Reversibility and Stochastic Networks, ch. 3); above it requests wait for a slot (their wait belongs to
TTFT, not TPOT) and the tail is geometric with ratio ρ = Λ·O·step(c) / (N_d·c), the decode load; ρ < 1 is
the decode stage's stability condition (Eq. 5). With a flat step the law is Poisson(Λ·O·step) below the cap,
the M/G/∞ occupancy: the mean in service n solves n = Λ·O·step(n/N_d) (Little's law).

**TPOT.** A token emitted by an instance of batch b took step(b); the law of the step seen by a token is
π_K weighted by each instance's token rate. A request's TPOT is the mean of its own O tokens' steps, so its
mean over requests is the token-weighted mean step, E[min(K, N_d·c)] / (Λ·O) by Little's law. Its spread is
that of the batch averaged over the request's own stay: for Poisson arrivals and equal stays D, the others'
count averaged over a window of length D has variance 2/3 of the instantaneous one (each other request
overlaps the window by D - |a| for an arrival at offset a, and ∫(1 - |a|/D)² da = 2D/3). So the percentile
is the token-weighted mean plus sqrt(2/3) times the token law's deviation at that percentile.

Assumptions, stated: Poisson arrivals at the decode stage; output lengths equal to their mean for the
spread (exact for the paper's fixed 1,024; shorter requests of a spread distribution average over less
and see more spread, longer ones less); a step function of the batch alone (the mean context, as the
physics prices it); the token-level law mapped linearly onto the per-request mean (the step curve is near
linear in the batch over the spread). TPOT never falls as Λ rises (the batch law grows stochastically with
Λ and the step curve is non-decreasing): ``tests/latency/test_tpot.py``.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike, NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InfeasibleError
from prfaas_plan.throughput import StageModel

Array = NDArray[np.float64]

#: Variance of a request's own-stay average of the others' count over the instantaneous variance (equal
#: stays, Poisson arrivals: ∫(1 - |a|/D)² da / D = 2/3).
WINDOW_VARIANCE_RATIO = 2.0 / 3.0
#: Percentiles reported (as fractions).
TPOT_LEVELS = (0.5, 0.9, 0.99)
_BISECTIONS = 60


@frozen
class TpotUnderLoad:
    """The decode stage at one arrival rate: load, batch and TPOT (s) with its percentiles."""

    rate_req_per_s: float
    n_pd_decode: int
    #: ρ = Λ·O·step(BS_max) / (N_d·BS_max): the fraction of the decode stage's capacity in use.
    load: float
    #: Mean requests in service per instance, and the probability that every slot is taken.
    mean_batch: float
    slots_full_probability: float
    tpot_mean_s: float
    tpot_p50_s: float
    tpot_p90_s: float
    tpot_p99_s: float

    @property
    def tokens_per_s_per_user(self) -> float:
        """1 / mean TPOT: what one request sees, tokens/s."""
        return 1.0 / self.tpot_mean_s


@frozen
class DecodeStage:
    """What TPOT under load needs of a stage model (hashable, so that rate limits are cached): the step
    curve's knots, BS_max and the mean output tokens O."""

    step_batches: tuple[float, ...]
    step_times_s: tuple[float, ...]
    step_time_s: float
    max_batch: int
    output_tokens_mean: float

    def step_s(self, batch: Array) -> Array:
        """Decode step at ``batch`` (``StageModel.decode_step_s``)."""
        if not self.step_batches:
            return np.full(np.shape(batch), self.step_time_s)
        return np.asarray(np.interp(batch, self.step_batches, self.step_times_s), dtype=np.float64)


def decode_stage(model: StageModel) -> DecodeStage:
    """The decode part of ``model``."""
    return DecodeStage(
        step_batches=model.decode_step_batches,
        step_times_s=model.decode_step_times_s,
        step_time_s=model.decode_step_time_s,
        max_batch=model.decode_max_batch,
        output_tokens_mean=model.output_tokens_mean,
    )


def _balanced(in_service: Array, n_d: int) -> tuple[Array, Array, Array, Array]:
    """For m requests in service spread evenly over n_d instances: (batch q + 1, its instance count r, batch q,
    its count n_d - r)."""
    q = np.floor_divide(in_service, n_d)
    r = in_service - q * n_d
    return q + 1.0, r, q, n_d - r


def _token_law(model: DecodeStage, rate_req_per_s: float, n_d: int) -> tuple[Array, Array, Array, float]:
    """(step value, token weight, state probability of the stay it came from, P(slots full)): the decode step
    seen by a token, as unnormalised weights over each state's two batch sizes, and the batch law π_K."""
    cap = n_d * model.max_batch
    k = np.arange(0.0, cap + 1.0)
    hi_b, hi_n, lo_b, lo_n = _balanced(k, n_d)
    step_hi, step_lo = model.step_s(hi_b), model.step_s(np.maximum(lo_b, 1.0))
    tokens_hi = hi_n * hi_b / step_hi
    tokens_lo = lo_n * lo_b / step_lo
    rate_tokens = tokens_hi + tokens_lo  # R(K), tokens/s
    births = rate_req_per_s * model.output_tokens_mean
    # log π_K - log π_0 = Σ_{j=1..K} log(Λ·O / R(j)).
    log_ratio = np.log(births) - np.log(rate_tokens[1:])
    log_pi = np.concatenate(([0.0], np.cumsum(log_ratio)))
    log_pi -= np.max(log_pi)
    pi = np.exp(log_pi)
    rho = births / rate_tokens[-1]
    # States above the cap: π_cap·ρ^j, j >= 1, lumped into the cap state (same batch, same step).
    tail = pi[-1] * rho / (1.0 - rho)
    pi_full = pi.copy()
    pi_full[-1] += tail
    total = float(np.sum(pi_full))
    pi_full /= total
    values = np.concatenate((step_hi, step_lo))
    weights = np.concatenate((pi_full * tokens_hi, pi_full * tokens_lo))
    return values, weights, pi_full, float(pi_full[-1])


def _weighted_quantile(values: Array, weights: Array, q: float) -> float:
    """The q-quantile of a discrete law, interpolated linearly between the mid-points of its atoms."""
    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order]
    keep = w > 0
    v, w = v[keep], w[keep]
    cdf = (np.cumsum(w) - 0.5 * w) / np.sum(w)
    return float(np.interp(q, cdf, v))


def decode_capacity_req_per_s(model: StageModel | DecodeStage, n_pd_decode: int) -> float:
    """N_d · BS_max / (O · step(BS_max)): the decode stage's saturation rate (Eq. 5), req/s."""
    stage = model if isinstance(model, DecodeStage) else decode_stage(model)
    top = float(stage.step_s(np.asarray(float(stage.max_batch))))
    return n_pd_decode * stage.max_batch / (stage.output_tokens_mean * top)


def _quantile(stage: DecodeStage, rate_req_per_s: float, n_d: int, quantile: float) -> float:
    if rate_req_per_s <= 0.0:
        return float(stage.step_s(np.asarray(1.0)))
    values, weights, _, _ = _token_law(stage, rate_req_per_s, n_d)
    mean = float(np.sum(values * weights) / np.sum(weights))
    return mean + math.sqrt(WINDOW_VARIANCE_RATIO) * (_weighted_quantile(values, weights, quantile) - mean)


def tpot_under_load(model: StageModel, rate_req_per_s: float, n_pd_decode: int) -> TpotUnderLoad:
    """TPOT at arrival rate Λ on N_d decode instances (module docstring: the law and its assumptions).

    Requires 0 < Λ < the decode capacity (ValueError otherwise)."""
    if n_pd_decode < 1:
        raise ValueError(f"n_pd_decode must be >= 1, got {n_pd_decode}")
    stage = decode_stage(model)
    capacity = decode_capacity_req_per_s(stage, n_pd_decode)
    if not 0.0 < rate_req_per_s < capacity:
        raise ValueError(f"rate must be in (0, {capacity:.6g}) req/s (the decode capacity), got {rate_req_per_s}")
    values, weights, pi, full = _token_law(stage, rate_req_per_s, n_pd_decode)
    mean = float(np.sum(values * weights) / np.sum(weights))
    spread = math.sqrt(WINDOW_VARIANCE_RATIO)
    cap = n_pd_decode * stage.max_batch
    in_service = np.arange(0.0, cap + 1.0)
    levels = {q: mean + spread * (_weighted_quantile(values, weights, q) - mean) for q in TPOT_LEVELS}
    return TpotUnderLoad(
        rate_req_per_s=rate_req_per_s,
        n_pd_decode=n_pd_decode,
        load=rate_req_per_s / capacity,
        mean_batch=float(np.sum(pi * in_service)) / n_pd_decode,
        slots_full_probability=full,
        tpot_mean_s=mean,
        tpot_p50_s=levels[0.5],
        tpot_p90_s=levels[0.9],
        tpot_p99_s=levels[0.99],
    )


def tpot_quantile_s(model: StageModel, rate_req_per_s: float, n_pd_decode: int, quantile: float = 0.9) -> float:
    """The ``quantile`` of TPOT (s) at Λ on N_d instances; the unloaded step(1) at Λ = 0."""
    return _quantile(decode_stage(model), rate_req_per_s, n_pd_decode, quantile)


@lru_cache(maxsize=4096)
def _rate_limit(stage: DecodeStage, n_d: int, slo_s: float, quantile: float) -> float:
    capacity = decode_capacity_req_per_s(stage, n_d)
    if _quantile(stage, 0.0, n_d, quantile) > slo_s:
        return 0.0
    top = capacity * (1.0 - 1e-9)
    if _quantile(stage, top, n_d, quantile) <= slo_s:
        return top
    low, high = 0.0, top
    for _ in range(_BISECTIONS):
        mid = 0.5 * (low + high)
        if _quantile(stage, mid, n_d, quantile) <= slo_s:
            low = mid
        else:
            high = mid
        if high - low <= 1e-12 * capacity:
            break
    return low


def tpot_rate_limit(
    model: StageModel, n_pd_decode: ArrayLike, slo_s: float | None = None, quantile: float = 0.9
) -> Array:
    """The largest Λ (req/s) at which the TPOT ``quantile`` stays within ``slo_s`` (default: the model's
    ``tpot_p90_slo_s``) on each N_d of ``n_pd_decode``: the decode capacity (less 1e-9) where the SLO holds up
    to saturation, 0 where even one request's step misses it or N_d < 1, +inf with no SLO. TPOT never falls
    as Λ rises, so the answer is found by bisection."""
    slo = model.tpot_p90_slo_s if slo_s is None else slo_s
    n_d = np.asarray(n_pd_decode, dtype=np.float64)
    if slo is None:
        return np.full(n_d.shape, np.inf)
    stage = decode_stage(model)
    out = np.zeros(n_d.shape)
    flat = out.reshape(-1)
    for index, value in enumerate(n_d.reshape(-1).tolist()):
        if value >= 1 and math.isfinite(value):
            flat[index] = _rate_limit(stage, int(value), float(slo), float(quantile))
    return out


def check_tpot_slo(model: StageModel) -> None:
    """InfeasibleError when the model's P90 TPOT SLO is missed at any load: the step of a batch of one is
    already longer (no rate, however small, meets it)."""
    slo = model.tpot_p90_slo_s
    if slo is None:
        return
    alone = float(decode_stage(model).step_s(np.asarray(1.0)))
    if alone > slo:
        raise InfeasibleError(
            f"tpot_p90: the decode step of one request alone is {alone * 1e3:.3g} ms, above the P90 TPOT SLO "
            f"of {slo * 1e3:g} ms, so no load meets it"
        )


def tpot_decode_floor(model: StageModel, rate_req_per_s: float, most: int = 1 << 20) -> int:
    """Fewest decode instances whose P90 TPOT stays within the model's SLO at ``rate_req_per_s`` (1 without an
    SLO; ``most`` + 1 when even ``most`` instances do not suffice): the rate limit rises with N_d, so the
    answer is found by doubling, then bisection."""
    if model.tpot_p90_slo_s is None or rate_req_per_s <= 0.0:
        return 1

    def carries(n_d: int) -> bool:
        return bool(tpot_rate_limit(model, [n_d])[0] > rate_req_per_s)

    high = 1
    while not carries(high):
        if high >= most:
            return most + 1
        high = min(2 * high, most)
    low = high // 2  # does not carry (or 0)
    while high - low > 1:
        mid = (low + high) // 2
        if carries(mid):
            high = mid
        else:
            low = mid
    return high
