"""Tests of prfaas_plan.lengths: paper check values, closed forms against quadrature, and sampling."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from prfaas_plan.lengths import (
    Empirical,
    Fixed,
    LengthDistribution,
    TruncatedLogNormal,
    Uniform,
    distinct_sorted,
    standard_normal_quantile,
)
from tests.conftest import examples

PROPERTY = settings(max_examples=examples(60), deadline=None)
LOG_MAX = math.log(1e6)


# -- strategies over physical ranges (mu 4..12, sigma 0.2..2.5, bounds 1..1e6 tokens) ---------------------


@st.composite
def lognormals(draw: st.DrawFn) -> TruncatedLogNormal:
    """Truncated log-normals whose bounds, placed in standard-score space, keep a usable probability mass."""
    mu = draw(st.floats(4.0, 12.0))
    sigma = draw(st.floats(0.2, 2.5))
    z_lo = draw(st.floats(-8.0, 3.0))
    z_hi = draw(st.floats(z_lo + 0.2, 9.0))
    log_lo = min(max(mu + sigma * z_lo, 0.0), LOG_MAX)
    log_hi = min(max(mu + sigma * z_hi, 0.0), LOG_MAX)
    assume(log_hi - log_lo > 0.01)
    return TruncatedLogNormal(mu=mu, sigma=sigma, lower_tokens=math.exp(log_lo), upper_tokens=math.exp(log_hi))


@st.composite
def uniforms(draw: st.DrawFn) -> Uniform:
    """Uniform lengths on [Lo, U] within 0..1e6 tokens, at least one token wide."""
    lower = draw(st.floats(0.0, 5e5))
    upper = draw(st.floats(lower + 1.0, 1e6))
    return Uniform(lower_tokens=lower, upper_tokens=upper)


token_values = st.one_of(st.integers(1, 10**6).map(float), st.floats(1.0, 1e6))
empiricals = st.lists(token_values, min_size=1, max_size=80).map(lambda v: Empirical(values=np.array(v)))
fixeds = st.floats(1.0, 1e6).map(lambda v: Fixed(tokens=v))
continuous = st.one_of(lognormals(), uniforms())
distributions = st.one_of(lognormals(), uniforms(), empiricals, fixeds)
# Points on and around the support, including values outside it.
points = st.floats(0.0, 2e6)


def _point_for(draw: st.DrawFn, dist: LengthDistribution) -> float:
    """A test point: sometimes exactly an atom of a discrete distribution, otherwise anywhere."""
    if isinstance(dist, Empirical) and draw(st.booleans()):
        return float(draw(st.sampled_from(list(dist.sorted_tokens))))
    if isinstance(dist, Fixed) and draw(st.booleans()):
        return dist.tokens
    return draw(points)


# -- the paper's case-study workload (digest §2.4) -----------------------------------------------------------


PAPER = TruncatedLogNormal(mu=9.90, sigma=1.00, lower_tokens=128, upper_tokens=131072)


def test_paper_check_values() -> None:
    """Digest §2.4: E[L] = 27.49K; median 19.2K, P90 62.4K, P99 115.4K; at t = 19,400 p = 0.4957,
    E[L|L>t] = 45.0K and E[L|L<=t] = 10.2K."""
    assert round(PAPER.mean_tokens / 1e3, 2) == 27.49
    assert round(PAPER.quantile(0.50) / 1e3, 1) == 19.2
    assert round(PAPER.quantile(0.25) / 1e3, 1) == 9.9
    assert round(PAPER.quantile(0.75) / 1e3, 1) == 36.5
    assert round(PAPER.quantile(0.90) / 1e3, 1) == 62.4
    assert round(PAPER.quantile(0.95) / 1e3, 1) == 82.2
    assert round(PAPER.quantile(0.99) / 1e3, 1) == 115.4
    t = 19_400.0
    assert round(PAPER.sf(t), 4) == 0.4957
    assert round(PAPER.mean_above(t) / 1e3, 1) == 45.0
    assert round(PAPER.mean_below(t) / 1e3, 1) == 10.2


def test_paper_upper_bound_128000_variant() -> None:
    """Digest §2.4: with the upper bound at 128,000 instead, p = 0.4949 and l_long = 44.8K."""
    dist = TruncatedLogNormal(mu=9.90, sigma=1.00, lower_tokens=128, upper_tokens=128_000)
    assert round(dist.sf(19_400.0), 4) == 0.4949
    assert round(dist.mean_above(19_400.0) / 1e3, 1) == 44.8


def test_describe() -> None:
    """describe() is short and names the family and its parameters."""
    assert PAPER.describe() == "lognormal(mu=9.9, sigma=1, [128, 131072])"
    assert Fixed(tokens=1024).describe() == "fixed(1024)"
    assert Uniform(lower_tokens=128, upper_tokens=8192).describe() == "uniform([128, 8192])"
    assert Empirical(values=[3, 1, 2]).describe() == "empirical(n=3, mean=2, [1, 3])"


# -- closed forms --------------------------------------------------------------------------------------------


def _normal_mass(z_lo: float, z_hi: float) -> float:
    if z_lo > 0:
        return float(stats.norm.sf(z_lo) - stats.norm.sf(z_hi))
    return float(stats.norm.cdf(z_hi) - stats.norm.cdf(z_lo))


def _lognormal_moment_by_quadrature(dist: TruncatedLogNormal, k: int, a: float, b: float) -> float:
    """∫ x^k f(x) dx over (a, b] ∩ support, with f the truncated log-normal density, in u = ln x."""
    lo_tokens, hi_tokens = max(a, dist.lower_tokens), min(b, dist.upper_tokens)
    if lo_tokens >= hi_tokens:
        return 0.0
    lo, hi = math.log(lo_tokens), math.log(hi_tokens)
    z_norm = _normal_mass(
        (math.log(dist.lower_tokens) - dist.mu) / dist.sigma,
        (math.log(dist.upper_tokens) - dist.mu) / dist.sigma,
    )

    def integrand(u: float) -> float:
        # x^k f(x) dx with x = e^u, f(x) = φ((ln x − mu)/σ) / (x σ Z), dx = x du.
        return math.exp(k * u) * stats.norm.pdf((u - dist.mu) / dist.sigma) / (dist.sigma * z_norm)

    peak = dist.mu + k * dist.sigma**2
    extra = [peak] if lo < peak < hi else None
    value, _ = integrate.quad(integrand, lo, hi, points=extra, epsabs=0.0, epsrel=1e-11, limit=400)
    return float(value)


@PROPERTY
@given(dist=lognormals(), k=st.integers(0, 2), data=st.data())
def test_lognormal_partial_moment_matches_quadrature(dist: TruncatedLogNormal, k: int, data: st.DataObject) -> None:
    """E[L^k; a < L <= b] in closed form equals the numerical integral of x^k times the density."""
    a, b = sorted((data.draw(points), data.draw(points)))
    expected = _lognormal_moment_by_quadrature(dist, k, a, b)
    full = dist.partial_moment(k, -math.inf, math.inf)
    assert dist.partial_moment(k, a, b) == pytest.approx(expected, rel=1e-7, abs=1e-12 * full)


@PROPERTY
@given(dist=uniforms(), k=st.integers(0, 2), data=st.data())
def test_uniform_partial_moment_matches_quadrature(dist: Uniform, k: int, data: st.DataObject) -> None:
    """E[L^k; a < L <= b] in closed form equals the integral of x^k / (U − Lo) over (a, b] ∩ [Lo, U]."""
    a, b = sorted((data.draw(points), data.draw(points)))
    lo, hi = max(a, dist.lower_tokens), min(b, dist.upper_tokens)
    width = dist.upper_tokens - dist.lower_tokens
    expected = integrate.quad(lambda x: x**k / width, lo, hi)[0] if lo < hi else 0.0
    full = dist.partial_moment(k, -math.inf, math.inf)
    assert dist.partial_moment(k, a, b) == pytest.approx(expected, rel=1e-7, abs=1e-12 * full)


@PROPERTY
@given(dist=empiricals, k=st.integers(0, 4), data=st.data())
def test_empirical_partial_moment_matches_direct_sum(dist: Empirical, k: int, data: st.DataObject) -> None:
    """E[L^k; a < L <= b] from cumulative sums equals (1/n) Σ v^k over the values with a < v <= b."""
    a, b = sorted((_point_for(data.draw, dist), _point_for(data.draw, dist)))
    values = dist.sorted_tokens
    expected = float(np.sum(values**k * ((values > a) & (values <= b)))) / values.size
    full = float(np.mean(values**k))
    assert dist.partial_moment(k, a, b) == pytest.approx(expected, rel=1e-9, abs=1e-12 * full)


@PROPERTY
@given(tokens=st.floats(0.0, 1e6), k=st.integers(0, 4), a=points, b=points)
def test_fixed_partial_moment_is_an_indicator(tokens: float, k: int, a: float, b: float) -> None:
    """For a point mass at v, E[L^k; a < L <= b] = v^k if a < v <= b and 0 otherwise."""
    dist = Fixed(tokens=tokens)
    assert dist.partial_moment(k, a, b) == (tokens**k if a < tokens <= b else 0.0)
    assert dist.partial_moment(k, tokens, tokens) == 0.0


@PROPERTY
@given(dist=distributions, k=st.integers(0, 4), data=st.data())
def test_empty_or_reversed_interval_has_no_moment(dist: LengthDistribution, k: int, data: st.DataObject) -> None:
    """M_k(a, b) = 0 whenever a >= b."""
    b, a = sorted((_point_for(data.draw, dist), _point_for(data.draw, dist)))
    assert dist.partial_moment(k, a, b) == 0.0


def test_partial_moment_broadcasts_and_keeps_scalars_scalar() -> None:
    """Array a and b broadcast elementwise; scalar inputs give a float back."""
    a = np.array([0.0, 1e3, 2e4])
    b = np.array([5e3, 5e4, 1e5, math.inf])
    grid = PAPER.partial_moment(1, a[:, np.newaxis], b[np.newaxis, :])
    assert grid.shape == (3, 4)
    for i, a_i in enumerate(a):
        for j, b_j in enumerate(b):
            assert grid[i, j] == pytest.approx(PAPER.partial_moment(1, float(a_i), float(b_j)), rel=1e-14)
    assert isinstance(PAPER.cdf(1e4), float)
    assert PAPER.sf(np.array([1.0, 1e9])).tolist() == [1.0, 0.0]
    assert PAPER.quantile(np.array([[0.0, 1.0]])).tolist() == [[128.0, 131072.0]]


def test_lognormal_scalar_moments_are_the_array_path_s_bits_and_never_shared() -> None:
    """Scalar bounds are remembered (lengths._scalar_moment): a first and a repeated call give the bits of the
    same bounds evaluated inside an array; the array handed back is a fresh one (writing into it changes no later
    answer); the store never grows past its bound."""
    from prfaas_plan import lengths

    points = [(-math.inf, 19_400.0), (19_400.0, math.inf), (0.0, 5e3), (-0.0, 5e3), (200.0, 200.0), (1e9, 2e9)]
    for k in range(3):
        grid = PAPER.partial_moment(k, np.array([p[0] for p in points]), np.array([p[1] for p in points]))
        for (a, b), expected in zip(points, grid, strict=True):
            first, again = PAPER.partial_moment(k, a, b), PAPER.partial_moment(k, a, b)
            assert np.float64(first).tobytes() == np.float64(again).tobytes() == expected.tobytes()
    held = PAPER._partial_moment(1, np.array(-math.inf), np.array(math.inf))
    mean = float(held)
    held[()] = -1.0
    assert PAPER.mean_tokens == mean
    for i in range(lengths.SCALAR_MOMENTS_KEPT + 10):
        PAPER.partial_moment(0, float(i), math.inf)
    assert lengths._scalar_moment.cache_info().currsize <= lengths.SCALAR_MOMENTS_KEPT


def test_lognormal_with_wide_bounds_has_textbook_moments() -> None:
    """With bounds far outside the mass, E[L] = exp(mu + σ²/2) and SCV = exp(σ²) − 1."""
    dist = TruncatedLogNormal(mu=8.0, sigma=0.5, lower_tokens=1.0, upper_tokens=1e9)
    assert dist.mean_tokens == pytest.approx(math.exp(8.0 + 0.125), rel=1e-12)
    assert dist.scv == pytest.approx(math.expm1(0.25), rel=1e-9)
    assert dist.partial_moment(4, 0.0, math.inf) == pytest.approx(math.exp(32.0 + 8 * 0.25), rel=1e-12)


def test_uniform_and_fixed_moments() -> None:
    """Uniform[Lo, U]: mean (Lo+U)/2, variance (U−Lo)²/12; a point mass has SCV 0."""
    dist = Uniform(lower_tokens=1000.0, upper_tokens=3000.0)
    assert dist.mean_tokens == pytest.approx(2000.0)
    assert dist.scv == pytest.approx(2000.0**2 / 12 / 2000.0**2)
    assert Fixed(tokens=1024).mean_tokens == 1024.0
    assert Fixed(tokens=1024).scv == 0.0
    assert math.isnan(Fixed(tokens=1024).mean_above(1024.0))
    assert Fixed(tokens=1024).mean_below(1024.0) == 1024.0


def test_lognormal_truncated_far_in_the_upper_tail_stays_accurate() -> None:
    """Bounds 19 standard deviations above the median (mass ~1e-80) still give a proper distribution."""
    dist = TruncatedLogNormal(mu=4.0, sigma=0.4, lower_tokens=1e5, upper_tokens=1e6)
    median = dist.quantile(0.5)
    assert 1e5 < median < 1.1e5
    assert dist.cdf(median) == pytest.approx(0.5, rel=1e-9)
    assert dist.sf(1e5) == pytest.approx(1.0, rel=1e-12)
    assert 1e5 < dist.mean_tokens < median * 1.2


def test_empirical_is_right_continuous_and_quantile_is_its_inverse() -> None:
    """F(x) counts values <= x; Q(q) is the smallest value v with F(v) >= q."""
    dist = Empirical(values=[10, 20, 20, 30, 40])
    assert dist.cdf(20.0) == pytest.approx(0.6)
    assert dist.cdf(19.999) == pytest.approx(0.2)
    assert dist.sf(20.0) == pytest.approx(0.4)
    assert dist.quantile(np.array([0.0, 0.2, 0.2001, 0.6, 0.61, 1.0])).tolist() == [10, 10, 20, 20, 30, 40]
    assert dist.mean_above(20.0) == pytest.approx(35.0)
    assert dist.mean_below(20.0) == pytest.approx(50.0 / 3)
    assert math.isnan(dist.mean_above(40.0))
    assert math.isnan(dist.mean_below(9.0))


# -- laws every distribution obeys ---------------------------------------------------------------------------


@PROPERTY
@given(dist=distributions, data=st.data())
def test_sf_is_non_increasing(dist: LengthDistribution, data: st.DataObject) -> None:
    """P(L > t) never increases with t."""
    t1, t2 = sorted((_point_for(data.draw, dist), _point_for(data.draw, dist)))
    assert dist.sf(t2) <= dist.sf(t1) + 1e-14


@PROPERTY
@given(dist=distributions, data=st.data())
def test_sf_plus_cdf_is_one(dist: LengthDistribution, data: st.DataObject) -> None:
    """P(L > x) + P(L <= x) = 1."""
    x = _point_for(data.draw, dist)
    assert dist.sf(x) + dist.cdf(x) == pytest.approx(1.0, abs=1e-12)


@PROPERTY
@given(dist=distributions, data=st.data())
def test_conditional_means_bracket_the_mean(dist: LengthDistribution, data: st.DataObject) -> None:
    """E[L | L <= t] <= E[L] <= E[L | L > t] wherever the conditioning event has positive probability."""
    t = _point_for(data.draw, dist)
    mean = dist.mean_tokens
    below, above = dist.mean_below(t), dist.mean_above(t)
    slack = 1e-12 * mean
    if dist.cdf(t) > 0.0:
        assert below <= mean + slack
        assert below <= t
    else:
        assert math.isnan(below)
    if dist.sf(t) > 0.0:
        assert above >= mean - slack
        assert above >= t
    else:
        assert math.isnan(above)


@PROPERTY
@given(dist=st.one_of(continuous, empiricals), data=st.data())
def test_law_of_total_expectation(dist: LengthDistribution, data: st.DataObject) -> None:
    """p·E[L | L > t] + (1 − p)·E[L | L <= t] = E[L] with p = P(L > t)."""
    assume(dist.lower_tokens < dist.upper_tokens)
    # A point inside the support, so that both conditioning events usually have positive probability.
    t = dist.lower_tokens + data.draw(st.floats(0.0, 1.0, exclude_max=True)) * (dist.upper_tokens - dist.lower_tokens)
    p = dist.sf(t)
    assume(0.0 < p < 1.0)
    total = p * dist.mean_above(t) + (1.0 - p) * dist.mean_below(t)
    assert total == pytest.approx(dist.mean_tokens, rel=1e-9)


@PROPERTY
@given(dist=continuous, data=st.data())
def test_quantile_inverts_cdf_for_continuous(dist: LengthDistribution, data: st.DataObject) -> None:
    """Q(F(x)) = x on the support where the density is not negligible, and F(Q(q)) = q."""
    x = data.draw(st.floats(dist.lower_tokens, dist.upper_tokens))
    c = dist.cdf(x)
    assume(1e-9 < c < 1.0 - 1e-9)
    assert dist.quantile(c) == pytest.approx(x, rel=1e-6)
    q = data.draw(st.floats(0.0, 1.0))
    assert dist.cdf(dist.quantile(q)) == pytest.approx(q, abs=1e-10)


@PROPERTY
@given(dist=empiricals, data=st.data())
def test_quantile_inverts_cdf_on_observed_values(dist: Empirical, data: st.DataObject) -> None:
    """For the empirical distribution Q(F(v)) = v exactly for every observed value v."""
    v = float(data.draw(st.sampled_from(list(dist.sorted_tokens))))
    assert dist.quantile(dist.cdf(v)) == v


@PROPERTY
@given(dist=distributions, data=st.data())
def test_quantile_is_non_decreasing_and_in_support(dist: LengthDistribution, data: st.DataObject) -> None:
    """Q is non-decreasing and maps [0, 1] into [lower_tokens, upper_tokens]."""
    q1, q2 = sorted((data.draw(st.floats(0.0, 1.0)), data.draw(st.floats(0.0, 1.0))))
    x1, x2 = dist.quantile(q1), dist.quantile(q2)
    assert dist.lower_tokens <= x1 <= x2 * (1 + 1e-12) <= dist.upper_tokens * (1 + 1e-12)


# -- sampling ------------------------------------------------------------------------------------------------

SAMPLED = [
    PAPER,
    TruncatedLogNormal(mu=6.0, sigma=2.0, lower_tokens=16, upper_tokens=32768),
    TruncatedLogNormal(mu=11.0, sigma=0.3, lower_tokens=50_000, upper_tokens=1e6),
    Uniform(lower_tokens=128, upper_tokens=8192),
]


@pytest.mark.parametrize("dist", SAMPLED, ids=lambda d: d.describe())
def test_samples_match_mean_and_cdf(dist: LengthDistribution) -> None:
    """With a fixed seed the sample mean lies within 4 standard errors of E[L] and a KS test against the
    closed-form CDF does not reject at the 1e-3 level."""
    n = 20_000
    sample = dist.sample(np.random.default_rng(20240611), n)
    assert sample.shape == (n,)
    assert sample.dtype == np.float64
    assert np.all((sample >= dist.lower_tokens) & (sample <= dist.upper_tokens))
    standard_error = dist.mean_tokens * math.sqrt(dist.scv / n)
    assert abs(sample.mean() - dist.mean_tokens) < 4 * standard_error
    assert stats.kstest(sample, dist.cdf).pvalue > 1e-3


def test_empirical_and_fixed_samples() -> None:
    """Empirical resampling draws only observed values and matches the mean; a point mass repeats itself."""
    observed = np.random.default_rng(1).lognormal(9.0, 1.0, 500).round()
    dist = Empirical(values=observed)
    sample = dist.sample(np.random.default_rng(7), 20_000)
    assert np.isin(sample, observed).all()
    standard_error = dist.mean_tokens * math.sqrt(dist.scv / sample.size)
    assert abs(sample.mean() - dist.mean_tokens) < 4 * standard_error
    assert Fixed(tokens=1024).sample(np.random.default_rng(0), 3).tolist() == [1024.0] * 3


def test_same_seed_same_sample() -> None:
    """Sampling depends only on the generator passed in."""
    one = PAPER.sample(np.random.default_rng(5), 100)
    two = PAPER.sample(np.random.default_rng(5), 100)
    assert np.array_equal(one, two)


# -- parameter guards ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "build",
    [
        lambda: TruncatedLogNormal(mu=9.9, sigma=0.0, lower_tokens=128, upper_tokens=131072),
        lambda: TruncatedLogNormal(mu=9.9, sigma=-1.0, lower_tokens=128, upper_tokens=131072),
        lambda: TruncatedLogNormal(mu=math.nan, sigma=1.0, lower_tokens=128, upper_tokens=131072),
        lambda: TruncatedLogNormal(mu=9.9, sigma=1.0, lower_tokens=4096, upper_tokens=128),
        lambda: TruncatedLogNormal(mu=9.9, sigma=1.0, lower_tokens=0, upper_tokens=128),
        lambda: TruncatedLogNormal(mu=9.9, sigma=1.0, lower_tokens=128, upper_tokens=math.inf),
        lambda: TruncatedLogNormal(mu=1.0, sigma=0.01, lower_tokens=1e5, upper_tokens=1e6),
        lambda: Uniform(lower_tokens=10, upper_tokens=10),
        lambda: Uniform(lower_tokens=-1, upper_tokens=10),
        lambda: Uniform(lower_tokens=0, upper_tokens=math.nan),
        lambda: Fixed(tokens=-1),
        lambda: Fixed(tokens=math.nan),
        lambda: Empirical(values=[]),
        lambda: Empirical(values=[1.0, -2.0]),
        lambda: Empirical(values=[1.0, math.inf]),
    ],
)
def test_invalid_parameters_raise_value_error(build: object) -> None:
    """Invalid parameters are refused at construction."""
    with pytest.raises(ValueError):
        build()  # type: ignore[operator]


def test_invalid_arguments_raise_value_error() -> None:
    """Moment orders outside 0..4 and probabilities outside [0, 1] are refused."""
    with pytest.raises(ValueError, match="moment order"):
        PAPER.partial_moment(5, 0.0, 1.0)
    with pytest.raises(ValueError, match="moment order"):
        PAPER.partial_moment(-1, 0.0, 1.0)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        PAPER.quantile(1.5)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        PAPER.quantile(np.array([0.5, math.nan]))


def test_distributions_are_frozen() -> None:
    """Specs are immutable values."""
    with pytest.raises(AttributeError):
        PAPER.mu = 1.0  # type: ignore[misc]
    assert TruncatedLogNormal(mu=9.9, sigma=1.0, lower_tokens=128, upper_tokens=131072) == PAPER


def test_standard_normal_quantile_is_the_standard_library_s() -> None:
    """The vectorised AS 241 gives NormalDist().inv_cdf's numbers (the figures the planner printed with it) across
    the centre, both tails to 1e-300 and the branch points, to the last bit on x86-64 (1 ulp allowed for a
    platform whose C compiler fuses multiply-adds); and it is Φ⁻¹ (scipy's ndtri) to about 1e-15."""
    from statistics import NormalDist

    rng = np.random.default_rng(41)
    p = np.concatenate(
        [
            rng.random(20_000),
            10.0 ** rng.uniform(-300.0, -1.0, 5_000),
            1.0 - 10.0 ** rng.uniform(-16.0, -1.0, 5_000),
            [5e-324, 0.075, np.nextafter(0.075, 0.0), 0.925, np.nextafter(0.925, 1.0), 0.5, np.nextafter(1.0, 0.0)],
        ]
    )
    p = p[(p > 0.0) & (p < 1.0)]
    inv_cdf = NormalDist().inv_cdf
    expected = np.array([inv_cdf(float(v)) for v in p])
    got = standard_normal_quantile(p)
    np.testing.assert_array_max_ulp(got, expected, maxulp=1)
    # Near the centre: 2e-16 absolute; in the tails the approximation's own relative error, ~1e-16.
    assert np.allclose(got, stats.norm.ppf(p), rtol=1e-15, atol=2e-16)


def test_distinct_sorted_is_numpys_unique() -> None:
    rng = np.random.default_rng(3)
    for values in (rng.integers(0, 20, 200).astype(float), rng.integers(0, 5, 50), np.array([2.0]), np.array([])):
        got = distinct_sorted(values)
        np.testing.assert_array_equal(got, np.unique(values))
        assert got.dtype == np.unique(values).dtype
