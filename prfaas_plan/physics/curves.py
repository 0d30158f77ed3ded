"""Polynomial profile curves fitted to measured (or derived) points: T_prefill(l) and S_kv(l).

The paper gives its prefill latency and KV size only at four lengths (Table 5) and does not say how it
interpolates between them. A least-squares quadratic for time and an affine KV size reproduce its Table 6
(tests/validation/test_paper_table6.py), so curves here are polynomials in the uncached length ``l`` (tokens),
fitted by ordinary least squares, and carry their residuals so that every report can show how well they fit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan._lazy import lazy_getattr
from prfaas_plan.lengths import LengthDistribution
from prfaas_plan.spec.hardware import ProfilePoints, Provenance

if TYPE_CHECKING:
    from typing import TypeAlias

    from prfaas_plan.physics.tabulated import TabulatedCurve as TabulatedCurve

# Lengths are divided by this before fitting so the normal equations stay well conditioned (l^2 ~ 1e10).
_SCALE_TOKENS = 1e4


@frozen
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


if TYPE_CHECKING:
    #: What the stage model needs of a curve: evaluation and closed-form expectations.
    Curve: TypeAlias = PolyCurve | TabulatedCurve

#: ``TabulatedCurve`` (physics.tabulated) and the ``Curve`` union are named here and imported on first use, so that
#: a run whose curves are all fitted polynomials (measured pools) never builds the class (start-up time).
_EXPORTS = {"TabulatedCurve": "prfaas_plan.physics.tabulated"}
_export = lazy_getattr(__name__, _EXPORTS)


def __getattr__(name: str) -> Any:
    """``TabulatedCurve``, or ``Curve`` (what the stage model needs of a curve: evaluation and closed-form
    expectations, ``PolyCurve | TabulatedCurve``), imported when first asked for."""
    if name != "Curve":
        return _export(name)
    from prfaas_plan.physics.tabulated import TabulatedCurve

    union = PolyCurve | TabulatedCurve
    globals()["Curve"] = union
    return union
