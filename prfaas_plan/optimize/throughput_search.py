"""Search the routing threshold t and the local split N_p + N_d = N_local for the largest Λ_max (paper §3.4.2),
and evaluate the paper's two baselines.

Search. Λ(t, N_p) = min(F(t, N_p), Θ_pd-d(N_p)) where F = min(Θ_prfaas/p, Θ_pd-p/(1-p)) is the prefill side.
F can have several peaks in t (a convex PrfaaS prefill curve makes Θ_prfaas/p fall and then rise), so
refining only the best cell of a coarse grid can miss the best peak. The search is a branch and bound, for
every N_p at once (numpy, one row per split): F on a coarse grid of thresholds spaced by the length
distribution's quantiles gives each row an incumbent; every cell between grid points gets an upper bound
from the parts of F that are monotone in t for non-decreasing curves (Θ_prfaas, p and Θ_pd-p/(1-p)); every
cell whose bound beats the incumbent is cut up and bounded again, until the cells left are narrower than
the resolution; where the binding bound changes inside one of them (the paper's Eq. 7 crossing of the two
prefill bounds, or the PrfaaS stage turning from link- to compute-bound), the kink is located to 1e-3
tokens. No threshold is skipped, and the best F found comes with a proven upper bound on the true maximum
(see ``best_thresholds``). Maximising F (not just Λ) breaks the ties that arise when decode binds: among
thresholds of equal Λ it keeps the most prefill headroom, which is the Eq. 7 crossing. The best split is
then the row with the largest Λ (ties: the larger F). A local pool of more than 1,024 instances does not get
a row per split: F's best over t never falls as N_p grows and decode's bound falls, so intervals of splits
are bounded and discarded by a second branch and bound (``_best_splits``), searching O(log N_local) rows.
"""

from __future__ import annotations

import numpy as np

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InfeasibleError
from prfaas_plan.lengths import Empirical, distinct_sorted
from prfaas_plan.optimize.plans import PlanEvaluation, evaluate
from prfaas_plan.throughput import (
    StageModel,
    routing,
    stage_bounds,
    stage_throughputs,
)

_COARSE_POINTS = 257
# Empirical distributions with at most this many observations are searched at every observed length exactly.
_EXACT_EMPIRICAL_MAX = 20_000
# The branch and bound cuts every cell it cannot discard into this many sub-cells per round.
_SPLIT_CELLS = 16
# A cell is discarded when its upper bound is at most the incumbent times 1 + this: the relative optimality
# gap the search proves, far above the rounding of the closed-form moments and below every test's tolerance.
_BOUND_RTOL = 1e-9
# Kinks of F inside the last cells (the Eq. 7 crossing, PrfaaS compute = link) are located to this width.
_CROSSING_TOL_TOKENS = 1e-3


def _prefill_side(
    model: StageModel, thresholds: np.ndarray, n_p: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """At thresholds t (rows: N_p): the prefill side's three bounds on Λ stacked on a new last axis (PrfaaS
    compute and link, whose minimum is A = Θ_prfaas/p, and local prefill B = Θ_pd-p/(1-p)), and Θ_prfaas
    (NaN where p = 0) and p themselves, from which ``_cell_bounds`` bounds F over an interval. Req/s."""
    route = routing(model.lengths, thresholds)
    theta = stage_throughputs(model, route, n_p)
    bounds = stage_bounds(theta, route)
    shape = bounds["pd_prefill"].shape
    terms = np.stack(np.broadcast_arrays(bounds["prfaas_compute"], bounds["prfaas_link"], bounds["pd_prefill"]), -1)
    return terms, np.broadcast_to(theta.prfaas, shape), np.broadcast_to(route.offload_fraction, shape)


def _lowest(terms: np.ndarray) -> np.ndarray:
    """F = min(A, B) from ``_prefill_side``'s stacked bounds (a stage without traffic is +inf, never NaN)."""
    return np.asarray(np.fmin.reduce(terms, axis=-1))


def _cell_bounds(theta_lo: np.ndarray, local_lo: np.ndarray, p_hi: np.ndarray) -> np.ndarray:
    """An upper bound on F = min(A, B) over a cell t_lo <= t <= t_hi, req/s, from Θ_prfaas(t_lo), B(t_lo) and
    p(t_hi); +inf where p(t_hi) = 0 and B(t_lo) = inf.

    Valid for non-decreasing curves T_prfaas, S_kv, T_local (the loader rejects fitted curves that decrease
    over the length range). p(t) = P(L > t) never increases; l_long = E[L | L > t] and l_short = E[L | L <= t]
    never decrease. Hence Θ_prfaas(t) = min(N_prfaas / T_prfaas(l_long), B_out / S_kv(l_long)) never
    increases, and neither does B(t) = N_p / ((1 - p) T_local(l_short)), so on the cell
    A(t) <= Θ_prfaas(t_lo) / p(t_hi) and B(t) <= B(t_lo). A itself is NOT monotone: d(p·T(l_long))/dt =
    f(t)·(T'(l_long)·(l_long - t) - T(l_long)), so with a convex T_prfaas, p·T_prfaas(l_long) grows with t
    where T' is steep enough (at small t, for T = c0 + c1·l + c2·l², when c2·l_long² > c0), and Θ_prfaas/p
    falls: that is what gives Λ(t) several peaks.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        offload = np.where(p_hi > 0, theta_lo / p_hi, np.inf)
    return np.asarray(np.fmin(np.where(np.isnan(offload), np.inf, offload), local_lo))


def _coarse_grid(model: StageModel) -> np.ndarray:
    lengths = model.lengths
    # Below every length: everything offloaded, fully cached (zero-length) requests included.
    below_all = min(0.0, lengths.lower_tokens - 1.0)
    if isinstance(lengths, Empirical) and lengths.n_values <= _EXACT_EMPIRICAL_MAX:
        # Λ is piecewise constant between observed lengths: the observed values are every distinct plan.
        return distinct_sorted(np.concatenate(([below_all], lengths.sorted_tokens)))
    inner = np.asarray(lengths.quantile(np.linspace(0.0, 1.0, _COARSE_POINTS)), dtype=np.float64)
    return distinct_sorted(np.concatenate(([below_all], inner, [lengths.upper_tokens])))


@frozen
class ThresholdSearch:
    """For each N_p asked for: the best threshold found (tokens), the prefill side F there, and a proven
    upper bound on F over every threshold from 0 to the longest length (req/s)."""

    threshold_tokens: np.ndarray
    prefill_req_per_s: np.ndarray
    prefill_bound_req_per_s: np.ndarray


def _improve(t_best: np.ndarray, f_best: np.ndarray, row: np.ndarray, t: np.ndarray, f: np.ndarray) -> None:
    """Raise each row's incumbent (t_best, f_best, updated in place) to the best of candidates ``t``/``f``
    (one candidate set per entry of ``row``); ties keep the incumbent, then the smallest t."""
    if row.size == 0:
        return
    j = np.argmax(f, axis=1)
    value = f[np.arange(row.size), j]
    top = np.full(f_best.shape, -np.inf)
    np.maximum.at(top, row, value)
    winners = np.flatnonzero(value == top[row])
    won, first = np.unique(row[winners], return_index=True)
    pick = winners[first]
    better = value[pick] > f_best[won]
    f_best[won[better]] = value[pick][better]
    t_best[won[better]] = t[pick, j[pick]][better]


def best_thresholds(model: StageModel, n_pd_prefill: np.ndarray, resolution_tokens: float) -> ThresholdSearch:
    """For each N_p, the threshold maximising the prefill side F = min(A, B), by branch and bound.

    F is evaluated on a coarse grid spaced by the length distribution's quantiles; each row's best point is
    its incumbent. Every cell between neighbouring points gets the upper bound of ``_cell_bounds``; a cell
    whose bound is at most the incumbent times 1 + 1e-9 is discarded, any other is cut into 16 sub-cells,
    which are evaluated (raising the incumbent) and bounded in turn, until the cells left are narrower than
    ``resolution_tokens``. Where the binding bound changes inside one of those (the Eq. 7 crossing A = B,
    or PrfaaS compute = link) the kink is bracketed to 1e-3 tokens, and its ends and the secant root between
    them are evaluated too.

    Guarantee (non-decreasing curves): no threshold is skipped. Every t in [0, max length] lies in a
    discarded cell, where F(t) <= F(t̂)·(1 + 1e-9), or in a cell left at the resolution with both ends
    evaluated, where F(t) <= that cell's bound; ``prefill_bound_req_per_s`` is the largest of these, so
    F(t̂) <= sup_t F(t) <= bound. The gap shrinks with the resolution for continuous length distributions.
    An empirical distribution of at most 20,000 observations is searched exactly, at every observed length.
    """
    n_p = np.asarray(n_pd_prefill, dtype=np.float64).ravel()
    grid = _coarse_grid(model)
    terms, theta, p = _prefill_side(model, grid, n_p[:, None])
    score = _lowest(terms)
    best = np.argmax(score, axis=1)
    t_best = grid[best].astype(np.float64)
    f_best = score[np.arange(n_p.size), best].astype(np.float64)
    if isinstance(model.lengths, Empirical) and model.lengths.n_values <= _EXACT_EMPIRICAL_MAX:
        return ThresholdSearch(threshold_tokens=t_best, prefill_req_per_s=f_best, prefill_bound_req_per_s=f_best)

    def beats_incumbent(bound: np.ndarray, row: np.ndarray) -> np.ndarray:
        return np.asarray(bound > (f_best * (1 + _BOUND_RTOL))[row].reshape(row.shape + (1,) * (bound.ndim - 1)))

    # Open cells, one entry each: the row (N_p), the ends, Θ_prfaas and B at the low end, p at the high end
    # (what the cell's bound needs and its sub-cells inherit), and the bound.
    local = terms[..., 2]
    bound = _cell_bounds(theta[:, :-1], local[:, :-1], p[:, 1:])
    row, cell = np.nonzero(beats_incumbent(bound, np.arange(n_p.size)))
    lo, hi = grid[cell], grid[cell + 1]
    theta_lo, local_lo, p_hi, cell_bound = theta[row, cell], local[row, cell], p[row, cell + 1], bound[row, cell]
    finished = [(row[:0], lo[:0], hi[:0], cell_bound[:0])]
    fractions = np.linspace(0.0, 1.0, _SPLIT_CELLS + 1)[1:-1]
    while row.size:
        still = beats_incumbent(cell_bound, row)
        narrow = still & (hi - lo <= resolution_tokens)
        finished.append((row[narrow], lo[narrow], hi[narrow], cell_bound[narrow]))
        split = still & ~narrow
        row, lo, hi, theta_lo, local_lo, p_hi = (x[split] for x in (row, lo, hi, theta_lo, local_lo, p_hi))
        if row.size == 0:
            break
        inner = lo[:, None] + (hi - lo)[:, None] * fractions
        terms, theta, p = _prefill_side(model, inner, n_p[row][:, None])
        _improve(t_best, f_best, row, inner, _lowest(terms))
        ends = np.concatenate((lo[:, None], inner, hi[:, None]), axis=1)
        sub_theta_lo = np.concatenate((theta_lo[:, None], theta), axis=1)
        sub_local_lo = np.concatenate((local_lo[:, None], terms[..., 2]), axis=1)
        sub_p_hi = np.concatenate((p, p_hi[:, None]), axis=1)
        sub_bound = _cell_bounds(sub_theta_lo, sub_local_lo, sub_p_hi)
        parent, sub = np.nonzero(beats_incumbent(sub_bound, row))
        row, lo, hi = row[parent], ends[parent, sub], ends[parent, sub + 1]
        theta_lo, local_lo, p_hi = sub_theta_lo[parent, sub], sub_local_lo[parent, sub], sub_p_hi[parent, sub]
        cell_bound = sub_bound[parent, sub]
    row, lo, hi, cell_bound = (np.concatenate(parts) for parts in zip(*finished, strict=True))
    keep = beats_incumbent(cell_bound, row)
    row, lo, hi, cell_bound = row[keep], lo[keep], hi[keep], cell_bound[keep]
    _locate_kinks(model, n_p, row, lo, hi, t_best, f_best)
    upper = f_best * (1 + _BOUND_RTOL)
    np.maximum.at(upper, row, cell_bound)
    return ThresholdSearch(threshold_tokens=t_best, prefill_req_per_s=f_best, prefill_bound_req_per_s=upper)


def _locate_kinks(
    model: StageModel,
    n_p: np.ndarray,
    row: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    t_best: np.ndarray,
    f_best: np.ndarray,
) -> None:
    """In every cell [lo, hi] of ``row`` where a different bound binds at the two ends (i at lo, j at hi),
    bracket the sign change of bound_i - bound_j to ``_CROSSING_TOL_TOKENS`` and raise the incumbents in
    place: F = min(...) peaks there when bound i rises and bound j falls (the Eq. 7 crossing A = B). Each
    round cuts every bracket into ``_SPLIT_CELLS`` (one numpy call instead of four bisection steps)."""
    if row.size == 0:
        return
    terms = _prefill_side(model, np.stack((lo, hi), axis=1), n_p[row][:, None])[0]
    binding = np.argmin(terms, axis=-1)
    i, j = binding[:, 0], binding[:, 1]
    pair = np.stack((i, j), axis=1)[:, None, :]
    at_ends = np.take_along_axis(terms, np.broadcast_to(pair, (row.size, 2, 2)), axis=-1)
    kink = (i != j) & np.all(np.isfinite(at_ends), axis=(1, 2))
    if not np.any(kink):
        return
    row, left, right, pair = row[kink], lo[kink], hi[kink], pair[kink]
    diff_left, diff_right = (at_ends[kink, end, 0] - at_ends[kink, end, 1] for end in (0, 1))
    sign_left = np.sign(diff_left)
    take = np.arange(row.size)
    fractions = np.linspace(0.0, 1.0, _SPLIT_CELLS + 1)
    width = max(float(np.max(right - left)), _CROSSING_TOL_TOKENS)
    for _ in range(int(np.ceil(np.log(width / _CROSSING_TOL_TOKENS) / np.log(_SPLIT_CELLS)))):
        points = left[:, None] + (right - left)[:, None] * fractions
        terms = _prefill_side(model, points[:, 1:-1], n_p[row][:, None])[0]
        both = np.take_along_axis(terms, np.broadcast_to(pair, (*terms.shape[:2], 2)), axis=-1)
        diff = np.concatenate((diff_left[:, None], both[..., 0] - both[..., 1], diff_right[:, None]), axis=1)
        changed = np.sign(diff[:, 1:-1]) != sign_left[:, None]
        # The first sub-cell whose right end has left the low end's sign (the last one if none has).
        k = np.where(np.any(changed, axis=1), np.argmax(changed, axis=1), _SPLIT_CELLS - 1)
        left, right = points[take, k], points[take, k + 1]
        diff_left, diff_right = diff[take, k], diff[take, k + 1]
    # Within the last bracket the two bounds are straight to rounding: their crossing is the secant's root.
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.clip(diff_left / (diff_left - diff_right), 0.0, 1.0)
    crossing = left + (right - left) * np.where(np.isfinite(share), share, 0.5)
    ends = np.stack((left, crossing, right), axis=1)
    _improve(t_best, f_best, row, ends, _lowest(_prefill_side(model, ends, n_p[row][:, None])[0]))


#: Local pools of at most this many instances have the threshold search run for every split; larger ones
#: are searched by branch and bound over intervals of splits (``_best_splits``).
EXHAUSTIVE_SPLITS = 1024


def search(
    model: StageModel,
    resolution_tokens: float = 10.0,
    label: str = "prfaas-pd",
    *,
    exhaustive_splits: int = EXHAUSTIVE_SPLITS,
) -> PlanEvaluation:
    """Maximise Λ_max over t (continuous) and N_p in 0..N_local-1 (paper §3.4.2), and score the winner.

    Global in t for every split, with the guarantee of ``best_thresholds``; a pool of more than
    ``exhaustive_splits`` local instances has its splits searched by ``_best_splits``."""
    t_best, n_p_best, _ = best_plan(model, resolution_tokens, exhaustive_splits=exhaustive_splits)
    return evaluate(model, t_best, n_p_best, label=label)


def best_plan(
    model: StageModel, resolution_tokens: float = 10.0, *, exhaustive_splits: int = EXHAUSTIVE_SPLITS
) -> tuple[float, int, float]:
    """(t, N_p, Λ_max) of the plan ``search`` scores, without scoring it (no TTFT, no stability limit): what
    a caller that needs only the fluid bound (sizing's pre-filter) pays for."""
    if model.n_local < 1:
        raise InfeasibleError("pd_decode: the local pool has no instances")
    if model.n_local <= exhaustive_splits:
        n_p = np.arange(0, model.n_local)
        found = best_thresholds(model, n_p, resolution_tokens)
    else:
        n_p, found = _best_splits(model, resolution_tokens)
    t_best, f_best = found.threshold_tokens, found.prefill_req_per_s
    decode = (model.n_local - n_p) * model.decode_req_per_s_per_instance
    lam = np.fmin(f_best, decode)
    if not np.any(lam > 0):
        raise InfeasibleError("no threshold and split carries load: every plan leaves a routed stage without capacity")
    top = np.max(lam)
    ties = np.flatnonzero(lam >= top * (1 - 1e-12))
    k = int(ties[np.argmax(f_best[ties])])
    return float(t_best[k]), int(n_p[k]), float(top)


def _best_splits(model: StageModel, resolution_tokens: float) -> tuple[np.ndarray, ThresholdSearch]:
    """The splits whose threshold search could hold the best Λ, with that search (rows in split order).

    Λ(N_p) = min(F*(N_p), D(N_p)) with F* = max_t F(t, N_p) and D = (N_local - N_p) · decode per instance.
    F(t, N_p) = min(A(t), N_p / ((1 - p) T_local(l_short))) never decreases with N_p, so neither does F*,
    and every split of an interval [a, b] has Λ <= min(U(b), D(a)), U(b) the proven upper bound on F*(b)
    from ``best_thresholds``. Branch and bound on that: each round cuts every open interval into 16, runs the
    threshold search on the splits at the sub-intervals' upper ends (raising the incumbent, the best Λ of a
    searched split), and keeps a sub-interval only if its bound beats the incumbent times 1 + 1e-9, the gap
    ``best_thresholds`` itself proves. About 16 · log16(N_local) splits are searched instead of N_local.
    """
    n = model.n_local
    per_decode = model.decode_req_per_s_per_instance
    searched: dict[int, tuple[float, float, float]] = {}

    def run(rows: np.ndarray) -> None:
        rows = np.setdiff1d(rows, np.fromiter(searched, dtype=np.int64, count=len(searched)))
        if rows.size == 0:
            return
        found = best_thresholds(model, rows, resolution_tokens)
        for i, row in enumerate(rows.tolist()):
            searched[row] = (
                float(found.threshold_tokens[i]),
                float(found.prefill_req_per_s[i]),
                float(found.prefill_bound_req_per_s[i]),
            )

    def incumbent() -> float:
        return max(min(f, (n - row) * per_decode) for row, (_, f, _) in searched.items())

    first, last = np.zeros(1, dtype=np.int64), np.full(1, n - 1, dtype=np.int64)
    run(last)
    cuts = np.arange(_SPLIT_CELLS + 1)
    while first.size:
        width = last - first + 1
        edges = first[:, None] + (width[:, None] * cuts) // _SPLIT_CELLS
        a, b = edges[:, :-1], edges[:, 1:] - 1
        present = b >= a
        a, b = a[present], b[present]
        run(distinct_sorted(b))
        best = incumbent()
        bound = np.fmin([searched[row][2] for row in b.tolist()], (n - a) * per_decode)
        open_ = (bound > best * (1 + _BOUND_RTOL)) & (b > a)
        first, last = a[open_], b[open_]
    rows = np.array(sorted(searched), dtype=np.int64)
    t, f, u = (np.array([searched[row][i] for row in rows.tolist()]) for i in range(3))
    return rows, ThresholdSearch(threshold_tokens=t, prefill_req_per_s=f, prefill_bound_req_per_s=u)
