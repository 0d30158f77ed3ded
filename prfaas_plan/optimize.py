"""Search the routing threshold t and the local split N_p + N_d = N_local for the largest Λ_max (paper §3.4.2),
and evaluate the paper's two baselines.

Search. Λ(t, N_p) = min(F(t, N_p), Θ_pd-d(N_p)) where F = min(Θ_prfaas/p, Θ_pd-p/(1-p)) is the prefill side.
For every N_p at once (numpy, one row per split) F is evaluated on a coarse grid of thresholds spaced by the
length distribution's quantiles, then each row's best cell is refined by nested grids until the bracket is
narrower than the resolution, and finally, where the two prefill bounds cross inside the bracket (the
paper's Eq. 7 condition), the crossing is polished by bisection. Maximising F (not just Λ) breaks the
ties that arise when decode binds: among thresholds of equal Λ it keeps the most prefill headroom, which
is the Eq. 7 crossing. The best split is then the row with the largest Λ (ties: the larger F).
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
from prfaas_plan.ttft import route_latency, unloaded_ttft

_COARSE_POINTS = 257
# Empirical distributions with at most this many observations are searched at every observed length exactly.
_EXACT_EMPIRICAL_MAX = 20_000
_REFINE_POINTS = 33
# The Eq. 7 crossing is polished by bisection to this width.
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


def _prefill_side(model: StageModel, thresholds: np.ndarray, n_p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Offload bound A = Θ_prfaas/p and local bound B = Θ_pd-p/(1-p) at thresholds (rows: N_p)."""
    route = routing(model.lengths, thresholds)
    bounds = stage_bounds(stage_throughputs(model, route, n_p), route)
    offload = np.fmin(bounds["prfaas_compute"], bounds["prfaas_link"])
    return np.broadcast_to(offload, bounds["pd_prefill"].shape), bounds["pd_prefill"]


def _coarse_grid(model: StageModel) -> np.ndarray:
    lengths = model.lengths
    if isinstance(lengths, Empirical) and lengths.n_values <= _EXACT_EMPIRICAL_MAX:
        # Λ is piecewise constant between observed lengths: the observed values are every distinct plan.
        return np.unique(np.concatenate(([0.0], lengths.sorted_tokens)))
    inner = np.asarray(lengths.quantile(np.linspace(0.0, 1.0, _COARSE_POINTS)), dtype=np.float64)
    return np.unique(np.concatenate(([0.0], inner, [lengths.upper_tokens])))


def best_thresholds(
    model: StageModel, n_pd_prefill: np.ndarray, resolution_tokens: float
) -> tuple[np.ndarray, np.ndarray]:
    """For each N_p, the threshold maximising the prefill side F = min(A, B), and that F.

    Coarse quantile grid, then nested refinement of each row's best cell to ``resolution_tokens``, then a
    bisection on A - B where the crossing lies in the final bracket.
    """
    n_p = np.asarray(n_pd_prefill, dtype=np.float64)[:, None]
    grid = _coarse_grid(model)
    offload, local = _prefill_side(model, grid, n_p)
    score = np.fmin(offload, local)
    best = np.argmax(score, axis=1)
    rows = np.arange(n_p.shape[0])
    t_best = grid[best]
    f_best = score[rows, best]
    if isinstance(model.lengths, Empirical) and grid.size > _COARSE_POINTS + 2:
        return t_best, f_best
    lo = grid[np.maximum(best - 1, 0)]
    hi = grid[np.minimum(best + 1, grid.size - 1)]
    while np.max(hi - lo) > resolution_tokens:
        fractions = np.linspace(0.0, 1.0, _REFINE_POINTS)
        cand = lo[:, None] + (hi - lo)[:, None] * fractions[None, :]
        offload, local = _prefill_side(model, cand, n_p)
        score = np.fmin(offload, local)
        idx = np.argmax(score, axis=1)
        better = score[rows, idx] >= f_best
        t_best = np.where(better, cand[rows, idx], t_best)
        f_best = np.where(better, score[rows, idx], f_best)
        step = (hi - lo) / (_REFINE_POINTS - 1)
        lo = np.maximum(t_best - step, lo)
        hi = np.minimum(t_best + step, hi)
    # Polish the Eq. 7 crossing A(t) = B(t) where it lies inside the final bracket.
    a_lo, b_lo = _prefill_side(model, lo[:, None], n_p)
    a_hi, b_hi = _prefill_side(model, hi[:, None], n_p)
    crossing = (np.sign(a_lo - b_lo) != np.sign(a_hi - b_hi)).ravel() & np.isfinite(a_lo * b_lo * a_hi * b_hi).ravel()
    if np.any(crossing):
        left, right = lo.copy(), hi.copy()
        sign_left = np.sign(a_lo - b_lo).ravel()
        steps = int(np.ceil(np.log2(max(float(np.max(hi - lo)), _CROSSING_TOL_TOKENS) / _CROSSING_TOL_TOKENS)))
        for _ in range(steps):
            mid = 0.5 * (left + right)
            a_mid, b_mid = _prefill_side(model, mid[:, None], n_p)
            same = np.sign(a_mid - b_mid).ravel() == sign_left
            left = np.where(same, mid, left)
            right = np.where(same, right, mid)
        ends = np.stack([left, right], axis=1)
        a_c, b_c = _prefill_side(model, ends, n_p)
        f_c = np.fmin(a_c, b_c)
        pick = np.argmax(f_c, axis=1)
        f_end = f_c[rows, pick]
        better = crossing & (f_end >= f_best)
        t_best = np.where(better, ends[rows, pick], t_best)
        f_best = np.where(better, f_end, f_best)
    return t_best, f_best


def search(model: StageModel, resolution_tokens: float = 10.0, label: str = "prfaas-pd") -> PlanEvaluation:
    """Maximise Λ_max over t (continuous) and N_p in 0..N_local-1 (paper §3.4.2), and score the winner."""
    if model.n_local < 1:
        raise InfeasibleError("pd_decode: the local pool has no instances")
    n_p = np.arange(0, model.n_local)
    t_best, f_best = best_thresholds(model, n_p, resolution_tokens)
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
