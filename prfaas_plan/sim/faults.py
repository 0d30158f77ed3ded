"""What a fault did to TTFT: the spike and the time to recover, read from a run's records.

Requests are binned by arrival time in bins of ``bin_s`` seconds from the fault on. The baseline is the P90
TTFT of the requests that arrived in the ``baseline_s`` seconds before the fault; the spike is the largest
P90 of a bin after it; the run has recovered at the start of the first bin after the spike from which
``settle_bins`` bins in a row have a P90 within ``tolerance`` (relative) of the baseline, and at once (0 s)
when no bin exceeds that (the fault made no spike above the bins' own noise). A request that
never got its first token counts as an infinite TTFT; a bin with no arrivals counts as recovered.
"""

from __future__ import annotations

import math

import numpy as np

from prfaas_plan._frozen import frozen
from prfaas_plan.sim.records import Records


@frozen
class FaultImpact:
    """TTFT before and after a fault (s): baseline and peak binned P90, when the peak came (s after the
    fault), and the recovery time (s after the fault; None when the run never recovered)."""

    baseline_p90_s: float
    peak_p90_s: float
    peak_after_s: float
    recovery_s: float | None
    bin_s: float


def _p90(values: np.ndarray) -> float:
    if values.size == 0:
        return math.nan
    return float(np.quantile(np.where(np.isnan(values), np.inf, values), 0.9))


def fault_impact(
    records: Records,
    *,
    fault_s: float,
    bin_s: float = 10.0,
    baseline_s: float = 600.0,
    tolerance: float = 0.2,
    settle_bins: int = 3,
) -> FaultImpact:
    """Baseline, spike and recovery of the binned P90 TTFT around a fault at ``fault_s`` (module docstring)."""
    if not (bin_s > 0 and baseline_s > 0 and tolerance >= 0 and settle_bins >= 1):
        raise ValueError("bin and baseline widths must be > 0, the tolerance >= 0 and settle_bins >= 1")
    arrival, ttft = records.arrival_s, records.ttft_s
    before = (arrival >= fault_s - baseline_s) & (arrival < fault_s)
    baseline = _p90(ttft[before])
    after = arrival >= fault_s
    index = np.floor((arrival[after] - fault_s) / bin_s).astype(np.int64)
    bins = int(index.max()) + 1 if index.size else 0
    p90 = np.array([_p90(ttft[after][index == k]) for k in range(bins)])
    if not bins:
        return FaultImpact(
            baseline_p90_s=baseline, peak_p90_s=math.nan, peak_after_s=math.nan, recovery_s=None, bin_s=bin_s
        )
    filled = np.where(np.isnan(p90), -np.inf, p90)
    peak = int(np.argmax(filled))
    ok = np.isnan(p90) | (p90 <= baseline * (1 + tolerance))
    recovery: float | None = 0.0 if bool(np.all(ok)) else None
    for k in range(peak, bins - settle_bins + 1):
        if recovery is not None:
            break
        if bool(np.all(ok[k : k + settle_bins])):
            recovery = k * bin_s
            break
    return FaultImpact(
        baseline_p90_s=baseline,
        peak_p90_s=float(p90[peak]),
        peak_after_s=peak * bin_s,
        recovery_s=recovery,
        bin_s=bin_s,
    )
