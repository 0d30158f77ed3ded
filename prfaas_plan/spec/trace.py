"""A request trace: arrival times and per-request token counts, as read from a file by ``io.traces``."""

from __future__ import annotations

import math
from dataclasses import field

import numpy as np
import numpy.typing as npt

from prfaas_plan._frozen import frozen


@frozen
class Trace:
    """A recorded sequence of requests in arrival order.

    ``arrival_s`` is seconds since the first request (so it starts at 0 and never decreases);
    ``input_tokens``, ``output_tokens`` and ``cached_tokens`` are per-request token counts. ``cached_tokens``
    is None when the trace format carries no prefix information (or prefix caching was not asked for).

    ``block_ids`` and ``block_offsets`` keep each request's prefix blocks (Mooncake ``hash_ids``, one id per
    ``block_tokens``-token block, the last possibly partial) as one flat array of dense ids (0, 1, 2, ... in
    order of first appearance; equal hash ids map to equal dense ids) and n + 1 offsets: request i's blocks
    are ``block_ids[block_offsets[i]:block_offsets[i + 1]]``. 8 bytes per block plus 8 per request, instead
    of a Python list per request. Both are None when the trace carries no block hashes.
    Arrays are excluded from equality: two traces compare equal when they come from the same source.
    """

    source: str
    arrival_s: npt.NDArray[np.float64] = field(compare=False, repr=False)
    input_tokens: npt.NDArray[np.int64] = field(compare=False, repr=False)
    output_tokens: npt.NDArray[np.int64] = field(compare=False, repr=False)
    cached_tokens: npt.NDArray[np.int64] | None = field(default=None, compare=False, repr=False)
    block_ids: npt.NDArray[np.int64] | None = field(default=None, compare=False, repr=False)
    block_offsets: npt.NDArray[np.int64] | None = field(default=None, compare=False, repr=False)
    block_tokens: int = 512

    def __post_init__(self) -> None:
        n = self.arrival_s.shape[0]
        arrays = [self.input_tokens, self.output_tokens]
        if self.cached_tokens is not None:
            arrays.append(self.cached_tokens)
        if self.arrival_s.ndim != 1 or any(a.shape != (n,) for a in arrays):
            raise ValueError("trace arrays must be one-dimensional and of equal length")
        if (self.block_ids is None) != (self.block_offsets is None):
            raise ValueError("block_ids and block_offsets come together")
        if self.block_ids is not None and self.block_offsets is not None:
            offsets = self.block_offsets
            if (
                self.block_ids.ndim != 1
                or offsets.shape != (n + 1,)
                or int(offsets[0]) != 0
                or int(offsets[-1]) != self.block_ids.shape[0]
                or bool(np.any(np.diff(offsets) < 0))
            ):
                raise ValueError("block_offsets must be n + 1 non-decreasing offsets from 0 to len(block_ids)")
        if self.block_tokens < 1:
            raise ValueError(f"block_tokens must be >= 1, got {self.block_tokens}")

    @property
    def has_blocks(self) -> bool:
        """Whether the trace carries each request's prefix blocks."""
        return self.block_ids is not None

    def blocks(self, i: int) -> npt.NDArray[np.int64]:
        """Dense block ids of request ``i`` (an empty array when the trace carries none)."""
        if self.block_ids is None or self.block_offsets is None:
            return np.zeros(0, dtype=np.int64)
        return self.block_ids[int(self.block_offsets[i]) : int(self.block_offsets[i + 1])]

    @property
    def n_requests(self) -> int:
        """Number of requests in the trace."""
        return int(self.arrival_s.shape[0])

    @property
    def uncached_tokens(self) -> npt.NDArray[np.int64]:
        """Input tokens to prefill: input − cached, or all of the input when there is no cache information."""
        if self.cached_tokens is None:
            return self.input_tokens
        return self.input_tokens - self.cached_tokens

    @property
    def duration_s(self) -> float:
        """Span from the first to the last arrival (s); 0 for a single request."""
        if self.n_requests == 0:
            return 0.0
        return float(self.arrival_s[-1] - self.arrival_s[0])

    @property
    def mean_rate_req_per_s(self) -> float:
        """Mean arrival rate n / duration_s (req/s); NaN if the span is 0."""
        duration = self.duration_s
        return self.n_requests / duration if duration > 0.0 else math.nan

    def count_dispersion(self, window_gaps: float = 100.0) -> float:
        """Index of dispersion of arrival counts, Var[N(w)] / E[N(w)], over consecutive windows of
        ``window_gaps`` mean inter-arrival times each (the partial last window is dropped).

        For a renewal process it tends to the gap SCV as the window grows (Cox & Lewis 1966, §4.5), but unlike
        the gap SCV it is not inflated by requests logged in simultaneous batches (a trace whose timestamps
        come in bursts a few seconds apart has a gap SCV of about 9 and counts dispersed only 2-3 times more
        than Poisson over tens of seconds). NaN when fewer than 10 whole windows fit.
        """
        n = self.arrival_s.size
        span = self.duration_s
        if n < 2 or not span > 0:
            return math.nan
        window = window_gaps * span / (n - 1)
        windows = int(span // window)
        if windows < 10:
            return math.nan
        counts = np.bincount((self.arrival_s // window).astype(np.int64), minlength=windows + 1)[:windows]
        mean = float(counts.mean())
        return float(counts.var()) / mean if mean > 0 else math.nan

    @property
    def interarrival_scv(self) -> float:
        """Squared coefficient of variation of the gaps between consecutive arrivals, Var[g] / E[g]^2.

        Population variance (ddof = 0); 1 for a Poisson process, 0 for evenly spaced arrivals. NaN with fewer
        than two gaps or when every request arrives at the same instant.
        """
        gaps = np.diff(self.arrival_s)
        if gaps.size < 2:
            return math.nan
        mean = float(gaps.mean())
        if mean <= 0.0:
            return math.nan
        return float(gaps.var()) / (mean * mean)
