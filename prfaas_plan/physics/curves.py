"""Polynomial profile curves fitted to measured (or derived) points: T_prefill(l) and S_kv(l).

The paper gives its prefill latency and KV size only at four lengths (Table 5) and does not say how it
interpolates between them. A least-squares quadratic for time and an affine KV size reproduce its Table 6
(tests/validation/test_paper_table6.py), so curves here are polynomials in the uncached length ``l`` (tokens),
fitted by ordinary least squares, and carry their residuals so that every report can show how well they fit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from prfaas_plan.lengths import LengthDistribution
from prfaas_plan.spec.hardware import ProfilePoints, Provenance

# Lengths are divided by this before fitting so the normal equations stay well conditioned (l^2 ~ 1e10).
_SCALE_TOKENS = 1e4


@dataclass(frozen=True, slots=True, kw_only=True)
class PolyCurve:
    """y(l) = sum_k c_k * l^k, l in tokens, y in SI units (s or bytes); ``coefficients`` ascending in k."""

    coefficients: tuple[float, ...]
    provenance: Provenance
    source: str
    points_tokens: tuple[float, ...] = ()
    points_values: tuple[float, ...] = ()

    def __call__(self, length_tokens: ArrayLike) -> NDArray[np.float64]:
        """Evaluate the curve at one or many lengths (tokens)."""
        x = np.asarray(length_tokens, dtype=np.float64)
        out = np.zeros_like(x)
        for c in reversed(self.coefficients):
            out = out * x + c
        return out

    def derivative(self, length_tokens: ArrayLike) -> NDArray[np.float64]:
        """dy/dl at one or many lengths."""
        x = np.asarray(length_tokens, dtype=np.float64)
        out = np.zeros_like(x)
        for k in range(len(self.coefficients) - 1, 0, -1):
            out = out * x + k * self.coefficients[k]
        return out

    @property
    def residuals(self) -> tuple[float, ...]:
        """Fitted minus given value at each profile point (SI units)."""
        fitted = self(np.asarray(self.points_tokens))
        return tuple(float(f - v) for f, v in zip(fitted, self.points_values, strict=True))

    @property
    def relative_residuals(self) -> tuple[float, ...]:
        """Residuals divided by the given values."""
        return tuple(r / v for r, v in zip(self.residuals, self.points_values, strict=True))

    def expect(
        self, lengths: LengthDistribution, lower: ArrayLike, upper: ArrayLike, power: int = 1
    ) -> NDArray[np.float64]:
        """E[y(L)^power * 1{lower < L <= upper}] in closed form: the polynomial y^power expanded into the
        distribution's partial moments E[L^k; lower < L <= upper] (power 1 or 2; k <= 4 is supported)."""
        a = np.asarray(lower, dtype=np.float64)
        b = np.asarray(upper, dtype=np.float64)
        coefficients: tuple[float, ...] | NDArray[np.float64] = self.coefficients
        if power == 2:
            coefficients = np.convolve(self.coefficients, self.coefficients)
        elif power != 1:
            raise ValueError(f"power must be 1 or 2, got {power}")
        total = np.zeros(np.broadcast(a, b).shape, dtype=np.float64)
        for k, c in enumerate(coefficients):
            if c != 0.0:
                total += c * np.asarray(lengths.partial_moment(k, a, b), dtype=np.float64)
        return total

    def describe(self, unit: str) -> str:
        """Human form, e.g. ``0.389 + 4.21e-05*l + 9.94e-11*l^2 s``."""
        terms = []
        for k, c in enumerate(self.coefficients):
            terms.append(f"{c:.4g}" if k == 0 else (f"{c:.4g}*l" if k == 1 else f"{c:.4g}*l^{k}"))
        return " + ".join(terms).replace("+ -", "- ") + f" {unit}"


def fit_profile(points: ProfilePoints) -> PolyCurve:
    """Least-squares polynomial of ``points.fit_degree`` through the points (requires more points than degree).

    With exactly degree + 1 points the fit interpolates; with more it minimises the squared residuals.
    """
    x = np.asarray(points.lengths_tokens, dtype=np.float64)
    y = np.asarray(points.values, dtype=np.float64)
    degree = points.fit_degree
    if x.size < degree + 1:
        raise ValueError(f"{x.size} points cannot determine a degree-{degree} fit")
    vander = np.vander(x / _SCALE_TOKENS, degree + 1, increasing=True)
    scaled, *_ = np.linalg.lstsq(vander, y, rcond=None)
    coefficients = tuple(float(c) / _SCALE_TOKENS**k for k, c in enumerate(scaled))
    return PolyCurve(
        coefficients=coefficients,
        provenance=points.provenance,
        source=points.source,
        points_tokens=tuple(float(v) for v in x),
        points_values=tuple(float(v) for v in y),
    )


def shape_problems(curve: PolyCurve, lower_tokens: float, upper_tokens: float) -> list[str]:
    """Why ``curve`` is unfit as a latency or size over [lower, upper]: it must be positive and non-decreasing.

    Checked on a dense grid plus the endpoints; a fitted polynomial that dips or turns down inside the
    length range would make shorter requests look more expensive than longer ones.
    """
    grid = np.linspace(lower_tokens, upper_tokens, 2049)
    problems = []
    values = curve(grid)
    if np.any(values <= 0):
        where = float(grid[np.argmax(values <= 0)])
        problems.append(f"the fitted curve is not positive at {where:,.0f} tokens")
    slope = curve.derivative(grid)
    scale = max(float(np.max(np.abs(values))), 1e-300) / max(upper_tokens - lower_tokens, 1.0)
    if np.any(slope < -1e-9 * scale):
        where = float(grid[np.argmax(slope < -1e-9 * scale)])
        problems.append(f"the fitted curve decreases with length near {where:,.0f} tokens")
    return problems


@dataclass(frozen=True, slots=True, kw_only=True)
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


#: What the stage model needs of a curve: evaluation and closed-form expectations.
Curve = PolyCurve | TabulatedCurve
