"""Curves computed rather than fitted: y(l) piecewise linear between knots (roofline prefill times, KV sizes
with sliding windows), with exact closed-form expectations.

Apart from ``physics.curves`` (which names it lazily), so that a run on measured pools only never builds the class
(start-up time).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.lengths import LengthDistribution
from prfaas_plan.spec.hardware import Provenance


@frozen
class TabulatedCurve:
    """y(l) piecewise linear between knots (tokens), constant-slope extrapolation beyond the end knots.

    Used for curves computed rather than fitted (roofline prefill times, KV sizes with sliding windows).
    Expectations are exact for the piecewise-linear curve: on each segment y = α + β·l, so
    E[y^p; segment] expands into the distribution's partial moments of order <= 2p.
    """

    knots_tokens: tuple[float, ...]
    knot_values: tuple[float, ...]
    provenance: Provenance
    source: str

    def _segments(self) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        x = np.asarray(self.knots_tokens, dtype=np.float64)
        y = np.asarray(self.knot_values, dtype=np.float64)
        slope = np.diff(y) / np.diff(x)
        intercept = y[:-1] - slope * x[:-1]
        return x, intercept, slope

    def __call__(self, length_tokens: ArrayLike) -> NDArray[np.float64]:
        """Evaluate at one or many lengths (linear extrapolation outside the knots)."""
        x, intercept, slope = self._segments()
        at = np.asarray(length_tokens, dtype=np.float64)
        i = np.clip(np.searchsorted(x, at, side="right") - 1, 0, slope.size - 1)
        return np.asarray(intercept[i] + slope[i] * at, dtype=np.float64)

    def expect(
        self, lengths: LengthDistribution, lower: ArrayLike, upper: ArrayLike, power: int = 1
    ) -> NDArray[np.float64]:
        """E[y(L)^power * 1{lower < L <= upper}] (power 1 or 2), exact for the piecewise-linear curve.

        Computed as G(upper) - G(lower) with G(x) = E[y^power; L <= x]: the whole segments below x come
        from one cumulative sum over the segments (their partial moments are evaluated once per call, not
        once per bound), plus the part of x's own segment. Cost O(segments + bounds · log segments).
        """
        if power not in (1, 2):
            raise ValueError(f"power must be 1 or 2, got {power}")
        x, intercept, slope = self._segments()
        a = np.asarray(lower, dtype=np.float64)
        b = np.asarray(upper, dtype=np.float64)
        a, b = np.broadcast_arrays(a, b)
        edges_lo = np.concatenate(([-np.inf], x[1:-1]))
        edges_hi = np.concatenate((x[1:-1], [np.inf]))

        def contribution(j: NDArray[np.intp], lo: NDArray[np.float64], hi: NDArray[np.float64]) -> NDArray[np.float64]:
            m0 = np.asarray(lengths.partial_moment(0, lo, hi), dtype=np.float64)
            m1 = np.asarray(lengths.partial_moment(1, lo, hi), dtype=np.float64)
            c, d = intercept[j], slope[j]
            if power == 1:
                return np.asarray(c * m0 + d * m1, dtype=np.float64)
            m2 = np.asarray(lengths.partial_moment(2, lo, hi), dtype=np.float64)
            return np.asarray(c**2 * m0 + 2 * c * d * m1 + d**2 * m2, dtype=np.float64)

        every = np.arange(slope.size)
        whole = contribution(every, edges_lo, edges_hi)
        below = np.concatenate(([0.0], np.cumsum(whole)))  # below[j]: the segments before segment j

        def g(at: NDArray[np.float64]) -> NDArray[np.float64]:
            j = np.clip(np.searchsorted(x[1:-1], at, side="left"), 0, slope.size - 1)
            part = contribution(j, edges_lo[j], np.maximum(at, edges_lo[j]))
            return np.asarray(below[j] + part, dtype=np.float64)

        out = np.where(b > a, g(b.ravel()).reshape(b.shape) - g(a.ravel()).reshape(a.shape), 0.0)
        return np.asarray(out, dtype=np.float64)

    def derivative(self, length_tokens: ArrayLike) -> NDArray[np.float64]:
        """Slope of the segment containing each length."""
        x, _, slope = self._segments()
        at = np.asarray(length_tokens, dtype=np.float64)
        return np.asarray(slope[np.clip(np.searchsorted(x, at, side="right") - 1, 0, slope.size - 1)])

    def describe(self, unit: str) -> str:
        """Human form: the knot count and range."""
        lo, hi = self.knots_tokens[0], self.knots_tokens[-1]
        return f"piecewise linear over {len(self.knots_tokens)} knots, {lo:,.0f}-{hi:,.0f} tokens ({unit})"
