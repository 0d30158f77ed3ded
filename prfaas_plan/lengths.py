"""Token-length distributions with closed-form partial moments.

The planner's routing model (paper §3.4.1) needs, for a threshold t on the uncached input length L,
p(t) = P(L > t), l_long = E[L | L > t] and l_short = E[L | L <= t]; the queueing models need moments and
the squared coefficient of variation; the simulator needs samples. Everything here derives from one
primitive, the partial moment

    M_k(a, b) = E[L^k · 1{a < L <= b}]      (tokens^k; k = 0 gives the probability mass of (a, b])

which each distribution evaluates in closed form, vectorised over numpy arrays (a search evaluates it
thousands of times). Only numpy and the standard library are used: scipy is too slow to import on the
planner's start-up path.

Public methods accept a scalar or a numpy array (broadcasting a and b); a scalar input gives a ``float``
back, an array input an array.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, overload

import numpy as np
import numpy.typing as npt

from prfaas_plan._frozen import frozen

FloatArray = npt.NDArray[np.float64]

#: Highest k for which ``partial_moment`` is defined (the fourth moment is enough for kurtosis-level models).
MAX_MOMENT_ORDER = 4

_SQRT2 = math.sqrt(2.0)
_ERFC = np.frompyfunc(math.erfc, 1, 1)
_LOG = np.frompyfunc(math.log, 1, 1)

# Wichura (1988), Algorithm AS 241 (PPND16), Applied Statistics 37(3): 477-484, the rational approximations of
# the standard normal's inverse CDF (relative error about 1e-16), coefficients from the highest power down:
# |p - 1/2| <= 0.425 in r = 0.180625 - (p - 1/2)², else in r = sqrt(-ln(min(p, 1 - p))) - 1.6 (r <= 5) or - 5.
_AS241_CENTRAL = (
    (2.5090809287301226727e3, 3.3430575583588128105e4, 6.7265770927008700853e4, 4.5921953931549871457e4,
     1.3731693765509461125e4, 1.9715909503065514427e3, 1.3314166789178437745e2, 3.3871328727963666080e0),
    (5.2264952788528545610e3, 2.8729085735721942674e4, 3.9307895800092710610e4, 2.1213794301586595867e4,
     5.3941960214247511077e3, 6.8718700749205790830e2, 4.2313330701600911252e1, 1.0),
)  # fmt: skip
_AS241_NEAR = (
    (7.74545014278341407640e-4, 2.27238449892691845833e-2, 2.41780725177450611770e-1, 1.27045825245236838258e0,
     3.64784832476320460504e0, 5.76949722146069140550e0, 4.63033784615654529590e0, 1.42343711074968357734e0),
    (1.05075007164441684324e-9, 5.47593808499534494600e-4, 1.51986665636164571966e-2, 1.48103976427480074590e-1,
     6.89767334985100004550e-1, 1.67638483018380384940e0, 2.05319162663775882187e0, 1.0),
)  # fmt: skip
_AS241_FAR = (
    (2.01033439929228813265e-7, 2.71155556874348757815e-5, 1.24266094738807843860e-3, 2.65321895265761230930e-2,
     2.96560571828504891230e-1, 1.78482653991729133580e0, 5.46378491116411436990e0, 6.65790464350110377720e0),
    (2.04426310338993978564e-15, 1.42151175831644588870e-7, 1.84631831751005468180e-5, 7.86869131145613259100e-4,
     1.48753612908506148525e-2, 1.36929880922735805310e-1, 5.99832206555887937690e-1, 1.0),
)  # fmt: skip


def _horner(coefficients: tuple[float, ...], r: FloatArray) -> FloatArray:
    """Σ c_i r^(n-i) for coefficients from the highest power down, by Horner's rule (one rounding per step)."""
    out = coefficients[0] * r + coefficients[1]
    for c in coefficients[2:]:
        out = out * r + c
    return out


def _ratio(pair: tuple[tuple[float, ...], tuple[float, ...]], r: FloatArray) -> tuple[FloatArray, FloatArray]:
    return _horner(pair[0], r), _horner(pair[1], r)


def standard_normal_quantile(p: FloatArray) -> FloatArray:
    """Φ⁻¹(p) for every p in (0, 1), elementwise (Wichura's AS 241, coefficients above).

    The same operations in the same order as ``statistics.NormalDist().inv_cdf``, which evaluates AS 241 one
    number at a time: equal to it bit for bit on 1.6 million probabilities from 5e-324 to 1 - 1e-16 (x86-64),
    the logarithm taken by ``math.log`` as there (numpy's vectorised log differs from it by an ulp on about one
    input in 3,000). Vectorised, and without importing ``statistics`` (which brings ``fractions``, ``decimal``
    and ``random``) on the commands' start-up path.
    """
    q = p - 0.5
    central = np.abs(q) <= 0.425
    out = np.empty_like(q)
    if np.any(central):
        qc = q[central]
        num, den = _ratio(_AS241_CENTRAL, 0.180625 - qc * qc)
        out[central] = num * qc / den
    tail = ~central
    if np.any(tail):
        qt, pt = q[tail], p[tail]
        r = np.sqrt(-np.asarray(_LOG(np.where(qt <= 0.0, pt, 1.0 - pt)), dtype=np.float64))
        near = r <= 5.0
        num, den = np.empty_like(r), np.empty_like(r)
        num[near], den[near] = _ratio(_AS241_NEAR, r[near] - 1.6)
        num[~near], den[~near] = _ratio(_AS241_FAR, r[~near] - 5.0)
        x = num / den
        out[tail] = np.where(qt < 0.0, -x, x)
    # NormalDist returns mu + x·sigma with mu = 0, sigma = 1: the same number, -0.0 turned into 0.0.
    return 0.0 + out


def distinct_sorted(values: npt.ArrayLike) -> npt.NDArray[Any]:
    """The distinct values in increasing order, flattened: ``np.unique(values)`` for values without NaN.

    Written out because ``np.unique`` without its index outputs first asks whether its input is a masked array,
    which imports ``numpy.ma`` (10-15 ms) on the first call: every command that builds a threshold or knot grid
    would pay it at start-up.
    """
    ordered = np.sort(np.asarray(values).ravel())
    keep = np.ones(ordered.size, dtype=np.bool_)
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def _erfc(x: FloatArray) -> FloatArray:
    """Complementary error function, elementwise (math.erfc; float64 in, float64 out)."""
    return np.asarray(_ERFC(x), dtype=np.float64)


def _normal_mass(z_lo: FloatArray, z_hi: FloatArray) -> FloatArray:
    """Φ(z_hi) − Φ(z_lo) for z_lo <= z_hi, elementwise, without cancellation in either tail.

    When both points lie in the upper tail the mass is evaluated as Q(z_lo) − Q(z_hi) with
    Q(z) = erfc(z/√2)/2, so that two numbers close to 1 are never subtracted.
    """
    upper_tail = z_lo > 0.0
    first = np.where(upper_tail, z_lo, -z_hi)
    second = np.where(upper_tail, z_hi, -z_lo)
    return 0.5 * (_erfc(first / _SQRT2) - _erfc(second / _SQRT2))


def _check_order(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 0 <= k <= MAX_MOMENT_ORDER:
        raise ValueError(f"moment order k must be an integer in 0..{MAX_MOMENT_ORDER}, got {k!r}")


def _check_length(name: str, value: float) -> None:
    if not math.isfinite(value) or value < 0.0:
        raise ValueError(f"{name} must be a finite, non-negative number of tokens, got {value!r}")


class LengthDistribution(ABC):
    """A distribution of a token length L >= 0 on the support [lower_tokens, upper_tokens].

    Subclasses implement the partial moment ``_partial_moment`` and the inverse CDF ``_quantile`` on
    float64 arrays, plus ``sample`` and ``describe``; the CDF, survival function, mean, squared coefficient
    of variation and conditional means are all derived here from the partial moment.
    """

    __slots__ = ()

    if TYPE_CHECKING:
        # Declared for the type checker only: at run time a class attribute of this name would be taken by
        # @dataclass as the default value of the subclasses' ``lower_tokens`` / ``upper_tokens`` fields.
        @property
        def lower_tokens(self) -> float:
            """Smallest length in the support (tokens)."""

        @property
        def upper_tokens(self) -> float:
            """Largest length in the support (tokens)."""

    # -- what each distribution provides -------------------------------------------------------------------

    @abstractmethod
    def _partial_moment(self, k: int, a: FloatArray, b: FloatArray) -> FloatArray:
        """E[L^k · 1{a < L <= b}] for broadcast float64 arrays a, b (any values; a >= b gives 0)."""

    @abstractmethod
    def _quantile(self, q: FloatArray) -> FloatArray:
        """Smallest x with P(L <= x) >= q, for a float64 array q with every element in [0, 1]."""

    @abstractmethod
    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        """Draw ``n`` independent lengths (float64 tokens) using the generator ``rng``."""

    @abstractmethod
    def describe(self) -> str:
        """A short human description, e.g. ``lognormal(mu=9.9, sigma=1, [128, 131072])``."""

    # -- derived quantities ----------------------------------------------------------------------------------

    @overload
    def partial_moment(self, k: int, a: float, b: float) -> float: ...
    @overload
    def partial_moment(self, k: int, a: npt.NDArray[Any], b: float | npt.NDArray[Any]) -> FloatArray: ...
    @overload
    def partial_moment(self, k: int, a: float, b: npt.NDArray[Any]) -> FloatArray: ...

    def partial_moment(self, k: int, a: Any, b: Any) -> Any:
        """Partial moment M_k(a, b) = E[L^k · 1{a < L <= b}] in tokens^k.

        ``k`` is an integer in 0..4; k = 0 gives the probability P(a < L <= b). ``a`` and ``b`` broadcast
        against each other and may lie outside the support (±inf allowed); where a >= b the result is 0.
        """
        _check_order(k)
        a_arr, b_arr = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if a_arr.shape != b_arr.shape:  # equal shapes (scalars above all) would come back from it unchanged
            a_arr, b_arr = np.broadcast_arrays(a_arr, b_arr)
        return self._partial_moment(int(k), a_arr, b_arr)[()]

    @overload
    def cdf(self, x: float) -> float: ...
    @overload
    def cdf(self, x: npt.NDArray[Any]) -> FloatArray: ...

    def cdf(self, x: Any) -> Any:
        """Cumulative distribution F(x) = P(L <= x) = M_0(−inf, x) (right-continuous; dimensionless)."""
        return self.partial_moment(0, -math.inf, x)

    @overload
    def sf(self, x: float) -> float: ...
    @overload
    def sf(self, x: npt.NDArray[Any]) -> FloatArray: ...

    def sf(self, x: Any) -> Any:
        """Survival function P(L > x) = M_0(x, inf) = 1 − F(x); the paper's offload fraction p(t)."""
        return self.partial_moment(0, x, math.inf)

    @property
    def mean_tokens(self) -> float:
        """Mean E[L] = M_1(−inf, inf) in tokens."""
        return float(self.partial_moment(1, -math.inf, math.inf))

    @property
    def scv(self) -> float:
        """Squared coefficient of variation Var[L] / E[L]^2 = E[L^2]/E[L]^2 − 1 (dimensionless).

        NaN when E[L] = 0. Clamped at 0 against rounding for near-deterministic distributions.
        """
        mean = self.mean_tokens
        if mean == 0.0:
            return math.nan
        second = float(self.partial_moment(2, -math.inf, math.inf))
        return max(second / (mean * mean) - 1.0, 0.0)

    @overload
    def mean_above(self, t: float) -> float: ...
    @overload
    def mean_above(self, t: npt.NDArray[Any]) -> FloatArray: ...

    def mean_above(self, t: Any) -> Any:
        """Conditional mean E[L | L > t] = M_1(t, inf) / M_0(t, inf) in tokens (the paper's l_long).

        NaN where P(L > t) = 0, i.e. where the condition cannot occur; callers handle p = 0 themselves.
        """
        return self._conditional_mean(t, above=True)

    @overload
    def mean_below(self, t: float) -> float: ...
    @overload
    def mean_below(self, t: npt.NDArray[Any]) -> FloatArray: ...

    def mean_below(self, t: Any) -> Any:
        """Conditional mean E[L | L <= t] = M_1(−inf, t) / M_0(−inf, t) in tokens (the paper's l_short).

        NaN where P(L <= t) = 0, i.e. where the condition cannot occur; callers handle p = 1 themselves.
        """
        return self._conditional_mean(t, above=False)

    def _conditional_mean(self, t: Any, *, above: bool) -> Any:
        t_arr = np.asarray(t, dtype=np.float64)
        a, b = (t_arr, np.full_like(t_arr, math.inf)) if above else (np.full_like(t_arr, -math.inf), t_arr)
        mass = self._partial_moment(0, a, b)
        first = self._partial_moment(1, a, b)
        positive = mass > 0.0
        out = np.full_like(mass, math.nan)
        np.divide(first, mass, out=out, where=positive)
        # The ratio of two rounded integrals can stray a few ulps outside the conditioning interval.
        if above:
            out = np.clip(out, np.maximum(t_arr, self.lower_tokens), self.upper_tokens)
        else:
            out = np.clip(out, self.lower_tokens, np.minimum(t_arr, self.upper_tokens))
        return out[()]

    @overload
    def quantile(self, q: float) -> float: ...
    @overload
    def quantile(self, q: npt.NDArray[Any]) -> FloatArray: ...

    def quantile(self, q: Any) -> Any:
        """Quantile function Q(q) = min{x : P(L <= x) >= q} in tokens, for probabilities q in [0, 1].

        Q(0) is the lower end of the support and Q(1) the upper end. Raises ValueError for q outside [0, 1].
        """
        q_arr = np.asarray(q, dtype=np.float64)
        if not np.all((q_arr >= 0.0) & (q_arr <= 1.0)):
            raise ValueError("quantile probabilities must lie in [0, 1]")
        return self._quantile(q_arr)[()]


@frozen
class TruncatedLogNormal(LengthDistribution):
    """ln L ~ N(mu, sigma²) truncated to lower_tokens <= L <= upper_tokens (paper §4.1 workload).

    The paper's case study uses mu = 9.90, sigma = 1.00 on [128, 128K = 131072] tokens.
    """

    mu: float
    sigma: float
    lower_tokens: float
    upper_tokens: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.mu) and math.isfinite(self.sigma) and self.sigma > 0.0):
            raise ValueError(f"lognormal needs finite mu and sigma > 0, got mu={self.mu!r} sigma={self.sigma!r}")
        _check_length("lower_tokens", self.lower_tokens)
        _check_length("upper_tokens", self.upper_tokens)
        if not 0.0 < self.lower_tokens < self.upper_tokens:
            raise ValueError(
                f"lognormal needs 0 < lower_tokens < upper_tokens, got [{self.lower_tokens}, {self.upper_tokens}]"
            )
        if not self._normaliser() > 0.0:
            raise ValueError(f"{self.describe()} puts no probability mass (in float64) inside its bounds")

    def _bound_z(self) -> tuple[float, float]:
        """Standard scores z(Lo), z(U) of the bounds, z(x) = (ln x − mu)/sigma, computed in one place only."""
        return (
            (math.log(self.lower_tokens) - self.mu) / self.sigma,
            (math.log(self.upper_tokens) - self.mu) / self.sigma,
        )

    def _normaliser(self) -> float:
        """Z = Φ(z(U)) − Φ(z(Lo)), the untruncated probability mass inside the bounds."""
        z_lo, z_hi = self._bound_z()
        if z_lo > 0.0:
            return 0.5 * (math.erfc(z_lo / _SQRT2) - math.erfc(z_hi / _SQRT2))
        return 0.5 * (math.erfc(-z_hi / _SQRT2) - math.erfc(-z_lo / _SQRT2))

    def _partial_moment(self, k: int, a: FloatArray, b: FloatArray) -> FloatArray:
        """``_moment_of_arrays``, remembered for scalar bounds (``_scalar_moment``); a fresh array each time."""
        if a.ndim or b.ndim:
            return self._moment_of_arrays(k, a, b)
        return np.array(_scalar_moment(self, k, float(a), float(b)))

    def _moment_of_arrays(self, k: int, a: FloatArray, b: FloatArray) -> FloatArray:
        """E[L^k; a < L <= b] = exp(k·mu + k²sigma²/2) · [Φ(z(b') − k·sigma) − Φ(z(a') − k·sigma)] / Z.

        Here a', b' are a, b clipped to the support and z(x) = (ln x − mu)/sigma; the identity follows from
        completing the square in the normal integral of e^{k·y} (the standard lognormal partial expectation,
        e.g. Johnson, Kotz & Balakrishnan, Continuous Univariate Distributions vol. 1, ch. 14).
        """
        lo, hi = self.lower_tokens, self.upper_tokens
        # Clipping a from below and b from above is enough: a > U or b < Lo leaves a' >= b' (no mass).
        a_c = np.maximum(a, lo)
        b_c = np.minimum(b, hi)
        inside = a_c < b_c
        # Outside the interval any finite point in the support will do; it keeps logs and erfc quiet.
        a_c = np.where(inside, a_c, lo)
        b_c = np.where(inside, b_c, lo)
        # At the bounds use the very numbers Z is made of, so that P(L > t) is exactly 1 below the support.
        z_lo, z_hi = self._bound_z()
        shift = k * self.sigma
        z_a = np.where(a_c <= lo, z_lo, (np.log(a_c) - self.mu) / self.sigma) - shift
        z_b = np.where(b_c >= hi, z_hi, (np.log(b_c) - self.mu) / self.sigma) - shift
        mass = _normal_mass(z_a, z_b)
        untruncated_moment = math.exp(k * self.mu + 0.5 * shift**2)
        return np.where(inside, untruncated_moment * (mass / self._normaliser()), 0.0)

    def _quantile(self, q: FloatArray) -> FloatArray:
        """Invert F(x) = [Φ(z(x)) − Φ(z_lo)]/Z with the inverse normal, from whichever tail is closer.

        Below the median of the truncated mass, Φ(z) = Φ(z_lo) + q·Z; above it, 1 − Φ(z) = Q(z_hi) + (1−q)·Z,
        so the inverse normal is never asked for a probability that has lost its digits to cancellation.
        """
        z_lo, z_hi = self._bound_z()
        norm = self._normaliser()
        cdf_lo = 0.5 * math.erfc(-z_lo / _SQRT2)
        sf_hi = 0.5 * math.erfc(z_hi / _SQRT2)
        from_below = cdf_lo + q * norm
        from_above = sf_hi + (1.0 - q) * norm
        use_below = from_below <= 0.5
        target = np.where(use_below, from_below, from_above).ravel()
        inside = (target > 0.0) & (target < 1.0)
        z_flat = np.full(target.shape, math.nan)
        z_flat[inside] = standard_normal_quantile(target[inside])
        z = z_flat.reshape(q.shape)
        z = np.where(use_below, z, -z)
        x = np.clip(np.exp(self.mu + self.sigma * z), self.lower_tokens, self.upper_tokens)
        # Endpoints and probabilities that underflowed (target 0 or 1) map to the bounds exactly.
        x = np.where(q <= 0.0, self.lower_tokens, np.where(q >= 1.0, self.upper_tokens, x))
        bad = np.isnan(x)
        return np.where(bad, np.where(use_below, self.lower_tokens, self.upper_tokens), x)

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        """Draw ``n`` lengths (float64 tokens) by inverse transform: L = Q(U), U ~ Uniform[0, 1)."""
        return self._quantile(rng.random(n))

    def describe(self) -> str:
        """E.g. ``lognormal(mu=9.9, sigma=1, [128, 131072])``."""
        bounds = f"[{self.lower_tokens:g}, {self.upper_tokens:g}]"
        return f"lognormal(mu={self.mu:g}, sigma={self.sigma:g}, {bounds})"


#: How many scalar partial moments ``_scalar_moment`` keeps (least recently used dropped first).
SCALAR_MOMENTS_KEPT = 4096


@lru_cache(maxsize=SCALAR_MOMENTS_KEPT)
def _scalar_moment(dist: TruncatedLogNormal, k: int, a: float, b: float) -> float:
    """``dist``'s partial moment at scalar bounds, remembered: a plan's scoring asks for the same few again and
    again (the mean input length once per stage throughput, the same thresholds from the routing, the route
    moments and the TTFT solves: 38 distinct among 148 scalar calls in one ``optimize``). The value is the one
    computed the first time, so the answers are the same bits; bounds equal as floats (±0) give the same moment."""
    return float(dist._moment_of_arrays(k, np.array(a), np.array(b)))


@frozen
class Fixed(LengthDistribution):
    """Every request has exactly ``tokens`` tokens (a point mass; the paper's fixed 1024-token output)."""

    tokens: float

    def __post_init__(self) -> None:
        _check_length("tokens", self.tokens)

    @property
    def lower_tokens(self) -> float:
        """The single value (tokens)."""
        return self.tokens

    @property
    def upper_tokens(self) -> float:
        """The single value (tokens)."""
        return self.tokens

    @property
    def scv(self) -> float:
        """Exactly 0: a point mass has no variance."""
        return 0.0

    def _partial_moment(self, k: int, a: FloatArray, b: FloatArray) -> FloatArray:
        """E[L^k; a < L <= b] = v^k · 1{a < v <= b} for the point mass at v."""
        return np.where((a < self.tokens) & (self.tokens <= b), float(self.tokens) ** k, 0.0)

    def _quantile(self, q: FloatArray) -> FloatArray:
        """Q(q) = v for every q in [0, 1]."""
        return np.full_like(q, self.tokens)

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        """``n`` copies of the value (the generator is not consumed)."""
        return np.full(n, float(self.tokens))

    def describe(self) -> str:
        """E.g. ``fixed(1024)``."""
        return f"fixed({self.tokens:g})"


@frozen
class Uniform(LengthDistribution):
    """L ~ Uniform[lower_tokens, upper_tokens] (continuous)."""

    lower_tokens: float
    upper_tokens: float

    def __post_init__(self) -> None:
        _check_length("lower_tokens", self.lower_tokens)
        _check_length("upper_tokens", self.upper_tokens)
        if not self.lower_tokens < self.upper_tokens:
            raise ValueError(
                f"uniform needs lower_tokens < upper_tokens, got [{self.lower_tokens}, {self.upper_tokens}]"
            )

    def _partial_moment(self, k: int, a: FloatArray, b: FloatArray) -> FloatArray:
        """E[L^k; a < L <= b] = (b'^{k+1} − a'^{k+1}) / ((k+1)(U − Lo)), a', b' clipped to [Lo, U]."""
        lo, hi = self.lower_tokens, self.upper_tokens
        a_c = np.clip(a, lo, hi)
        b_c = np.clip(b, lo, hi)
        value = (b_c ** (k + 1) - a_c ** (k + 1)) / ((k + 1) * (hi - lo))
        return np.where(a_c < b_c, value, 0.0)

    def _quantile(self, q: FloatArray) -> FloatArray:
        """Q(q) = Lo + q·(U − Lo)."""
        return self.lower_tokens + q * (self.upper_tokens - self.lower_tokens)

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        """Draw ``n`` lengths (float64 tokens) uniformly on [Lo, U)."""
        return rng.uniform(self.lower_tokens, self.upper_tokens, n)

    def describe(self) -> str:
        """E.g. ``uniform([128, 8192])``."""
        return f"uniform([{self.lower_tokens:g}, {self.upper_tokens:g}])"


@frozen(eq=False)
class Empirical(LengthDistribution):
    """The empirical distribution of observed lengths: each of the n values has probability 1/n.

    Moments are population moments (divide by n). Equality is identity: two instances built from the same
    values are different objects (numpy arrays have no dataclass-friendly equality).
    """

    values: npt.ArrayLike = field(repr=False)
    _sorted_tokens: FloatArray = field(init=False, repr=False)
    _cumulative_powers: FloatArray = field(init=False, repr=False)
    _levels: FloatArray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        values = np.array(self.values, dtype=np.float64).ravel()
        if values.size == 0:
            raise ValueError("empirical distribution needs at least one value")
        if not np.all(np.isfinite(values)) or np.any(values < 0.0):
            raise ValueError("empirical lengths must be finite and non-negative")
        values.sort()
        # cumulative[k, i] = sum of the i smallest values to the power k, with a leading 0, so that the
        # partial moment over (a, b] is one difference of two searchsorted lookups (O(log n)).
        powers = values[np.newaxis, :] ** np.arange(MAX_MOMENT_ORDER + 1)[:, np.newaxis]
        cumulative = np.concatenate([np.zeros((MAX_MOMENT_ORDER + 1, 1)), np.cumsum(powers, axis=1)], axis=1)
        # F at the i-th smallest value is (i+1)/n, computed exactly as cdf() computes it, so that
        # quantile(cdf(x)) returns x for every observed x.
        levels = np.arange(1, values.size + 1, dtype=np.float64) / values.size
        for array in (values, cumulative, levels):
            array.setflags(write=False)
        # Caches derived from the one input, built once because a search queries them thousands of times;
        # a frozen dataclass can only fill them this way. ``values`` itself is left as given.
        object.__setattr__(self, "_sorted_tokens", values)
        object.__setattr__(self, "_cumulative_powers", cumulative)
        object.__setattr__(self, "_levels", levels)

    @property
    def lower_tokens(self) -> float:
        """Smallest observed value (tokens)."""
        return float(self._sorted_tokens[0])

    @property
    def upper_tokens(self) -> float:
        """Largest observed value (tokens)."""
        return float(self._sorted_tokens[-1])

    @property
    def sorted_tokens(self) -> FloatArray:
        """The observations as a sorted, read-only float64 array (tokens)."""
        return self._sorted_tokens

    @property
    def n_values(self) -> int:
        """Number of observations."""
        return int(self._sorted_tokens.size)

    def _partial_moment(self, k: int, a: FloatArray, b: FloatArray) -> FloatArray:
        """E[L^k; a < L <= b] = (1/n) · Σ_{a < v_i <= b} v_i^k, by two searchsorted lookups."""
        i_a = np.searchsorted(self._sorted_tokens, a, side="right")
        i_b = np.searchsorted(self._sorted_tokens, b, side="right")
        cumulative = self._cumulative_powers[k]
        value = (cumulative[i_b] - cumulative[i_a]) / self._sorted_tokens.size
        return np.where(i_a < i_b, value, 0.0)

    def _quantile(self, q: FloatArray) -> FloatArray:
        """Q(q) = the smallest observed v with F(v) >= q (the inverse of the right-continuous ECDF)."""
        index = np.searchsorted(self._levels, q, side="left")
        return self._sorted_tokens[np.minimum(index, self._sorted_tokens.size - 1)]

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        """Resample ``n`` observed values with replacement (float64 tokens)."""
        return self._sorted_tokens[rng.integers(0, self._sorted_tokens.size, n)].copy()

    def describe(self) -> str:
        """E.g. ``empirical(n=12031, mean=12035, [1, 126195])``."""
        return (
            f"empirical(n={self.n_values}, mean={self.mean_tokens:.6g}, [{self.lower_tokens:g}, {self.upper_tokens:g}])"
        )
