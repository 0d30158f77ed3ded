"""How long one transfer stays on a shared processor-sharing link, given its own size: moments, law, nodes.

``stages`` charges every transfer the mean PS stretch κ, so the link adds no spread of its own. Here the
sojourn T(x) of a transfer of x seconds of link work (its bytes over the bandwidth) is a random variable:
``ps_sojourn`` gives its mean and variance, ``ps_alone_probability`` the atom P(T = x), and
``sojourn_nodes`` a small quadrature of the law for averaging a TTFT CDF over the spread. Notation: ρ the
link utilisation, m = E[S] and cs² the mean and squared coefficient of variation (SCV) of the transfers'
work (s), ca² the SCV of the times between transfer starts, λ = ρ/m, and

    n_P = ρ/(1 - ρ),   v_P = ρ/(1 - ρ)²,   θ_P = m (1 + cs²)/(2 (1 - ρ)),   b = ρ m (ca² + cs²)/(1 - ρ)³.

**Poisson arrivals (M/G/1-PS).** The mean is exact for any work law, E[T(x)] = x/(1 - ρ) (Kleinrock 1976,
Queueing Systems Vol. 2, ch. 4). The variance is

    Var T(x) = 2 v_P θ_P² (x/θ_P - 1 + e^{-x/θ_P}),

exact for exponential work, where it is the M/M/1-PS result 2ρmx/(1-ρ)³ - 2ρm²(1 - e^{-(1-ρ)x/m})/(1-ρ)⁴
(Coffman, Muntz & Trotter 1970, J. ACM 17(1); tests check it against an independent Markov-chain
computation). For any work law it is exact at both ends:
- x → 0: T ≈ x (1 + N), N the number of others in flight, geometric of mean n_P (insensitive; PASTA), so
  Var T ≈ Var N · x² = v_P x²;
- x → ∞: while the transfer is in flight the link never idles, so T = x + W_0 + A(T) - R, with W_0 and R
  the others' work at its start and at its end (O(1)) and A(t) the work arriving in t, of variance
  λ E[S²] t. Inverting (1 - ρ) T ≈ x + (A(T) - ρ T) (CLT for the inverse process) gives Var T ~ b x with
  b = λ E[S²]/(1 - ρ)³ = ρ m (1 + cs²)/(1 - ρ)³ at ca² = 1.
The bridge has one relaxation scale, θ_P = b/(2 v_P) = E[S_e]/(1 - ρ), E[S_e] = m (1 + cs²)/2 the mean
residual work of a transfer in flight: CMT's m/(1 - ρ) for exponential work.

**Renewal arrivals (GI/G/1-PS), an approximation** that reduces to the above at ca² = 1:
1. Others found in flight. For gamma gaps (the simulator's ``Renewal``) and exponential work N is exactly
   geometric with parameter σ, the root in (0, 1) of σ = A*((1 - σ)/m), A*(s) = (1 + s ca²/λ)^{-1/ca²} the
   gaps' Laplace transform (GI/M/1, Kleinrock 1975, Queueing Systems Vol. 1, ch. 6; with exponential work
   PS has FCFS's number process). Other work laws scale it by the heavy-traffic ratio of GI/G/1-PS to
   GI/M/1-PS, (ca² + cs²)/(1 + cs²) over (ca² + 1)/2 (state-space collapse, N ≈ workload/E[S_e]; Gromoll
   2004, Ann. Appl. Probab. 14(2)), and N is taken geometric:
       n̄ = σ/(1 - σ) · 2 (ca² + cs²)/((1 + cs²)(1 + ca²)),   v = n̄ (1 + n̄),   Δn = n̄ - n_P.
   As ρ → 1, n̄ → ρ/(1 - ρ) · (ca² + cs²)/(1 + cs²), the κ - 1 of ``stages``.
2. Mean. It starts with slope 1 + n̄ and ends with slope 1/(1 - ρ) (any stationary arrivals), offset by D:
   in T = x + W_0 + A(T) - R, W_0 exceeds its Poisson value by Δn E[S_e], and after an arrival a renewal
   process brings (ca² - 1)/2 more arrivals than λt (renewal theory), so (1 - ρ) D = Δn E[S_e] + m (ca² - 1)/2
   (R at its M/G/1 value: in heavy traffic, R sampled when the transfer leaves is the M/G/1 workload). One
   exponential of relaxation work θ_G = D/Δn joins the two slopes:
       E[T(x)] = x/(1 - ρ) + Δn θ_G (1 - e^{-x/θ_G}),   θ_G = θ_P + m · max((ca² - 1)/Δn, 0)/(2 (1 - ρ)).
3. Variance, with v x² at x → 0 and slope b at x → ∞ (renewal-reward CLT: the work arriving in t has
   variance λ t m² (ca² + cs²)); y = x/θ, e = 1 - e^{-y}, b_P = 2 v_P θ_P:
   - ca² > 1: the Poisson part on θ_P plus the excess (v - v_P, b - b_P >= 0) relaxing with the mean, on θ_G:
       Var T(x) = 2 v_P θ_P² (y_P - e_P) + (v - v_P) θ_G² e_G² + (b - b_P)/(2 θ_G) · θ_G² (2 y_G - 2 e_G - e_G²);
   - ca² <= 1: one scale θ_1 = min(b/(2v), θ_G) for both terms (a negative excess on its own scale could
     outgrow the Poisson part; evenly spaced starts of equal works must have no spread at all):
       Var T(x) = v θ_1² e_1² + b/(2 θ_1) · θ_1² (2 y_1 - 2 e_1 - e_1²).
   Both are CMT's at ca² = 1 (θ_1 = θ_P there), so the variance is continuous in ca².

**The law.** With probability p_0 = P(N = 0) P(G > x) (``ps_alone_probability``: idle link on arrival and
no other start for x; exactly (1 - ρ) e^{-λx} for Poisson arrivals) the transfer has the link to itself and
T = x; otherwise T = x + Y, Y gamma with the mean and variance left over (``sojourn_nodes``). The atom is
real and large where the link is lightly loaded (p_0 ≈ 1 - ρ for short transfers, 85 % at the paper's link
loads); the gamma shape runs from near-exponential (short transfers that wait: the ladder x N given N >= 1
is geometric) to near-normal (long ones, the CLT regime). Families matched to the same moments, against the
simulated M/G/1-PS link (worst error over work deciles of P50/P90/P99):
    exponential work, ρ = 0.3:  gamma 20/4/13 %, log-normal 17/2/8 %, shifted log-normal 13/18/8 %,
                                shifted gamma 6/12/8 %, atom + shifted gamma 0.5/6/3 %;
    exponential and log-normal work (SCV 0.3, 1.5), ρ = 0.15 and 0.3:
                                shifted gamma 10/17/10 %, atom + shifted gamma 1/8/8 %.
``tests/validation/test_link_spread_sim.py`` tabulates the model against ``SharedLink`` per work decile over
ρ ∈ {0.3, 0.6, 0.85}, ca² ∈ {1, 0.5, 3} and three work laws (``tests/benchmarks/link_spread_table.py``
prints the full table).

**What it does not capture.**
- The link's input is the departure stream of the PrfaaS prefill pool (c servers), not a renewal process,
  and a transfer's size is correlated with the gap before it (a long prompt's prefill is long). Only ca²
  of that stream enters, through gamma gaps; the light-traffic behaviour of real bursts depends on more
  than ca² (gamma gaps of SCV 3 cluster far more tightly than a two-phase hyperexponential of the same SCV).
- Layer-wise transfers join the link when prefill starts, each capped by the rate at which prefill produces
  KV: the link is then a rate-limited PS (bandwidth sharing with peak rates) and a transfer's stay is at
  least its prefill time. This module treats every transfer as elastic from the moment its KV is complete;
  the caller must combine the two (e.g. the later of prefill end and transfer end) itself.
- Bandwidth steps and outages (``SharedLink``'s profile), TCP's RTT-unfair shares and per-flow windows.
- Correlation between transfers: the law is the marginal of one transfer; consecutive transfers share the
  link's state, so averages over a short window spread more than the marginal suggests.
- Renewal arrivals are approximate (worst decile errors in the validation table: 12-18 % in the mean, up to
  25 % in a quantile, largest at light load with bursty starts, where they run low).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike, NDArray

Array = NDArray[np.float64]
Mask = NDArray[np.bool_]

# Bisection steps for the GI/M/1 root: the bracket (0, 1] of 1 - σ halves each step, so 80 steps leave
# 2^-80 ≈ 1e-24, below double precision even when 1 - σ ≈ 1e-12 (ρ a hair below 1).
_SIGMA_STEPS = 80
# Below this x/θ the relaxation terms use their Taylor series (the closed forms cancel catastrophically).
_SERIES_BELOW = 1e-3
# A conditional law with SCV below this is treated as a point (the gamma's shape would exceed 1e12).
_POINT_MASS_SCV = 1e-12
# Inter-start SCVs below this are evenly spaced starts (1/SCV, the gamma gaps' shape, would overflow).
_SPACED_SCV = 1e-200
# Gamma shapes up to this take the slice masses from the recurrence P(k + 1, z) = P(k, z) - z^k e^{-z}/Γ(k + 1)
# (``sojourn_nodes``), within about 1e-14 of scipy's gammainc there; larger ones call gammainc.
_RECURRENCE_SHAPE = 16.0


# --------------------------------------------------------------------------------------------------------
# Moments of the sojourn
# --------------------------------------------------------------------------------------------------------


def _gamma_renewal_root(utilization: Array, arrival_scv: Array) -> tuple[Array, Array]:
    """(σ, 1 - σ) for the root σ in (0, 1) of σ = A*((1 - σ)/m), gamma gaps of SCV ca² and mean m/ρ (GI/M/1).

    With t = (1 - σ)/ρ (the Laplace argument in units of the mean gap), A*(t) = (1 + t ca²)^{-1/ca²}, or e^{-t}
    for evenly spaced arrivals (ca² = 0). Solved for δ = 1 - σ by bisection on (0, 1]: F(δ) = 1 - δ - A*(δ/ρ)
    is positive between the trivial root δ = 0 and the wanted one, negative above it (A* is convex). σ is
    then A*(δ/ρ), which keeps its relative precision when it is far below 1e-16 (light, smooth traffic).
    Where ρ <= 0 the result is (0, 1): nothing else on the link.
    """
    rho = np.where(utilization > 0.0, utilization, 1.0)
    ca2 = np.maximum(arrival_scv, 0.0)
    smooth = ca2 < _SPACED_SCV
    ca2_safe = np.where(smooth, 1.0, ca2)

    def log_transform(delta: Array) -> Array:
        t = delta / rho
        return np.where(smooth, -t, -np.log1p(t * ca2_safe) / ca2_safe)

    low = np.zeros(rho.shape)
    high = np.ones(rho.shape)
    for _ in range(_SIGMA_STEPS):
        delta = 0.5 * (low + high)
        # 1 - δ - A*(t), written with expm1/log1p so that the sign is right even when δ is tiny.
        above = -delta - np.expm1(log_transform(delta)) > 0.0
        low = np.where(above, delta, low)
        high = np.where(above, high, delta)
    delta = 0.5 * (low + high)
    idle = utilization <= 0.0
    return np.where(idle, 0.0, np.exp(log_transform(delta))), np.where(idle, 1.0, delta)


@lru_cache(maxsize=64)
def _gamma_renewal_root_one(utilization: float, arrival_scv: float) -> tuple[float, float]:
    """``_gamma_renewal_root`` for one (ρ, ca²): the same bisection, step for step, on numpy scalars (the same
    ufunc loops, so the same bits) rather than on arrays of one element, which cost ten times more per step.
    Cached: ``ps_sojourn`` and ``ps_alone_probability`` ask for the same link state in turn."""
    if utilization <= 0.0:
        return 0.0, 1.0
    rho = np.float64(utilization)
    ca2 = np.float64(max(arrival_scv, 0.0))
    smooth = bool(ca2 < _SPACED_SCV)

    def log_transform(delta: np.float64) -> np.float64:
        t = delta / rho
        return -t if smooth else -np.log1p(t * ca2) / ca2

    low, high = np.float64(0.0), np.float64(1.0)
    for _ in range(_SIGMA_STEPS):
        delta = 0.5 * (low + high)
        if -delta - np.expm1(log_transform(delta)) > 0.0:
            low = delta
        else:
            high = delta
    delta = 0.5 * (low + high)
    return float(np.exp(log_transform(delta))), float(delta)


def mean_others_seen(utilization: ArrayLike, work_scv: ArrayLike, arrival_scv: ArrayLike = 1.0) -> Array:
    """n̄: mean number of other transfers in flight when a transfer starts (dimensionless), elementwise.

    n̄ = σ/(1 - σ) · 2 (ca² + cs²)/((1 + cs²)(1 + ca²)), σ the GI/M/1 root for gamma gaps (module
    docstring, item 1). Exact for Poisson arrivals (ρ/(1 - ρ), any work law) and for gamma gaps with
    exponential work; tends to ρ/(1-ρ)·(ca² + cs²)/(1 + cs²) as ρ → 1. Domain: 0 <= ρ < 1, cs², ca² >= 0;
    NaN where ρ >= 1 or an input is negative.
    """
    rho = np.asarray(utilization, dtype=np.float64)
    cs2 = np.asarray(work_scv, dtype=np.float64)
    ca2 = np.asarray(arrival_scv, dtype=np.float64)
    rho, cs2, ca2 = np.broadcast_arrays(rho, cs2, ca2)
    valid = (rho >= 0.0) & (rho < 1.0) & (cs2 >= 0.0) & (ca2 >= 0.0)
    rho_v = np.where(valid, rho, 0.5)
    cs2_v = np.where(valid, cs2, 1.0)
    ca2_v = np.where(valid, ca2, 1.0)
    # Poisson arrivals: σ = ρ exactly and the ratio is 1; take n_P itself rather than the root's rounding.
    poisson = ca2_v == 1.0
    if np.all(poisson):  # no root to solve (the choice below would discard it everywhere)
        return np.where(valid, rho_v / (1.0 - rho_v), np.nan)
    # The root depends on (ρ, ca²) alone, which callers broadcast against many works: solve each pair once.
    one_state = rho_v.size > 0 and rho_v.min() == rho_v.max() and ca2_v.min() == ca2_v.max()
    if one_state:  # one link state (a plan at one rate): the scalar root, kept for the next caller
        root = _gamma_renewal_root_one(float(rho_v.flat[0]), float(ca2_v.flat[0]))
        sigma, one_minus_sigma = (np.full(rho_v.shape, v) for v in root)
    else:
        pairs, where = np.unique(np.stack([rho_v.ravel(), ca2_v.ravel()]), axis=1, return_inverse=True)
        sigma_unique, one_minus_unique = _gamma_renewal_root(pairs[0], pairs[1])
        sigma = sigma_unique[where.ravel()].reshape(rho_v.shape)
        one_minus_sigma = one_minus_unique[where.ravel()].reshape(rho_v.shape)
    shape_ratio = 2.0 * (ca2_v + cs2_v) / ((1.0 + cs2_v) * (1.0 + ca2_v))
    seen = np.where(poisson, rho_v / (1.0 - rho_v), sigma / one_minus_sigma * shape_ratio)
    return np.where(valid, seen, np.nan)


def _relaxation(x: Array, scale: Array) -> tuple[Array, Array, Array]:
    """For y = x/θ: (e, y - e, 2(y - e) - e²) with e = 1 - e^{-y}, by Taylor series where y is small."""
    y = x / scale
    small = y < _SERIES_BELOW
    e = -np.expm1(-y)
    lag = np.where(small, y * y * (0.5 - y * (1.0 / 6.0 - y / 24.0)), y - e)
    excess = np.where(small, y**3 * (2.0 / 3.0 - 0.5 * y), 2.0 * lag - e * e)
    return e, lag, excess


def _link_inputs(
    work_s: ArrayLike, utilization: ArrayLike, mean_work_s: ArrayLike, work_scv: ArrayLike, arrival_scv: ArrayLike
) -> tuple[Array, Array, Array, Array, Array, Mask, Mask, Mask]:
    """The inputs of ``ps_sojourn`` and ``ps_alone_probability`` as broadcast float arrays, with the masks
    ``valid`` (no negative input), ``loaded`` (0 < ρ < 1 and E[S] > 0) and ``unstable`` (ρ >= 1, x > 0)."""
    arrays = [np.asarray(v, dtype=np.float64) for v in (work_s, utilization, mean_work_s, work_scv, arrival_scv)]
    x, rho, m, cs2, ca2 = (np.asarray(a, dtype=np.float64) for a in np.broadcast_arrays(*arrays))
    valid = (x >= 0.0) & (rho >= 0.0) & (m >= 0.0) & (cs2 >= 0.0) & (ca2 >= 0.0)
    loaded = valid & (rho > 0.0) & (rho < 1.0) & (m > 0.0)
    unstable = valid & (rho >= 1.0) & (x > 0.0)
    return x, rho, m, cs2, ca2, valid, loaded, unstable


def ps_sojourn(
    work_s: ArrayLike,
    utilization: ArrayLike,
    mean_work_s: ArrayLike,
    work_scv: ArrayLike,
    arrival_scv: ArrayLike = 1.0,
) -> tuple[Array, Array]:
    """Mean (s) and variance (s²) of the sojourn on a processor-sharing link of a transfer of ``work_s``.

    ``work_s`` = its bytes / bandwidth (its time alone on the link); ``utilization`` ρ = λ E[S]; the transfers'
    work has mean ``mean_work_s`` (s) and SCV ``work_scv``; transfer starts have inter-start SCV
    ``arrival_scv`` (1 = Poisson). All broadcast against each other.

        E[T(x)]  = x/(1 - ρ) + Δn θ_G (1 - e^{-x/θ_G})
        Var T(x) = 2 v_P θ_P² (x/θ_P - 1 + e^{-x/θ_P})                                  (Poisson)

    and the renewal forms of the module docstring. Exact for Poisson arrivals in the mean (any work law,
    Kleinrock) and in the variance (exponential work, Coffman, Muntz & Trotter 1970); otherwise exact in the
    limits x → 0 (given n̄) and x → ∞ (slopes 1/(1 - ρ) and b). ρ = 0 gives (x, 0). Domain: 0 <= ρ < 1,
    x >= 0, E[S] > 0 (or ρ = 0), cs², ca² >= 0; (inf, inf) where ρ >= 1 and x > 0, NaN for negative inputs.
    """
    x, rho, m, cs2, ca2, valid, loaded, unstable = _link_inputs(work_s, utilization, mean_work_s, work_scv, arrival_scv)

    r = np.where(loaded, rho, 0.5)
    mm = np.where(loaded, m, 1.0)
    c2 = np.where(loaded, cs2, 1.0)
    a2 = np.where(loaded, ca2, 1.0)
    xx = np.where(loaded, x, 0.0)

    n_poisson = r / (1.0 - r)
    v_poisson = r / (1.0 - r) ** 2
    theta_p = mm * (1.0 + c2) / (2.0 * (1.0 - r))
    seen = mean_others_seen(r, c2, a2)
    dn = seen - n_poisson
    # (ca² - 1)/Δn: the renewal excess of arrivals per unit of excess occupancy (0 where Δn = 0: Poisson).
    has_excess = dn != 0.0
    per_excess = np.where(has_excess, (a2 - 1.0) / np.where(has_excess, dn, 1.0), 0.0)
    theta_g = theta_p + mm * np.maximum(per_excess, 0.0) / (2.0 * (1.0 - r))

    mean = xx / (1.0 - r) + dn * theta_g * -np.expm1(-xx / theta_g)

    # Variance. Bursty arrivals (ca² > 1): the exact Poisson part on θ_P plus the renewal excess (v - v_P,
    # b - b_P >= 0) relaxing on θ_G. Smooth ones (ca² <= 1): one relaxation scale θ_1 = min(b/(2v), θ_G) for
    # both terms, which keeps both ends (v x², b x) and every term non-negative (a negative excess on its own
    # scale could outgrow the Poisson part; evenly spaced arrivals of equal sizes must give no variance at
    # all). b/(2v) is the scale on which v x² meets b x; θ_G caps it where almost nobody is found on arrival
    # (v → 0) and the variance is built by the starts during the stay, about a gap apart. Both forms are
    # CMT's at ca² = 1 (θ_1 = θ_P there), so the variance is continuous in ca².
    slope = r * mm * (a2 + c2) / (1.0 - r) ** 3
    slope_poisson = 2.0 * v_poisson * theta_p
    variance_seen = seen * (1.0 + seen)
    # b/(2v), kept finite (<= 1e300) where v underflows: the min with θ_G below is all that is used of it.
    meet = slope / np.maximum(2.0 * variance_seen, np.maximum(slope * 1e-300, np.finfo(np.float64).tiny))
    theta_one = np.minimum(meet, theta_g)
    theta_one = np.where(theta_one > 0.0, theta_one, theta_p)  # b = 0 (so v = 0): no variance on any scale
    e_one, _, excess_one = _relaxation(xx, theta_one)
    one_scale = variance_seen * theta_one**2 * e_one**2 + slope / 2.0 * theta_one * excess_one
    _, lag_p, _ = _relaxation(xx, theta_p)
    e_g, _, excess_g = _relaxation(xx, theta_g)
    two_scales = (
        2.0 * v_poisson * theta_p**2 * lag_p
        + np.maximum(variance_seen - v_poisson, 0.0) * theta_g**2 * e_g**2
        + np.maximum(slope - slope_poisson, 0.0) / (2.0 * theta_g) * theta_g**2 * excess_g
    )
    var = np.where(a2 > 1.0, two_scales, one_scale)

    idle = valid & ~loaded & ~unstable  # ρ = 0 (or no work): the transfer has the link to itself
    mean_out = np.where(loaded, mean, np.where(idle, x, np.where(unstable, np.inf, np.nan)))
    var_out = np.where(loaded, var, np.where(idle, 0.0, np.where(unstable, np.inf, np.nan)))
    return mean_out, var_out


# --------------------------------------------------------------------------------------------------------
# The shifted-gamma law as a small quadrature
# --------------------------------------------------------------------------------------------------------


@lru_cache(maxsize=16)
def _slices(nodes: int) -> tuple[Array, Array]:
    """Probability cuts u_0 = 0 < ... < u_n = 1 with u_j = 1 - (1 - j/n)², and their widths."""
    j = np.arange(nodes + 1, dtype=np.float64)
    cuts = 1.0 - (1.0 - j / nodes) ** 2
    cuts[0], cuts[-1] = 0.0, 1.0
    cuts.setflags(write=False)
    widths = np.diff(cuts)
    widths.setflags(write=False)
    return cuts, widths


def _gamma_survival(shape: Array, y: Array) -> Array:
    """Q(k, y) = 1 - P(k, y) for k > 0, y >= 0 (unit scale), elementwise: ``scipy.special.gammaincc``.

    Imported here rather than at the top: scipy.special costs about 0.2 s to import, which commands that never
    reach this law should not pay."""
    from scipy.special import gammaincc

    return np.asarray(gammaincc(shape, np.maximum(y, 0.0)), dtype=np.float64)


def ps_alone_probability(
    work_s: ArrayLike,
    utilization: ArrayLike,
    mean_work_s: ArrayLike,
    work_scv: ArrayLike,
    arrival_scv: ArrayLike = 1.0,
) -> Array:
    """P(T(x) = x): the transfer finds the link idle and no other transfer starts before it ends (dimensionless).

        p_0 = P(N = 0) · P(G > x),   P(N = 0) = 1/(1 + n̄),   G ~ Gamma(1/ca², mean m/ρ)

    (the next gap of a renewal process is independent of the state it starts in). Exact for Poisson arrivals,
    p_0 = (1 - ρ) e^{-ρx/m} (any work law), and for gamma gaps with exponential work (N geometric, GI/M/1);
    otherwise N is taken geometric with the mean n̄ of ``mean_others_seen``. Evenly spaced starts (ca² = 0)
    give P(G > x) = 1{x < m/ρ}. Same arguments, broadcasting and domain as ``ps_sojourn``; 1 where ρ = 0,
    0 where ρ >= 1 and x > 0, NaN for negative inputs.
    """
    x, rho, m, cs2, ca2, valid, loaded, unstable = _link_inputs(work_s, utilization, mean_work_s, work_scv, arrival_scv)
    r = np.where(loaded, rho, 0.5)
    a2 = np.where(loaded, ca2, 1.0)
    gaps = np.where(loaded, x, 0.0) * r / np.where(loaded, m, 1.0)  # x in mean gaps, λx
    spaced = a2 < _SPACED_SCV
    shape = np.where(spaced, 1.0, 1.0 / np.where(spaced, 1.0, a2))
    quiet = np.where(a2 == 1.0, np.exp(-gaps), (gaps < 1.0).astype(np.float64))
    renewal = ~spaced & (a2 != 1.0)  # gamma gaps other than Poisson: the incomplete gamma, only where needed
    if np.any(renewal):
        quiet[renewal] = _gamma_survival(shape[renewal], (gaps * shape)[renewal])
    alone = quiet / (1.0 + mean_others_seen(r, np.where(loaded, cs2, 1.0), a2))
    idle = valid & ~loaded & ~unstable
    return np.where(loaded, alone, np.where(idle, 1.0, np.where(unstable, 0.0, np.nan)))


def sojourn_nodes(
    mean_s: ArrayLike,
    variance_s2: ArrayLike,
    nodes: int = 16,
    work_s: ArrayLike = 0.0,
    atom_probability: ArrayLike = 0.0,
) -> tuple[Array, Array]:
    """A ``nodes``-point quadrature of the sojourn law (values in s, weights), elementwise over leading axes.

    The law: T = x with probability p (the atom: ``atom_probability``, from ``ps_alone_probability``), otherwise
    T = x + Y with Y ~ Gamma(k, θ) matched to the mean and variance of T - x given T > x,

        μ₊ = (E[T] - x)/(1 - p),   σ₊² = (Var T (1 - p) - p (E[T] - x)²)/(1 - p)²,   k = μ₊²/σ₊²,  θ = σ₊²/μ₊,

    x = ``work_s`` (pass the transfer's own work and p: the zero-inflated shifted gamma fits the simulated
    link best; see the module docstring). p is lowered where needed to keep σ₊² >= 0 (at the bound the law is
    two points, matching both moments). Node 0 is the atom, T = x with weight p (0 by default). Nodes
    1..n-1 cut the gamma's probability axis at u_j = 1 - (1 - j/(n - 1))², so the slices narrow towards the
    tail (the last carries 1/(n - 1)² of the gamma part) and P90/P99 of a mixture fall among several nodes;
    each is the conditional mean of its slice,

        E[Y | q_j < Y <= q_{j+1}] = k θ (P(k + 1, q_{j+1}/θ) - P(k + 1, q_j/θ)) / (u_{j+1} - u_j),

    q_j = θ P^{-1}(k, u_j), so Σ w_j T_j = E[T] exactly (the within-slice variance is dropped). Values and
    weights both have the broadcast shape of the inputs plus a trailing axis of ``nodes``; weights sum to 1.
    ``nodes`` = 1 gives the mean alone. Where Var T = 0 or E[T] = x every node is E[T]; infinite or NaN
    inputs give NaN nodes. Requires nodes >= 1, Var >= 0, E[T] >= x, 0 <= p <= 1.
    """
    if nodes < 1:
        raise ValueError(f"nodes must be >= 1, got {nodes}")
    mean = np.asarray(mean_s, dtype=np.float64)
    var = np.asarray(variance_s2, dtype=np.float64)
    shift = np.asarray(work_s, dtype=np.float64)
    atom = np.asarray(atom_probability, dtype=np.float64)
    mean, var, shift, atom = np.broadcast_arrays(mean, var, shift, atom)
    finite = np.isfinite(mean) & np.isfinite(var) & np.isfinite(shift)
    extra = mean - shift
    spread = finite & (var > 0.0) & (extra > 0.0)
    if nodes == 1:
        return np.where(finite, mean, np.nan)[..., None], np.ones((*mean.shape, 1))
    var_s = np.where(spread, var, 1.0)
    extra_s = np.where(spread, extra, 1.0)
    # Largest atom the two moments allow: Var (1 - p) >= p E[Y]² (Cauchy-Schwarz on Y given Y > 0).
    p = np.where(spread, np.clip(np.minimum(atom, var_s / (var_s + extra_s**2)), 0.0, 1.0), 0.0)
    p = np.where(p < 1.0, p, 0.0)  # p = 1 needs Var = 0, which is not ``spread``
    mean_plus = extra_s / (1.0 - p)
    var_plus = np.maximum((var_s * (1.0 - p) - p * extra_s**2) / (1.0 - p) ** 2, 0.0)
    # At (or within rounding of) the bound the conditional law is a point: a gamma of shape > 1e12 is one.
    gamma_part = spread & (var_plus > _POINT_MASS_SCV * mean_plus**2)
    shape = np.where(gamma_part, mean_plus**2 / np.where(gamma_part, var_plus, 1.0), 1.0)
    scale = np.where(gamma_part, np.where(gamma_part, var_plus, 1.0) / mean_plus, 1.0)
    slices = nodes - 1
    cuts, widths = _slices(slices)

    # Mass of Gamma(k + 1) below each interior cut's quantile z_j of Gamma(k) (unit scale), trailing axis;
    # scipy's incomplete gamma and its inverse (imported here: scipy.special is slow to import, see
    # _gamma_survival). The recurrence P(k + 1, z) = P(k, z) - z^k e^{-z}/Γ(k + 1) (A&S 6.5.21), with
    # P(k, z_j) = u_j (the inverse's own cut, to its rounding), costs one exponential where gammainc costs a
    # series; gammainc is kept where the recurrence loses more than 3 bits to cancellation (the term is over
    # 7/8 of u_j: small shapes), where z_j underflows (then P(k, z_j) is not u_j), and for shapes above
    # _RECURRENCE_SHAPE (the exponent k ln z - z - ln Γ(k + 1) loses about k ln k ulps). Within 2e-14 of
    # gammainc everywhere (tests/latency/test_link_spread.py).
    from scipy.special import gammainc, gammaincinv, gammaln, xlogy

    k = np.broadcast_to(shape[..., None], (*shape.shape, slices - 1))
    inner = cuts[1:-1]
    quantiles = np.asarray(gammaincinv(k, inner), dtype=np.float64)
    term = np.exp(xlogy(k, quantiles) - quantiles - gammaln(shape + 1.0)[..., None])
    mass = inner - term
    library = (term > 0.875 * inner) | (quantiles < np.finfo(np.float64).tiny) | (k > _RECURRENCE_SHAPE)
    if np.any(library):
        mass[library] = gammainc(k[library] + 1.0, quantiles[library])

    cumulative = np.concatenate([np.zeros((*shape.shape, 1)), mass, np.ones((*shape.shape, 1))], axis=-1)
    slice_mean = shape[..., None] * np.diff(cumulative, axis=-1) / widths
    continuous = np.where(gamma_part[..., None], scale[..., None] * slice_mean, mean_plus[..., None] * np.ones(slices))
    values = np.concatenate([shift[..., None], shift[..., None] + continuous], axis=-1)
    values = np.where(spread[..., None], values, mean[..., None])
    values = np.where(finite[..., None], values, np.nan)
    weights = np.concatenate([p[..., None], (1.0 - p)[..., None] * widths], axis=-1)
    return values, weights
