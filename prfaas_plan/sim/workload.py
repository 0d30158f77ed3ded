"""The requests a run replays: arrival times and token counts, all drawn before the run starts.

Sampling everything up front with numpy keeps the event loop free of random draws, and makes a run a
pure function of its workload: the same seed gives the same workload and so the same records.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from prfaas_plan._frozen import frozen
from prfaas_plan.lengths import LengthDistribution
from prfaas_plan.sim.arrivals import ArrivalProcess
from prfaas_plan.sim.prefix_cache import CacheReplay
from prfaas_plan.spec.trace import Trace

FloatArray = npt.NDArray[np.float64]

#: Runs longer than this are refused: about 1 GB of arrays and minutes of wall time per 10 million.
MAX_REQUESTS = 10_000_000


def _frozen(values: npt.ArrayLike) -> FloatArray:
    array = np.array(values, dtype=np.float64)
    array.setflags(write=False)
    return array


@frozen(eq=False)
class Workload:
    """``n`` requests: arrival times (s, non-decreasing), uncached input and output lengths (tokens).

    Optional, set by a prefix-cache replay (``sim.prefix_cache``): ``offloaded``, each request's route fixed
    in advance (True: PrfaaS) instead of input > t; ``extra_prefill_s``, time added to the request's prefill
    (loading its cached prefix); ``cache_transfer_bytes``, a cached prefix that must cross the link before
    the prefill can start (the abundant rule), towards PrfaaS where ``cache_transfer_to_prfaas``.
    """

    arrival_s: FloatArray
    input_tokens: FloatArray
    output_tokens: FloatArray
    offloaded: npt.NDArray[np.bool_] | None = None
    extra_prefill_s: FloatArray | None = None
    cache_transfer_bytes: FloatArray | None = None
    cache_transfer_to_prfaas: npt.NDArray[np.bool_] | None = None

    @property
    def moves_caches(self) -> bool:
        """Whether any request waits for a cross-cluster cache transfer."""
        return self.cache_transfer_bytes is not None and bool(np.any(self.cache_transfer_bytes > 0))

    def __post_init__(self) -> None:
        n = self.arrival_s.shape[0]
        arrays: tuple[FloatArray, ...] = (self.arrival_s, self.input_tokens, self.output_tokens)
        if self.extra_prefill_s is not None:
            arrays = (*arrays, self.extra_prefill_s)
            if n and float(np.min(self.extra_prefill_s)) < 0.0:
                raise ValueError("extra prefill times must be >= 0")
        if self.cache_transfer_bytes is not None:
            arrays = (*arrays, self.cache_transfer_bytes)
            if n and float(np.min(self.cache_transfer_bytes)) < 0.0:
                raise ValueError("cache transfer sizes must be >= 0")
        for flags in (self.offloaded, self.cache_transfer_to_prfaas):
            if flags is not None and (flags.ndim != 1 or flags.shape[0] != n):
                raise ValueError("workload arrays must be one-dimensional and of equal length")
        if (self.cache_transfer_bytes is None) != (self.cache_transfer_to_prfaas is None):
            raise ValueError("cache transfer sizes and directions come together")
        if any(a.ndim != 1 or a.shape[0] != n for a in arrays):
            raise ValueError("workload arrays must be one-dimensional and of equal length")
        if not all(bool(np.all(np.isfinite(a))) for a in arrays):
            raise ValueError("workload values must be finite")
        if n and (float(np.min(self.input_tokens)) < 0.0 or float(np.min(self.output_tokens)) < 0.0):
            raise ValueError("token counts must be >= 0")
        if n > 1 and bool(np.any(np.diff(self.arrival_s) < 0.0)):
            raise ValueError("arrival times must be non-decreasing")

    @staticmethod
    def of(arrival_s: npt.ArrayLike, input_tokens: npt.ArrayLike, output_tokens: npt.ArrayLike) -> Workload:
        """A workload from array-likes (copied into read-only float64 arrays)."""
        return Workload(
            arrival_s=_frozen(arrival_s), input_tokens=_frozen(input_tokens), output_tokens=_frozen(output_tokens)
        )

    @property
    def n_requests(self) -> int:
        """Number of requests."""
        return int(self.arrival_s.shape[0])

    @property
    def mean_rate_req_per_s(self) -> float:
        """(n − 1) / (last − first arrival), req/s; NaN with fewer than two distinct arrival times."""
        span = float(self.arrival_s[-1] - self.arrival_s[0]) if self.n_requests else 0.0
        return (self.n_requests - 1) / span if span > 0.0 else math.nan


def check_request_count(n: int) -> None:
    """Refuse counts that are not positive or would not finish in reasonable time (ValueError)."""
    if n < 1:
        raise ValueError(f"the number of requests must be >= 1, got {n}")
    if n > MAX_REQUESTS:
        raise ValueError(f"{n:,} requests is more than the {MAX_REQUESTS:,} a run may simulate")


def synthetic_workload(
    rng: np.random.Generator,
    arrivals: ArrivalProcess,
    input_lengths: LengthDistribution,
    output_lengths: LengthDistribution,
    n: int,
) -> Workload:
    """Draw ``n`` requests: arrival times, then uncached input lengths, then output lengths (in that order,
    so that one seed always gives the same workload)."""
    check_request_count(n)
    arrival_s = arrivals.sample(rng, n)
    inputs = input_lengths.sample(rng, n)
    outputs = output_lengths.sample(rng, n)
    return Workload.of(arrival_s, inputs, outputs)


def trace_workload(
    trace: Trace, n: int | None = None, rate_req_per_s: float | None = None, replay: CacheReplay | None = None
) -> Workload:
    """The first ``n`` requests of a trace (all when None), with uncached inputs and recorded outputs.

    With ``rate_req_per_s`` the time axis is stretched or squeezed so that the replayed requests arrive at
    that mean rate ((n − 1)/span); gaps keep their relative sizes, so the burstiness (SCV) is unchanged.
    With ``replay`` (a prefix-cache replay of at least those requests) the inputs are the incremental
    lengths it left at each request's cluster, the routes are its routes, and loading a hit adds its
    ``load_s`` to the prefill.
    """
    count = trace.n_requests if n is None else min(n, trace.n_requests)
    check_request_count(count)
    arrival_s = np.asarray(trace.arrival_s[:count], dtype=np.float64)
    arrival_s = arrival_s - arrival_s[0]
    if rate_req_per_s is not None:
        if not (math.isfinite(rate_req_per_s) and rate_req_per_s > 0.0):
            raise ValueError(f"target rate must be > 0 req/s, got {rate_req_per_s!r}")
        span = float(arrival_s[-1])
        if count < 2 or span <= 0.0:
            raise ValueError("a trace needs two distinct arrival times to be rescaled to a rate")
        arrival_s = arrival_s * ((count - 1) / span / rate_req_per_s)
    if replay is None:
        return Workload.of(arrival_s, trace.uncached_tokens[:count], trace.output_tokens[:count])
    if replay.input_tokens.shape[0] < count:
        raise ValueError(f"the cache replay covers {replay.input_tokens.shape[0]} requests, fewer than {count}")
    offloaded = np.array(replay.offloaded[:count], dtype=bool)
    to_prfaas = np.array(replay.transfer_to_prfaas[:count], dtype=bool)
    for flags in (offloaded, to_prfaas):
        flags.setflags(write=False)
    return Workload(
        arrival_s=_frozen(arrival_s),
        input_tokens=_frozen(replay.incremental_tokens[:count]),
        output_tokens=_frozen(trace.output_tokens[:count]),
        offloaded=offloaded,
        extra_prefill_s=_frozen(replay.load_s[:count]),
        cache_transfer_bytes=_frozen(replay.transfer_bytes[:count]),
        cache_transfer_to_prfaas=to_prfaas,
    )
