"""Whether a deployment carries a target rate within a TTFT SLO, and its price there: the sizing searches'
oracle.

``Carrier`` answers "does (N_prfaas, N_local, B) carry Λ?" with the fixed-rate search of ``latency.goodput``
(``best_plan_at_rate``: the plan with the most SLO margin at Λ), caches every answer, and answers without
solving when a solved deployment dominates the question (goodput never falls when a pool gains an instance or
the link gains bandwidth). A deployment the search accepts is verified with the full TTFT law before sizing
returns it. ``smallest_local`` gallops and bisects over N_local; ``priced_deployment`` prices a deployment at
the target rate and at its goodput.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.latency import TtftSummary, loaded_ttft
from prfaas_plan.latency.goodput import plans_goodput
from prfaas_plan.optimize.cost import (
    CostBreakdown,
    TokenCost,
    UnitPrices,
    deployment_cost,
    token_cost,
)
from prfaas_plan.optimize.goodput_search import ThresholdScan, best_plan_at_rate, threshold_scan
from prfaas_plan.spec.cost import Target
from prfaas_plan.spec.plan import Plan
from prfaas_plan.throughput import Routing, StageModel, egress_bytes_per_s, routing, with_link_rate

Array = NDArray[np.float64]


@frozen
class Carried:
    """The goodput-optimal plan of one deployment: its threshold, split and goodput (req/s)."""

    threshold_tokens: float
    n_pd_prefill: int
    goodput_req_per_s: float
    stability_limit_req_per_s: float
    limited_by: str


#: Thresholds tried above a sized deployment's own, on a geometric grid up to the longest prompt (offload none),
#: for a plan that routes fewer requests over the link (``cheaper_plan``). A design choice, not tuned on any case.
CHEAPER_PLAN_THRESHOLDS = 16


@frozen
class CheaperPlan:
    """A plan on a sized deployment that also carries the target (its TTFT quantile at the target rate within the
    SLO by the full law) and offloads fewer requests than the deployment's own plan, the one with the most SLO
    margin: cheaper where egress is priced per byte, with less margin."""

    threshold_tokens: float
    n_pd_prefill: int
    n_pd_decode: int
    offload_fraction: float
    egress_at_target_bytes_per_s: float
    cost_at_target: CostBreakdown
    ttft_quantile_at_target_s: float


@frozen
class Deployment:
    """A sized deployment and its goodput-optimal plan, priced at the target rate and at its goodput.
    ``cheaper_plan``: where egress is priced per byte, the cheapest plan found on the same deployment that also
    carries the target with less margin (None when the deployment's own plan is already the cheapest found)."""

    label: str
    n_prfaas: int
    n_local: int
    bandwidth_bytes_per_s: float
    threshold_tokens: float | None
    n_pd_prefill: int
    n_pd_decode: int
    offload_fraction: float
    goodput_req_per_s: float
    stability_limit_req_per_s: float
    egress_at_target_bytes_per_s: float
    cost_at_target: CostBreakdown
    tokens_at_target: TokenCost
    tokens_at_goodput: TokenCost
    cheaper_plan: CheaperPlan | None = None

    @property
    def usd_per_hour(self) -> float:
        """Total hourly cost at the target rate."""
        return self.cost_at_target.total_usd_per_hour


class Carrier:
    """Goodput of deployments of one stage model (the base), solved once per (N_prfaas, N_local, B).

    ``solve`` is the search's goodput (``best_goodput_plan``: each transfer stretched by the link's mean
    stretch), which is never below the goodput under the full TTFT law (the law spreads the sojourn). A
    deployment is accepted only after ``verify``: the full law's TTFT quantile at the target rate, for the
    plan found, is within the SLO; one that fails is demoted, so the search moves on.
    """

    def __init__(self, model: StageModel, target: Target, resolution_tokens: float, decode_service_scv: float) -> None:
        self.model = model
        self.target = target
        self.resolution_tokens = resolution_tokens
        self.scv = decode_service_scv
        self.cache: dict[tuple[int, int, float], Carried] = {}
        self.verified: dict[tuple[int, int, float], bool] = {}
        # The fixed-rate search's threshold scan, per link bandwidth (it does not depend on instance counts).
        self.scans: dict[float, ThresholdScan] = {}

    @staticmethod
    def key(n_prfaas: int, n_local: int, bandwidth: float) -> tuple[int, int, float]:
        return (n_prfaas, n_local, bandwidth if n_prfaas > 0 else 0.0)

    def deployed(self, n_prfaas: int, n_local: int, bandwidth: float) -> StageModel:
        # ``bandwidth`` is a size bought (priced as such); it serves at what its connections deliver.
        return with_link_rate(replace(self.model, n_prfaas=n_prfaas, n_local=n_local), bandwidth or 1.0)

    def solve(self, n_prfaas: int, n_local: int, bandwidth: float) -> Carried:
        """Whether the deployment carries the target by the search's law: the plan with the most SLO margin at
        the target rate (``best_plan_at_rate``). ``goodput_req_per_s`` is then the target rate when it carries
        (a lower bound on the goodput), else 0 (an upper bound is not needed: only >= target is asked)."""
        key = self.key(n_prfaas, n_local, bandwidth)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        model = self.deployed(n_prfaas, n_local, bandwidth)
        slo, rate = self.target.ttft_slo, self.target.rate_req_per_s
        fixed = [model.lengths.upper_tokens] if n_prfaas == 0 else None
        scan = None
        if fixed is None:
            scan = self.scans.get(model.link_bandwidth_bytes_per_s)
            if scan is None:
                scan = self.scans[model.link_bandwidth_bytes_per_s] = threshold_scan(model, slo.limit_s)
        t, n_p, slack, zero_load = best_plan_at_rate(
            model,
            rate,
            slo,
            resolution_tokens=self.resolution_tokens,
            decode_service_scv=self.scv,
            thresholds=fixed,
            scan=scan,
        )
        carries = slack >= 0.0
        result = Carried(
            threshold_tokens=t,
            n_pd_prefill=n_p,
            goodput_req_per_s=rate if carries else 0.0,
            stability_limit_req_per_s=float("inf") if carries else 0.0,
            limited_by="unloaded" if zero_load < slo.quantile else "slo",
        )
        self.cache[key] = result
        return result

    def verify(self, n_prfaas: int, n_local: int, bandwidth: float) -> bool:
        """The full TTFT law's quantile at the target rate is within the SLO for the solved plan; a failure
        demotes the deployment (its goodput is capped just below the target)."""
        key = self.key(n_prfaas, n_local, bandwidth)
        if key in self.verified:
            return self.verified[key]
        carried = self.solve(n_prfaas, n_local, bandwidth)
        rate = self.target.rate_req_per_s
        ok = False
        if carried.goodput_req_per_s >= rate and rate < carried.stability_limit_req_per_s:
            plan = Plan(
                threshold_tokens=carried.threshold_tokens,
                n_pd_prefill=carried.n_pd_prefill,
                n_pd_decode=n_local - carried.n_pd_prefill,
            )
            law = loaded_ttft(self.deployed(n_prfaas, n_local, bandwidth), plan, rate, decode_service_scv=self.scv).ttft
            ok = law is not None and _quantile_of(law, self.target.quantile) <= self.target.ttft_slo_s
        self.verified[key] = ok
        if not ok:
            self.cache[key] = replace(carried, goodput_req_per_s=min(carried.goodput_req_per_s, rate * (1 - 1e-9)))
        return ok

    def rescored(self, n_prfaas: int, n_local: int, bandwidth: float) -> Carried:
        """The goodput, under the full TTFT law (``plans_goodput``), of the plan that carries the target with the
        most margin (the solved one), for reporting."""
        carried = self.solve(n_prfaas, n_local, bandwidth)
        if carried.goodput_req_per_s <= 0:
            return carried
        (scored,) = plans_goodput(
            self.deployed(n_prfaas, n_local, bandwidth),
            [carried.threshold_tokens],
            [carried.n_pd_prefill],
            self.target.ttft_slo,
            decode_service_scv=self.scv,
        )
        return replace(
            carried,
            goodput_req_per_s=scored.rate_req_per_s,
            stability_limit_req_per_s=scored.stability_limit_req_per_s,
            limited_by=scored.limited_by,
        )

    def carries(self, n_prfaas: int, n_local: int, bandwidth: float) -> bool:
        """Whether the deployment carries the target. Answered without solving when a solved deployment
        dominates it (goodput is non-decreasing in N_prfaas, N_local and B): a smaller one that carries, or
        a larger one that does not."""
        b = bandwidth if n_prfaas > 0 else 0.0
        rate = self.target.rate_req_per_s
        for (p, n, c), known in self.cache.items():
            if (p > 0) != (n_prfaas > 0):
                continue  # with and without a PrfaaS pool are different systems (no link at all without one)
            ok = known.goodput_req_per_s >= rate
            if ok and p <= n_prfaas and n <= n_local and c <= b:
                return True
            if not ok and p >= n_prfaas and n >= n_local and c >= b:
                return False
        return self.solve(n_prfaas, n_local, bandwidth).goodput_req_per_s >= rate


def _quantile_of(law: TtftSummary, quantile: float) -> float:
    levels = {0.5: law.p50_s, 0.9: law.p90_s, 0.99: law.p99_s}
    if quantile not in levels:
        raise ValueError(f"sizing supports the 0.5, 0.9 and 0.99 TTFT quantiles, got {quantile}")
    return levels[quantile]


def smallest_local(
    carrier: Carrier, n_prfaas: int, bandwidth: float, low: int, high: int, guess: int | None = None
) -> int | None:
    """Smallest N_local in [low, high] that carries the target (goodput is non-decreasing in N_local), or
    None. Tries ``low`` and ``high``, then gallops from ``guess`` (default ``low``; up when it does not
    carry, down when it does) and bisects. The unloaded TTFT depends on the threshold, the hardware and the
    link, never on instance counts: a deployment that misses the SLO with no load rules out every larger
    N_local."""
    if low > high:
        return None
    if carrier.carries(n_prfaas, low, bandwidth):
        return low
    if carrier.solve(n_prfaas, low, bandwidth).limited_by == "unloaded":
        return None  # even an empty system misses the SLO: unloaded TTFT does not depend on instance counts
    if not carrier.carries(n_prfaas, high, bandwidth):
        return None  # one solve at the top of the range rules out the whole range
    lo, hi = low, high  # lo never carries, hi carries
    start = lo if guess is None else min(max(guess, lo), hi)
    if start > lo and carrier.carries(n_prfaas, start, bandwidth):
        hi, step = start, 1
        while hi - step > lo:  # gallop down
            if not carrier.carries(n_prfaas, hi - step, bandwidth):
                lo = hi - step
                break
            hi, step = hi - step, step * 2
    else:
        lo, step = start, 1
        while lo + step < hi:  # gallop up
            if carrier.carries(n_prfaas, lo + step, bandwidth):
                hi = lo + step
                break
            lo, step = lo + step, step * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if carrier.carries(n_prfaas, mid, bandwidth):
            hi = mid
        else:
            lo = mid
    return hi


def priced_deployment(
    carrier: Carrier, prices: UnitPrices, n_prfaas: int, n_local: int, bandwidth: float, label: str, *, final: bool
) -> Deployment:
    """The deployment priced at the target (and at its goodput). ``final``: its goodput re-scored with the
    full TTFT law (slower; for what is reported), else the search's."""
    model, target = carrier.model, carrier.target
    carried = carrier.rescored(n_prfaas, n_local, bandwidth) if final else carrier.solve(n_prfaas, n_local, bandwidth)
    route = routing(model.lengths, carried.threshold_tokens)
    link = bandwidth if n_prfaas > 0 else 0.0
    egress, at_target = _priced_route(model, prices, n_prfaas, n_local, link, route, target.rate_req_per_s)
    _, at_goodput = _priced_route(model, prices, n_prfaas, n_local, link, route, carried.goodput_req_per_s)
    tokens_in, tokens_out = model.lengths.mean_tokens, model.output_tokens_mean
    cheaper = (
        cheaper_plan(carrier, prices, n_prfaas, n_local, bandwidth, carried.threshold_tokens, at_target)
        if final and n_prfaas > 0 and prices.link.egress_usd_per_gb > 0 and route.offload_fraction > 0
        else None
    )
    return Deployment(
        label=label,
        n_prfaas=n_prfaas,
        n_local=n_local,
        bandwidth_bytes_per_s=link,
        threshold_tokens=carried.threshold_tokens if n_prfaas > 0 else None,
        n_pd_prefill=carried.n_pd_prefill,
        n_pd_decode=n_local - carried.n_pd_prefill,
        offload_fraction=float(route.offload_fraction) if n_prfaas > 0 else 0.0,
        goodput_req_per_s=carried.goodput_req_per_s,
        stability_limit_req_per_s=carried.stability_limit_req_per_s,
        egress_at_target_bytes_per_s=egress,
        cost_at_target=at_target,
        tokens_at_target=token_cost(at_target.total_usd_per_hour, target.rate_req_per_s, tokens_in, tokens_out),
        tokens_at_goodput=token_cost(at_goodput.total_usd_per_hour, carried.goodput_req_per_s, tokens_in, tokens_out),
        cheaper_plan=cheaper,
    )


def _priced_route(
    model: StageModel,
    prices: UnitPrices,
    n_prfaas: int,
    n_local: int,
    link_bytes_per_s: float,
    route: Routing,
    rate_req_per_s: float,
) -> tuple[float, CostBreakdown]:
    """(egress B/s, hourly cost) of ``n_prfaas`` + ``n_local`` instances of ``model`` on a link of
    ``link_bytes_per_s`` routing by ``route`` at ``rate_req_per_s``; no egress without a PrfaaS pool."""
    sized = replace(model, n_prfaas=n_prfaas, n_local=n_local)
    egress = float(egress_bytes_per_s(sized, route, rate_req_per_s)) if n_prfaas > 0 else 0.0
    cost = deployment_cost(
        prices, n_prfaas=n_prfaas, n_local=n_local, bandwidth_bytes_per_s=link_bytes_per_s, egress_bytes_per_s=egress
    )
    return egress, cost


def cheaper_plan(
    carrier: Carrier,
    prices: UnitPrices,
    n_prfaas: int,
    n_local: int,
    bandwidth: float,
    threshold_tokens: float,
    own_cost: CostBreakdown,
) -> CheaperPlan | None:
    """The plan with the highest threshold (the fewest requests offloaded, the least egress) among
    ``CHEAPER_PLAN_THRESHOLDS`` above ``threshold_tokens`` on a geometric grid up to the longest prompt, each with
    its split of the most margin at the target rate, whose TTFT quantile at the target is within the SLO by the
    full law, where it costs less at the target than ``own_cost``; None otherwise."""
    model = carrier.deployed(n_prfaas, n_local, bandwidth)
    target, slo = carrier.target, carrier.target.ttft_slo
    upper = float(model.lengths.upper_tokens)
    low = max(float(threshold_tokens), 1.0)
    if not low < upper:
        return None
    grid = low * (upper / low) ** (np.arange(CHEAPER_PLAN_THRESHOLDS, 0, -1) / CHEAPER_PLAN_THRESHOLDS)
    for t in grid:
        t_found, n_p, slack, _ = best_plan_at_rate(
            model, target.rate_req_per_s, slo, decode_service_scv=carrier.scv, thresholds=[float(t)]
        )
        if slack < 0:
            continue
        plan = Plan(threshold_tokens=t_found, n_pd_prefill=n_p, n_pd_decode=n_local - n_p)
        law = loaded_ttft(model, plan, target.rate_req_per_s, decode_service_scv=carrier.scv).ttft
        if law is None or _quantile_of(law, target.quantile) > target.ttft_slo_s:
            continue
        route = routing(model.lengths, t_found)
        egress, cost = _priced_route(carrier.model, prices, n_prfaas, n_local, bandwidth, route, target.rate_req_per_s)
        if not cost.total_usd_per_hour < own_cost.total_usd_per_hour:
            return None
        return CheaperPlan(
            threshold_tokens=t_found,
            n_pd_prefill=n_p,
            n_pd_decode=n_local - n_p,
            offload_fraction=float(route.offload_fraction),
            egress_at_target_bytes_per_s=egress,
            cost_at_target=cost,
            ttft_quantile_at_target_s=_quantile_of(law, target.quantile),
        )
    return None
