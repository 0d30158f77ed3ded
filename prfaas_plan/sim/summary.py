"""Steady-state figures from a run's records: throughput, TTFT percentiles, egress, utilisation, queues.

Warm-up: the first ``warmup_fraction`` of the requests (by arrival) are left out, and time-averages are
taken over the measurement window [t0, t1] from the first measured arrival to the last arrival (or the
horizon), so the empty start and the drain after the last arrival are both excluded.

Confidence intervals come from batch means: the measured requests are cut into ``batches`` consecutive
groups (the window into as many equal spans for throughput), each batch gives one estimate, and the
half-width is t_{0.975, b-1} · sd / sqrt(b). Batches long compared with the system's memory are nearly
independent; independent replications (``replicate``) are the check when that is in doubt.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from prfaas_plan._frozen import frozen
from prfaas_plan.sim.records import STATES, Records, SimResult

FloatArray = npt.NDArray[np.float64]
T = TypeVar("T")

#: TTFT percentiles reported (with the mean).
PERCENTILES = (50, 90, 99)


@frozen
class Estimate:
    """A point estimate with the half-width of its 95 % confidence interval (NaN when not available)."""

    value: float
    half_width: float = math.nan


@frozen
class TtftStats:
    """TTFT over a set of requests (s): mean and percentiles with batch-means CIs, and the request count."""

    count: int
    mean_s: Estimate
    p50_s: Estimate
    p90_s: Estimate
    p99_s: Estimate


@frozen
class Summary:
    """Steady-state figures of one run over its measurement window (rates in req/s, bytes/s)."""

    requests: int
    measured: int
    completed: int
    window_s: tuple[float, float]
    #: Requests that finished inside the window (the throughput's numerator; 0: no throughput was measured).
    window_completions: int
    offered_rate_req_per_s: float
    throughput_req_per_s: Estimate
    ttft: TtftStats
    ttft_by_route: dict[str, TtftStats]
    tpot_mean_s: float
    egress_mean_bytes_per_s: float
    egress_peak_bytes_per_s: float
    utilization: dict[str, float]
    occupancy: dict[str, float]
    #: Percentiles over the measured requests of each one's mean TPOT, (finish - decode start) / L_out, s.
    tpot_p50_s: float = math.nan
    tpot_p90_s: float = math.nan
    tpot_p99_s: float = math.nan


def student_t_quantile(q: float, df: int) -> float:
    """Quantile of Student's t with ``df`` degrees of freedom, 0 < q < 1, without scipy (start-up time).

    Exact for df = 1 (tan π(q - 1/2)) and df = 2 ((2q - 1) / √(2q(1 - q))); for df >= 3 the Cornish-Fisher
    expansion in the normal quantile z to order 1/df³ (Abramowitz & Stegun 26.7.5), within 0.8 % of the
    exact value at the 0.975 level for every df >= 3 (tests/sim/test_summary_t.py checks it against scipy).
    """
    if df == 1:
        return math.tan(math.pi * (q - 0.5))
    if df == 2:
        return (2.0 * q - 1.0) / math.sqrt(2.0 * q * (1.0 - q))
    z = statistics.NormalDist().inv_cdf(q)
    nu = float(df)
    return (
        z
        + (z**3 + z) / (4.0 * nu)
        + (5.0 * z**5 + 16.0 * z**3 + 3.0 * z) / (96.0 * nu**2)
        + (3.0 * z**7 + 19.0 * z**5 + 17.0 * z**3 - 15.0 * z) / (384.0 * nu**3)
    )


def confidence_half_width(values: Sequence[float] | FloatArray, level: float = 0.95) -> float:
    """Half-width t_{(1+level)/2, n-1} · s / sqrt(n) of the CI of the mean of ``values`` (NaN if n < 2)."""
    data = np.asarray(values, dtype=np.float64)
    data = data[np.isfinite(data)]
    if data.size < 2:
        return math.nan
    return student_t_quantile(0.5 + level / 2, data.size - 1) * float(data.std(ddof=1)) / math.sqrt(data.size)


def _overlap_s(start: FloatArray, end: FloatArray, lo: float, hi: float) -> float:
    """Sum over intervals of |[start, end] ∩ [lo, hi]| (NaN starts: not begun; NaN ends: still open)."""
    begun = np.isfinite(start)
    s = np.clip(start[begun], lo, hi)
    e = np.clip(np.where(np.isfinite(end[begun]), end[begun], hi), lo, hi)
    return float(np.sum(np.maximum(e - s, 0.0)))


def state_intervals(records: Records) -> dict[str, tuple[FloatArray, FloatArray]]:
    """(entry, exit) times of every request in each state of ``STATES`` (NaN entry: never entered)."""
    off = records.offloaded
    nan = np.full(records.n_requests, np.nan)
    return {
        "prfaas_queue": (np.where(off, records.arrival_s, nan), records.prefill_start_s),
        "local_queue": (np.where(off, nan, records.arrival_s), records.prefill_start_s),
        "prfaas_prefill": (np.where(off, records.prefill_start_s, nan), records.prefill_end_s),
        "local_prefill": (np.where(off, nan, records.prefill_start_s), records.prefill_end_s),
        "transfer": (records.prefill_end_s, records.kv_ready_s),
        "decode_queue": (records.kv_ready_s, records.decode_start_s),
        "decode": (records.decode_start_s, records.finish_s),
    }


def occupancy(records: Records, lo: float, hi: float) -> dict[str, float]:
    """Time-average number of requests in each state over [lo, hi], from the records alone."""
    span = hi - lo
    return {name: _overlap_s(entry, exit_, lo, hi) / span for name, (entry, exit_) in state_intervals(records).items()}


def _ttft_stats(ttft_s: FloatArray, batches: int) -> TtftStats:
    done = ttft_s[np.isfinite(ttft_s)]
    if done.size == 0:
        nan = Estimate(value=math.nan)
        return TtftStats(count=0, mean_s=nan, p50_s=nan, p90_s=nan, p99_s=nan)
    parts = [p[np.isfinite(p)] for p in np.array_split(ttft_s, batches)] if ttft_s.size >= 2 * batches else []
    parts = [p for p in parts if p.size]

    def estimate(stat: Callable[[FloatArray], float]) -> Estimate:
        return Estimate(value=stat(done), half_width=confidence_half_width([stat(p) for p in parts]))

    p50, p90, p99 = (lambda a, q=q: float(np.percentile(a, q)) for q in PERCENTILES)
    return TtftStats(
        count=int(done.size),
        mean_s=estimate(lambda a: float(a.mean())),
        p50_s=estimate(p50),
        p90_s=estimate(p90),
        p99_s=estimate(p99),
    )


def _link_utilization(sent_bytes: float, capacity_bytes: float) -> float:
    """Bytes sent over what the link could carry in the window; nan where it could carry nothing (a link down
    for the whole window: its use is undefined, not infinite)."""
    return sent_bytes / capacity_bytes if capacity_bytes > 0 else math.nan


def _bandwidth_integral(result: SimResult, lo: float, hi: float) -> float:
    """∫ B(t) dt over [lo, hi] (bytes), with the run's bandwidth profile if it had one."""
    profile = result.bandwidth_profile
    if not profile:
        return result.link_bandwidth_bytes_per_s * (hi - lo)
    starts = [s for s, _ in profile] + [math.inf]
    return sum(bw * max(0.0, min(hi, starts[k + 1]) - max(lo, starts[k])) for k, (_, bw) in enumerate(profile))


def _egress(result: SimResult, lo: float, hi: float) -> tuple[float, float]:
    """Mean and peak (busiest whole bin) egress in bytes/s over [lo, hi]."""
    bins, width = result.egress_bin_bytes, result.egress_bin_s
    if bins.size == 0:
        return 0.0, 0.0
    edges = np.arange(bins.size + 1) * width
    covered = np.clip(np.minimum(edges[1:], hi) - np.maximum(edges[:-1], lo), 0.0, width) / width
    mean = float(np.sum(bins * covered)) / (hi - lo)
    whole = covered >= 1.0
    peak = float(np.max(bins[whole])) / width if np.any(whole) else mean
    return mean, peak


def summarize(result: SimResult, *, warmup_fraction: float = 0.1, batches: int = 20) -> Summary:
    """Figures of a run over its measurement window (see the module docstring); ValueError when fewer than
    two requests remain after the warm-up."""
    if not 0.0 <= warmup_fraction < 1.0:
        raise ValueError(f"warmup_fraction must be in [0, 1), got {warmup_fraction}")
    rec = result.records
    n = rec.n_requests
    first = min(math.ceil(warmup_fraction * n), n - 1)
    if n - first < 2:
        raise ValueError("too few requests to measure: need at least two after the warm-up")
    lo, hi = float(rec.arrival_s[first]), min(float(rec.arrival_s[-1]), result.end_s)
    if not hi > lo:
        raise ValueError("the measured requests all arrive at one instant: no window to average over")
    span = hi - lo
    finish = rec.finish_s[np.isfinite(rec.finish_s)]
    edges = np.linspace(lo, hi, batches + 1)
    per_batch = np.histogram(finish, bins=edges)[0] / np.diff(edges)
    inside = int(np.count_nonzero((finish >= lo) & (finish <= hi)))
    throughput = Estimate(value=inside / span, half_width=confidence_half_width(per_batch))
    measured = slice(first, n)
    ttft = rec.ttft_s[measured]
    offloaded = rec.offloaded[measured]
    out_tokens = rec.output_tokens[measured]
    hold = (rec.finish_s - rec.decode_start_s)[measured]
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = hold / out_tokens
    tpot = tpot[np.isfinite(tpot) & (out_tokens > 0)]
    states = occupancy(rec, lo, hi)
    egress_mean, egress_peak = _egress(result, lo, hi)
    decode_busy = states["decode"]
    utilization = {
        "prfaas": states["prfaas_prefill"] / result.n_prfaas if result.n_prfaas else math.nan,
        "pd_prefill": states["local_prefill"] / result.n_pd_prefill if result.n_pd_prefill else math.nan,
        "link": _link_utilization(egress_mean * span, _bandwidth_integral(result, lo, hi)),
        "pd_decode": decode_busy / result.decode_slots,
    }
    return Summary(
        requests=n,
        measured=n - first,
        completed=int(np.count_nonzero(np.isfinite(rec.finish_s))),
        window_s=(lo, hi),
        window_completions=inside,
        offered_rate_req_per_s=(n - 1 - first) / span,
        throughput_req_per_s=throughput,
        ttft=_ttft_stats(ttft, batches),
        ttft_by_route={
            "offloaded": _ttft_stats(ttft[offloaded], batches),
            "local": _ttft_stats(ttft[~offloaded], batches),
        },
        tpot_mean_s=float(tpot.mean()) if tpot.size else math.nan,
        egress_mean_bytes_per_s=egress_mean,
        egress_peak_bytes_per_s=egress_peak,
        utilization=utilization,
        occupancy={name: states[name] for name in STATES},
        **_tpot_percentiles(tpot),
    )


def _tpot_percentiles(tpot: npt.NDArray[np.float64]) -> dict[str, float]:
    """P50, P90 and P99 of the per-request mean TPOTs (NaN when none finished)."""
    if not tpot.size:
        return {}
    p50, p90, p99 = (float(v) for v in np.percentile(tpot, [50.0, 90.0, 99.0]))
    return {"tpot_p50_s": p50, "tpot_p90_s": p90, "tpot_p99_s": p99}


def replicate(run: Callable[[np.random.Generator], T], replications: int, seed: int) -> list[T]:
    """Independent replications: ``run`` once per child of ``np.random.SeedSequence(seed)``, each with its
    own generator (statistically independent streams); feed the results to ``confidence_half_width``."""
    children = np.random.SeedSequence(seed).spawn(replications)
    return [run(np.random.default_rng(child)) for child in children]
