"""The distribution of TTFT under load, composed from the stage laws of ``stages`` and the route curves of ``unloaded``.

A request of uncached length L on route r (offloaded: L > t; local: L <= t) sees

    TTFT = W_r + W_d + g_r(L)

where W_r is the wait of its prefill pool, W_d the wait for a decode slot, and g_r(L) the zero-wait latency
of ``unloaded.RouteLatency`` (prefill + visible transfer [+ first decode step]) with the offloaded transfer
stretched by the link's sharing factor κ. W_r and W_d are taken as independent, each an atom at zero plus
an exponential. Then for x >= 0

    P(TTFT <= x, r) = P(W_r = 0) P(W_d = 0) · P(g_r(L) <= x, r) + E[G_r(x - g_r(L)); r]

with G_r(y) = P(0 < W_r + W_d <= y) (a mixture of two exponentials and their hypoexponential
convolution, closed form). The first term is the zero-load CDF of ``unloaded`` (exact inversion of the
monotone route curve), so at zero load the whole law reduces to ``unloaded.unloaded_ttft`` exactly. The second
is an expectation over L of a continuous function, evaluated by the midpoint rule on an equal-probability
grid of the route's conditional length law. The overall law is the mixture of the two routes. The mean is
closed form: E[g_r(L); r] from ``unloaded.route_mean_s`` plus the mean waits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
from numpy.typing import ArrayLike, NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.latency.link_spread import ps_alone_probability, ps_sojourn, sojourn_nodes
from prfaas_plan.latency.stages import (
    RouteMoments,
    StageState,
    Wait,
    route_moments,
    stability_limit_req_per_s,
    stage_state,
)
from prfaas_plan.latency.unloaded import (
    TTFT_LEVELS,
    RouteLatency,
    local_mass_below,
    offload_mass_below,
    route_latency,
    route_mean_s,
    solve_quantiles,
    ttft_bracket,
)
from prfaas_plan.lengths import LengthDistribution
from prfaas_plan.spec.plan import Plan
from prfaas_plan.throughput import STAGES, StageModel

Array = NDArray[np.float64]

#: With a busy link, offloaded lengths on this many grid points, each with the transfer's sojourn law as
#: this many nodes (``link_spread.sojourn_nodes``: slices narrowing toward the tail, so P99 falls among
#: several of them).
SOJOURN_GRID_POINTS = 512
_MIN_SPREAD_UTILIZATION = 1e-9
SOJOURN_NODES = 16
#: Midpoint-rule points per route for E[G(x - g(L))] of one plan: the integrand is continuous in the
#: length quantile; tests/latency/test_distribution.py checks the result against sampling.
GRID_POINTS = 2048
# Waits are bounded by their quantile at this level when bracketing TTFT quantiles.
_WAIT_BOUND_LEVEL = 1.0 - 1e-9
# Two conditional-wait means closer than this (relative) are treated as equal (Erlang-2 convolution).
_EQUAL_MEANS_RTOL = 1e-6
ROUTES = ("offloaded", "local")


def length_grid(lengths: LengthDistribution, lower: ArrayLike, upper: ArrayLike, points: int) -> Array:
    """Midpoints of ``points`` equal-probability cells of L | lower < L <= upper (tokens, trailing axis).

    u_i = F(lower) + (i - 1/2)/n · (F(upper) - F(lower)), L_i = F^-1(u_i); any length where the interval
    carries no mass (the caller weights it by zero).
    """
    a = np.asarray(lengths.cdf(np.asarray(lower, dtype=np.float64)), dtype=np.float64)[..., None]
    b = np.asarray(lengths.cdf(np.asarray(upper, dtype=np.float64)), dtype=np.float64)[..., None]
    u = a + (np.arange(points) + 0.5) / points * (b - a)
    return np.asarray(lengths.quantile(np.clip(u, 0.0, 1.0)), dtype=np.float64)


def positive_wait_cdf(y: Array, first: Wait, second: Wait) -> Array:
    """G(y) = P(0 < W1 + W2 <= y) for independent atom-plus-exponential waits (0 for y <= 0).

    P(W1 + W2 > y) = π1(1-π2) e^{-y/m1} + (1-π1)π2 e^{-y/m2} + π1π2 H(y), with the hypoexponential
    survival H(y) = (m1 e^{-y/m1} - m2 e^{-y/m2}) / (m1 - m2) (Erlang-2 e^{-y/m}(1 + y/m) when m1 = m2).
    Wait parameters carry a trailing axis of length 1 against the grid axis of ``y``.
    """
    p1, p2 = first.p_wait[..., None], second.p_wait[..., None]
    m1 = np.where(p1 > 0, first.conditional_mean_s[..., None], 1.0)
    m2 = np.where(p2 > 0, second.conditional_mean_s[..., None], 1.0)
    y_pos = np.maximum(y, 0.0)
    e1 = np.exp(-y_pos / m1)
    e2 = np.exp(-y_pos / m2)
    equal = np.abs(m1 - m2) <= _EQUAL_MEANS_RTOL * np.maximum(m1, m2)
    m_avg = 0.5 * (m1 + m2)
    difference = np.where(equal, 1.0, m1 - m2)
    hypo = np.where(equal, np.exp(-y_pos / m_avg) * (1.0 + y_pos / m_avg), (m1 * e1 - m2 * e2) / difference)
    survival = p1 * (1.0 - p2) * e1 + (1.0 - p1) * p2 * e2 + p1 * p2 * hypo
    positive = 1.0 - (1.0 - p1) * (1.0 - p2)
    return np.asarray(np.where(y > 0, np.maximum(positive - survival, 0.0), 0.0), dtype=np.float64)


@frozen
class RouteSpread:
    """E[G(x - g(L)); route] / P(route) for one plan: the weighted mean of G(x - g_i) over the route's zero-wait
    latencies g_i (weights w_i summing to 1: equal on the length grid, or grid × link-sojourn nodes).

    With scalar wait laws, Σ_{g_i < x} w_i e^{-(x - g_i)/m} = exp(LSE_{g_i < x}(g_i/m + ln w_i) - x/m) where LSE
    is a prefix log-sum-exp over the sorted latencies, so each x costs a binary search instead of n terms (and
    no term overflows). Nearly equal conditional means (the Erlang-2 case of ``positive_wait_cdf``) fall back
    to the direct sum. Build with ``route_spread``.
    """

    latency_s: Array
    weight: Array
    #: Σ_{j <= i} w_j over the sorted latencies.
    cumulative_weight: Array
    first: Wait
    second: Wait
    #: Prefix log-sum-exp of g_i / m + ln w_i for each conditional mean; None in the direct-sum case.
    prefix: tuple[Array, Array] | None

    def below(self, x_s: ArrayLike) -> Array:
        """Σ_{g_i <= x} w_i: the zero-wait law's CDF at x."""
        x = np.asarray(x_s, dtype=np.float64)
        index = np.searchsorted(self.latency_s, x, side="right")
        return np.where(index > 0, self.cumulative_weight[np.maximum(index - 1, 0)], 0.0)

    def mean(self, x_s: ArrayLike) -> Array:
        """Σ_i w_i G(x - g_i) elementwise over x (s in, probability out)."""
        x = np.asarray(x_s, dtype=np.float64)
        p1, p2 = float(self.first.p_wait), float(self.second.p_wait)
        if p1 == 0.0 and p2 == 0.0:
            return np.zeros(x.shape)
        if self.prefix is None:
            direct = positive_wait_cdf(x[..., None] - self.latency_s, self.first, self.second)
            return np.asarray(direct @ self.weight, dtype=np.float64)
        m1, m2 = _safe_mean(self.first), _safe_mean(self.second)
        below = np.searchsorted(self.latency_s, x, side="left")
        last = np.maximum(below - 1, 0)
        has = below > 0
        mass = np.where(has, self.cumulative_weight[last], 0.0)
        s1, s2 = (
            np.where(has, np.exp(np.minimum(prefix[last] - x / m, 0.0)), 0.0)
            for prefix, m in zip(self.prefix, (m1, m2), strict=True)
        )
        positive = 1.0 - (1.0 - p1) * (1.0 - p2)
        survival = p1 * (1.0 - p2) * s1 + (1.0 - p1) * p2 * s2 + p1 * p2 * (m1 * s1 - m2 * s2) / (m1 - m2)
        return np.asarray(np.maximum(positive * mass - survival, 0.0), dtype=np.float64)


def _safe_mean(wait: Wait) -> float:
    """The conditional mean, or 1 s where nothing waits (its terms then carry zero weight)."""
    return float(wait.conditional_mean_s) if float(wait.p_wait) > 0 else 1.0


def route_spread(latency_s: Array, first: Wait, second: Wait, weight: Array | None = None) -> RouteSpread:
    """A route's spread term from its (unsorted) zero-wait latencies, their weights (default: equal) and its
    two waits."""
    g, w = _sorted_latencies(latency_s, weight)
    return _spread(g, w, first, second)


def _sorted_latencies(latency_s: Array, weight: Array | None) -> tuple[Array, Array]:
    """Latencies (flattened) in increasing order (a stable sort) and their weights (default: equal)."""
    g = np.asarray(latency_s, dtype=np.float64).reshape(-1)
    w = np.full(g.size, 1.0 / g.size) if weight is None else np.asarray(weight, dtype=np.float64).reshape(-1)
    order = np.argsort(g, kind="stable")
    return g[order], w[order]


def _spread(g: Array, w: Array, first: Wait, second: Wait) -> RouteSpread:
    """``route_spread`` from latencies already sorted and their weights."""
    m1, m2 = _safe_mean(first), _safe_mean(second)
    prefix = None
    if abs(m1 - m2) > _EQUAL_MEANS_RTOL * max(m1, m2):
        with np.errstate(divide="ignore"):
            log_w = np.log(w)
        prefix = (np.logaddexp.accumulate(g / m1 + log_w), np.logaddexp.accumulate(g / m2 + log_w))
    return RouteSpread(latency_s=g, weight=w, cumulative_weight=np.cumsum(w), first=first, second=second, prefix=prefix)


@frozen
class TtftLaw:
    """The loaded TTFT law of one plan at one arrival rate (see the module docstring).

    ``local_part(x)`` and ``offload_part(x)`` give P(TTFT <= x, local) and P(TTFT <= x, offloaded). With a busy
    link (``offload_sojourn``) the offloaded zero-wait law is the weighted grid × sojourn-node set of
    ``offload_spread`` rather than the exact inversion of the mean-stretched route curve.
    """

    lengths: LengthDistribution
    route: RouteLatency
    threshold_tokens: float
    offload_fraction: float
    link_stretch: float
    local_atom: float
    offload_atom: float
    local_spread: RouteSpread
    offload_spread: RouteSpread
    offload_sojourn: bool = False
    #: (latency of the longest local length (s), its mass P(L <= min(t, max L))) from ``_local_top``, or None:
    #: every x at or above that latency has the whole local route below it, with no inversion of the curve.
    local_top: tuple[float, float] | None = None

    def local_part(self, x_s: ArrayLike) -> Array:
        """P(TTFT <= x, local) (unnormalised: the local route's probability at most)."""
        top = self.local_top
        x = np.asarray(x_s, dtype=np.float64)
        if top is not None and bool(np.all(x >= top[0])):
            zero_wait = np.full(x.shape, top[1])  # local_mass_below's value there, without its inversion
        else:
            zero_wait = local_mass_below(self.lengths, self.route, self.threshold_tokens, x_s)
        spread = (1.0 - self.offload_fraction) * self.local_spread.mean(x_s)
        return np.asarray(self.local_atom * zero_wait + spread, dtype=np.float64)

    def offload_part(self, x_s: ArrayLike) -> Array:
        """P(TTFT <= x, offloaded) (unnormalised: the offloaded route's probability at most)."""
        if self.offload_sojourn:
            zero_wait = self.offload_fraction * self.offload_spread.below(x_s)
        else:
            zero_wait = offload_mass_below(self.lengths, self.route, self.threshold_tokens, x_s, self.link_stretch)
        spread = self.offload_fraction * self.offload_spread.mean(x_s)
        return np.asarray(self.offload_atom * zero_wait + spread, dtype=np.float64)

    @property
    def offload_zero_wait_mean_s(self) -> float:
        """E[zero-wait TTFT | offloaded] over the weighted latencies (s)."""
        return float(self.offload_spread.latency_s @ self.offload_spread.weight)


def offload_sojourn_latencies(
    model: StageModel, moments: RouteMoments, state: StageState, grid: Array, arrival_scv: float
) -> tuple[Array, Array]:
    """Zero-wait TTFT of offloaded requests with the link's processor-sharing spread: for each grid length its
    transfer's sojourn law (``link_spread.ps_sojourn`` at the link's utilisation, work moments and the
    offloaded stream's arrival SCV; an atom at its own work when it has the link to itself) as
    ``SOJOURN_NODES`` nodes, composed with the prefill as the route does
    (after it, or overlapped layer-wise). Returns (latencies, weights) flattened, weights summing to 1."""
    route = route_latency(model)
    assert route.offload_prefill is not None and route.offload_kv_bytes is not None
    work = route.offload_kv_bytes(grid) / route.link_bandwidth_bytes_per_s
    prefill = route.offload_prefill(grid)[..., None]
    return _sojourn_latencies(route, moments, state, work, prefill, arrival_scv)


def _sojourn_latencies(
    route: RouteLatency, moments: RouteMoments, state: StageState, work: Array, prefill: Array, arrival_scv: float
) -> tuple[Array, Array]:
    """``offload_sojourn_latencies`` from the grid's link work (s) and prefill times (s, trailing axis of 1)."""
    rho = float(state.utilization["prfaas_link"])
    link = (rho, float(moments.link_mean_s), float(moments.link_scv), arrival_scv)
    mean, var = ps_sojourn(work, *link)
    alone = ps_alone_probability(work, *link)
    sojourn, node_weight = sojourn_nodes(mean, var, SOJOURN_NODES, work, atom_probability=alone)
    visible = prefill + sojourn if route.transfer == "after_prefill" else np.maximum(prefill, sojourn)
    latency = visible + route.offload_fixed_s
    weight = np.broadcast_to(node_weight / work.size, latency.shape)
    return latency.reshape(-1), weight.reshape(-1)


@frozen
class _RateFree:
    """The parts of one plan's TTFT law that do not depend on the arrival rate (route curves on the length
    grids), computed once so that a search over rates (``goodput._with_link_spread``) evaluates only what
    moves with the rate. Grids the law may not need are built on first use and kept in ``cache``."""

    model: StageModel
    moments: RouteMoments
    route: RouteLatency
    grid_points: int
    threshold_tokens: float
    offload_fraction: float
    #: The local route's zero-wait latencies on its length grid, sorted, with their (equal) weights.
    local_sorted_s: Array
    local_weight: Array
    local_top: tuple[float, float] | None
    cache: dict[str, tuple[Array, ...]]

    def mean_stretch_offload(self) -> Array:
        """The offloaded route's length grid of ``grid_points`` cells (tokens)."""
        if "plain" not in self.cache:
            lengths = self.model.lengths
            lo, hi = lengths.lower_tokens, lengths.upper_tokens
            self.cache["plain"] = (length_grid(lengths, max(self.threshold_tokens, lo - 1.0), hi, self.grid_points),)
        return self.cache["plain"][0]

    def sojourn_offload(self) -> tuple[Array, Array]:
        """(link work (s), prefill time (s, trailing axis of 1)) on the offloaded route's sojourn grid."""
        if "sojourn" not in self.cache:
            route = self.route
            assert route.offload_prefill is not None and route.offload_kv_bytes is not None
            lengths = self.model.lengths
            lo, hi = lengths.lower_tokens, lengths.upper_tokens
            grid = length_grid(lengths, max(self.threshold_tokens, lo - 1.0), hi, SOJOURN_GRID_POINTS)
            work = route.offload_kv_bytes(grid) / route.link_bandwidth_bytes_per_s
            self.cache["sojourn"] = (work, route.offload_prefill(grid)[..., None])
        work, prefill = self.cache["sojourn"]
        return work, prefill


def _rate_free(model: StageModel, moments: RouteMoments, grid_points: int) -> _RateFree:
    lengths = model.lengths
    route = route_latency(model)
    t = float(moments.threshold_tokens)
    local_grid = length_grid(lengths, lengths.lower_tokens - 1.0, t, grid_points)
    local_sorted, local_weight = _sorted_latencies(route.local_s(local_grid), None)
    return _RateFree(
        model=model,
        moments=moments,
        route=route,
        grid_points=grid_points,
        threshold_tokens=t,
        offload_fraction=float(moments.offload_fraction),
        local_sorted_s=local_sorted,
        local_weight=local_weight,
        local_top=_local_top(lengths, route, t),
        cache={},
    )


def _local_top(lengths: LengthDistribution, route: RouteLatency, threshold_tokens: float) -> tuple[float, float] | None:
    """(the local route's latency at its longest length min(t, max L) (s), P(L <= that length)): where x is at
    least the former, ``local_mass_below`` is the latter (as ``local_mass_below`` computes them: the same
    elementwise arithmetic on the same values). None where t is below every length (no local mass)."""
    lo, hi = lengths.lower_tokens, lengths.upper_tokens
    if not threshold_tokens >= lo:
        return None
    top = np.asarray([min(threshold_tokens, hi)], dtype=np.float64)
    latency = float(route.local_s(np.maximum(top, lo))[0])
    return latency, float(np.asarray(lengths.cdf(top), dtype=np.float64)[0])


def _law(parts: _RateFree, state: StageState) -> TtftLaw:
    """The TTFT law of one stable plan at the rate of ``state`` (scalar), from its rate-free parts."""
    model, route = parts.model, parts.route
    p = parts.offload_fraction
    stretch = float(state.link_stretch)
    # Below a utilisation of 1e-9 the spread is below a nanosecond per second of transfer: mean stretch only.
    sojourn = p > 0 and float(state.utilization["prfaas_link"]) > _MIN_SPREAD_UTILIZATION
    if sojourn:
        ca2_offload = p * model.interarrival_scv + (1.0 - p)
        work, prefill = parts.sojourn_offload()
        offload_latency, offload_weight = _sojourn_latencies(route, parts.moments, state, work, prefill, ca2_offload)
    else:
        offload_grid = parts.mean_stretch_offload()
        offload_latency = route.offload_s(offload_grid, stretch) if p > 0 else np.zeros_like(offload_grid)
        offload_weight = None
    decode_free = 1.0 - float(state.decode_wait.p_wait)
    return TtftLaw(
        lengths=model.lengths,
        route=route,
        threshold_tokens=parts.threshold_tokens,
        offload_fraction=p,
        link_stretch=stretch,
        local_atom=(1.0 - float(state.local_wait.p_wait)) * decode_free,
        offload_atom=(1.0 - float(state.prfaas_wait.p_wait)) * decode_free,
        local_spread=_spread(parts.local_sorted_s, parts.local_weight, state.local_wait, state.decode_wait),
        offload_spread=route_spread(offload_latency, state.prfaas_wait, state.decode_wait, offload_weight),
        offload_sojourn=sojourn,
        local_top=parts.local_top,
    )


def ttft_law(model: StageModel, moments: RouteMoments, state: StageState, grid_points: int = GRID_POINTS) -> TtftLaw:
    """Assemble the TTFT law of one stable plan (scalar moments and state) from its stage laws."""
    return _law(_rate_free(model, moments, grid_points), state)


# --------------------------------------------------------------------------------------------------------
# One plan at one rate: the report
# --------------------------------------------------------------------------------------------------------


@frozen
class TtftSummary:
    """Mean and percentiles of TTFT over requests (s)."""

    mean_s: float
    p50_s: float
    p90_s: float
    p99_s: float


@frozen
class LoadedTtft:
    """TTFT of one plan at arrival rate Λ, with every stage's utilisation.

    ``stable`` is False when some stage's utilisation is >= 1; then ``unstable_stage`` names the most loaded
    one and the TTFT fields are None (the queue grows without bound: there is no steady-state TTFT).
    ``by_route`` has "offloaded" and "local"; a route with no traffic is None. ``service_scv``: the SCV of
    one request's service time at each prefill pool ("prfaas_compute", "pd_prefill"; 0 for no traffic), for
    the checks of the validated domain (``profile.stationary_validity``).
    """

    rate_req_per_s: float
    utilization: Mapping[str, float]
    service_scv: Mapping[str, float]
    stable: bool
    unstable_stage: str | None
    stability_limit_req_per_s: float
    wait_mean_s: Mapping[str, float] | None
    ttft: TtftSummary | None
    by_route: Mapping[str, TtftSummary | None]


def _scalar(value: Array) -> float:
    return float(np.asarray(value).reshape(-1)[0])


def loaded_ttft(
    model: StageModel,
    plan: Plan,
    rate_req_per_s: float,
    *,
    decode_service_scv: float = 0.0,
    grid_points: int = GRID_POINTS,
) -> LoadedTtft:
    """TTFT mean, P50, P90 and P99 overall and per route for ``plan`` (t, N_p, N_d) at arrival rate Λ (req/s).

    N_prfaas is ``model.n_prfaas``. At Λ = 0 the result equals ``unloaded.unloaded_ttft`` (same settings) exactly.
    ``decode_service_scv``: SCV of a decode slot's holding time (that of the output length; 0 = fixed).
    """
    _check_rate(rate_req_per_s)
    moments = route_moments(model, np.asarray(float(plan.threshold_tokens)))
    state = stage_state(model, moments, plan.n_pd_prefill, plan.n_pd_decode, rate_req_per_s, decode_service_scv)
    limit, _ = stability_limit_req_per_s(model, moments, plan.n_pd_prefill, plan.n_pd_decode)
    utilization = {s: _scalar(state.utilization[s]) for s in STAGES}
    common = {
        "rate_req_per_s": float(rate_req_per_s),
        "utilization": utilization,
        "service_scv": {"prfaas_compute": _scalar(moments.prfaas_scv), "pd_prefill": _scalar(moments.local_scv)},
        "stability_limit_req_per_s": _scalar(limit),
    }
    if not bool(state.stable):
        worst = max(STAGES, key=lambda s: utilization[s])
        return LoadedTtft(
            **common,  # type: ignore[arg-type]
            stable=False,
            unstable_stage=worst,
            wait_mean_s=None,
            ttft=None,
            by_route=dict.fromkeys(ROUTES),
        )
    law = ttft_law(model, moments, state, grid_points)
    p = law.offload_fraction
    q = 1.0 - p
    local_mean, offload_mean = route_mean_s(model.lengths, law.route, law.threshold_tokens, law.link_stretch)
    if law.offload_sojourn:
        offload_mean = p * law.offload_zero_wait_mean_s
    w_offload = _scalar(state.prfaas_wait.mean_s)
    w_local = _scalar(state.local_wait.mean_s)
    w_decode = _scalar(state.decode_wait.mean_s)
    local_total = local_mean + q * (w_local + w_decode)
    offload_total = offload_mean + p * (w_offload + w_decode)
    low, high = _quantile_bracket(law, state)
    kinds = ["overall"] + (["offloaded"] if p > 0 else []) + (["local"] if q > 0 else [])
    kind_index = {k: i for i, k in enumerate(kinds)}
    n_levels = len(TTFT_LEVELS)

    # Rows come in blocks of n_levels per kind; each route is evaluated once, on the rows that need it
    # (every computation is elementwise, so the overall rows equal the unloaded model's at zero load).
    rows = {k: np.arange(i * n_levels, (i + 1) * n_levels) for i, k in enumerate(kinds)}
    local_rows = np.concatenate([rows["overall"], rows.get("local", rows["overall"][:0])])
    offload_rows = np.concatenate([rows["overall"], rows.get("offloaded", rows["overall"][:0])])

    def cdf(xs: Array) -> Array:
        local = np.zeros_like(xs)
        offload = np.zeros_like(xs)
        local[local_rows] = law.local_part(xs[local_rows])
        offload[offload_rows] = law.offload_part(xs[offload_rows])
        out = local + offload
        if p > 0:
            out[rows["offloaded"]] = offload[rows["offloaded"]] / p
        if q > 0:
            out[rows["local"]] = local[rows["local"]] / q
        return out

    levels = np.tile(np.asarray(TTFT_LEVELS), len(kinds))
    quantiles = solve_quantiles(cdf, levels, low, high).reshape(len(kinds), n_levels)

    def summary(kind: str, mean: float) -> TtftSummary:
        p50, p90, p99 = (float(v) for v in quantiles[kind_index[kind]])
        return TtftSummary(mean_s=mean, p50_s=p50, p90_s=p90, p99_s=p99)

    return LoadedTtft(
        **common,  # type: ignore[arg-type]
        stable=True,
        unstable_stage=None,
        wait_mean_s={
            "prfaas_compute": w_offload,
            "prfaas_link": _scalar(state.link_wait_mean_s),
            "pd_prefill": w_local,
            "pd_decode": w_decode,
        },
        ttft=summary("overall", local_total + offload_total),
        by_route={
            "offloaded": summary("offloaded", offload_total / p) if p > 0 else None,
            "local": summary("local", local_total / q) if q > 0 else None,
        },
    )


def _check_rate(rate_req_per_s: float) -> None:
    if not (rate_req_per_s >= 0.0 and np.isfinite(rate_req_per_s)):
        raise ValueError(f"rate_req_per_s must be a finite number >= 0, got {rate_req_per_s}")


def _quantile_bracket(law: TtftLaw, state: StageState) -> tuple[float, float]:
    """[low, high] (s) holding every TTFT quantile of the law: the zero-wait latencies' range, widened above by
    the waits' quantiles at 1 - 1e-9."""
    p = law.offload_fraction
    q = 1.0 - p
    low, high = ttft_bracket(law.lengths, law.route, law.threshold_tokens, law.link_stretch)
    if law.offload_sojourn:
        g = law.offload_spread.latency_s
        low, high = min(low, float(g[0])), max(high, float(g[-1]))
    tail = max(
        _scalar(state.prfaas_wait.quantile_s(_WAIT_BOUND_LEVEL)) if p > 0 else 0.0,
        _scalar(state.local_wait.quantile_s(_WAIT_BOUND_LEVEL)) if q > 0 else 0.0,
    ) + _scalar(state.decode_wait.quantile_s(_WAIT_BOUND_LEVEL))
    return low, high + tail


def ttft_quantile_at_rates(
    model: StageModel,
    plan: Plan,
    level: float,
    *,
    decode_service_scv: float = 0.0,
    grid_points: int = GRID_POINTS,
) -> Callable[[float], float | None]:
    """For one plan, the function Λ -> the ``level`` quantile of TTFT over all requests (s), None where the plan
    is unstable at Λ: the overall figure ``loaded_ttft`` reports at that level (the same numbers), without the
    means and the other quantiles, and with the law's rate-free parts (the length grids and the route curves
    on them) computed once for all the rates asked (a goodput search evaluates dozens)."""
    moments = route_moments(model, np.asarray(float(plan.threshold_tokens)))
    parts: list[_RateFree] = []

    def quantile_at(rate_req_per_s: float) -> float | None:
        _check_rate(rate_req_per_s)
        state = stage_state(model, moments, plan.n_pd_prefill, plan.n_pd_decode, rate_req_per_s, decode_service_scv)
        if not bool(state.stable):
            return None
        if not parts:
            parts.append(_rate_free(model, moments, grid_points))
        law = _law(parts[0], state)
        low, high = _quantile_bracket(law, state)

        def cdf(xs: Array) -> Array:
            return np.asarray(law.local_part(xs) + law.offload_part(xs), dtype=np.float64)

        return float(solve_quantiles(cdf, np.asarray([level]), low, high)[0])

    return quantile_at
