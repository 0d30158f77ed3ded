"""The conditional sojourn law of a transfer on a processor-sharing link (prfaas_plan.latency.link_spread)."""

from __future__ import annotations

import ast
import math
from decimal import Decimal, localcontext
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from prfaas_plan.latency import link_spread
from prfaas_plan.latency.link_spread import mean_others_seen, ps_alone_probability, ps_sojourn, sojourn_nodes
from tests.conftest import examples

loads = st.floats(0.01, 0.97)
work_scvs = st.floats(0.0, 5.0)
arrival_scvs = st.floats(0.0, 5.0)
means = st.floats(0.01, 100.0)


def _cmt_variance(x: float, rho: float, m: float) -> float:
    """M/M/1-PS conditional variance (Coffman, Muntz & Trotter 1970), written out independently and evaluated
    in 50-digit decimal arithmetic (its two terms cancel to O(x²) for small x)."""
    with localcontext() as ctx:
        ctx.prec = 50
        xd, r, md = Decimal(x), Decimal(rho), Decimal(m)
        one = Decimal(1)
        value = (
            2 * r * md * xd / (one - r) ** 3 - 2 * r * md * md * (one - (-(one - r) * xd / md).exp()) / (one - r) ** 4
        )
        return float(value)


def _mm1_markov_moments(x: float, rho: float, states: int) -> tuple[float, float]:
    """E[T(x)] and Var T(x) in M/M/1-PS (m = 1) from the Markov chain of the others, on the tagged transfer's
    own clock: with n others it advances at 1/(1 + n), so per unit of its work n -> n + 1 at rate ρ(1 + n),
    n -> n - 1 at rate n, and T = ∫ (1 + n) dτ, an additive functional whose moments are blocks of matrix
    exponentials (Van Loan 1978). n starts geometric (PASTA); the chain is truncated at ``states``."""
    from scipy.linalg import expm

    n = np.arange(states, dtype=np.float64)
    generator = np.diag(rho * (1 + n[:-1]), 1) + np.diag(n[1:], -1)
    generator -= np.diag(generator.sum(axis=1))
    reward = np.diag(1 + n)
    start = (1 - rho) * rho**n
    zero = np.zeros((states, states))
    first = expm(np.block([[generator, reward], [zero, generator]]) * x)[:states, states:]
    second = expm(np.block([[generator, reward, zero], [zero, generator, reward], [zero, zero, generator]]) * x)[
        :states, 2 * states :
    ]
    mean = float(start @ first.sum(axis=1))
    return mean, float(2 * start @ second.sum(axis=1)) - mean**2


@pytest.mark.parametrize(("rho", "x"), [(0.3, 0.4), (0.6, 2.0), (0.85, 5.0)])
def test_exponential_variance_matches_the_markov_chain(rho: float, x: float) -> None:
    """For Poisson arrivals and exponential work the mean and variance equal an independent Markov-chain
    computation of M/M/1-PS to 1e-6 (the chain truncated where ρ^n < 1e-10)."""
    states = int(math.log(1e-10) / math.log(rho)) + 30
    exact_mean, exact_var = _mm1_markov_moments(x, rho, states)
    mean, var = ps_sojourn(x, rho, 1.0, 1.0, 1.0)
    assert mean == pytest.approx(exact_mean, rel=1e-6)
    assert var == pytest.approx(exact_var, rel=1e-6)


@settings(deadline=None, max_examples=examples(100))
@given(x=st.floats(0.0, 1e3), rho=loads, m=means, cs2=work_scvs)
def test_poisson_mean_is_kleinrocks(x: float, rho: float, m: float, cs2: float) -> None:
    """Poisson arrivals: E[T(x)] = x/(1 - ρ) for any work law (Kleinrock)."""
    mean, _ = ps_sojourn(x, rho, m, cs2, 1.0)
    assert mean == pytest.approx(x / (1 - rho), rel=1e-12, abs=1e-300)


@settings(deadline=None, max_examples=examples(100))
@given(x=st.floats(1e-3, 1e3), rho=loads, m=means)
def test_poisson_exponential_variance_is_cmt(x: float, rho: float, m: float) -> None:
    """Poisson arrivals, exponential work: Var T(x) is Coffman, Muntz & Trotter's closed form."""
    _, var = ps_sojourn(x, rho, m, 1.0, 1.0)
    assert var == pytest.approx(_cmt_variance(x, rho, m), rel=1e-9)


@settings(deadline=None, max_examples=examples(100))
@given(rho=loads, m=means, cs2=work_scvs, ca2=arrival_scvs)
def test_small_transfer_sees_a_frozen_link(rho: float, m: float, cs2: float, ca2: float) -> None:
    """x → 0: T ≈ x (1 + N) with N geometric of mean n̄, so E[T]/x → 1 + n̄ and Var T/x² → n̄(1 + n̄).
    (x is taken small against n̄ too: the x³ term of the variance must not rival n̄ x² when n̄ is tiny.)"""
    seen = float(mean_others_seen(rho, cs2, ca2))
    assume(seen == 0.0 or seen > 1e-100)  # neither x below nor x² may underflow
    x = 1e-7 * m * min(1.0, seen) if seen > 0.0 else 1e-7 * m  # n̄ = 0: evenly spaced, equal transfers
    mean, var = ps_sojourn(x, rho, m, cs2, ca2)
    assert mean / x == pytest.approx(1 + seen, rel=1e-5)
    assert var / x**2 == pytest.approx(seen * (1 + seen), rel=1e-4, abs=1e-12)


@settings(deadline=None, max_examples=examples(100))
@given(rho=loads, m=means, cs2=work_scvs, ca2=st.floats(0.05, 5.0))
def test_long_transfer_slopes(rho: float, m: float, cs2: float, ca2: float) -> None:
    """x → ∞: the mean grows like x/(1 - ρ) (any stationary arrivals) and the variance like
    ρ m (ca² + cs²)/(1 - ρ)³ · x (central limit theorem for the work brought in during the stay)."""
    x = 1e6 * m / (1 - rho) ** 2 * (1 + cs2 + ca2) / min(rho, 1 - rho)  # far beyond every relaxation scale
    (m1, m2), (v1, v2) = (np.asarray(a) for a in ps_sojourn(np.array([x, 2 * x]), rho, m, cs2, ca2))
    assert (m2 - m1) / x == pytest.approx(1 / (1 - rho), rel=1e-6)
    assert (v2 - v1) / x == pytest.approx(rho * m * (ca2 + cs2) / (1 - rho) ** 3, rel=1e-6)


@settings(deadline=None, max_examples=examples(50))
@given(x=st.floats(0.0, 1e3), m=means, cs2=work_scvs, ca2=arrival_scvs)
def test_idle_link_gives_the_transfer_alone(x: float, m: float, cs2: float, ca2: float) -> None:
    """ρ = 0: T = x with no spread; and a nearly idle link is nearly that."""
    mean, var = ps_sojourn(x, 0.0, m, cs2, ca2)
    assert (float(mean), float(var)) == (x, 0.0)
    mean, var = ps_sojourn(x, 1e-9, m, cs2, 1.0)
    assert mean == pytest.approx(x, rel=1e-8, abs=1e-300)
    assert var <= 1e-8 * (x * x + x * m)


@settings(deadline=None, max_examples=examples(120))
@given(
    x=st.floats(1e-4, 50.0),
    grow=st.floats(1.0, 3.0),
    rho=st.floats(0.02, 0.95),
    more=st.floats(0.0, 0.04),
    cs2=work_scvs,
    ca2=arrival_scvs,
)
def test_more_work_or_load_never_shortens_the_stay(
    x: float, grow: float, rho: float, more: float, cs2: float, ca2: float
) -> None:
    """Mean and variance never decrease with the transfer's own work; both never decrease with the load for
    Poisson or smooth arrivals (ca² <= 1), and nor does the mean for bursty ones. (The variance of bursty
    arrivals may dip by under 1 % as ρ leaves 0: n̄ grows like (ρ/ca²)^{1/ca²} there, the documented limit of
    the gamma-gap assumption; the property is asserted for ρ >= 0.05.)"""
    mean, var = (float(v) for v in ps_sojourn(x, rho, 1.0, cs2, ca2))
    mean_x, var_x = (float(v) for v in ps_sojourn(x * grow, rho, 1.0, cs2, ca2))
    mean_r, var_r = (float(v) for v in ps_sojourn(x, rho + more, 1.0, cs2, ca2))
    slack = 1e-12 * max(var, 1e-300)
    assert mean_x >= mean and var_x >= var - slack
    assert mean_r >= mean * (1 - 1e-12)
    if ca2 <= 1.0 or rho >= 0.05:
        assert var_r >= var - slack


def test_broadcasting_and_domain() -> None:
    """Inputs broadcast; ρ >= 1 gives an infinite stay, negative inputs NaN."""
    mean, var = ps_sojourn(np.array([[0.5], [2.0]]), np.array([0.2, 0.5, 0.8]), 1.0, 0.3, 1.0)
    assert mean.shape == var.shape == (2, 3)
    mean, var = ps_sojourn([1.0, 1.0, -1.0, 1.0], [1.0, 1.5, 0.5, 0.5], 1.0, [1.0, 1.0, 1.0, -0.1], 1.0)
    assert np.all(np.isinf(mean[:2])) and np.all(np.isinf(var[:2]))
    assert np.all(np.isnan(mean[2:])) and np.all(np.isnan(var[2:]))
    assert tuple(float(v) for v in ps_sojourn(0.0, 0.99, 1.0, 1.0, 3.0)) == (0.0, 0.0)


def test_evenly_spaced_equal_transfers_never_overlap() -> None:
    """D/D arrivals below saturation: nobody is ever in flight on arrival, so no spread at all."""
    assert float(mean_others_seen(0.7, 0.0, 0.0)) == 0.0
    _, var = ps_sojourn(np.linspace(0.0, 5.0, 11), 0.7, 1.0, 0.0, 0.0)
    assert np.all(var <= 1e-12)


@settings(deadline=None, max_examples=examples(100))
@given(rho=st.floats(0.01, 0.99), ca2=st.floats(0.0, 10.0))
def test_others_seen_is_the_gi_m_1_root(rho: float, ca2: float) -> None:
    """Exponential work: n̄ = σ/(1 - σ) with σ = A*((1 - σ)/m) for gamma gaps (GI/M/1), Poisson σ = ρ."""
    seen = float(mean_others_seen(rho, 1.0, ca2))
    sigma = seen / (1 + seen)
    t = (1 - sigma) / rho
    # Below 1e-200 the gaps' shape 1/ca² overflows: the module takes such starts as evenly spaced.
    transform = math.exp(-t if ca2 < 1e-200 else -math.log1p(t * ca2) / ca2)
    assert sigma == pytest.approx(transform, rel=1e-9, abs=1e-15)
    assert float(mean_others_seen(rho, 2.5, 1.0)) == pytest.approx(rho / (1 - rho), rel=1e-12)


@pytest.mark.parametrize(("cs2", "ca2"), [(0.3, 0.5), (1.5, 3.0), (0.0, 2.0)])
def test_others_seen_in_heavy_traffic(cs2: float, ca2: float) -> None:
    """ρ → 1: n̄ (1 - ρ)/ρ tends to (ca² + cs²)/(1 + cs²), the κ - 1 scaling of ``stages``."""
    rho = 1 - 1e-6
    assert float(mean_others_seen(rho, cs2, ca2)) * (1 - rho) / rho == pytest.approx((ca2 + cs2) / (1 + cs2), rel=1e-4)


# --------------------------------------------------------------------------------------------------------
# Nodes of the shifted-gamma law
# --------------------------------------------------------------------------------------------------------


def test_nodes_are_the_slice_means_of_the_shifted_gamma() -> None:
    """Without an atom, node 0 has weight 0 and node j >= 1 is E[T | T in slice j] of T = x + Gamma(k, θ),
    slices cut at u_j = 1 - (1 - j/(n-1))² (checked against scipy.special), shapes from 1e-3 to 1e6."""
    from scipy.special import gammainc, gammaincinv

    n = 16
    cuts = 1 - (1 - np.arange(n) / (n - 1)) ** 2
    for k in (1e-3, 0.05, 0.3, 1.0, 7.0, 300.0, 5e3, 1e6):
        theta, x = 0.7, 2.0
        values, weights = sojourn_nodes(x + k * theta, k * theta * theta, n, x)
        assert weights[0] == 0.0 and values[0] == x
        assert weights[1:] == pytest.approx(np.diff(cuts), rel=1e-14)
        q = gammaincinv(k, cuts)
        mass = np.where(np.isfinite(q), gammainc(k + 1, np.where(np.isfinite(q), q, 0.0)), 1.0)
        exact = x + k * theta * np.diff(mass) / np.diff(cuts)
        assert values[1:] == pytest.approx(exact, rel=1e-9), k
        sd = math.sqrt(k) * theta
        assert np.all(values[1:] >= x + theta * q[:-1] - 1e-9 * sd)
        assert np.all(values[1:] <= x + theta * q[1:] + 1e-9 * sd)


def _mp_slice_means(shape: float, cuts: list[float]) -> list[float]:
    """Unit-scale slice means k (P(k+1, q_{j+1}) - P(k+1, q_j))/(u_{j+1} - u_j) for the given consecutive cuts,
    in 40-digit mpmath: each quantile q = P^{-1}(k, u) by Newton's method on ln q (P'(ln q) = q^k e^{-q}/Γ(k))
    kept inside a bisection bracket, started from the small-q law ln q = (ln u + ln Γ(k + 1))/k. Independent of
    scipy."""
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workdps(40):
        k = mpmath.mpf(shape)
        masses = []
        for u in cuts:
            if u in (0.0, 1.0):
                masses.append(mpmath.mpf(u))
                continue

            def excess(t: object, u: float = u) -> object:
                return mpmath.gammainc(k, 0, mpmath.exp(t), regularized=True) - u

            log_q = min(mpmath.log(k), (mpmath.log(u) + mpmath.loggamma(k + 1)) / k)
            low, high = log_q - 1, mpmath.log(k + 50 * mpmath.sqrt(k) + 50)
            while excess(low) > 0:
                low -= 2 * abs(low) + 1
            for _ in range(400):
                f = excess(log_q)
                low, high = (log_q, high) if f < 0 else (low, log_q)
                step = f / mpmath.exp(k * log_q - mpmath.exp(log_q) - mpmath.loggamma(k))
                if abs(step) < mpmath.mpf(10) ** -30:
                    log_q -= step
                    break
                nxt = log_q - step
                log_q = nxt if low < nxt < high else (low + high) / 2
            else:
                raise AssertionError(f"mpmath Newton did not converge at k={shape}, u={u}")
            masses.append(mpmath.gammainc(k + 1, 0, mpmath.exp(log_q), regularized=True))
        pairs = zip(masses[:-1], masses[1:], cuts[:-1], cuts[1:], strict=True)
        return [float(k * (b - a) / (mpmath.mpf(v) - mpmath.mpf(w))) for a, b, w, v in pairs]


@pytest.mark.parametrize("shape", [1e-3, 0.05, 0.5, 1.0, 3.0, 40.0, 2e3, 1e4, 1e5])
def test_node_extremes_match_mpmath(shape: float) -> None:
    """With 1,001 nodes the cuts reach u ≈ 0.002 and 1 - 1e-6: the first two and last two slice means of the
    unit gamma match a 40-digit mpmath evaluation to 1e-9 of the law's standard deviation (plus the rounding of
    the formula itself), for shapes from 1e-3 (quantiles below 1e-2000 near u = 0) to 1e5. The Wilson-Hilferty
    law this module used above shape 1e4 missed by 1e-5 to 1e-4 of the standard deviation."""
    n = 1001
    cuts = 1 - (1 - np.arange(n) / (n - 1)) ** 2
    values, _ = sojourn_nodes(shape, shape, n, 0.0)  # E[Y] = Var Y = k: unit scale, no shift
    head = _mp_slice_means(shape, [float(c) for c in cuts[:3]])
    tail = _mp_slice_means(shape, [float(c) for c in cuts[-3:]])
    # Each mean is k ΔP/Δu: an absolute rounding of ΔP (a few eps) weighs k/Δu, which dominates for wide laws in
    # the narrow tail slices; the bound allows 2 eps of it on top of 1e-9 of the standard deviation.
    widths = np.diff(cuts)
    bound = 1e-9 * math.sqrt(shape) + 2 * np.finfo(np.float64).eps * shape / widths
    assert np.all(np.abs(values[1:3] - head) <= bound[:2])
    assert np.all(np.abs(values[-2:] - tail) <= bound[-2:])


@pytest.mark.parametrize("arrival_scv", [1e-4, 1e-3, 0.05, 0.5, 3.0, 50.0])
def test_alone_probability_tails_match_mpmath(arrival_scv: float) -> None:
    """P(G > x) for gamma gaps of shape 1/ca² from 0.02 to 1e4, over x from 1e-6 to 100 mean gaps (so the
    survival runs from 1 - 1e-9 down to 1e-300): relative error below 1e-11 against mpmath (the upper tail is
    evaluated directly, not as 1 - P)."""
    mpmath = pytest.importorskip("mpmath")
    rho, m = 0.4, 1.0
    gaps = np.concatenate([np.logspace(-6, 0, 13), np.linspace(1.2, 100.0, 30)])
    empty = 1.0 / (1.0 + float(mean_others_seen(rho, 1.0, arrival_scv)))
    quiet = ps_alone_probability(gaps * m / rho, rho, m, 1.0, arrival_scv) / empty
    k = mpmath.mpf(1) / mpmath.mpf(arrival_scv)
    checked = 0
    for g, value in zip(gaps.tolist(), quiet.tolist(), strict=True):
        exact = float(mpmath.gammainc(k, k * mpmath.mpf(g), mpmath.inf, regularized=True))
        if exact < 1e-300:
            assert value < 1e-290
            continue
        assert value == pytest.approx(exact, rel=1e-11, abs=0.0), g
        checked += 1
    assert checked >= 10


def test_atom_nodes_condition_the_gamma_on_a_wait() -> None:
    """With an atom p, node 0 is x with weight p and the rest are the slices of the gamma matched to
    E[T - x | T > x] = E[T - x]/(1 - p) and Var(T - x | T > x) = (Var (1 - p) - p E[T - x]²)/(1 - p)²."""
    x, extra, var, p = 1.0, 0.6, 0.9, 0.4
    values, weights = sojourn_nodes(x + extra, var, 12, x, p)
    plus_mean = extra / (1 - p)
    plus_var = (var * (1 - p) - p * extra**2) / (1 - p) ** 2
    reference, reference_weights = sojourn_nodes(x + plus_mean, plus_var, 12, x)
    assert values[0] == x and weights[0] == pytest.approx(p)
    assert values[1:] == pytest.approx(reference[1:], rel=1e-12)
    assert weights[1:] == pytest.approx((1 - p) * reference_weights[1:], rel=1e-12)
    # An atom larger than the moments allow is cut to Var/(Var + E[Y]²): then the law is two points.
    values, weights = sojourn_nodes(x + extra, var, 6, x, 0.99)
    assert weights[0] == pytest.approx(var / (var + extra**2))
    assert values[1:] == pytest.approx(np.full(5, x + extra / (1 - weights[0])))


@settings(deadline=None, max_examples=examples(100))
@given(
    mean_extra=st.floats(1e-6, 1e4),
    cv=st.floats(1e-3, 30.0),
    x=st.floats(0.0, 1e3),
    n=st.integers(1, 40),
    atom=st.floats(0.0, 1.0),
)
def test_nodes_keep_the_mean_and_most_of_the_variance(
    mean_extra: float, cv: float, x: float, n: int, atom: float
) -> None:
    """Σ w_j T_j = E[T] exactly, the weights sum to 1, the nodes rise and stay >= x, and the node variance
    is the law's less the within-slice part (at most Var T)."""
    var = (cv * mean_extra) ** 2
    values, weights = sojourn_nodes(x + mean_extra, var, n, x, atom)
    assert values.shape == weights.shape == (n,)
    assert weights.sum() == pytest.approx(1.0, rel=1e-12) and np.all(weights >= 0.0)
    assert float(values @ weights) == pytest.approx(x + mean_extra, rel=1e-9)
    assert np.all(np.diff(values) >= -1e-9 * values[-1]) and np.all(values >= x)
    rounding = 8 * np.finfo(np.float64).eps * (x + mean_extra) * math.sqrt(var)  # nodes are stored as x + Y
    assert float(((values - x - mean_extra) ** 2) @ weights) <= var * (1 + 1e-9) + rounding


def test_slice_means_match_the_incomplete_gamma_directly() -> None:
    """The slice means take P(k + 1, z_j) from the recurrence P(k, z_j) - z_j^k e^{-z_j}/Γ(k + 1) where it is
    well conditioned and from gammainc elsewhere; against k θ (P(k + 1, z_{j+1}) - P(k + 1, z_j))/(u_{j+1} - u_j)
    with gammainc and gammaincinv written out here, over shapes 1e-5..1e5 and 3 to 39 slices, every node
    agrees to 1e-13 relative."""
    from scipy.special import gammainc, gammaincinv

    mean_extra = 2.0  # no shift (x = 0), so that the nodes are Y itself, however small
    for target in np.geomspace(1e-5, 1e5, 61):
        var = mean_extra**2 / target
        k, theta = mean_extra**2 / var, var / mean_extra  # the module's own shape and scale (bit for bit)
        for n in (4, 16, 40):
            values, _ = sojourn_nodes(mean_extra, var, n)
            cuts = 1.0 - (1.0 - np.arange(n) / (n - 1)) ** 2
            cuts[0], cuts[-1] = 0.0, 1.0
            mass = np.concatenate(([0.0], gammainc(k + 1.0, gammaincinv(k, cuts[1:-1])), [1.0]))
            reference = theta * (k * np.diff(mass) / np.diff(cuts))
            assert values[1:] == pytest.approx(reference, rel=1e-13, abs=1e-300), (k, n)


def test_nodes_broadcast_and_degenerate_cases() -> None:
    """Leading axes broadcast; zero variance puts every node on the mean; NaN/inf propagate as NaN; n >= 1."""
    x = np.array([[0.0], [0.5], [3.0]])
    rho = np.array([0.0, 0.3, 0.9])
    mean, var = ps_sojourn(x, rho, 1.0, 1.5, 1.0)
    values, weights = sojourn_nodes(mean, var, 16, x, ps_alone_probability(x, rho, 1.0, 1.5, 1.0))
    assert values.shape == weights.shape == (3, 3, 16)
    assert np.allclose(np.sum(values * weights, axis=-1), mean, rtol=1e-9)
    assert np.all(values[0] == 0.0) and np.all(values[:, 0] == mean[:, 0, None])
    values, _ = sojourn_nodes([np.inf, np.nan], [1.0, 1.0], 4)
    assert np.all(np.isnan(values))
    values, weights = sojourn_nodes(3.0, 4.0, 1)
    assert values.tolist() == [3.0] and weights.tolist() == [1.0]
    with pytest.raises(ValueError, match="nodes"):
        sojourn_nodes(1.0, 1.0, 0)


@settings(deadline=None, max_examples=examples(100))
@given(x=st.floats(0.0, 50.0), rho=loads, m=means, cs2=work_scvs)
def test_poisson_alone_probability(x: float, rho: float, m: float, cs2: float) -> None:
    """Poisson arrivals: T = x exactly when the link is idle on arrival (1 - ρ) and nobody starts within x
    (e^{-ρx/m}), for any work law."""
    p = float(ps_alone_probability(x, rho, m, cs2, 1.0))
    assert p == pytest.approx((1 - rho) * math.exp(-rho * x / m), rel=1e-12, abs=1e-300)


@settings(deadline=None, max_examples=examples(100))
@given(x=st.floats(0.0, 20.0), rho=loads, cs2=work_scvs, ca2=arrival_scvs)
def test_alone_probability_is_a_probability_that_falls_with_work(x: float, rho: float, cs2: float, ca2: float) -> None:
    """0 <= p_0 <= 1/(1 + n̄), non-increasing in x; evenly spaced starts leave a transfer alone until the
    next one, m/ρ later; gamma gaps: P(G > x) (checked against scipy.special.gammaincc)."""
    from scipy.special import gammaincc

    p, p_longer = (float(v) for v in ps_alone_probability(np.array([x, x + 1.0]), rho, 1.0, cs2, ca2))
    empty = 1 / (1 + float(mean_others_seen(rho, cs2, ca2)))
    assert 0.0 <= p_longer <= p <= empty * (1 + 1e-12)
    if ca2 < 1e-200:
        assert p == (empty if x < 1 / rho else 0.0)
    elif ca2 > 1e-3 and ca2 != 1.0:
        assert p == pytest.approx(empty * gammaincc(1 / ca2, rho * x / ca2), rel=1e-9, abs=1e-15)


def test_module_imports_scipy_lazily_and_sits_above_the_simulator() -> None:
    """No scipy import at module level (scipy.special costs about 0.2 s at start-up; the law's functions import
    it when they run), and no import from the simulator (layering)."""
    tree = ast.parse(Path(link_spread.__file__).read_text())
    top_level = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    names = [a.name for n in top_level if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in top_level if isinstance(n, ast.ImportFrom)]
    assert not [name for name in names if name.split(".")[0] == "scipy"]
    every = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    every += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [name for name in every if name.startswith("prfaas_plan.sim")]
