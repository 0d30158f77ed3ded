"""The global plan of a topology: per PD cluster j a threshold t_j and prefill/decode split, and the share of
its long requests (L > t_j) prefilled at each PrfaaS cluster k, maximising the common scale factor λ of every
region's rate r_j (all regions carry λ · r_j together, at their own traffic mix).

The per-request costs are the stage model's (``throughput``, paper Eqs. 1-8), priced for every pair (j, k) by
``stage_model`` on the pair's 1 x 1 scenario (``spec.topology.pair_scenario``): PrfaaS prefill T_k(l_long,j) and
KV size S_k(l_long,j) at the region's l_long = E[L | L > t_j], local prefill T_j(l_short,j), decode capacity per
instance θ_j. At fixed thresholds the plan is the linear programme

    max λ  s.t.  Σ_k y_jk = λ r_j p_j                    (every long request of region j goes to some site)
                 Σ_j y_jk T_k(l_long,j) <= N_k           (PrfaaS k: prefill seconds per second)
                 0 <= y_jk <= B_jk / S_k(l_long,j)        (link j-k: KV bytes per second; no link: y_jk = 0)
                 λ r_j <= Λ_local,j(t_j)                  (PD j: the best integer split, below)

with y_jk the long requests per second of region j prefilled at k. The local pool is private to its region, so
its best integer split is exact in closed form: Λ_local,j = max over N_p in 0..N_j-1 of min(N_p / ((1 - p_j)
T_j(l_short,j)), (N_j - N_p) θ_j) (Eqs. 4-5), a concave piecewise-linear function of N_p whose integer maximum
is next to the crossing. The LP is solved by HiGHS (scipy.optimize.linprog) and is exact at fixed thresholds.

The outer search over the thresholds (one per PD cluster) is a coordinate search: each region's threshold in
turn over a grid of its length quantiles (grid points that its own bounds cannot lift above the incumbent are
skipped), then polished between the neighbours of the best grid point (the crossing of the region's local bound
with the rest of the LP, to 1e-9 relative, else golden section). It is a heuristic; its answer comes with a
proven upper bound over every threshold (``topology_bound``): a relaxation in which each region may split its
traffic over the cells between grid points, each priced with its cell's most favourable ends (p at the high
end, l_long and l_short at the low end: every cost is monotone in t for non-decreasing curves) and the local
split relaxed to continuous. gap = bound / λ - 1.

On a 1 x 1 topology the LP is Eq. 6 at the threshold (min of PrfaaS compute, link and the local pool's best
split), so the search maximises the function ``optimize.throughput_search.search`` maximises; see
tests/topology/test_exact.py for how closely the two agree on the paper's scenario.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InfeasibleError
from prfaas_plan.lengths import LengthDistribution
from prfaas_plan.optimize.topology_lp import RoutingLP, SolverError
from prfaas_plan.spec.topology import Topology, pair_scenario
from prfaas_plan.throughput import StageModel, routing, stage_model

Array = NDArray[np.float64]

#: Quantile points per region in the coordinate search's grid (plus one below every length and the longest).
GRID_POINTS = 65
#: A candidate must beat the incumbent by this relative margin to be accepted (no cycling on rounding).
IMPROVE_RTOL = 1e-12
#: Coordinate sweeps at most (each visits every region once); the search stops at the first sweep without
#: an improvement.
MAX_SWEEPS = 4
#: The bound LP's default grid is the finest (up to 4x the search's) that keeps it near this many columns.
BOUND_LP_COLUMNS = 20_000
#: Golden-section steps of the polish where no crossing is bracketed.
GOLDEN_STEPS = 30


@frozen
class TopologyModel:
    """What the global plan needs of a topology, priced once: per region (PD cluster, index j) its stage model
    and rate, per linked pair (index p) the PrfaaS site's stage model, and the capacities as arrays.

    ``pair_region[p]``, ``pair_site[p]``: the region and PrfaaS site of pair p; ``bandwidth_bytes_per_s[p]`` its
    link. Instance counts are floats so that an alternative may split a site (no sharing)."""

    topology: Topology
    regions: tuple[str, ...]
    sites: tuple[str, ...]
    rate_req_per_s: Array
    local: tuple[StageModel, ...]
    pair_region: NDArray[np.int64]
    pair_site: NDArray[np.int64]
    pair_model: tuple[StageModel, ...]
    bandwidth_bytes_per_s: Array
    site_instances: Array
    local_instances: NDArray[np.int64]

    @property
    def n_regions(self) -> int:
        """J, the number of PD clusters."""
        return len(self.regions)

    @property
    def n_sites(self) -> int:
        """K, the number of PrfaaS clusters."""
        return len(self.sites)


def topology_model(topology: Topology) -> TopologyModel:
    """Price every region and linked pair with the stage model (``throughput.stage_model`` on the pair's 1 x 1
    scenario). InfeasibleError when a PD cluster cannot decode within the TPOT SLO."""
    regions = tuple(c.name for c in topology.pd_clusters)
    sites = tuple(c.name for c in topology.prfaas_clusters)
    cache: dict[tuple[str, str], StageModel] = {}

    def priced(pd: str, prfaas: str) -> StageModel:
        if (pd, prfaas) not in cache:
            link = topology.link(prfaas, pd)
            bandwidth = 1.0 if link is None else link.bandwidth_bytes_per_s  # unlinked: only local parts read
            try:
                cache[(pd, prfaas)] = stage_model(pair_scenario(topology, pd, prfaas, bandwidth))
            except InfeasibleError as exc:
                raise InfeasibleError([f"{pd}: {r}" for r in exc.reasons]) from None
        return cache[(pd, prfaas)]

    pair_region, pair_site, pair_model, bandwidth = [], [], [], []
    local = []
    for j, pd in enumerate(regions):
        linked = [k for k, site in enumerate(sites) if topology.link(site, pd) is not None]
        local.append(priced(pd, sites[linked[0] if linked else 0]))
        for k in linked:
            link = topology.link(sites[k], pd)
            assert link is not None
            pair_region.append(j)
            pair_site.append(k)
            pair_model.append(priced(pd, sites[k]))
            bandwidth.append(link.bandwidth_bytes_per_s)
    clusters = topology.by_name
    return TopologyModel(
        topology=topology,
        regions=regions,
        sites=sites,
        rate_req_per_s=np.array([topology.traffic_of(pd).rate_req_per_s for pd in regions], dtype=np.float64),
        local=tuple(local),
        pair_region=np.array(pair_region, dtype=np.int64),
        pair_site=np.array(pair_site, dtype=np.int64),
        pair_model=tuple(pair_model),
        bandwidth_bytes_per_s=np.array(bandwidth, dtype=np.float64),
        site_instances=np.array([clusters[s].pool.instances for s in sites], dtype=np.float64),
        local_instances=np.array([clusters[pd].pool.instances for pd in regions], dtype=np.int64),
    )


# ------------------------------------------------------------------------------------------ region terms


@frozen
class RegionTerms:
    """One region's side of the LP at thresholds t (arrays over t): offload fraction p, the local pool's
    bound Λ_local (req/s of the region's whole traffic, best integer split) and that split N_p, and per
    linked pair of the region (rows) the PrfaaS seconds and KV bytes of one long request."""

    threshold_tokens: Array
    offload_fraction: Array
    local_bound_req_per_s: Array
    n_pd_prefill: NDArray[np.int64]
    site_seconds_per_req: Array
    kv_bytes_per_req: Array


def _local_split(model: StageModel, p: Array, short_tokens: Array) -> tuple[Array, NDArray[np.int64]]:
    """Λ_local = max over integer N_p in 0..N-1 of min(N_p a, (N - N_p) θ), a = 1/((1 - p) T(l_short)) (inf
    when p = 1: nothing is prefilled locally), and the N_p that attains it (the crossing's floor or ceiling)."""
    n = int(model.n_local)
    theta = model.decode_req_per_s_per_instance
    has_short = p < 1
    l_short = np.where(has_short, short_tokens, model.lengths.mean_tokens)
    with np.errstate(divide="ignore"):
        per_prefill = np.where(has_short, 1.0 / ((1.0 - p) * model.local_prefill(l_short)), np.inf)
    crossing = np.where(np.isfinite(per_prefill), n * theta / (per_prefill + theta), 0.0)
    best = np.full(p.shape, -np.inf)
    split = np.zeros(p.shape, dtype=np.int64)
    for candidate in (np.floor(crossing), np.ceil(crossing)):
        n_p = np.clip(candidate, 0, n - 1)
        with np.errstate(invalid="ignore"):
            prefill = np.where(has_short, n_p * per_prefill, np.inf)
        value = np.fmin(prefill, (n - n_p) * theta)
        better = value > best
        best = np.where(better, value, best)
        split = np.where(better, n_p.astype(np.int64), split)
    return best, split


def region_terms(tm: TopologyModel, j: int, thresholds: Array) -> RegionTerms:
    """Region j's LP coefficients at every threshold of ``thresholds`` (the stage model's, Eqs. 3-5)."""
    model = tm.local[j]
    t = np.asarray(thresholds, dtype=np.float64)
    route = routing(model.lengths, t)
    p = route.offload_fraction
    bound, split = _local_split(model, p, route.short_tokens)
    pairs = np.flatnonzero(tm.pair_region == j)
    l_long = np.where(p > 0, route.long_tokens, model.lengths.mean_tokens)
    seconds = np.array([tm.pair_model[q].prfaas_prefill(l_long) for q in pairs]).reshape(pairs.size, t.size)
    kv = np.array([tm.pair_model[q].kv_bytes(l_long) for q in pairs]).reshape(pairs.size, t.size)
    return RegionTerms(
        threshold_tokens=t,
        offload_fraction=p,
        local_bound_req_per_s=bound,
        n_pd_prefill=split,
        site_seconds_per_req=seconds,
        kv_bytes_per_req=kv,
    )


def region_grid(lengths: LengthDistribution, points: int = GRID_POINTS) -> Array:
    """Thresholds spaced by the length distribution's quantiles, from below every length (everything
    offloaded) to the longest (nothing offloaded)."""
    below_all = min(0.0, lengths.lower_tokens - 1.0)
    inner = np.asarray(lengths.quantile(np.linspace(0.0, 1.0, points)), dtype=np.float64)
    return np.unique(np.concatenate(([below_all], inner, [lengths.upper_tokens])))


# --------------------------------------------------------------------------------------------- the LP


@frozen
class Routing:
    """The LP's optimum at fixed thresholds: λ, and per linked pair the long requests per second (at λ)."""

    scale: float
    pair_req_per_s: Array


def _column(terms: Sequence[RegionTerms], i: int) -> tuple[Array, Array, Array, Array]:
    """(p, Λ_local, PrfaaS seconds per pair, KV bytes per pair) of every region at its i-th threshold."""
    p = np.array([t.offload_fraction[i] for t in terms])
    bound = np.array([t.local_bound_req_per_s[i] for t in terms])
    seconds = np.concatenate([t.site_seconds_per_req[:, i] for t in terms]) if terms else np.zeros(0)
    kv = np.concatenate([t.kv_bytes_per_req[:, i] for t in terms]) if terms else np.zeros(0)
    return p, bound, seconds, kv


def routing_lp(tm: TopologyModel) -> RoutingLP:
    """A warm-started HiGHS instance of ``tm``'s routing LP (``optimize.topology_lp``)."""
    return RoutingLP(tm.pair_region, tm.pair_site, tm.n_regions, tm.site_instances)


def lp_units(tm: TopologyModel) -> tuple[float, Array]:
    """The units the LPs are solved in, powers of two (exact to multiply by): λ's, about λ's ceiling λ_0 =
    min_j N_j θ_j / r_j (every region decodes locally), and each region's request rates', about λ_0 r_j. In
    them every region's flows are of order one whatever its rate, so that a region whose rate is far from the
    others' (1e6 beside 1e-8 req/s) keeps the LP's coefficients within a few orders of magnitude: unscaled,
    HiGHS called such LPs unbounded."""
    rates = tm.rate_req_per_s
    with np.errstate(divide="ignore", invalid="ignore"):
        ceiling = (
            np.array([n * m.decode_req_per_s_per_instance for n, m in zip(tm.local_instances, tm.local, strict=True)])
            / rates
        )
    usable = ceiling[np.isfinite(ceiling) & (ceiling > 0)]
    lam0 = float(np.min(usable)) if usable.size else 1.0
    region = lam0 * rates
    region = np.where(np.isfinite(region) & (region > 0), region, 1.0)
    return float(2.0 ** np.round(np.log2(lam0))), np.asarray(2.0 ** np.round(np.log2(region)), dtype=np.float64)


def solve_routing(
    tm: TopologyModel,
    p: Array,
    local_bound: Array,
    seconds: Array,
    kv: Array,
    lp: RoutingLP | None = None,
    units: tuple[float, Array] | None = None,
) -> Routing:
    """The LP of the module docstring at one threshold per region (given as each region's p and Λ_local and
    each pair's T_k and S_k there, pairs in ``tm``'s order). HiGHS, in ``lp_units`` (λ = u_λ μ, y_q = u_j z_q:
    the region rows divided by u_j); exact."""
    n_pairs = tm.pair_region.size
    rates = tm.rate_req_per_s
    cap = float(np.min(local_bound / rates))
    long_rate = rates * p
    if not np.any(long_rate > 0):
        return Routing(scale=cap, pair_req_per_s=np.zeros(n_pairs))
    if n_pairs == 0:
        return Routing(scale=0.0, pair_req_per_s=np.zeros(n_pairs))
    unit, region_unit = units or lp_units(tm)
    pair_unit = region_unit[tm.pair_region]
    x = (lp or routing_lp(tm)).solve(
        long_rate * unit / region_unit, cap / unit, seconds * pair_unit, tm.bandwidth_bytes_per_s / kv / pair_unit
    )
    return Routing(scale=max(float(x[0]) * unit, 0.0), pair_req_per_s=np.maximum(x[1:] * pair_unit, 0.0))


def routing_at(tm: TopologyModel, thresholds: Array) -> tuple[Routing, list[RegionTerms]]:
    """The LP's optimum at one threshold per region."""
    terms = [region_terms(tm, j, np.array([thresholds[j]])) for j in range(tm.n_regions)]
    return solve_routing(tm, *_column(terms, 0)), terms


# ---------------------------------------------------------------------------------- coordinate search


@frozen
class SearchResult:
    """A threshold per region and the LP's λ there, with the number of LPs solved."""

    thresholds: Array
    scale: float
    lp_solves: int


class _Evaluator:
    """λ(t) with region j's threshold varied and the others fixed, counting LP solves. Holds the LP's current
    coefficients (each region's p and Λ_local, each pair's T and S) and one warm HiGHS instance."""

    def __init__(self, tm: TopologyModel, thresholds: Array) -> None:
        self.tm = tm
        self.t = thresholds.astype(np.float64).copy()
        terms = [region_terms(tm, j, self.t[j : j + 1]) for j in range(tm.n_regions)]
        self.p, self.bound, self.seconds, self.kv = _column(terms, 0)
        self.pairs = [np.flatnonzero(tm.pair_region == j) for j in range(tm.n_regions)]
        self.solves = 0
        self.lp = routing_lp(tm)
        self.units = lp_units(tm)

    def _with(self, j: int, terms: RegionTerms, i: int) -> tuple[Array, Array, Array, Array]:
        p, bound, seconds, kv = self.p.copy(), self.bound.copy(), self.seconds.copy(), self.kv.copy()
        p[j] = terms.offload_fraction[i]
        bound[j] = terms.local_bound_req_per_s[i]
        seconds[self.pairs[j]] = terms.site_seconds_per_req[:, i]
        kv[self.pairs[j]] = terms.kv_bytes_per_req[:, i]
        return p, bound, seconds, kv

    def value_at(self, j: int, terms: RegionTerms, i: int, without_local: bool = False) -> float:
        """λ with region j at the i-th threshold of ``terms`` (its local bound dropped if ``without_local``)."""
        p, bound, seconds, kv = self._with(j, terms, i)
        if without_local:
            bound[j] = np.inf
        self.solves += 1
        return solve_routing(self.tm, p, bound, seconds, kv, self.lp, self.units).scale

    def value(self, j: int, t: float, without_local: bool = False) -> float:
        """λ with region j at threshold t."""
        return self.value_at(j, region_terms(self.tm, j, np.array([t])), 0, without_local)

    def set_at(self, j: int, terms: RegionTerms, i: int) -> None:
        """Move region j to the i-th threshold of ``terms``."""
        self.t[j] = terms.threshold_tokens[i]
        self.p, self.bound, self.seconds, self.kv = self._with(j, terms, i)

    def set(self, j: int, t: float) -> None:
        """Move region j to threshold t."""
        self.set_at(j, region_terms(self.tm, j, np.array([t])), 0)


def _own_bound(tm: TopologyModel, j: int, terms: RegionTerms) -> Array:
    """An upper bound on λ from region j alone at each threshold of ``terms``: its local pool, and its long
    requests over every linked site and link as if it had them to itself."""
    rate = tm.rate_req_per_s[j]
    pairs = np.flatnonzero(tm.pair_region == j)
    sites = tm.site_instances[tm.pair_site[pairs]][:, None]
    per_pair = np.fmin(
        sites / terms.site_seconds_per_req, tm.bandwidth_bytes_per_s[pairs][:, None] / terms.kv_bytes_per_req
    )
    offload_capacity = per_pair.sum(axis=0) if pairs.size else np.zeros(terms.offload_fraction.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        offload = np.where(terms.offload_fraction > 0, offload_capacity / (rate * terms.offload_fraction), np.inf)
    return np.asarray(np.fmin(terms.local_bound_req_per_s / rate, offload))


def _polish(ev: _Evaluator, j: int, lo: float, hi: float, best: float) -> tuple[float, float]:
    """The best threshold of region j in [lo, hi] found by locating the crossing of its local bound with the
    LP without it (where λ peaks when one rises and the other falls), else by golden section."""
    from scipy.optimize import brentq

    tm = ev.tm
    rate = float(tm.rate_req_per_s[j])

    def gap(t: float) -> float:
        local = float(region_terms(tm, j, np.array([t])).local_bound_req_per_s[0]) / rate
        return local - ev.value(j, t, without_local=True)

    found_t, found = ev.t[j], best
    g_lo, g_hi = gap(lo), gap(hi)
    if np.isfinite(g_lo) and np.isfinite(g_hi) and g_lo > 0 > g_hi:
        root = float(brentq(gap, lo, hi, xtol=1e-12 * max(abs(hi), 1.0), rtol=1e-15, maxiter=200))
        for t in (root, float(np.nextafter(root, lo))):
            value = ev.value(j, t)
            if value > found * (1 + IMPROVE_RTOL):
                found_t, found = t, value
        return found_t, found
    ratio = (np.sqrt(5.0) - 1.0) / 2.0
    a, b = lo, hi
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = ev.value(j, c), ev.value(j, d)
    for _ in range(GOLDEN_STEPS):
        if fc >= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = ev.value(j, c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = ev.value(j, d)
    for t, value in ((c, fc), (d, fd)):
        if value > found * (1 + IMPROVE_RTOL):
            found_t, found = t, value
    return found_t, found


def coordinate_search(
    tm: TopologyModel,
    seeds: Sequence[Array],
    *,
    grid_points: int = GRID_POINTS,
    max_sweeps: int = MAX_SWEEPS,
    stop_at: float = np.inf,
) -> SearchResult:
    """Thresholds maximising the LP's λ, one region at a time, from the best of ``seeds`` (one threshold per
    region each). Never below the best seed's λ: a move is taken only when it raises λ. Stops early once λ
    reaches ``stop_at`` (a proven upper bound: nothing is left to find).

    A region's step evaluates its grid points in decreasing order of the bound its own capacities put on λ
    (its local pool, and every linked site and link to itself) and stops at the first whose bound is below
    the best found. Sweeps repeat until one brings no gain; then one sweep polishes every region's threshold
    between its grid neighbours."""
    if not seeds:
        raise ValueError("coordinate_search needs at least one seed")
    best_seed, best = seeds[0], -1.0
    solves = 0
    for seed in seeds:
        value = routing_at(tm, seed)[0].scale
        solves += 1
        if value > best:
            best_seed, best = seed, value
    ev = _Evaluator(tm, np.asarray(best_seed, dtype=np.float64))
    grids = [region_grid(tm.local[j].lengths, grid_points) for j in range(tm.n_regions)]
    grid_terms = [region_terms(tm, j, grids[j]) for j in range(tm.n_regions)]
    region_bounds = [_own_bound(tm, j, grid_terms[j]) for j in range(tm.n_regions)]
    linked = sorted({int(j) for j in tm.pair_region})

    def done() -> bool:
        return best >= stop_at * (1 - 1e-12)

    for _ in range(max_sweeps):
        start = best
        for j in linked:  # a region without a site keeps its threshold above every length
            if done():
                break
            grid = grids[j]
            for i in np.argsort(-region_bounds[j], kind="stable"):
                if not region_bounds[j][i] > best * (1 + IMPROVE_RTOL):
                    break
                value = ev.value_at(j, grid_terms[j], int(i))
                if value > best * (1 + IMPROVE_RTOL):
                    best = value
                    ev.set_at(j, grid_terms[j], int(i))
        if done() or not best > start * (1 + IMPROVE_RTOL) or len(linked) == 1:
            break
    for j in linked:  # one polishing sweep, between each region's grid neighbours
        if done():
            break
        grid = grids[j]
        i = int(np.searchsorted(grid, ev.t[j]))
        lo, hi = float(grid[max(i - 1, 0)]), float(grid[min(i + 1, grid.size - 1)])
        if hi > lo:
            t, value = _polish(ev, j, lo, hi, best)
            if value > best * (1 + IMPROVE_RTOL):
                best = value
                ev.set(j, t)
    return SearchResult(thresholds=ev.t.copy(), scale=best, lp_solves=solves + ev.solves)


# ---------------------------------------------------------------------------------------- the bound


@frozen
class Bound:
    """The relaxation's optimum: the bound on λ, and per region the two ends of the grid cell carrying the
    most of its traffic there (seeds for the search)."""

    scale: float
    heaviest_cell_tokens: tuple[tuple[float, float], ...]


def topology_bound(tm: TopologyModel, grid_points: int = GRID_POINTS, *, points: bool = False) -> Bound:
    """A proven upper bound on λ over every threshold vector and integer split (see the module docstring):
    each region splits its traffic a_jg >= 0 (Σ_g a_jg = λ r_j) over the cells [t_g, t_g+1] of its grid; a
    cell is priced with p(t_g+1), l_long(t_g) and l_short(t_g), the least each cost can be inside it, and the
    local pool twice: by instance-seconds, Σ_g a_jg ((1 - p) T_j(l_short) + 1/θ_j) <= N_j (the split relaxed),
    and by its best integer split time-shared, Σ_g a_jg / Λ_local,j(t_g) <= 1 (a pure threshold in cell g
    carries λ r_j <= Λ_local,j(t) <= Λ_local,j(t_g)).

    ``points=True`` prices the grid's points themselves instead of its cells: the same LP over mixtures of
    grid thresholds, no longer a bound between grid points but the best coordinated mixture, whose heaviest
    point per region seeds the search.

    Solved as it is first; where HiGHS finds no optimum (it called the LP unbounded when one region's rate was
    orders of magnitude from the others'), again in ``lp_units`` (λ = u_λ μ, a_jg = u_j a'_jg, y_jkg = u_j
    y'_jkg; region j's equality rows divided by u_j). The same optimum; the first is kept where it solves so
    that the seeds it gives the search (a degenerate LP's vertex) stay those of earlier releases. SolverError
    when neither solves."""
    try:
        return _bound_lp(tm, grid_points, points, (1.0, np.ones(tm.n_regions)))
    except SolverError:
        return _bound_lp(tm, grid_points, points, lp_units(tm))


def _bound_lp(tm: TopologyModel, grid_points: int, points: bool, units: tuple[float, Array]) -> Bound:
    """``topology_bound``'s LP, with λ in units of ``units[0]`` and region j's flows in units of
    ``units[1][j]``."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_array

    rows: list[NDArray[Any]] = []
    cols: list[NDArray[Any]] = []
    vals: list[NDArray[Any]] = []
    eq_rows: list[NDArray[Any]] = []
    eq_cols: list[NDArray[Any]] = []
    eq_vals: list[NDArray[Any]] = []
    ub_b: list[float] = []
    upper: list[Array] = [np.array([np.inf])]
    cells_of: list[tuple[NDArray[Any], Array, Array]] = []
    n_var = 1
    n_ub = tm.n_sites
    n_eq = 0
    ub_b.extend(tm.site_instances.tolist())
    unit, region_unit = units
    for j in range(tm.n_regions):
        model = tm.local[j]
        u = float(region_unit[j])
        grid = region_grid(model.lengths, grid_points)
        lo_t, hi_t = (grid, grid) if points else (grid[:-1], grid[1:])
        route_lo = routing(model.lengths, lo_t)
        p_hi = np.asarray(model.lengths.sf(hi_t), dtype=np.float64)
        p_lo = route_lo.offload_fraction
        l_short = np.where(p_lo < 1, route_lo.short_tokens, model.lengths.mean_tokens)
        local_cost = np.where(p_lo < 1, (1.0 - p_lo) * model.local_prefill(l_short), 0.0)
        local_cost = local_cost + 1.0 / model.decode_req_per_s_per_instance
        l_long = np.where(p_lo > 0, route_lo.long_tokens, model.lengths.mean_tokens)
        cells = lo_t.size
        a = n_var + np.arange(cells)
        cells_of.append((a, lo_t, hi_t))
        n_var += cells
        upper.append(np.full(cells, np.inf))
        # Σ_g a_jg - λ r_j = 0
        eq_rows += [np.full(cells + 1, n_eq)]
        eq_cols += [np.concatenate(([0], a))]
        eq_vals += [np.concatenate(([-tm.rate_req_per_s[j] * unit / u], np.ones(cells)))]
        n_eq += 1
        # local instance-seconds
        rows.append(np.full(cells, n_ub))
        cols.append(a)
        vals.append(local_cost * u)
        ub_b.append(float(tm.local_instances[j]))
        n_ub += 1
        # the best integer split, time-shared: Σ_g a_jg / Λ_local(t_g) <= 1 (Λ_local never rises with t)
        integer_bound = _local_split(model, p_lo, route_lo.short_tokens)[0]
        usable = integer_bound > 0
        rows.append(np.full(int(usable.sum()), n_ub))
        cols.append(a[usable])
        vals.append(u / integer_bound[usable])
        ub_b.append(1.0)
        n_ub += 1
        upper[-1] = np.where(usable, np.inf, 0.0)
        pairs = np.flatnonzero(tm.pair_region == j)
        flows = []
        for q in pairs:
            y = n_var + np.arange(cells)
            n_var += cells
            upper.append(np.full(cells, np.inf))
            flows.append(y)
            pm = tm.pair_model[q]
            rows.append(np.full(cells, int(tm.pair_site[q])))
            cols.append(y)
            vals.append(np.asarray(pm.prfaas_prefill(l_long), dtype=np.float64) * u)
            rows.append(np.full(cells, n_ub))
            cols.append(y)
            vals.append(np.asarray(pm.kv_bytes(l_long), dtype=np.float64) * u)
            ub_b.append(float(tm.bandwidth_bytes_per_s[q]))
            n_ub += 1
        # Σ_k y_jkg - p(t_g+1) a_jg = 0, one row per cell
        cell_rows = n_eq + np.arange(cells)
        n_eq += cells
        eq_rows.append(cell_rows)
        eq_cols.append(a)
        eq_vals.append(-p_hi)
        for y in flows:
            eq_rows.append(cell_rows)
            eq_cols.append(y)
            eq_vals.append(np.ones(cells))
    a_ub = coo_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n_ub, n_var)).tocsr()
    a_eq = coo_array(
        (np.concatenate(eq_vals), (np.concatenate(eq_rows), np.concatenate(eq_cols))), shape=(n_eq, n_var)
    ).tocsr()
    objective = np.zeros(n_var)
    objective[0] = -1.0
    bounds = np.column_stack((np.zeros(n_var), np.concatenate(upper)))
    result = linprog(
        objective, A_ub=a_ub, b_ub=np.array(ub_b), A_eq=a_eq, b_eq=np.zeros(n_eq), bounds=bounds, method="highs"
    )
    if result.status != 0:
        raise SolverError("bound LP (the upper bound on the scale factor)", str(result.message))
    x = np.asarray(result.x, dtype=np.float64)
    heaviest = []
    for a, lo_t, hi_t in cells_of:
        g = int(np.argmax(x[a]))
        heaviest.append((float(lo_t[g]), float(hi_t[g])))
    return Bound(scale=float(-result.fun) * unit, heaviest_cell_tokens=tuple(heaviest))


# ------------------------------------------------------------------------------------ plans and views


@frozen
class RegionPlan:
    """One PD cluster's part of a plan: threshold, split, the rate it carries at λ and where its long
    requests go (site -> req/s)."""

    cluster: str
    threshold_tokens: float
    offload_fraction: float
    n_pd_prefill: int
    n_pd_decode: int
    carried_req_per_s: float
    local_bound_req_per_s: float
    long_req_per_s_by_site: dict[str, float] = field(default_factory=dict)

    @property
    def shares(self) -> dict[str, float]:
        """Share of the region's long requests prefilled at each site."""
        total = sum(self.long_req_per_s_by_site.values())
        return {k: (v / total if total > 0 else 0.0) for k, v in self.long_req_per_s_by_site.items()}


@frozen
class LinkLoad:
    """A link's load at λ: long requests per second over it, KV bytes per second and utilisation."""

    prfaas: str
    pd: str
    req_per_s: float
    kv_bytes_per_s: float
    bandwidth_bytes_per_s: float

    @property
    def utilization(self) -> float:
        """KV bytes per second over the bandwidth."""
        return self.kv_bytes_per_s / self.bandwidth_bytes_per_s


@frozen
class TopologyPlan:
    """A plan for the whole topology at its common scale factor λ (every region carries λ · r_j)."""

    label: str
    scale: float
    regions: tuple[RegionPlan, ...]
    links: tuple[LinkLoad, ...]
    site_utilization: dict[str, float]
    lp_solves: int = 0

    @property
    def throughput_req_per_s(self) -> float:
        """Σ_j λ r_j: what all regions carry together."""
        return sum(r.carried_req_per_s for r in self.regions)


def plan_at(tm: TopologyModel, thresholds: Array, label: str, lp_solves: int = 0) -> TopologyPlan:
    """The plan (routing, splits, loads) the LP gives at ``thresholds``; InfeasibleError when it carries
    nothing."""
    found, terms = routing_at(tm, thresholds)
    if not found.scale > 0:
        raise InfeasibleError(f"{label}: no load can be carried at these thresholds (a region with no capacity)")
    lam = found.scale
    seconds, kv = _column(terms, 0)[2:]
    regions = []
    for j, pd in enumerate(tm.regions):
        pairs = np.flatnonzero(tm.pair_region == j)
        n_p = int(terms[j].n_pd_prefill[0])
        regions.append(
            RegionPlan(
                cluster=pd,
                threshold_tokens=float(thresholds[j]),
                offload_fraction=float(terms[j].offload_fraction[0]),
                n_pd_prefill=n_p,
                n_pd_decode=int(tm.local_instances[j]) - n_p,
                carried_req_per_s=lam * float(tm.rate_req_per_s[j]),
                local_bound_req_per_s=float(terms[j].local_bound_req_per_s[0]),
                long_req_per_s_by_site={tm.sites[int(tm.pair_site[q])]: float(found.pair_req_per_s[q]) for q in pairs},
            )
        )
    links = tuple(
        LinkLoad(
            prfaas=tm.sites[int(tm.pair_site[q])],
            pd=tm.regions[int(tm.pair_region[q])],
            req_per_s=float(found.pair_req_per_s[q]),
            kv_bytes_per_s=float(found.pair_req_per_s[q] * kv[q]),
            bandwidth_bytes_per_s=float(tm.bandwidth_bytes_per_s[q]),
        )
        for q in range(tm.pair_region.size)
    )
    busy = np.zeros(tm.n_sites)
    np.add.at(busy, tm.pair_site, found.pair_req_per_s * seconds)
    return TopologyPlan(
        label=label,
        scale=lam,
        regions=tuple(regions),
        links=links,
        site_utilization={
            s: float(busy[k] / tm.site_instances[k]) if tm.site_instances[k] > 0 else 0.0
            for k, s in enumerate(tm.sites)
        },
        lp_solves=lp_solves,
    )


def restricted(tm: TopologyModel, keep: NDArray[np.bool_]) -> TopologyModel:
    """The model with only the linked pairs where ``keep`` is true."""
    index = np.flatnonzero(keep)
    return replace(
        tm,
        pair_region=tm.pair_region[index],
        pair_site=tm.pair_site[index],
        pair_model=tuple(tm.pair_model[q] for q in index),
        bandwidth_bytes_per_s=tm.bandwidth_bytes_per_s[index],
    )


def region_only(tm: TopologyModel, j: int, site_instances: Array) -> TopologyModel:
    """Region j alone, with ``site_instances`` (per site) of PrfaaS capacity to itself."""
    keep = tm.pair_region == j
    sub = restricted(tm, keep)
    return replace(
        sub,
        regions=(tm.regions[j],),
        rate_req_per_s=tm.rate_req_per_s[j : j + 1],
        local=(tm.local[j],),
        pair_region=np.zeros(sub.pair_region.size, dtype=np.int64),
        site_instances=np.asarray(site_instances, dtype=np.float64),
        local_instances=tm.local_instances[j : j + 1],
    )


def upper_thresholds(tm: TopologyModel) -> Array:
    """Every region's longest length: nothing offloaded."""
    return np.array([m.lengths.upper_tokens for m in tm.local], dtype=np.float64)


@frozen
class GlobalSearch:
    """The best thresholds found, λ there, the proven bound and the LPs solved."""

    thresholds: Array
    scale: float
    bound: float
    lp_solves: int

    @property
    def gap(self) -> float:
        """bound / λ - 1: how far the true optimum may be above the plan."""
        return self.bound / self.scale - 1.0 if self.scale > 0 else float("inf")


def global_search(
    tm: TopologyModel, seeds: Sequence[Array] = (), *, grid_points: int = GRID_POINTS, bound_grid_points: int = 0
) -> GlobalSearch:
    """The bound (``topology_bound`` on ``bound_grid_points``, default up to 4x the search's grid), then the
    coordinate search from the best of ``seeds``, nothing offloaded and the ends of the relaxation's heaviest
    cells; unless that reaches the bound, a second coordinate search from each region's heaviest grid point in
    the best mixture of grid thresholds (``topology_bound(points=True)``); the better of the two."""
    if not bound_grid_points:  # finer where the bound LP stays small (about BOUND_LP_COLUMNS columns)
        per_cell = tm.pair_region.size + tm.n_regions
        bound_grid_points = max(grid_points, min(4 * grid_points, BOUND_LP_COLUMNS // max(per_cell, 1)))
    bound = topology_bound(tm, bound_grid_points)
    unlinked = np.ones(tm.n_regions, dtype=bool)
    unlinked[tm.pair_region] = False
    upper = upper_thresholds(tm)
    cells = np.array(bound.heaviest_cell_tokens)
    mixture = np.array(topology_bound(tm, grid_points, points=True).heaviest_cell_tokens)[:, 0]
    candidates = [upper, np.where(unlinked, upper, cells[:, 0]), np.where(unlinked, upper, cells[:, 1]), *seeds]
    runs = [coordinate_search(tm, candidates, grid_points=grid_points, stop_at=bound.scale)]
    if runs[0].scale < bound.scale * (1 - 1e-9):  # a second start, from the coordinated mixture's points
        seed = np.where(unlinked, upper, mixture)
        runs.append(coordinate_search(tm, [seed], grid_points=grid_points, stop_at=bound.scale))
    found = max(runs, key=lambda r: r.scale)
    solves = sum(r.lp_solves for r in runs)
    return GlobalSearch(thresholds=found.thresholds, scale=found.scale, bound=bound.scale, lp_solves=solves)
