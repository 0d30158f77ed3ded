"""Expert load imbalance of a routed MoE layer: how many tokens the busiest expert, or the busiest GPU's share
of the experts, receives in one forward pass.

T tokens each route to k distinct experts of E. Under uniform routing expert e's load is Binomial(T, k/E)
exactly (each token picks e with probability k/E, independently of the other tokens). A group of m = E/g
experts (one GPU's share under expert parallelism) receives the sum of its experts' loads; a token's k
choices fall in it hypergeometrically, approximated here by the T·k choices landing in it independently
with probability 1/g, Binomial(T·k, 1/g), whose variance overstates the exact one by (E - 1)/(E - k)
(slightly pessimistic; exact for one expert per group).

The busiest of the g units (experts, or groups):

    E[max_u L_u] = Σ_{c >= 0} (1 - Π_u F_u(c))          (F_u the CDF of unit u's load)

treating the units' loads as independent. Multinomial counts are negatively associated (Joag-Dev and
Proschan 1983, Ann. Statist. 11(1); top-k choices without replacement and sums over independent tokens too,
Dubhashi and Ranjan 1998, Random Struct. Algorithms 13(2)), so P(all <= c) <= Π_u F_u(c): the independent
form is a lower bound of the exact expectation; tests/physics/test_moe_load.py measures the gap against
simulated routing (within 3 %; the bound is exact for a single token).

Skew s is the long-run excess of the hottest expert's load over the mean (``MaxVio`` of Wang et al. 2024,
"Auxiliary-Loss-Free Load Balancing Strategy for Mixture-of-Experts", arXiv 2408.15664: max load / mean load
- 1): the hottest expert routes with probability (1 + s)·k/E and the others share the rest equally; the GPU
holding it routes (1 + s/m)/g of the choices. s = 0 is uniform routing, where only a finite batch's spread
remains, and it vanishes as T grows (relative spread ~ sqrt(g / (T·k))).

Units whose load has a standard deviation above ``_EXACT_MAX_SD`` tokens use the normal approximation to the
binomial with continuity correction (integrated on a fine grid); smaller ones sum exact binomial
probabilities. Pure numpy and the standard library (no scipy on the pricing path).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

Array = NDArray[np.float64]

# Above this standard deviation (tokens) a unit's load is priced by the normal approximation: the binomial's
# skewness is then below 0.005 and the exact window would run to thousands of points per length.
_EXACT_MAX_SD = 200.0
# Windows reach this many standard deviations (plus a few tokens) either side of the mean: the tails beyond
# carry less than 1e-20 of probability.
_TAIL_SD = 10.0
_GRID_POINTS = 4001


def _erf(x: Array) -> Array:
    """erf(x), absolute error below 1.5e-7 (Abramowitz and Stegun 1964, formula 7.1.26)."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.asarray(sign * (1.0 - poly * np.exp(-a * a)), dtype=np.float64)


def _normal_cdf(x: Array, mean: float, sd: float) -> Array:
    return np.asarray(0.5 * (1.0 + _erf((x - mean) / (sd * math.sqrt(2.0)))), dtype=np.float64)


def _binomial_cdf(n: int, p: float, lo: int, hi: int) -> Array:
    """P(X <= c) for c = lo..hi of X ~ Binomial(n, p), 0 < p < 1, with lo at least ``_TAIL_SD`` standard
    deviations below the mean (or 0), so that P(X < lo) is negligible. The probabilities come from the ratio
    of consecutive terms, anchored at lo by the log-gamma form."""
    c = np.arange(lo, hi + 1, dtype=np.float64)
    log_first = (
        math.lgamma(n + 1)
        - math.lgamma(lo + 1)
        - math.lgamma(n - lo + 1)
        + lo * math.log(p)
        + (n - lo) * math.log1p(-p)
    )
    steps = np.log((n - c[:-1]) / (c[:-1] + 1.0)) + math.log(p / (1.0 - p))
    log_pmf = log_first + np.concatenate(([0.0], np.cumsum(steps)))
    return np.asarray(np.minimum(np.cumsum(np.exp(log_pmf)), 1.0), dtype=np.float64)


def _expected_max(n: int, probabilities: tuple[tuple[float, int], ...]) -> float:
    """E[max] over units with loads Binomial(n, p), given as (p, how many units have it) (module docstring)."""
    units = [(p, count) for p, count in probabilities if count > 0]
    if any(p >= 1.0 for p, _ in units):
        return float(n)  # a unit that takes every choice is the busiest
    units = [(p, count) for p, count in units if p > 0.0]
    if not units or n == 0:
        return 0.0
    sds = [math.sqrt(n * p * (1.0 - p)) for p, _ in units]
    means = [n * p for p, _ in units]
    lo = max(0.0, min(m - _TAIL_SD * s - 10.0 for m, s in zip(means, sds, strict=True)))
    hi = min(float(n), max(m + _TAIL_SD * s + 10.0 for m, s in zip(means, sds, strict=True)))
    if max(sds) <= _EXACT_MAX_SD:
        first, last = math.floor(lo), math.ceil(hi)
        log_all = np.zeros(last - first + 1)
        for (p, count), mean, sd in zip(units, means, sds, strict=True):
            own_lo = int(max(0.0, math.floor(mean - _TAIL_SD * sd - 10.0)))
            own_hi = int(min(float(n), math.ceil(mean + _TAIL_SD * sd + 10.0)))
            cdf = np.zeros(last - first + 1)
            cdf[own_lo - first : own_hi - first + 1] = _binomial_cdf(n, p, own_lo, own_hi)
            cdf[own_hi - first + 1 :] = 1.0
            log_all += count * np.log(np.maximum(cdf, 1e-300))
        return float(first + np.sum(1.0 - np.exp(log_all)))
    # Normal approximation: Σ_c (1 - G(c)) with G(c) ≈ Π Φ((c + 1/2 - μ)/σ) is the midpoint rule of
    # ∫_0^∞ (1 - Π Φ((y - μ)/σ)) dy; below ``lo`` the integrand is 1.
    y = np.linspace(lo, hi, _GRID_POINTS)
    log_all = np.zeros_like(y)
    for (_, count), mean, sd in zip(units, means, sds, strict=True):
        log_all += count * np.log(np.maximum(_normal_cdf(y, mean, sd), 1e-300))
    return float(lo + np.trapezoid(1.0 - np.exp(log_all), y))


def busiest_load(tokens: float, experts: int, active: int, groups: int | None = None, skew: float = 0.0) -> float:
    """Expected routed tokens of the busiest of ``groups`` equal groups of experts (default: every expert its
    own group) when ``tokens`` tokens each route to ``active`` distinct experts of ``experts`` (module
    docstring). Equals the mean tokens·active/groups for one group; at least the mean otherwise."""
    if experts < 1 or active < 1 or (groups is not None and groups < 1) or skew < 0:
        raise ValueError("experts, active and groups must be >= 1 and skew >= 0")
    t = round(tokens)
    k = min(active, experts)
    g = experts if groups is None else min(groups, experts)
    if g == 1 or t == 0:
        return float(t * k / g)
    if t == 1 and g == experts:
        return 1.0  # one token: every expert it touches gets exactly it
    if g == experts:
        n, p = t, k / experts
        hot = min(1.0, p * (1.0 + skew))
        rest = (k - hot) / (experts - 1)
    else:
        n, p = t * k, 1.0 / g
        hot = min(1.0, p * (1.0 + skew * g / experts))
        rest = (1.0 - hot) / (g - 1)
    return _expected_max(n, ((hot, 1), (rest, g - 1)))


def imbalance_factor(
    tokens: ArrayLike, experts: int, active: int, groups: int | None = None, skew: float = 0.0
) -> Array:
    """E[busiest load] / mean load (``busiest_load`` over tokens·active/groups), elementwise over ``tokens``;
    1 where no token is routed. How much longer the expert GEMMs take when they wait for the busiest unit."""
    t = np.asarray(tokens, dtype=np.float64)
    g = experts if groups is None else min(groups, experts)
    k = min(active, experts)
    out = np.ones_like(t)
    for value in np.unique(t):
        if round(float(value)) >= 1:
            mean = round(float(value)) * k / g
            out[t == value] = busiest_load(float(value), experts, active, groups, skew) / mean
    return np.asarray(out, dtype=np.float64)


def fit_skew(tokens: float, experts: int, active: int, observed_max: float, upper: float = 64.0) -> float:
    """The skew s at which ``busiest_load`` (one expert per unit) equals ``observed_max`` (bisection: the
    load grows with s); 0 when the observation is at or below the uniform routing's expectation."""
    if busiest_load(tokens, experts, active, skew=0.0) >= observed_max:
        return 0.0
    low, high = 0.0, upper
    if busiest_load(tokens, experts, active, skew=high) <= observed_max:
        return high
    for _ in range(60):
        mid = 0.5 * (low + high)
        if busiest_load(tokens, experts, active, skew=mid) < observed_max:
            low = mid
        else:
            high = mid
    return 0.5 * (low + high)
