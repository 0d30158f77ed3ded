"""The goodput search: the threshold and split with the most goodput (``best_goodput_plan``), and the best plan
at a fixed rate (``best_plan_at_rate``, sizing's question), over the goodput laws of ``latency.goodput``.

The search over (t, N_p) reuses the throughput search's structure: the splits on a grid of thresholds spaced
by the length distribution's quantiles (every split of a small pool, a branch and bound over intervals of
splits for a large one, so that its cost grows with the logarithm of the pool), then nested grids around the
best cells.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.latency.goodput import (
    SEARCH_GRID_POINTS,
    goodput_brackets,
    goodput_rates,
    slack_setup,
)
from prfaas_plan.latency.stages import RouteMoments, route_moments, stability_limit_req_per_s
from prfaas_plan.latency.unloaded import (
    local_mass_below,
    offload_mass_below,
    route_latency,
)
from prfaas_plan.lengths import distinct_sorted
from prfaas_plan.spec.plan import TtftSlo
from prfaas_plan.throughput import STAGES, StageModel, decode_floor

Array = NDArray[np.float64]

# While searching: 1e-6 of the limit and fewer midpoint-rule points per route (the winner is re-scored
# with RATE_RTOL and the full grid).
_SEARCH_RATE_RTOL = 1e-6
# Candidates scored first to bound the best goodput from below (those with the largest stability limits).
_PROBE_CANDIDATES = 8
_COARSE_THRESHOLDS = 33
_REFINE_POINTS = 17
# Splits whose coarse goodput is within this fraction of the best are refined.
_REFINE_ROWS = 2
#: Pools of at most this many local instances have every split scored on the coarse threshold grid; larger
#: ones are searched by branch and bound over intervals of splits (``_split_search``).
EXHAUSTIVE_SPLITS = 64
# The branch and bound cuts each interval of splits it cannot discard into this many per round, discards
# an interval whose bound is at most the best goodput times 1 + _GAP_RTOL (the optimality gap it proves),
# and brackets every goodput it scores to _BOUND_RATE_RTOL of the plan's stability limit, well inside the gap.
_SPLIT_CELLS = 16
_GAP_RTOL = 1e-6
_BOUND_RATE_RTOL = 1e-9


def _coarse_thresholds(model: StageModel) -> Array:
    lengths = model.lengths
    inner = np.asarray(lengths.quantile(np.linspace(0.0, 1.0, _COARSE_THRESHOLDS)), dtype=np.float64)
    below_all = min(0.0, lengths.lower_tokens - 1.0)
    return distinct_sorted(np.concatenate(([below_all], inner, [lengths.upper_tokens])))


# Thresholds on which ``_rate_thresholds`` looks for the plans that can carry a rate.
_FEASIBLE_SCAN = 257


@frozen
class ThresholdScan:
    """The fine threshold scan of a fixed-rate search (``threshold_scan``): everything in it that depends on
    neither the instance counts nor the rate, for one deployment's curves, link bandwidth and SLO, so that a
    caller asking about many instance counts on one link computes it once."""

    thresholds: Array
    moments: RouteMoments
    zero_load: Array
    bandwidth_bytes_per_s: float
    ttft_slo_s: float


def threshold_scan(model: StageModel, ttft_slo_s: float) -> ThresholdScan:
    """``_FEASIBLE_SCAN`` quantile-spaced thresholds (plus one below every length and the longest), their route
    moments and the empty system's P(TTFT <= X) at each."""
    lengths = model.lengths
    scan = distinct_sorted(
        np.concatenate(
            (
                [min(0.0, lengths.lower_tokens - 1.0)],
                np.asarray(lengths.quantile(np.linspace(0.0, 1.0, _FEASIBLE_SCAN)), dtype=np.float64),
                [lengths.upper_tokens],
            )
        )
    )
    route = route_latency(model)
    unloaded = local_mass_below(lengths, route, scan, ttft_slo_s)
    if route.offload_prefill is not None:
        unloaded = unloaded + offload_mass_below(lengths, route, scan, ttft_slo_s)
    return ThresholdScan(
        thresholds=scan,
        moments=route_moments(model, scan),
        zero_load=np.asarray(unloaded, dtype=np.float64),
        bandwidth_bytes_per_s=model.link_bandwidth_bytes_per_s,
        ttft_slo_s=float(ttft_slo_s),
    )


def _rate_thresholds(model: StageModel, rate: float, quantile: float, scan: ThresholdScan) -> tuple[Array, float]:
    """The coarse thresholds of a fixed-rate search, and the best zero-load P(TTFT <= X) of the scan.

    ``_COARSE_THRESHOLDS`` thresholds, evenly spaced in rank over those of the scan at which some plan can
    carry ``rate`` (the empty system meets the SLO, the PrfaaS pool and the link are stable at the rate, and
    the local pool has room for the prefill and decode instances the rate needs); the usual coarse grid when
    there is none (then nothing carries). The zero-load figure covers the whole scan, so that it does not
    depend on the instance counts.

    On a large deployment the thresholds that carry a rate can form a window narrower than the spacing of
    the usual grid (the PrfaaS pool needs t high, the SLO needs t low), which a search on that grid misses.
    """
    moments, unloaded = scan.moments, scan.zero_load
    decode = float(decode_floor(model, rate))
    local_need = rate * (1.0 - moments.offload_fraction) * moments.local_mean_s
    prefill = np.where(local_need > 0, np.floor(local_need) + 1.0, 0.0)
    _, stage = stability_limit_req_per_s(model, moments, np.maximum(prefill, 1.0), np.asarray(decode))
    ok = (
        (unloaded >= quantile)
        & (np.asarray(stage["prfaas_compute"]) > rate)
        & (np.asarray(stage["prfaas_link"]) > rate)
        & (prefill + decode <= model.n_local)
    )
    zero_load = float(np.max(unloaded))
    if not np.any(ok):
        return _coarse_thresholds(model), zero_load
    feasible = scan.thresholds[ok]
    picks = distinct_sorted(np.round(np.linspace(0, feasible.size - 1, _COARSE_THRESHOLDS)).astype(np.int64))
    return feasible[picks], zero_load


def best_goodput_plan(
    model: StageModel,
    slo: TtftSlo,
    *,
    resolution_tokens: float = 10.0,
    decode_service_scv: float = 0.0,
    thresholds: ArrayLike | None = None,
    exhaustive_splits: int = EXHAUSTIVE_SPLITS,
) -> tuple[float, int, float]:
    """(t, N_p, goodput) maximising goodput over thresholds and splits N_p in 0..N_local-1 (req/s).

    ``thresholds`` restricts t to given values (no refinement), e.g. the upper end of the length range for
    a pool that prefills everything locally. Otherwise: a quantile-spaced coarse grid x the splits, then
    nested grids around the best threshold of the best two splits until the bracket is narrower than
    ``resolution_tokens``.

    On the coarse grid, a pool of at most ``exhaustive_splits`` local instances has every split bounded:
    goodput never exceeds the stability limit, so once some plans are scored, a candidate whose limit is
    below the best goodput found cannot win and is not scored. A larger pool is searched by branch and bound
    over intervals of splits (``_split_search``), whose cost grows with the logarithm of the pool.
    """
    fixed = thresholds is not None
    grid = np.asarray(thresholds, dtype=np.float64).ravel() if fixed else _coarse_thresholds(model)

    def score(t: Array, n_p: Array) -> Array:
        rates, _, _ = goodput_rates(
            model,
            t,
            n_p,
            slo,
            decode_service_scv=decode_service_scv,
            rate_rtol=_SEARCH_RATE_RTOL,
        )
        return rates

    if model.n_local <= exhaustive_splits:
        cell, split, rates = _every_split(model, grid, score)
    else:
        cell, split, rates = _split_search(model, grid, slo, decode_service_scv)
    # Scored plans in threshold-major order: ties go to the smallest threshold, then the smallest split.
    order = np.lexsort((split, cell))
    cell, split, rates = cell[order], split[order], rates[order]
    k = int(np.argmax(rates))
    best = (float(grid[cell[k]]), int(split[k]), float(rates[k]))
    if fixed or grid.size < 3 or best[2] <= 0:
        return best
    rows, best_cell = _best_rows(cell, split, rates)
    positive = np.array([np.max(rates[split == r]) > 0 for r in rows], dtype=bool)
    rows, best_cell = rows[positive], best_cell[positive]
    return _refine(grid, rows, best_cell, best, resolution_tokens, score)


def _refine(
    grid: Array,
    rows: NDArray[np.int64],
    best_cell: NDArray[np.int64],
    best: tuple[float, int, float],
    resolution_tokens: float,
    score: Callable[[Array, Array], Array],
) -> tuple[float, int, float]:
    """Nested threshold grids around each row's best coarse cell, until the bracket is narrower than
    ``resolution_tokens``: ``_REFINE_POINTS`` candidates per row, the bracket shrunk around the best one each
    round. ``score(t, n_p)`` (arrays of one shape) is maximised; returns the best (t, N_p, score)."""
    lo = grid[np.maximum(best_cell - 1, 0)]
    hi = grid[np.minimum(best_cell + 1, grid.size - 1)]
    fractions = np.linspace(0.0, 1.0, _REFINE_POINTS)
    picks = np.arange(rows.size)
    while np.max(hi - lo) > resolution_tokens:
        cand = lo[:, None] + (hi - lo)[:, None] * fractions[None, :]
        r = score(cand, np.broadcast_to(rows[:, None].astype(np.float64), cand.shape))
        idx = np.argmax(r, axis=1)
        top = r[picks, idx]
        for row in picks:
            if top[row] > best[2]:
                best = (float(cand[row, idx[row]]), int(rows[row]), float(top[row]))
        step = (hi - lo) / (_REFINE_POINTS - 1)
        centre = cand[picks, idx]
        lo = np.maximum(centre - step, lo)
        hi = np.minimum(centre + step, hi)
    return best


def best_plan_at_rate(
    model: StageModel,
    rate_req_per_s: float,
    slo: TtftSlo,
    *,
    resolution_tokens: float = 10.0,
    decode_service_scv: float = 0.0,
    thresholds: ArrayLike | None = None,
    exhaustive_splits: int = EXHAUSTIVE_SPLITS,
    scan: ThresholdScan | None = None,
) -> tuple[float, int, float, float]:
    """(t, N_p, slack, best zero-load P(TTFT <= X)) of the plan with the most SLO margin at one rate: slack =
    P_Λ(TTFT <= X) - q, maximised over thresholds and splits N_p in 0..N_local-1. The model's deployment
    carries Λ (goodput >= Λ, the search's mean-stretch law) if and only if the slack is >= 0, up to the
    threshold grid's resolution.

    What ``best_goodput_plan`` searches, at a fixed rate: one slack evaluation per candidate instead of a
    bisection on the rate, for callers that ask "does it carry Λ?" (sizing). The coarse grid is quantile-spaced
    over the thresholds at which some plan can carry the rate (``_rate_thresholds``), with every split of a
    pool of at most ``exhaustive_splits`` local instances and a branch and bound over intervals of splits for
    a larger one (``_splits_at_rate``), then nested grids around the best threshold of the best two splits.
    A plan past its stability limit scores -1 - (q - P(TTFT <= X at zero load)), below every stable plan.
    ``scan`` (``threshold_scan`` of a model with the same curves, link and SLO) saves recomputing it.
    """
    fixed = thresholds is not None
    rate = float(rate_req_per_s)
    ttft_slo_s, quantile = slo.limit_s, slo.quantile
    seen: list[float] = []
    if fixed:
        grid = np.asarray(thresholds, dtype=np.float64).ravel()
    else:
        if scan is None:
            scan = threshold_scan(model, ttft_slo_s)
        elif scan.bandwidth_bytes_per_s != model.link_bandwidth_bytes_per_s or scan.ttft_slo_s != ttft_slo_s:
            raise ValueError("best_plan_at_rate: the threshold scan was made for another link or SLO")
        grid, scan_zero_load = _rate_thresholds(model, rate, quantile, scan)
        seen.append(scan_zero_load)

    def plans(t: Array, n_p: Array, n_d: Array) -> Array:
        slack, limit, unloaded, feasible, shape = slack_setup(
            model, t, n_p, n_d, slo, decode_service_scv, SEARCH_GRID_POINTS
        )
        seen.append(float(np.max(unloaded, initial=0.0)))
        value = np.where(feasible & (rate < limit), slack(np.full(limit.shape, rate)), -1.0 - (quantile - unloaded))
        return np.asarray(value, dtype=np.float64).reshape(shape)

    def margin(t: Array, n_p: Array) -> Array:
        return plans(t, n_p, model.n_local - np.asarray(n_p, dtype=np.float64))

    if model.n_local <= exhaustive_splits:
        t_cand, n_cand = np.meshgrid(grid, np.arange(model.n_local, dtype=np.float64), indexing="ij")
        cell, split = (a.ravel() for a in np.meshgrid(np.arange(grid.size), np.arange(model.n_local), indexing="ij"))
        values = margin(t_cand, n_cand).ravel()
    else:
        cell, split, values = _splits_at_rate(model, grid, rate, plans)
    order = np.lexsort((split, cell))
    cell, split, values = cell[order], split[order], values[order]
    k = int(np.argmax(values))
    best = (float(grid[cell[k]]), int(split[k]), float(values[k]))
    if fixed or grid.size < 3:
        return (*best, max(seen))
    rows, best_cell = _best_rows(cell, split, values)
    best = _refine(grid, rows, best_cell, best, resolution_tokens, margin)
    return (*best, max(seen))


def _best_rows(
    cell: NDArray[np.int64], split: NDArray[np.int64], values: Array
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The ``_REFINE_ROWS`` splits with the best scored values (ties: the smaller split) and, for each, the
    first threshold cell (in grid order) of its best value. Plans must be in threshold-major order."""
    splits, which = np.unique(split, return_inverse=True)
    row_best = np.full(splits.size, -np.inf)
    np.maximum.at(row_best, which, values)
    top_rows = np.argsort(-row_best, kind="stable")[:_REFINE_ROWS]
    best_cell = np.array([cell[which == r][np.argmax(values[which == r])] for r in top_rows], dtype=np.int64)
    return splits[top_rows].astype(np.int64), best_cell


def _split_limits(model: StageModel, grid: Array) -> tuple[Array, Array, Array, NDArray[np.int64]]:
    """Stability limits of every (threshold of ``grid``, split N_p in 0..N_local-1): (the plan's limit, the
    limit of the stages that rise with N_p, that of pd_decode, which falls with it, and each threshold's split
    of largest limit). pd_prefill grows with N_p, pd_decode with N_d, the rest do not depend on the split, so
    an interval [a, b] of splits has largest limit at most min(rising at b, falling at a)."""
    n = model.n_local
    splits = np.arange(n, dtype=np.float64)
    moments = route_moments(model, grid[:, None])
    limit, stage_limits = stability_limit_req_per_s(model, moments, splits[None, :], n - splits[None, :])
    limit = np.where(np.isfinite(limit), limit, 0.0)
    rising = np.fmin.reduce([np.asarray(stage_limits[s]) for s in STAGES if s != "pd_decode"])
    falling = np.asarray(stage_limits["pd_decode"])
    return limit, rising, falling, np.argmax(limit, axis=1)


def _cut(
    cell: NDArray[np.int64], first: NDArray[np.int64], last: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Each interval [first, last] of splits (of threshold ``cell``) cut into up to ``_SPLIT_CELLS`` non-empty
    ones: (cell, a, b) per piece."""
    cuts = np.arange(_SPLIT_CELLS + 1)
    width = last - first + 1
    edges = first[:, None] + (width[:, None] * cuts) // _SPLIT_CELLS
    a, b = edges[:, :-1], edges[:, 1:] - 1
    parent = np.broadcast_to(np.arange(cell.size)[:, None], a.shape)
    present = b >= a
    return cell[parent[present]], a[present], b[present]


def _probes(
    cell: NDArray[np.int64], a: NDArray[np.int64], b: NDArray[np.int64], peak: NDArray[np.int64], n: int
) -> tuple[NDArray[np.int64], NDArray[np.bool_], NDArray[np.int64], Array, Array]:
    """What one round of a split branch and bound scores in one call: the real plan at ``pick`` (the split of
    largest limit) of every interval, then the bounding plan (N_p = b, N_d = n - a) of each wide one. Returns
    (pick, wide, the plans' threshold cells, N_p, N_d)."""
    pick = np.clip(peak[cell], a, b)
    wide = b > a
    n_p = np.concatenate((pick, b[wide])).astype(np.float64)
    n_d = np.concatenate((n - pick, n - a[wide])).astype(np.float64)
    return pick, wide, np.concatenate((cell, cell[wide])), n_p, n_d


def _splits_at_rate(
    model: StageModel, grid: Array, rate: float, plans: Callable[[Array, Array, Array], Array]
) -> tuple[NDArray[np.int64], NDArray[np.int64], Array]:
    """Branch and bound over intervals of splits at one rate, for every coarse threshold at once: the scored
    plans (threshold cell, split, value), ``plans(t, N_p, N_d)`` giving each plan's value.

    Bound. P_Λ(TTFT <= X) never falls when N_p or N_d grows (every stage's wait law is stochastically
    non-increasing in its servers; see ``_split_search``), and neither does a stability limit, so every
    split of [a, b] scores at most the plan (t, N_p = b, N_d = N_local - a). An interval whose bounding plan
    is unstable at the rate holds only unstable plans, which score no better than the threshold's probe.

    Search. Each threshold's split with the largest stability limit is scored first (a probe per
    threshold, and the incumbent); then each round cuts every open interval into up to 16, drops those that
    are unstable or bounded at most the incumbent plus ``_GAP_RTOL``, and scores the split of largest limit
    in each one left. Rounds grow with log16(N_local).
    """
    n = model.n_local
    _, rising, falling, peak = _split_limits(model, grid)
    scored_cell, scored_split, scored_value = [], [], []

    def record(cell: NDArray[np.int64], split: NDArray[np.int64], value: Array) -> float:
        scored_cell.append(cell)
        scored_split.append(split)
        scored_value.append(value)
        return float(max(np.max(v, initial=-np.inf) for v in scored_value))

    cell = np.arange(grid.size, dtype=np.int64)
    best = record(cell, peak, plans(grid, peak.astype(np.float64), n - peak.astype(np.float64)))
    first = np.zeros(grid.size, dtype=np.int64)
    last = np.full(grid.size, n - 1, dtype=np.int64)
    while cell.size:
        cell, a, b = _cut(cell, first, last)
        stable = np.fmin(rising[cell, b], falling[cell, a]) > rate
        cell, a, b = cell[stable], a[stable], b[stable]
        if cell.size == 0:
            break
        pick, wide, cells, n_p, n_d = _probes(cell, a, b, peak, n)
        value = plans(grid[cells], n_p, n_d)
        best = record(cell, pick, value[: cell.size])
        open_ = value[cell.size :] > best + _GAP_RTOL
        cell, first, last = cell[wide][open_], a[wide][open_], b[wide][open_]
    return np.concatenate(scored_cell), np.concatenate(scored_split), np.concatenate(scored_value)


def _every_split(
    model: StageModel, grid: Array, score: Callable[[Array, Array], Array]
) -> tuple[NDArray[np.int64], NDArray[np.int64], Array]:
    """Every (threshold cell, split) of the coarse grid with its goodput (0 where pruned by the stability
    limit: such a plan cannot beat the best scored one)."""
    n = model.n_local
    t_cand, n_cand = (a.ravel() for a in np.meshgrid(grid, np.arange(n, dtype=np.float64), indexing="ij"))
    moments = route_moments(model, t_cand)
    limits, _ = stability_limit_req_per_s(model, moments, n_cand, n - n_cand)
    limits = np.where(np.isfinite(limits), limits, 0.0)
    order = np.argsort(-limits, kind="stable")
    rates = np.zeros(t_cand.shape)
    probe = order[:_PROBE_CANDIDATES]
    rates[probe] = score(t_cand[probe], n_cand[probe])
    rest = order[_PROBE_CANDIDATES:]
    rest = rest[limits[rest] > np.max(rates)]
    if rest.size:
        rates[rest] = score(t_cand[rest], n_cand[rest])
    cell, split = np.divmod(np.arange(t_cand.size, dtype=np.int64), n)
    return cell, split, rates


def _split_search(
    model: StageModel, grid: Array, slo: TtftSlo, decode_service_scv: float
) -> tuple[NDArray[np.int64], NDArray[np.int64], Array]:
    """Branch and bound over intervals of splits, for every coarse threshold at once: the scored plans
    (threshold cell, split, goodput).

    Bound. Every stage's wait law is stochastically non-increasing in its number of servers (Erlang C and
    Whitt's conditional mean both fall as servers are added at a fixed load), so P_Λ(TTFT <= X) never falls
    when N_p or N_d grows, and neither does the goodput. Every split N_p in [a, b] has N_p <= b and
    N_local - N_p <= N_local - a, so its goodput is at most that of the plan (t, N_p = b, N_d = N_local - a),
    which has more instances than exist; the upper end of that plan's bracket bounds the interval. (On a
    single split the bound is the plan's own goodput.)

    Search. The splits with the largest stability limits are scored first (an incumbent); every threshold
    starts with one interval, 0..N_local-1. Each round cuts every open interval into up to 16, drops those
    whose stability limit or bound is at most the incumbent times 1 + ``_GAP_RTOL``, and scores the split
    of largest stability limit in each one left (raising the incumbent). No split is skipped that could beat
    the result by more than that gap; rounds grow with log16(N_local), and each scores a number of plans
    set by how many splits come within the gap of the optimum, not by the pool.
    """
    n = model.n_local
    limit, rising, falling, peak = _split_limits(model, grid)

    def score(cell: NDArray[np.int64], n_p: Array, n_d: Array) -> tuple[Array, Array]:
        low, high, _, _ = goodput_brackets(
            model,
            grid[cell],
            n_p,
            n_d,
            slo,
            decode_service_scv=decode_service_scv,
            rate_rtol=_BOUND_RATE_RTOL,
        )
        return low, high

    scored_cell, scored_split, scored_rate = [], [], []

    def record(cell: NDArray[np.int64], split: NDArray[np.int64], rate: Array) -> float:
        scored_cell.append(cell)
        scored_split.append(split)
        scored_rate.append(rate)
        return float(max(np.max(r, initial=0.0) for r in scored_rate))

    probe = np.argsort(-limit.ravel(), kind="stable")[:_PROBE_CANDIDATES]
    cell, split = np.divmod(probe, n)
    best = record(cell, split, score(cell, split.astype(np.float64), n - split.astype(np.float64))[0])
    cell = np.arange(grid.size, dtype=np.int64)
    first = np.zeros(grid.size, dtype=np.int64)
    last = np.full(grid.size, n - 1, dtype=np.int64)
    keep = np.max(limit, axis=1) > best * (1 + _GAP_RTOL)
    cell, first, last = cell[keep], first[keep], last[keep]
    while cell.size:
        cell, a, b = _cut(cell, first, last)
        stability = np.fmin(rising[cell, b], falling[cell, a])
        alive = stability > best * (1 + _GAP_RTOL)
        cell, a, b = cell[alive], a[alive], b[alive]
        if cell.size == 0:
            break
        pick, wide, cells, n_p, n_d = _probes(cell, a, b, peak, n)
        low, high = score(cells, n_p, n_d)
        best = record(cell, pick, low[: cell.size])
        bound = high[cell.size :]
        open_ = bound > best * (1 + _GAP_RTOL)
        cell, first, last = cell[wide][open_], a[wide][open_], b[wide][open_]
    return np.concatenate(scored_cell), np.concatenate(scored_split), np.concatenate(scored_rate)
