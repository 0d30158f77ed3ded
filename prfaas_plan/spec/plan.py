"""What a plan and a TTFT SLO are: the values the latency laws, the searches and the studies pass around.

A ``Plan`` is the decision the planner makes for one deployment (paper §3.4.1): the routing threshold t and
the split of the local pool into N_p prefill and N_d decode instances. The PrfaaS pool's size N_prfaas is the
deployment's (``StageModel.n_prfaas``), not the plan's. A ``TtftSlo`` is the percentile target the goodput
laws hold: the ``quantile`` of TTFT stays within ``limit_s``. The P90 TPOT SLO under load travels with the
stage model (``StageModel.tpot_p90_slo_s``), which every law that holds it reads.
"""

from __future__ import annotations

import math
import operator

from prfaas_plan._frozen import frozen


def _count(name: str, value: object) -> None:
    try:
        count = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None
    if count < 0:
        raise ValueError(f"{name} must be >= 0, got {count}")


@frozen
class Plan:
    """A plan (t, N_p, N_d): requests whose uncached input exceeds ``threshold_tokens`` are prefilled on the
    PrfaaS pool, the rest on ``n_pd_prefill`` local prefill instances; ``n_pd_decode`` local instances decode
    everything.

    The threshold may lie outside the length range (below it: everything offloaded; at or above its top:
    nothing offloaded), but not be NaN; the counts are integers >= 0 (a plan with no instance where traffic
    goes is infeasible, which the laws that score it report, not an invalid value).
    """

    threshold_tokens: float
    n_pd_prefill: int
    n_pd_decode: int

    def __post_init__(self) -> None:
        if math.isnan(self.threshold_tokens):
            raise ValueError("threshold_tokens must be a number, got nan")
        _count("n_pd_prefill", self.n_pd_prefill)
        _count("n_pd_decode", self.n_pd_decode)

    @property
    def n_local(self) -> int:
        """Local instances the plan uses, N_p + N_d."""
        return self.n_pd_prefill + self.n_pd_decode


@frozen
class TtftSlo:
    """A TTFT percentile target: the ``quantile`` of TTFT (over all requests) is at most ``limit_s``."""

    limit_s: float
    quantile: float = 0.9

    def __post_init__(self) -> None:
        if not (self.limit_s > 0 and math.isfinite(self.limit_s)):
            raise ValueError(f"ttft_slo_s must be a finite number > 0, got {self.limit_s}")
        if not 0.0 < self.quantile < 1.0:
            raise ValueError(f"quantile must be in (0, 1), got {self.quantile}")
