"""Goodput: the largest arrival rate at which a TTFT percentile stays within its SLO, and its maximisation.

For a plan, P_q(TTFT) <= X  <=>  P(TTFT <= X) >= q (the quantile is the smallest x with CDF >= q), and
P(TTFT <= X) falls as Λ grows (every wait grows stochastically with Λ, and so does the link stretch). So
goodput is the root of P_Λ(TTFT <= X) = q on (0, Λ_stable), found by bisection, with no quantile solved
inside the loop. Λ_stable is the rate at which the first stage saturates; the batch-cap TPOT
(``decode_tokens_per_s``) is already met by every plan the stage model accepts (``throughput.stage_model``
rejects a decode profile that misses it). A P90 TPOT SLO under load (``StageModel.tpot_p90_slo_s``) lowers
Λ_stable to the rate at which it binds (``latency.tpot.tpot_rate_limit``, a function of N_d alone), so every
search over these laws holds both SLOs.

The search over plans that uses these laws lives in ``optimize.goodput_search``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.latency.distribution import GRID_POINTS, length_grid, positive_wait_cdf
from prfaas_plan.latency.stages import route_moments, stability_limit_req_per_s, stage_state
from prfaas_plan.latency.tpot import tpot_rate_limit
from prfaas_plan.latency.unloaded import (
    TTFT_LEVELS,
    RouteLatency,
    largest_length_within,
    local_mass_below,
    offload_mass_below,
    route_latency,
)
from prfaas_plan.spec.plan import Plan, TtftSlo
from prfaas_plan.throughput import StageModel

Array = NDArray[np.float64]

#: Goodput is resolved to this fraction of the stability limit when scoring a plan.
RATE_RTOL = 1e-10
_RATE_MAX_STEPS = 200
_RATE_BISECTIONS = 2
# Stop once P(TTFT <= X) is within this of q at the lower end (the rate error is this over the slope).
_SLACK_TOL = 1e-12
SEARCH_GRID_POINTS = 64
# Lengths on which the largest tolerable link stretch is tabulated (see _stretch_inverse), and regula
# falsi steps that then polish each answer inside its cell.
_STRETCH_TABLE = 4097
_STRETCH_POLISH = 4


@frozen
class Goodput:
    """The largest Λ (req/s) at which the ``quantile`` of TTFT is <= ``ttft_slo_s``.

    ``limited_by``: "slo" (the percentile reaches the SLO at that rate), "unloaded" (even an empty system
    misses the SLO: goodput 0), "stability" (the SLO still holds just below the saturation rate), or
    "tpot_slo" (the model's P90 TPOT SLO binds first: ``latency.tpot``; the stability limit is then the
    rate at which P90 TPOT reaches it).
    """

    rate_req_per_s: float
    stability_limit_req_per_s: float
    ttft_slo_s: float
    quantile: float
    limited_by: str


def _stretch_inverse(route: RouteLatency, lower: float, upper: float, x_s: float) -> Callable[[Array], Array]:
    """l*(κ) = sup{l in [lower, upper] : offload latency(l; κ) <= x} for link stretches κ >= 1 (tokens).

    P(TTFT <= X, offloaded | no wait) depends on the rate only through κ, and only via l*(κ). The largest
    stretch a length tolerates is explicit: κ_max(l) = (X - d - T(l)) / s(l) after the prefill (d the first
    decode step, the link's round trips and the KV handoff: ``RouteLatency.offload_fixed_s``; s(l) =
    S_kv(l)/B), and X - d over s(l) layer-wise, where lengths with T(l) + d > X never qualify (an exact cap).
    κ_max is non-increasing in l, so it is tabulated once on a length grid; each candidate's κ is located in its
    cell by binary search, then Illinois regula falsi on the exact κ_max polishes the answer inside the cell.
    ``lower - 1`` where no length qualifies.
    """
    assert route.offload_prefill is not None
    prefill_curve = route.offload_prefill
    grid = np.linspace(lower, upper, _STRETCH_TABLE)
    budget = x_s - route.offload_fixed_s
    transfer = route.transfer_s(grid)
    prefill = prefill_curve(grid)
    room = budget - prefill if route.transfer == "after_prefill" else np.full_like(grid, budget)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(transfer > 0, room / transfer, np.where(room >= 0, np.inf, 0.0))
    # Non-increasing by construction; the running minimum removes rounding-level wiggles.
    tolerated = np.minimum.accumulate(np.maximum(ratio, 0.0))
    cap = float(upper)
    if route.transfer == "layerwise":
        cap = float(
            largest_length_within(
                lambda length: prefill_curve(length) + route.offload_fixed_s,
                np.asarray(x_s),
                lower,
                upper,
            )
        )

    def exact(length: Array) -> Array:
        room_at = budget - prefill_curve(length) if route.transfer == "after_prefill" else budget
        return np.asarray(room_at / route.transfer_s(length), dtype=np.float64)

    def l_star(stretch: Array) -> Array:
        kappa = np.asarray(stretch, dtype=np.float64)
        count = np.searchsorted(-tolerated, -kappa, side="right")
        i = np.clip(count - 1, 0, grid.size - 2)
        a, b = grid[i], grid[i + 1]
        f_a, f_b = tolerated[i] - kappa, tolerated[i + 1] - kappa
        inside = (count > 0) & (count < grid.size)
        # Illinois regula falsi inside the cell on the exact κ_max(l) - κ (smooth and decreasing there);
        # g_a, g_b are the (possibly halved) values that steer it, f_a, f_b the true ones.
        g_a, g_b = f_a, f_b
        last = np.zeros(kappa.shape, dtype=np.int8)
        for _ in range(_STRETCH_POLISH):
            with np.errstate(divide="ignore", invalid="ignore"):
                trial = a + g_a / (g_a - g_b) * (b - a)
                trial = np.where(inside & (trial > a) & (trial < b), trial, 0.5 * (a + b))
                f_trial = np.where(inside, exact(trial) - kappa, 0.0)
            low = f_trial >= 0
            a, f_a, g_a = np.where(low, trial, a), np.where(low, f_trial, f_a), np.where(low, f_trial, g_a)
            b, f_b, g_b = np.where(low, b, trial), np.where(low, f_b, f_trial), np.where(low, g_b, f_trial)
            g_b = np.where(low & (last == 1), 0.5 * g_b, g_b)
            g_a = np.where(~low & (last == -1), 0.5 * g_a, g_a)
            last = np.where(low, 1, -1).astype(np.int8)
        with np.errstate(divide="ignore", invalid="ignore"):
            secant = a + f_a / (f_a - f_b) * (b - a)
        root = np.where((secant >= a) & (secant <= b), secant, a)
        value = np.where(count >= grid.size, upper, np.where(count == 0, lower - 1.0, root))
        return np.minimum(value, cap)

    return l_star


def goodput_rates(
    model: StageModel,
    threshold_tokens: ArrayLike,
    n_pd_prefill: ArrayLike,
    slo: TtftSlo,
    *,
    decode_service_scv: float = 0.0,
    grid_points: int = SEARCH_GRID_POINTS,
    rate_rtol: float = RATE_RTOL,
) -> tuple[Array, Array, Array]:
    """Goodput of every candidate plan (t, N_p, N_d = N_local - N_p) at once (arrays broadcast).

    Returns (goodput, stability limit, P(TTFT <= X) at zero load), each of the broadcast shape; goodput is 0
    where the empty system already misses the SLO. Each goodput is bracketed to ``rate_rtol`` of its
    stability limit by regula falsi with the Illinois modification on f(Λ) = P_Λ(TTFT <= X) - q, which is
    continuous and decreasing on (0, Λ_stable); the returned value is the lower, SLO-meeting end.
    """
    n_p = np.asarray(n_pd_prefill, dtype=np.float64)
    low, _, limit, unloaded = goodput_brackets(
        model,
        threshold_tokens,
        n_p,
        model.n_local - n_p,
        slo,
        decode_service_scv=decode_service_scv,
        grid_points=grid_points,
        rate_rtol=rate_rtol,
    )
    return low, limit, unloaded


def slack_setup(
    model: StageModel,
    threshold_tokens: ArrayLike,
    n_pd_prefill: ArrayLike,
    n_pd_decode: ArrayLike,
    slo: TtftSlo,
    decode_service_scv: float,
    grid_points: int,
) -> tuple[Callable[[Array], Array], Array, Array, NDArray[np.bool_], tuple[int, ...]]:
    """For plans (t, N_p, N_d) flattened: (slack, stability limit, P(TTFT <= X) at zero load, feasible, shape),
    slack(Λ) = P_Λ(TTFT <= X) - q per plan (-1 where Λ is past the limit), with every Λ-independent part
    computed once (``slo`` is checked when it is made: ``spec.plan.TtftSlo``)."""
    ttft_slo_s, quantile = slo.limit_s, slo.quantile
    lengths = model.lengths
    route = route_latency(model)
    t_all, n_all, d_all = np.broadcast_arrays(
        np.asarray(threshold_tokens, dtype=np.float64), np.asarray(n_pd_prefill), np.asarray(n_pd_decode)
    )
    shape = t_all.shape
    # Everything that depends on the threshold alone is computed once per distinct threshold.
    unique_t, which = np.unique(t_all.ravel(), return_inverse=True)
    t = unique_t[which]
    n_p = n_all.ravel().astype(np.float64)
    n_d = d_all.ravel().astype(np.float64)
    moments = route_moments(model, t)
    limit, _ = stability_limit_req_per_s(model, moments, n_p, n_d)
    if model.tpot_p90_slo_s is not None:  # the TPOT SLO caps the rate a plan may carry (latency.tpot)
        limit = np.fmin(limit, tpot_rate_limit(model, n_d))
    lo, hi = lengths.lower_tokens, lengths.upper_tokens
    local_grid = length_grid(lengths, lo - 1.0, unique_t, grid_points)[which]
    offload_grid = length_grid(lengths, np.maximum(unique_t, lo - 1.0), hi, grid_points)[which]
    local_unloaded = local_mass_below(lengths, route, unique_t, ttft_slo_s)[which]
    has_offload = bool(np.any(t < hi)) and route.offload_prefill is not None
    local_latency = route.local_s(local_grid)
    offload_prefill = route.offload_prefill(offload_grid) if has_offload and route.offload_prefill else 0.0
    offload_transfer = route.transfer_s(offload_grid) if has_offload else 0.0
    p = moments.offload_fraction

    def slack(rate: Array) -> Array:
        # The two terms of TtftLaw.local_part/offload_part at x = X, with every Λ-independent part reused.
        state = stage_state(model, moments, n_p, n_d, rate, decode_service_scv)
        stretch = np.where(state.stable, state.link_stretch, 1.0)
        transfer = stretch[..., None] * offload_transfer
        if route.transfer == "after_prefill":
            offload_latency = offload_prefill + transfer + route.offload_fixed_s
        else:
            offload_latency = np.maximum(offload_prefill, transfer) + route.offload_fixed_s
        atom_local = (1.0 - state.local_wait.p_wait) * (1.0 - state.decode_wait.p_wait)
        atom_offload = (1.0 - state.prfaas_wait.p_wait) * (1.0 - state.decode_wait.p_wait)
        offload_unloaded = zero_wait_offload(stretch) if has_offload else 0.0
        spread_local = positive_wait_cdf(ttft_slo_s - local_latency, state.local_wait, state.decode_wait)
        spread_offload = positive_wait_cdf(ttft_slo_s - offload_latency, state.prfaas_wait, state.decode_wait)
        cdf = (
            atom_local * local_unloaded
            + (1.0 - p) * spread_local.mean(axis=-1)
            + atom_offload * offload_unloaded
            + p * spread_offload.mean(axis=-1)
        )
        return np.asarray(np.where(state.stable, cdf - quantile, -1.0), dtype=np.float64)

    offload_zero = offload_mass_below(lengths, route, unique_t, ttft_slo_s)[which] if has_offload else 0.0
    unloaded_cdf = local_unloaded + offload_zero
    feasible = (unloaded_cdf >= quantile) & np.isfinite(limit) & (limit > 0)
    l_star_of_stretch = _stretch_inverse(route, lo, hi, ttft_slo_s) if has_offload else None
    cdf_at_t = np.asarray(lengths.cdf(t))

    def zero_wait_offload(stretch: Array) -> Array:
        assert l_star_of_stretch is not None
        l_star = l_star_of_stretch(stretch)
        return np.where(l_star > t, np.asarray(lengths.cdf(l_star)) - cdf_at_t, 0.0)

    return slack, limit, np.asarray(unloaded_cdf, dtype=np.float64), feasible, tuple(int(n) for n in shape)


def goodput_brackets(
    model: StageModel,
    threshold_tokens: ArrayLike,
    n_pd_prefill: ArrayLike,
    n_pd_decode: ArrayLike,
    slo: TtftSlo,
    *,
    decode_service_scv: float = 0.0,
    grid_points: int = SEARCH_GRID_POINTS,
    rate_rtol: float = RATE_RTOL,
) -> tuple[Array, Array, Array, Array]:
    """``goodput_rates`` for plans (t, N_p, N_d) with N_d given (N_p + N_d need not be ``model.n_local``).

    Returns (low, high, stability limit, P(TTFT <= X) at zero load): the goodput lies in [low, high] (req/s),
    low meets the SLO, and high = low = 0 where the empty system misses it; high is the limit where the
    SLO still holds just below it. The search bounds groups of splits by plans with more instances than
    exist (see ``best_goodput_plan``), and needs ``high`` as a proven upper bound.
    """
    slack, limit, unloaded_cdf, feasible, shape = slack_setup(
        model, threshold_tokens, n_pd_prefill, n_pd_decode, slo, decode_service_scv, grid_points
    )
    quantile = slo.quantile
    top = np.where(feasible, limit, 0.0) * (1.0 - 1e-9)
    f_top = slack(top)
    top_ok = feasible & (f_top >= 0.0)
    low, high = np.zeros(limit.shape), top.copy()
    f_low, f_high = unloaded_cdf - quantile, f_top
    pending = feasible & ~top_ok
    tolerance = rate_rtol * top
    last_side = np.zeros(limit.shape, dtype=np.int8)
    for step in range(_RATE_MAX_STEPS):
        pending &= (high - low > tolerance) & (f_low > _SLACK_TOL)
        if not np.any(pending):
            break
        with np.errstate(divide="ignore", invalid="ignore"):
            trial = low - f_low * (high - low) / (f_high - f_low)
        # The slack is flat at low load and steep near saturation: halve first, then interpolate.
        secant = (step >= _RATE_BISECTIONS) & (trial > low) & (trial < high)
        trial = np.where(secant, trial, 0.5 * (low + high))
        f_trial = slack(trial)
        to_low = f_trial >= 0.0
        low = np.where(pending & to_low, trial, low)
        f_low = np.where(pending & to_low, f_trial, f_low)
        high = np.where(pending & ~to_low, trial, high)
        f_high = np.where(pending & ~to_low, f_trial, f_high)
        # Illinois: an endpoint kept twice in a row has its value halved (signs are preserved).
        side = np.where(to_low, 1, -1).astype(np.int8)
        f_high = np.where(pending & (side == 1) & (last_side == 1), 0.5 * f_high, f_high)
        f_low = np.where(pending & (side == -1) & (last_side == -1), 0.5 * f_low, f_low)
        last_side = side
    rate = np.where(feasible, np.where(top_ok, top, low), 0.0)
    upper = np.where(feasible, np.where(top_ok, limit, high), 0.0)
    unloaded = np.broadcast_to(unloaded_cdf, limit.shape)
    return rate.reshape(shape), upper.reshape(shape), limit.reshape(shape), unloaded.reshape(shape)


def plans_goodput(
    model: StageModel,
    threshold_tokens: ArrayLike,
    n_pd_prefill: ArrayLike,
    slo: TtftSlo,
    *,
    decode_service_scv: float = 0.0,
) -> list[Goodput]:
    """Goodput of several plans (t, N_p, N_d = N_local - N_p) of one pool, scored together with the full
    length grid; N_prfaas = ``model.n_prfaas``."""
    rates, limits, unloaded = goodput_rates(
        model,
        np.asarray(threshold_tokens, dtype=np.float64).ravel(),
        np.asarray(n_pd_prefill, dtype=np.float64).ravel(),
        slo,
        decode_service_scv=decode_service_scv,
        grid_points=GRID_POINTS,
    )
    quantile = slo.quantile
    out = []
    ts = np.asarray(threshold_tokens, dtype=np.float64).ravel()
    nps = np.asarray(n_pd_prefill, dtype=np.float64).ravel()
    for i, (value, limit, zero_load) in enumerate(zip(rates.tolist(), limits.tolist(), unloaded.tolist(), strict=True)):
        if zero_load >= quantile and value < limit * (1.0 - 1e-6) and quantile in _LAW_LEVELS:
            n_p = int(nps[i])
            plan = Plan(threshold_tokens=float(ts[i]), n_pd_prefill=n_p, n_pd_decode=model.n_local - n_p)
            value = _with_link_spread(model, plan, slo, value, limit, decode_service_scv)
        tpot_cap = float(tpot_rate_limit(model, model.n_local - nps[i]))
        if zero_load < quantile:
            limited_by = "unloaded"
        elif tpot_cap <= 0.0 or (value >= limit * (1.0 - 1e-6) and tpot_cap <= limit):
            limited_by = "tpot_slo"
        elif value >= limit * (1.0 - 1e-6):
            limited_by = "stability"
        else:
            limited_by = "slo"
        out.append(
            Goodput(
                rate_req_per_s=value,
                stability_limit_req_per_s=limit,
                ttft_slo_s=float(slo.limit_s),
                quantile=quantile,
                limited_by=limited_by,
            )
        )
    return out


#: Quantiles the full TTFT law reports (``loaded_ttft``), for which goodput is re-scored with the link's spread.
_LAW_LEVELS = frozenset(TTFT_LEVELS)
# Illinois steps on P_q(Λ) - X when re-scoring with the full law, and the relative tolerance on P_q.
_LAW_STEPS = 60
_LAW_RTOL = 1e-9
# The bracket is sought from the estimate outwards: a first step of this fraction of the stability limit,
# each next one this many times longer.
_LAW_FIRST_STEP = 1e-3
_LAW_STEP_GROWTH = 8.0
# Illinois steps in a row that may keep the same end of the bracket before one bisection step is forced.
_LAW_SAME_SIDE = 2


def _with_link_spread(
    model: StageModel,
    plan: Plan,
    slo: TtftSlo,
    estimate_req_per_s: float,
    limit_req_per_s: float,
    decode_service_scv: float,
) -> float:
    """Goodput re-scored with the full TTFT law of ``loaded_ttft`` (which spreads each transfer's sojourn on
    the shared link; the vectorised search above charges the mean stretch only): the largest Λ in
    [0, limit · (1 - 1e-9)] with P_q(Λ) <= X, to ``_LAW_RTOL`` of X in P_q. P_q is the figure ``loaded_ttft``
    reports, computed alone by ``ttft_quantile_at_rates`` (the law's rate-free parts once).

    P_q rises with Λ, so the root is bracketed from the estimate (the mean-stretch goodput, within a fraction
    of a percent of it on the paper's scenarios) outwards, by steps of ``_LAW_FIRST_STEP`` of the limit
    growing ``_LAW_STEP_GROWTH``-fold, down to 0 or up to the limit at most (0 and the limit are the answer
    when P_q(0) > X, resp. P_q(limit · (1 - 1e-9)) <= X, as before). Then the Illinois method narrows the
    bracket, with one bisection step after ``_LAW_SAME_SIDE`` Illinois steps in a row that keep the same end:
    P_q is flat in places (a plateau where q falls inside an atom of the law), where Illinois alone crawls."""
    from prfaas_plan.latency.distribution import ttft_quantile_at_rates

    quantile_at = ttft_quantile_at_rates(model, plan, slo.quantile, decode_service_scv=decode_service_scv)
    ttft_slo_s = slo.limit_s

    def excess(rate: float) -> float:
        value = quantile_at(rate)
        return value - ttft_slo_s if value is not None else float("inf")

    low, high = 0.0, limit_req_per_s * (1.0 - 1e-9)
    guess = min(max(estimate_req_per_s, low), high)
    f_guess = excess(guess)
    step = _LAW_FIRST_STEP * limit_req_per_s
    if f_guess <= 0.0:  # goodput >= guess: walk up until P_q exceeds X, or to the limit
        low, f_low = guess, f_guess
        while True:
            trial = low + step
            if trial >= high:
                f_high = excess(high)
                if f_high <= 0.0:
                    return high
                break
            f_trial = excess(trial)
            if f_trial > 0.0:
                high, f_high = trial, f_trial
                break
            low, f_low = trial, f_trial
            step *= _LAW_STEP_GROWTH
    else:  # goodput < guess: walk down until P_q meets X, or to 0
        if guess <= 0.0:
            return 0.0
        high, f_high = guess, f_guess
        while True:
            trial = high - step
            if trial <= 0.0:
                f_low = excess(0.0)
                if f_low > 0.0:
                    return 0.0
                low = 0.0
                break
            f_trial = excess(trial)
            if f_trial <= 0.0:
                low, f_low = trial, f_trial
                break
            high, f_high = trial, f_trial
            step *= _LAW_STEP_GROWTH
    side = 0
    same_side = 0
    true_low = f_low
    for _ in range(_LAW_STEPS):
        if abs(true_low) <= _LAW_RTOL * ttft_slo_s or high - low <= 1e-12 * limit_req_per_s:
            break
        mid = 0.5 * (low + high)
        if same_side >= _LAW_SAME_SIDE:
            same_side = 0
        elif np.isfinite(f_high) and f_high != f_low:
            secant = high - f_high * (high - low) / (f_high - f_low)
            mid = secant if low < secant < high else mid
        f_mid = excess(mid)
        if f_mid <= 0.0:
            low, f_low, true_low = mid, f_mid, f_mid
            if side == -1:
                f_high *= 0.5
                same_side += 1
            else:
                same_side = 0
            side = -1
        else:
            high, f_high = mid, f_mid
            if side == 1:
                f_low *= 0.5
                same_side += 1
            else:
                same_side = 0
            side = 1
    return low


def plan_goodput(model: StageModel, plan: Plan, slo: TtftSlo, *, decode_service_scv: float = 0.0) -> Goodput:
    """Goodput of one plan (t, N_p, N_d), N_prfaas = ``model.n_prfaas``, scored with the full length grid."""
    sized = replace(model, n_local=plan.n_local)
    (goodput,) = plans_goodput(
        sized, [plan.threshold_tokens], [plan.n_pd_prefill], slo, decode_service_scv=decode_service_scv
    )
    return goodput
