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
then the row with the largest Λ (ties: the larger F).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from prfaas_plan.errors import InfeasibleError, InputError, Problem
from prfaas_plan.latency import (
    Goodput,
    LoadedTtft,
    best_goodput_plan,
    loaded_ttft,
    plan_goodput,
    plans_goodput,
    route_moments,
    stability_limit_req_per_s,
    stage_utilization,
)
from prfaas_plan.latency.unloaded import route_latency, unloaded_ttft
from prfaas_plan.lengths import Empirical
from prfaas_plan.throughput import (
    STAGES,
    StageModel,
    egress_bytes_per_s,
    max_throughput,
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
# Stages whose bound is within this relative distance of Λ_max are reported as binding together.
_CO_BINDING_RTOL = 0.01


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanEvaluation:
    """One plan scored by the stage model, with its unloaded TTFT. Rates in req/s, sizes in bytes."""

    label: str
    threshold_tokens: float | None
    n_prfaas: int
    n_pd_prefill: int
    n_pd_decode: int
    offload_fraction: float
    long_tokens: float | None
    short_tokens: float | None
    theta_prfaas_compute: float | None
    theta_prfaas_link: float | None
    theta_pd_prefill: float | None
    theta_pd_decode: float
    stage_bounds: dict[str, float]
    throughput_req_per_s: float
    bottleneck: str
    binding: tuple[str, ...]
    egress_bytes_per_s: float
    link_bandwidth_bytes_per_s: float
    ttft_unloaded_mean_s: float
    ttft_unloaded_p90_s: float
    #: Where a stage's utilisation reaches 1 with each route's *mean service time* E[T(L)]: the rate a real
    #: (queueing) system saturates at. Below Λ_max, which prices T at the mean length, since T is convex.
    stability_limit_req_per_s: float = float("nan")

    @property
    def theta_prfaas(self) -> float | None:
        """Θ_prfaas = min(compute, link) (Eq. 3), None when nothing is offloaded."""
        if self.theta_prfaas_compute is None or self.theta_prfaas_link is None:
            return None
        return min(self.theta_prfaas_compute, self.theta_prfaas_link)

    @property
    def link_utilization(self) -> float:
        """Egress over the link's bandwidth at Λ_max."""
        return self.egress_bytes_per_s / self.link_bandwidth_bytes_per_s


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """The optimised PrfaaS-PD plan beside the paper's two baselines."""

    plan: PlanEvaluation
    homogeneous_pd: PlanEvaluation
    naive_heterogeneous: PlanEvaluation
    #: Where each input of the stage model came from (StageModel.sources).
    sources: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)


def _optional(value: float) -> float | None:
    return None if not np.isfinite(value) else float(value)


def evaluate(model: StageModel, threshold_tokens: float, n_pd_prefill: int, label: str = "plan") -> PlanEvaluation:
    """Score one plan (t, N_p, N_d = N_local - N_p) with Eqs. 3-6 and the unloaded TTFT.

    Raises InfeasibleError when the plan cannot carry any load, naming the stage that has no capacity.
    """
    n_pd_decode = model.n_local - n_pd_prefill
    route = routing(model.lengths, threshold_tokens)
    theta = stage_throughputs(model, route, n_pd_prefill)
    bounds = {k: float(v) for k, v in stage_bounds(theta, route).items()}
    p = float(route.offload_fraction)
    reasons = []
    if n_pd_decode < 1:
        reasons.append(f"pd_decode: no decode instances (N_p = {n_pd_prefill} of {model.n_local} local instances)")
    if p < 1 and n_pd_prefill < 1:
        reasons.append(
            f"pd_prefill: no local prefill instances, but {1 - p:.1%} of requests (L <= {threshold_tokens:,.0f} "
            "tokens) are routed to local prefill"
        )
    if p > 0 and model.n_prfaas < 1:
        reasons.append(f"prfaas: no PrfaaS instances, but {p:.1%} of requests are offloaded")
    if reasons:
        raise InfeasibleError(reasons)
    lam = min(bounds.values())
    bottleneck = min(STAGES, key=lambda s: bounds[s])
    binding = tuple(s for s in STAGES if bounds[s] <= lam * (1 + _CO_BINDING_RTOL))
    ttft = unloaded_ttft(model.lengths, route_latency(model), threshold_tokens)
    return PlanEvaluation(
        label=label,
        threshold_tokens=float(threshold_tokens),
        n_prfaas=model.n_prfaas if p > 0 else 0,
        n_pd_prefill=n_pd_prefill,
        n_pd_decode=n_pd_decode,
        offload_fraction=p,
        long_tokens=float(route.long_tokens) if p > 0 else None,
        short_tokens=float(route.short_tokens) if p < 1 else None,
        theta_prfaas_compute=_optional(float(theta.prfaas_compute)),
        theta_prfaas_link=_optional(float(theta.prfaas_link)),
        theta_pd_prefill=_optional(float(theta.pd_prefill)),
        theta_pd_decode=float(theta.pd_decode),
        stage_bounds=bounds,
        throughput_req_per_s=lam,
        bottleneck=bottleneck,
        binding=binding,
        egress_bytes_per_s=float(egress_bytes_per_s(model, route, lam)),
        link_bandwidth_bytes_per_s=model.link_bandwidth_bytes_per_s,
        ttft_unloaded_mean_s=ttft.mean_s,
        ttft_unloaded_p90_s=ttft.p90_s,
        stability_limit_req_per_s=float(
            stability_limit_req_per_s(
                model, route_moments(model, np.asarray(float(threshold_tokens))), n_pd_prefill, n_pd_decode
            )[0]
        ),
    )


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
    if isinstance(lengths, Empirical) and lengths.n_values <= _EXACT_EMPIRICAL_MAX:
        # Λ is piecewise constant between observed lengths: the observed values are every distinct plan.
        return np.unique(np.concatenate(([0.0], lengths.sorted_tokens)))
    inner = np.asarray(lengths.quantile(np.linspace(0.0, 1.0, _COARSE_POINTS)), dtype=np.float64)
    return np.unique(np.concatenate(([0.0], inner, [lengths.upper_tokens])))


@dataclass(frozen=True, slots=True, kw_only=True)
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


def search(model: StageModel, resolution_tokens: float = 10.0, label: str = "prfaas-pd") -> PlanEvaluation:
    """Maximise Λ_max over t (continuous) and N_p in 0..N_local-1 (paper §3.4.2), and score the winner.

    Global in t for every split, with the guarantee of ``best_thresholds``."""
    if model.n_local < 1:
        raise InfeasibleError("pd_decode: the local pool has no instances")
    n_p = np.arange(0, model.n_local)
    found = best_thresholds(model, n_p, resolution_tokens)
    t_best, f_best = found.threshold_tokens, found.prefill_req_per_s
    decode = (model.n_local - n_p) * model.decode_req_per_s_per_instance
    lam = np.fmin(f_best, decode)
    if not np.any(lam > 0):
        raise InfeasibleError("no threshold and split carries load: every plan leaves a routed stage without capacity")
    top = np.max(lam)
    ties = np.flatnonzero(lam >= top * (1 - 1e-12))
    k = int(ties[np.argmax(f_best[ties])])
    return evaluate(model, float(t_best[k]), int(n_p[k]), label=label)


def homogeneous_model(model: StageModel, prfaas_gpus: int, local_gpus_per_instance: int) -> StageModel:
    """The homogeneous-PD baseline's pool: the PrfaaS GPUs become local GPUs (the paper: 32 H200 + 64 H20
    -> 96 H20 = 12 instances). GPUs that do not fill a whole local instance are dropped."""
    extra = prfaas_gpus // local_gpus_per_instance
    return replace(model, n_prfaas=0, n_local=model.n_local + extra)


def best_split_without_offload(model: StageModel, label: str) -> PlanEvaluation:
    """Best N_p for a pool that prefills everything locally (p = 0): max over N_p of min(Θ_pd-p, Θ_pd-d)."""
    t_all_local = model.lengths.upper_tokens
    n_p = np.arange(1, model.n_local)
    if n_p.size == 0:
        raise InfeasibleError("pd_prefill/pd_decode: the local pool cannot hold one prefill and one decode instance")
    route = routing(model.lengths, t_all_local)
    lam = max_throughput(stage_bounds(stage_throughputs(model, route, n_p[:, None]), route)).ravel()
    best = evaluate(model, t_all_local, int(n_p[int(np.argmax(lam))]), label=label)
    return replace(best, threshold_tokens=None)


def _with_baselines(
    model: StageModel, plan: PlanEvaluation, prfaas_gpus: int, local_gpus_per_instance: int
) -> Comparison:
    homogeneous = best_split_without_offload(
        homogeneous_model(model, prfaas_gpus, local_gpus_per_instance), label="homogeneous-pd"
    )
    naive = evaluate(model, 0.0, 0, label="naive-heterogeneous")
    return Comparison(plan=plan, homogeneous_pd=homogeneous, naive_heterogeneous=naive, sources=model.sources)


def compare(
    model: StageModel, prfaas_gpus: int, local_gpus_per_instance: int, resolution_tokens: float = 10.0
) -> Comparison:
    """The optimised plan beside homogeneous PD (no PrfaaS, same GPU count) and naive heterogeneous
    (every request prefilled on PrfaaS, every local instance decodes: t = 0, N_p = 0)."""
    return _with_baselines(model, search(model, resolution_tokens), prfaas_gpus, local_gpus_per_instance)


def evaluate_given(model: StageModel, threshold_tokens: float, n_pd_prefill: int, n_pd_decode: int) -> PlanEvaluation:
    """A given plan (t, N_p, N_d). N_p + N_d may use fewer local instances than the pool has (the rest idle),
    never more: that is an input error naming the options."""
    if n_pd_prefill + n_pd_decode > model.n_local:
        raise InputError(
            Problem(
                field="--n-pd-prefill/--n-pd-decode",
                message=f"{n_pd_prefill} + {n_pd_decode} instances exceed the local pool's {model.n_local} "
                "(deployment.local.instances)",
            )
        )
    return evaluate(replace(model, n_local=n_pd_prefill + n_pd_decode), threshold_tokens, n_pd_prefill, label="given")


def plan_comparison(
    model: StageModel,
    prfaas_gpus: int,
    local_gpus_per_instance: int,
    threshold_tokens: float,
    n_pd_prefill: int,
    n_pd_decode: int,
) -> Comparison:
    """A given plan (``evaluate_given``) beside the baselines."""
    plan = evaluate_given(model, threshold_tokens, n_pd_prefill, n_pd_decode)
    return _with_baselines(model, plan, prfaas_gpus, local_gpus_per_instance)


# --------------------------------------------------------------------------------------------------------
# Under load (prfaas_plan.latency): TTFT at a given rate, and the goodput objective
# --------------------------------------------------------------------------------------------------------

#: Loads, as fractions of a plan's Λ_max, at which ``ttft_curve`` reports TTFT.
LOAD_CURVE_FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)


def _as_scored(model: StageModel, plan: PlanEvaluation) -> tuple[StageModel, float]:
    """The stage model and threshold a scored plan stands for: its PrfaaS count and instances; t = the top of
    the length range when nothing is offloaded (homogeneous PD reports no threshold)."""
    t = plan.threshold_tokens if plan.threshold_tokens is not None else model.lengths.upper_tokens
    return replace(model, n_prfaas=plan.n_prfaas, n_local=plan.n_pd_prefill + plan.n_pd_decode), t


def loaded_plan(
    model: StageModel, plan: PlanEvaluation, rate_req_per_s: float, decode_service_scv: float = 0.0
) -> LoadedTtft:
    """TTFT of a scored plan at arrival rate Λ (req/s); ``model`` is the one the plan was scored with, or the
    scenario's (a baseline's instance counts come from the plan itself)."""
    sized, t = _as_scored(model, plan)
    return loaded_ttft(
        sized, t, plan.n_pd_prefill, plan.n_pd_decode, rate_req_per_s, decode_service_scv=decode_service_scv
    )


def loaded_comparison(
    model: StageModel,
    comparison: Comparison,
    *,
    rate_req_per_s: float | None = None,
    load_fraction: float | None = None,
    decode_service_scv: float = 0.0,
) -> dict[str, LoadedTtft]:
    """The plan and both baselines under load: all at one rate, or each at a fraction of its own Λ_max.

    Keys: "plan", "homogeneous_pd", "naive_heterogeneous". Exactly one of the two loads must be given.
    """
    if (rate_req_per_s is None) == (load_fraction is None):
        raise ValueError("give exactly one of rate_req_per_s and load_fraction")
    plans = {
        "plan": comparison.plan,
        "homogeneous_pd": comparison.homogeneous_pd,
        "naive_heterogeneous": comparison.naive_heterogeneous,
    }
    out = {}
    for key, plan in plans.items():
        if rate_req_per_s is not None:
            rate = rate_req_per_s
        else:
            assert load_fraction is not None
            rate = load_fraction * plan.throughput_req_per_s
        out[key] = loaded_plan(model, plan, rate, decode_service_scv)
    return out


def ttft_curve(
    model: StageModel,
    plan: PlanEvaluation,
    fractions: tuple[float, ...] = LOAD_CURVE_FRACTIONS,
    decode_service_scv: float = 0.0,
) -> list[LoadedTtft]:
    """TTFT of a plan at each fraction of its Λ_max (default 10 %..95 %)."""
    return [loaded_plan(model, plan, f * plan.throughput_req_per_s, decode_service_scv) for f in fractions]


@dataclass(frozen=True, slots=True, kw_only=True)
class GoodputEvaluation:
    """A scored plan with its goodput and every stage's utilisation at that rate."""

    plan: PlanEvaluation
    goodput: Goodput
    utilization_at_goodput: Mapping[str, float]


@dataclass(frozen=True, slots=True, kw_only=True)
class GoodputComparison:
    """The goodput-optimal PrfaaS-PD plan beside the throughput-optimal one and the two baselines, each with
    its goodput under the same TTFT SLO."""

    ttft_slo_s: float
    quantile: float
    plan: GoodputEvaluation
    throughput_plan: GoodputEvaluation
    homogeneous_pd: GoodputEvaluation
    naive_heterogeneous: GoodputEvaluation
    sources: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)


def goodput_evaluation(
    model: StageModel, plan: PlanEvaluation, ttft_slo_s: float, quantile: float = 0.9, decode_service_scv: float = 0.0
) -> GoodputEvaluation:
    """The goodput of a scored plan (see ``latency.goodput``) and its utilisations at that rate."""
    sized, t = _as_scored(model, plan)
    goodput = plan_goodput(
        sized, t, plan.n_pd_prefill, plan.n_pd_decode, ttft_slo_s, quantile, decode_service_scv=decode_service_scv
    )
    utilization = stage_utilization(sized, t, plan.n_pd_prefill, plan.n_pd_decode, goodput.rate_req_per_s)
    return GoodputEvaluation(plan=plan, goodput=goodput, utilization_at_goodput=utilization)


def compare_goodput(
    model: StageModel,
    prfaas_gpus: int,
    local_gpus_per_instance: int,
    ttft_slo_s: float,
    quantile: float = 0.9,
    resolution_tokens: float = 10.0,
    decode_service_scv: float = 0.0,
) -> GoodputComparison:
    """Maximise goodput (the largest Λ with the TTFT ``quantile`` <= ``ttft_slo_s``) over t and N_p, beside
    the throughput-optimal plan and the baselines (homogeneous PD with its split chosen for goodput).

    Raises InfeasibleError when no threshold and split meets the SLO even with no load.
    """
    options = {"decode_service_scv": decode_service_scv}
    t, n_p, rate = best_goodput_plan(model, ttft_slo_s, quantile, resolution_tokens=resolution_tokens, **options)
    if rate <= 0:
        raise InfeasibleError(
            f"ttft_p{quantile * 100:g}: no threshold and split keeps the P{quantile * 100:g} TTFT within "
            f"{ttft_slo_s:g} s even with no load"
        )
    # The goodput-optimal, the Λ_max-optimal and the naive plan share the pools: score them together.
    same_pool = [
        evaluate(model, t, n_p, label="prfaas-pd-goodput"),
        search(model, resolution_tokens),
        evaluate(model, 0.0, 0, label="naive-heterogeneous"),
    ]
    thresholds = [_as_scored(model, plan)[1] for plan in same_pool]
    splits = [plan.n_pd_prefill for plan in same_pool]
    scored = plans_goodput(model, thresholds, splits, ttft_slo_s, quantile, **options)
    best, throughput, naive = (
        GoodputEvaluation(
            plan=plan,
            goodput=goodput,
            utilization_at_goodput=stage_utilization(
                model, t_plan, plan.n_pd_prefill, plan.n_pd_decode, goodput.rate_req_per_s
            ),
        )
        for plan, goodput, t_plan in zip(same_pool, scored, thresholds, strict=True)
    )
    homogeneous = homogeneous_model(model, prfaas_gpus, local_gpus_per_instance)
    top = homogeneous.lengths.upper_tokens
    _, n_homog, homog_rate = best_goodput_plan(homogeneous, ttft_slo_s, quantile, thresholds=[top], **options)
    if homog_rate > 0:
        homog_plan = replace(evaluate(homogeneous, top, n_homog, label="homogeneous-pd"), threshold_tokens=None)
    else:  # no split meets the SLO: keep the throughput-optimal split
        homog_plan = best_split_without_offload(homogeneous, label="homogeneous-pd")
    return GoodputComparison(
        ttft_slo_s=ttft_slo_s,
        quantile=quantile,
        plan=best,
        throughput_plan=throughput,
        homogeneous_pd=goodput_evaluation(model, homog_plan, ttft_slo_s, quantile, **options),
        naive_heterogeneous=naive,
        sources=model.sources,
    )
