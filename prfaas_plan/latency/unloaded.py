"""Unloaded time to first token: the empty-system latency the paper's Table 6 reports (arXiv 2604.15039).

The paper gives no TTFT formula. Its six Table 6 figures are reproduced by a zero-queueing service-time
model evaluated over the input-length distribution (mean = expectation, P90 = 90th percentile over
requests):

    TTFT(l) = T_prfaas(l) + S_kv(l) / B_link     for l > t (offloaded; the whole link, no sharing)
    TTFT(l) = T_local(l)                          for l <= t (the intra-cluster RDMA transfer is neglected)

Scenario settings change the route curves (the defaults are the paper's, above):

- ``transfer = "layerwise"``: the transfer is pipelined with the prefill layer by layer, so only the part
  that outlasts the prefill is visible: T_prfaas(l) + max(0, S_kv(l)/B - T_prfaas(l)) = max(T_prfaas, S_kv/B);
- ``local_kv_transfer_bytes_per_s`` (b) given: local requests add the intra-cluster transfer S_kv(l)/b;
- ``ttft_includes_first_decode_step``: both routes add one decode step T_decode;
- a link with a round trip (``link_latency_s`` = r, ``physics.tcp.transfer_latency_s``): offloaded requests
  add r after the transfer, in both transfer modes (the last byte still crosses the path after it is sent);
- a prefill pool priced by an engine with a KV handoff (``local_handoff_s``, ``offload_handoff_s``: the wait of
  a disaggregated prefill until its KV is handed to the decode side): that route's requests add it.

This is NOT a latency under load: no request waits. ``prfaas_plan.latency`` adds the queueing delays to
these same curves (its ``link_stretch`` argument is how sharing the link lengthens a transfer); every
output labels the figures here "unloaded".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.lengths import LengthDistribution
from prfaas_plan.spec.scenario import TransferMode
from prfaas_plan.throughput import StageModel

if TYPE_CHECKING:  # annotations only (a tabulated curve's class loads where one is built)
    from prfaas_plan.physics.curves import Curve

Array = NDArray[np.float64]

# The inverse of a route curve: the curve is tabulated on this many lengths to bracket the answer in one
# cell, then safeguarded regula falsi (Illinois) narrows it until the bracket is 1e-12 of the range or the
# latency at its lower end is within 1e-12 s (relative) of the target (an error far below one token);
# smooth curves need a few steps, the cap is a guard.
_INVERSE_NODES = 65
_INVERSE_RTOL = 1e-12
_INVERSE_MAX_STEPS = 100
# Sign changes of S/B - T_prefill (layer-wise transfer) are located on this grid, then by bisection.
_CROSSING_GRID = 1025
_CROSSING_STEPS = 60
# Quantiles are bracketed by nested grids: each pass divides the bracket into 32 parts, so 7 passes
# narrow it by 32^7 ~ 3e10 (a few nanoseconds on a minute-wide bracket).
_QUANTILE_POINTS = 33
_QUANTILE_PASSES = 7
#: The percentile levels reported for TTFT.
TTFT_LEVELS = (0.5, 0.9, 0.99)


@frozen
class UnloadedTtft:
    """Mean and percentiles (P50, P90, P99) of TTFT over requests with no queueing, seconds."""

    mean_s: float
    p50_s: float
    p90_s: float
    p99_s: float


@frozen
class RouteLatency:
    """The zero-load TTFT curves of the two routes, seconds as a function of the uncached length (tokens).

    ``offload_*`` may be None when nothing is offloaded. ``offload_kv_bytes`` is the model's KV size S_kv(l);
    the intra-cluster transfer of local requests uses the same curve (the cache does not depend on where it
    was computed). Every curve must be non-decreasing in l (the loader checks fitted profiles), so each
    route's TTFT is too, and its inverse is well defined.
    """

    local_prefill: Curve
    offload_prefill: Curve | None = None
    offload_kv_bytes: Curve | None = None
    link_bandwidth_bytes_per_s: float = 1.0
    #: "after_prefill" (the paper's figures) or "layerwise" (see the module docstring).
    transfer: TransferMode = "after_prefill"
    #: Per-instance intra-cluster KV bandwidth b of the local pool, bytes/s; None = the transfer is neglected.
    local_kv_transfer_bytes_per_s: float | None = None
    #: Added to every request's TTFT: one decode step when the scenario counts it, else 0 (s).
    first_decode_step_s: float = 0.0
    #: Added to every offloaded request's TTFT: the round trips its transfer pays (s), holding no link capacity.
    link_latency_s: float = 0.0
    #: Added to each route's TTFT: its prefill pool's KV handoff (s), holding no prefill instance.
    local_handoff_s: float = 0.0
    offload_handoff_s: float = 0.0

    @property
    def offload_fixed_s(self) -> float:
        """What every offloaded request's TTFT adds to its prefill and transfer (s): the first decode step when
        counted, the link's round trips and the PrfaaS pool's KV handoff."""
        return self.first_decode_step_s + self.link_latency_s + self.offload_handoff_s

    @property
    def local_fixed_s(self) -> float:
        """What every local request's TTFT adds to its prefill (and intra-cluster transfer) (s): the first
        decode step when counted and the local pool's KV handoff."""
        return self.first_decode_step_s + self.local_handoff_s

    def __post_init__(self) -> None:
        if self.transfer not in ("after_prefill", "layerwise"):
            raise ValueError(f"transfer must be 'after_prefill' or 'layerwise', got {self.transfer!r}")

    def transfer_s(self, length_tokens: ArrayLike, link_stretch: ArrayLike = 1.0) -> Array:
        """Cross-datacenter transfer time κ · S_kv(l) / B (s); κ >= 1 is how link sharing lengthens it."""
        assert self.offload_kv_bytes is not None
        return np.asarray(link_stretch, dtype=np.float64) * (
            self.offload_kv_bytes(length_tokens) / self.link_bandwidth_bytes_per_s
        )

    def offload_s(self, length_tokens: ArrayLike, link_stretch: ArrayLike = 1.0) -> Array:
        """TTFT of an offloaded request with no waiting (s): T_prfaas(l) + κ S_kv(l)/B after the prefill, or
        max(T_prfaas(l), κ S_kv(l)/B) layer-wise; plus the link's round trips and the first decode step."""
        assert self.offload_prefill is not None
        prefill = self.offload_prefill(length_tokens)
        transfer = self.transfer_s(length_tokens, link_stretch)
        visible = prefill + transfer if self.transfer == "after_prefill" else np.maximum(prefill, transfer)
        return np.asarray(visible + self.offload_fixed_s, dtype=np.float64)

    def local_s(self, length_tokens: ArrayLike) -> Array:
        """TTFT of a local request with no waiting (s): T_local(l) [+ S_kv(l)/b] [+ the first decode step]."""
        total = self.local_prefill(length_tokens)
        if self.local_kv_transfer_bytes_per_s is not None:
            assert self.offload_kv_bytes is not None
            total = total + self.offload_kv_bytes(length_tokens) / self.local_kv_transfer_bytes_per_s
        return np.asarray(total + self.local_fixed_s, dtype=np.float64)


def route_latency(model: StageModel) -> RouteLatency:
    """The route curves of a stage model, with its transfer mode, intra-cluster bandwidth and first-step setting."""
    return RouteLatency(
        local_prefill=model.local_prefill,
        offload_prefill=model.prfaas_prefill,
        offload_kv_bytes=model.kv_bytes,
        link_bandwidth_bytes_per_s=model.link_bandwidth_bytes_per_s,
        transfer=model.transfer,
        local_kv_transfer_bytes_per_s=model.local_kv_transfer_bytes_per_s,
        first_decode_step_s=model.decode_step_time_s if model.ttft_includes_first_decode_step else 0.0,
        link_latency_s=model.link_latency_s,
        local_handoff_s=model.local_handoff_s,
        offload_handoff_s=model.prfaas_handoff_s,
    )


def _crossing(f: Callable[[float], float], left: float, right: float) -> float:
    """A point where the continuous f changes sign inside [left, right] (bisection; f(left), f(right) differ)."""
    positive_left = f(left) > 0.0
    for _ in range(_CROSSING_STEPS):
        mid = 0.5 * (left + right)
        if (f(mid) > 0.0) == positive_left:
            left = mid
        else:
            right = mid
    return 0.5 * (left + right)


def _layerwise_excess_s(
    lengths: LengthDistribution, route: RouteLatency, lower: float, upper: float, link_stretch: float
) -> float:
    """E[max(0, κ S_kv(L)/B - T_prfaas(L)); lower < L <= upper] (s): the visible part of a layer-wise transfer.

    The set where the transfer outlasts the prefill is a union of intervals, located on a grid and refined
    by bisection; on each the expectation is the difference of the two curves' closed-form expectations.
    """
    assert route.offload_prefill is not None and route.offload_kv_bytes is not None
    prefill, kv = route.offload_prefill, route.offload_kv_bytes
    scale = link_stretch / route.link_bandwidth_bytes_per_s

    def excess(length: float) -> float:
        return float(scale * kv(length) - prefill(length))

    grid = np.linspace(max(lower, lengths.lower_tokens), upper, _CROSSING_GRID)
    positive = scale * kv(grid) - prefill(grid) > 0.0
    if not np.any(positive):
        return 0.0
    edges = np.flatnonzero(np.diff(positive.astype(np.int8)))
    starts = ([0] if positive[0] else []) + [int(i) + 1 for i in edges if not positive[i]]
    ends = [int(i) for i in edges if positive[i]] + ([grid.size - 1] if positive[-1] else [])
    total = 0.0
    for i, j in zip(starts, ends, strict=True):
        a = lower if i == 0 else _crossing(excess, float(grid[i - 1]), float(grid[i]))
        b = upper if j == grid.size - 1 else _crossing(excess, float(grid[j]), float(grid[j + 1]))
        total += scale * float(kv.expect(lengths, a, b)) - float(prefill.expect(lengths, a, b))
    return max(total, 0.0)


def route_mean_s(
    lengths: LengthDistribution, route: RouteLatency, threshold_tokens: float, link_stretch: float = 1.0
) -> tuple[float, float]:
    """E[TTFT; local] and E[TTFT; offloaded] with no waiting (s), each weighted by its route's probability.

    Their sum is the mean over all requests. Closed form from the curves' partial expectations; the
    layer-wise transfer adds E[max(0, κ S/B - T_prfaas)] over the intervals where the transfer is longer.
    """
    lo, hi = lengths.lower_tokens, lengths.upper_tokens
    below = lo - 1.0
    local = 0.0
    if threshold_tokens >= lo:
        local = float(route.local_prefill.expect(lengths, below, threshold_tokens))
        if route.local_kv_transfer_bytes_per_s is not None:
            assert route.offload_kv_bytes is not None
            kv_local = float(route.offload_kv_bytes.expect(lengths, below, threshold_tokens))
            local += kv_local / route.local_kv_transfer_bytes_per_s
        if route.local_fixed_s:
            local += route.local_fixed_s * float(lengths.partial_moment(0, below, threshold_tokens))
    offload = 0.0
    if threshold_tokens < hi:
        assert route.offload_prefill is not None and route.offload_kv_bytes is not None
        t = max(threshold_tokens, below)
        offload = float(route.offload_prefill.expect(lengths, t, hi))
        if route.transfer == "after_prefill":
            offload += link_stretch * (
                float(route.offload_kv_bytes.expect(lengths, t, hi)) / route.link_bandwidth_bytes_per_s
            )
        else:
            offload += _layerwise_excess_s(lengths, route, t, hi, link_stretch)
        if route.offload_fixed_s:
            offload += route.offload_fixed_s * float(lengths.partial_moment(0, t, hi))
    return local, offload


def largest_length_within(latency_s: Callable[[Array], Array], x_s: Array, lower: float, upper: float) -> Array:
    """sup{l in [lower, upper] : latency(l) <= x} elementwise for a continuous non-decreasing curve (tokens).

    ``lower - 1`` where even ``latency(lower) > x`` (no length qualifies). ``latency_s`` maps lengths of any
    shape that broadcasts with ``x_s`` (a leading axis is added for the nodes) to latencies. The curve is
    tabulated on 65 lengths, which brackets each answer in one cell; regula falsi with the Illinois
    modification (Dowell & Jarratt 1971) then narrows the cell, keeping latency(low) <= x < latency(high);
    a step that would leave the cell is replaced by bisection. Returns ``low`` once the bracket is 1e-12 of
    the range or latency(low) is within 1e-12 (relative) of x.
    """
    x = np.asarray(x_s, dtype=np.float64)
    nodes = np.linspace(float(lower), float(upper), _INVERSE_NODES)
    table = np.broadcast_to(latency_s(nodes.reshape((-1,) + (1,) * x.ndim)), (nodes.size, *x.shape))
    count = np.sum(table <= x, axis=0)
    fits_all = count == nodes.size
    fits_none = count == 0
    cell = np.clip(count - 1, 0, nodes.size - 2)[None, ...]
    low = nodes[cell[0]]
    high = nodes[cell[0] + 1]
    f_low = np.take_along_axis(table, cell, axis=0)[0] - x
    f_high = np.take_along_axis(table, cell + 1, axis=0)[0] - x
    tolerance = _INVERSE_RTOL * max(float(upper) - float(lower), 1.0)
    latency_tolerance = _INVERSE_RTOL * np.maximum(np.abs(x), 1.0)
    pending = ~(fits_all | fits_none)
    # Which end each element moved last step (neither before the first, or once it has stopped).
    last_low = last_high = np.zeros(x.shape, dtype=bool)
    for _ in range(_INVERSE_MAX_STEPS):
        # An element stops as soon as it has converged, so its answer never depends on the other elements.
        pending &= (high - low > tolerance) & (-f_low > latency_tolerance)
        if not pending.any():
            break
        with np.errstate(divide="ignore", invalid="ignore"):
            trial = low - f_low * (high - low) / (f_high - f_low)
        trial = np.where((trial > low) & (trial < high), trial, 0.5 * (low + high))
        f_trial = latency_s(trial) - x
        fits = f_trial <= 0.0
        to_low = pending & fits
        to_high = pending & ~fits
        low = np.where(to_low, trial, low)
        f_low = np.where(to_low, f_trial, f_low)
        high = np.where(to_high, trial, high)
        f_high = np.where(to_high, f_trial, f_high)
        # Illinois: an endpoint kept twice in a row has its function value halved (signs are preserved).
        f_high = np.where(to_low & last_low, 0.5 * f_high, f_high)
        f_low = np.where(to_high & last_high, 0.5 * f_low, f_low)
        last_low, last_high = to_low, to_high
    return np.where(fits_all, float(upper), np.where(fits_none, float(lower) - 1.0, low))


def local_mass_below(
    lengths: LengthDistribution, route: RouteLatency, threshold_tokens: ArrayLike, x_s: ArrayLike
) -> Array:
    """P(TTFT <= x, local) = P(L <= min(t, TTFT_local^-1(x))) with no waiting, elementwise (broadcast)."""
    lo, hi = lengths.lower_tokens, lengths.upper_tokens
    t = np.asarray(threshold_tokens, dtype=np.float64)
    x = np.asarray(x_s, dtype=np.float64)
    shape = np.broadcast_shapes(x.shape, t.shape)
    if not np.any(t >= lo):
        return np.zeros(shape)
    t_all, x_all = np.broadcast_to(t, shape), np.broadcast_to(x, shape)
    # Where x is at least the latency of the longest local length, min(t, hi), that length itself is the
    # answer (the curve does not decrease): no inversion. Elsewhere (and where t is below every length,
    # which qualifies nothing) the inverse, elementwise, so each element's answer is the one it always had.
    t_top = np.minimum(t_all, hi)
    covered = (t_all >= lo) & (x_all >= route.local_s(np.maximum(t_top, lo)))
    l_star = np.array(t_top, dtype=np.float64)
    solve = ~covered
    if np.any(solve):
        l_star[solve] = np.minimum(t_all[solve], largest_length_within(route.local_s, x_all[solve], lo, hi))
    return np.asarray(np.where(l_star >= lo, lengths.cdf(l_star), 0.0), dtype=np.float64)


def offload_mass_below(
    lengths: LengthDistribution,
    route: RouteLatency,
    threshold_tokens: ArrayLike,
    x_s: ArrayLike,
    link_stretch: ArrayLike = 1.0,
) -> Array:
    """P(TTFT <= x, offloaded) = P(t < L <= TTFT_offload^-1(x)) with no waiting, elementwise (broadcast)."""
    lo, hi = lengths.lower_tokens, lengths.upper_tokens
    t = np.asarray(threshold_tokens, dtype=np.float64)
    stretch = np.asarray(link_stretch, dtype=np.float64)
    x = np.asarray(x_s, dtype=np.float64)
    shape = np.broadcast_shapes(x.shape, t.shape, stretch.shape)
    if not np.any(t < hi):
        return np.zeros(shape)
    # Where x is below the latency of the shortest offloaded length, max(t, lo), no length in (t, l*] exists
    # (the inverse is below t): mass 0, as the inversion gives. When that holds everywhere, no inversion.
    below = np.broadcast_to(x < route.offload_s(np.maximum(t, lo), stretch), shape)
    if np.all(below):
        return np.zeros(shape)
    # The inversion keeps the arguments' own shapes (the curve's table broadcasts them lazily): gathering the
    # elements to solve into one flat array would tabulate every node for each of them (65 x elements floats).
    l_star = largest_length_within(lambda length: route.offload_s(length, stretch), np.broadcast_to(x, shape), lo, hi)
    l_star = np.where(below, float(lo) - 1.0, l_star)
    mass = np.asarray(lengths.cdf(l_star)) - np.asarray(lengths.cdf(t))
    return np.asarray(np.where(l_star > t, mass, 0.0), dtype=np.float64)


def route_mass_below(
    lengths: LengthDistribution,
    route: RouteLatency,
    threshold_tokens: ArrayLike,
    x_s: ArrayLike,
    link_stretch: ArrayLike = 1.0,
) -> tuple[Array, Array]:
    """P(TTFT <= x, local) and P(TTFT <= x, offloaded) with no waiting, elementwise (broadcast arguments).

    Both route curves are non-decreasing in l, so each inverse is a bracketed root (``largest_length_within``).
    """
    local = local_mass_below(lengths, route, threshold_tokens, x_s)
    offload = offload_mass_below(lengths, route, threshold_tokens, x_s, link_stretch)
    return local, offload


def ttft_bracket(
    lengths: LengthDistribution, route: RouteLatency, threshold_tokens: float, link_stretch: float = 1.0
) -> tuple[float, float]:
    """The smallest and largest zero-wait TTFT over the length range (s): a bracket for every quantile."""
    ends = np.array([lengths.lower_tokens, lengths.upper_tokens])
    local = route.local_s(ends)
    if threshold_tokens >= lengths.upper_tokens:
        return float(local[0]), float(local[1])
    offload = route.offload_s(ends, link_stretch)
    return float(min(local[0], offload[0])), float(max(local[1], offload[1]))


def solve_quantiles(cdf: Callable[[Array], Array], levels: ArrayLike, low: float, high: float) -> Array:
    """For each level q, the smallest x on a nested grid with cdf(x) >= q, inside [low, high] (s).

    ``cdf`` is non-decreasing in x and maps an array of shape (len(levels), points), row i holding
    candidates for level i, to probabilities of that shape (so one call can serve several distributions,
    row by row). Each pass divides every bracket into 32 and keeps the cell where the level is crossed;
    after 7 passes the bracket is ~3e-11 of [low, high]. Returns the upper end of each final bracket.
    """
    q = np.asarray(levels, dtype=np.float64)
    lo = np.full(q.shape, float(low))
    hi = np.full(q.shape, float(high))
    fractions = np.linspace(0.0, 1.0, _QUANTILE_POINTS)
    rows = np.arange(q.size)
    for _ in range(_QUANTILE_PASSES):
        xs = lo[:, None] + (hi - lo)[:, None] * fractions[None, :]
        xs[:, -1] = hi
        below = cdf(xs) < q[:, None]
        # The last grid point still below the level, plus one (robust to rounding-level non-monotonicity).
        last_below = np.where(below.any(axis=1), fractions.size - 1 - np.argmax(below[:, ::-1], axis=1), -1)
        first_above = np.minimum(last_below + 1, fractions.size - 1)
        lo, hi = xs[rows, np.maximum(first_above - 1, 0)], xs[rows, first_above]
    return hi


def unloaded_ttft(lengths: LengthDistribution, route: RouteLatency, threshold_tokens: float) -> UnloadedTtft:
    """Mean, P50, P90 and P99 of the zero-load TTFT when requests with L > t are offloaded (Table 6).

    The mean is exact (closed-form partial expectations). Each quantile solves P(TTFT <= x) = q with
    P(TTFT <= x) = P(TTFT <= x, local) + P(TTFT <= x, offloaded) from ``route_mass_below``.
    """
    local_mean, offload_mean = route_mean_s(lengths, route, threshold_tokens)
    low, high = ttft_bracket(lengths, route, threshold_tokens)

    def cdf(x: Array) -> Array:
        local, offload = route_mass_below(lengths, route, threshold_tokens, x)
        return local + offload

    p50, p90, p99 = (float(v) for v in solve_quantiles(cdf, TTFT_LEVELS, low, high))
    return UnloadedTtft(mean_s=local_mean + offload_mean, p50_s=p50, p90_s=p90, p99_s=p99)
