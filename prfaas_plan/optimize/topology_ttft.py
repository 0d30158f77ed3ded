"""Loaded TTFT per region of a topology plan, in closed form: the single-pair law of ``latency.distribution``
composed over the sites each region uses.

A plan gives region j its threshold t_j, split (N_p,j, N_d,j), rate Λ_j and the shares s_jk of its long
requests (L > t_j) sent to each PrfaaS site k. The stages:

- **PrfaaS site k**: one G/G/c pool (c = N_k) fed by every region routed to it, at rate A_k = Σ_j Λ_j p_j s_jk.
  Its service law is the mixture of the regions' conditional prefill laws: mean Σ_j (a_jk / A_k) E[T_k | L > t_j]
  and second moment likewise, so the SCV is that of the mixture. Its arrival SCV is QNA's superposition of the
  split streams, Σ_j (a_jk / A_k) (p_j s_jk ca_j² + 1 - p_j s_jk) (Whitt 1983; exact when all are Poisson).
  Under FCFS every region sees the same wait law at a site (``stages.ggc_wait``).
- **Link k -> j**: processor sharing of the routed KV transfers only (a link serves one pair), utilisation
  a_jk E[S_kv,k / B_kj | L > t_j]; its stretch and sojourn law are those of ``stages`` / ``link_spread``.
- **Region j's local prefill and decode**: as for one pair (``stages.stage_state``), at Λ_j.

Region j's TTFT law is the mixture over routes: P(TTFT <= x) = P(TTFT <= x, local) + Σ_k s_jk P(TTFT <= x,
offloaded | site k) · (the pair law's offloaded part already carries p_j). Assumptions, as the single pair
states them and beyond: (1) the waits of the stages a request crosses are independent of each other and of
its length (the single pair's assumption); (2) a long request's site is drawn independently of its length
(what the router and the simulator do); (3) the site's FCFS wait is the same for every region; (4) in the
offloaded stream's sojourn law the arrival SCV is that of the region's whole offloaded stream (p_j ca_j² +
1 - p_j), not of the share sent to one link: identical for Poisson arrivals. The TTFT convention is the
single pair's: prefill waits + decode-slot wait + zero-wait route latency.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from prfaas_plan._frozen import frozen
from prfaas_plan.latency.distribution import TtftLaw, TtftSummary, ttft_law
from prfaas_plan.latency.stages import RouteMoments, StageState, Wait, ggc_wait, route_moments, stage_state
from prfaas_plan.latency.unloaded import TTFT_LEVELS, route_mean_s, solve_quantiles, ttft_bracket
from prfaas_plan.optimize.topology import TopologyModel, TopologyPlan
from prfaas_plan.throughput import STAGES

# Waits are bounded by their quantile at this level when bracketing TTFT quantiles (as the single pair does).
_WAIT_BOUND_LEVEL = 1.0 - 1e-9


@frozen
class RegionLoadedTtft:
    """One region's loaded TTFT (None when a stage it uses is unstable, then ``unstable`` names it)."""

    cluster: str
    rate_req_per_s: float
    offload_fraction: float
    shares: Mapping[str, float]
    ttft: TtftSummary | None
    unstable: str | None
    #: Utilisation of the region's local prefill and decode, and of each link it uses (by site).
    utilization: Mapping[str, float]


@frozen
class TopologyLoadedTtft:
    """Every region's loaded TTFT at ``load`` x the plan's λ, and every site's utilisation."""

    load: float
    regions: tuple[RegionLoadedTtft, ...]
    site_utilization: Mapping[str, float]


@frozen
class _SiteState:
    wait: Wait
    utilization: float


def _scalar(value: object) -> float:
    return float(np.asarray(value).reshape(-1)[0])


def _site_states(
    tm: TopologyModel, plan: TopologyPlan, load: float, moments: Mapping[int, RouteMoments]
) -> list[_SiteState]:
    """The G/G/c wait of each site under the rates the plan routes to it (see the module docstring)."""
    out = []
    for k in range(tm.n_sites):
        rates, means, seconds, scvs = [], [], [], []
        for q in np.flatnonzero(tm.pair_site == k):
            j = int(tm.pair_region[q])
            region = plan.regions[j]
            share = region.shares.get(tm.sites[k], 0.0)
            m = moments[int(q)]
            p = _scalar(m.offload_fraction)
            rate = load * region.carried_req_per_s * p * share
            if not rate > 0:
                continue
            split = p * share
            rates.append(rate)
            mean = _scalar(m.prfaas_mean_s)
            means.append(mean)
            seconds.append(mean**2 * (1.0 + _scalar(m.prfaas_scv)))
            scvs.append(split * tm.local[j].interarrival_scv + (1.0 - split))
        servers = float(tm.site_instances[k])
        if not rates:
            out.append(
                _SiteState(wait=Wait(p_wait=np.asarray(0.0), conditional_mean_s=np.asarray(0.0)), utilization=0.0)
            )
            continue
        r = np.asarray(rates)
        total = float(r.sum())
        weight = r / total
        mean = float(weight @ np.asarray(means))
        second = float(weight @ np.asarray(seconds))
        service_scv = max(second / mean**2 - 1.0, 0.0) if mean > 0 else 0.0
        arrival_scv = float(weight @ np.asarray(scvs))
        busy = total * mean
        utilization = busy / servers if servers > 0 else np.inf
        wait = ggc_wait(servers, total, mean, arrival_scv, service_scv)
        out.append(
            _SiteState(
                wait=Wait(
                    p_wait=np.asarray(_scalar(wait.p_wait)),
                    conditional_mean_s=np.asarray(_scalar(wait.conditional_mean_s)),
                ),
                utilization=float(utilization),
            )
        )
    return out


def _pair_state(
    base: StageState, moments: RouteMoments, site: _SiteState, link_rho: float, arrival_scv: float
) -> StageState:
    """The single pair's stage state with the site's shared wait and the link loaded by this pair alone."""
    utilization = dict(base.utilization)
    utilization["prfaas_compute"] = np.asarray(site.utilization)
    utilization["prfaas_link"] = np.asarray(link_rho)
    stable = all(_scalar(utilization[s]) < 1.0 for s in STAGES)
    link_scv = _scalar(moments.link_scv)
    burst = (arrival_scv + link_scv) / (1.0 + link_scv)
    stretch = 1.0 + burst * link_rho / (1.0 - link_rho) if stable else float("nan")
    return StageState(
        rate_req_per_s=base.rate_req_per_s,
        utilization=utilization,
        stable=np.asarray(stable),
        prfaas_wait=site.wait,
        local_wait=base.local_wait,
        decode_wait=base.decode_wait,
        link_stretch=np.asarray(stretch),
        link_wait_mean_s=np.asarray((stretch - 1.0) * _scalar(moments.link_mean_s)),
    )


def _wait_tail(wait: Wait) -> float:
    return _scalar(wait.quantile_s(_WAIT_BOUND_LEVEL))


def topology_loaded_ttft(
    tm: TopologyModel, plan: TopologyPlan, load: float, *, decode_service_scv: float = 0.0
) -> TopologyLoadedTtft:
    """P50/P90/P99 and mean TTFT of every region of ``plan`` when each carries ``load`` x its planned rate."""
    if not (load >= 0.0 and np.isfinite(load)):
        raise ValueError(f"load must be a finite number >= 0, got {load}")
    moments = {
        q: route_moments(tm.pair_model[q], np.asarray(plan.regions[int(tm.pair_region[q])].threshold_tokens))
        for q in range(tm.pair_region.size)
    }
    sites = _site_states(tm, plan, load, moments)
    out = []
    for j, region in enumerate(plan.regions):
        model = tm.local[j]
        rate = load * region.carried_req_per_s
        own = route_moments(model, np.asarray(region.threshold_tokens))
        base = stage_state(model, own, region.n_pd_prefill, region.n_pd_decode, rate, decode_service_scv)
        p = _scalar(own.offload_fraction)
        utilization = {
            "pd_prefill": _scalar(base.utilization["pd_prefill"]),
            "pd_decode": _scalar(base.utilization["pd_decode"]),
        }
        laws: list[tuple[float, TtftLaw, StageState, float]] = []  # share, law, state, offloaded mean
        unstable = next((s for s in ("pd_prefill", "pd_decode") if not utilization[s] < 1.0), None)
        used = [
            int(q)
            for q in np.flatnonzero(tm.pair_region == j)
            if p > 0 and region.shares.get(tm.sites[int(tm.pair_site[q])], 0.0) > 0
        ]
        for q in used:
            k = int(tm.pair_site[q])
            share = region.shares[tm.sites[k]]
            m = moments[q]
            link_rho = rate * p * share * _scalar(m.link_mean_s)
            utilization[f"link {tm.sites[k]}"] = link_rho
            utilization[f"site {tm.sites[k]}"] = sites[k].utilization
            if unstable is None and not sites[k].utilization < 1.0:
                unstable = f"site {tm.sites[k]}"
            if unstable is None and not link_rho < 1.0:
                unstable = f"link {tm.sites[k]}"
            if unstable is not None:
                continue
            split_scv = p * share * model.interarrival_scv + (1.0 - p * share)
            state = _pair_state(base, m, sites[k], link_rho, split_scv)
            law = ttft_law(tm.pair_model[q], m, state)
            if law.offload_sojourn:
                offload_mean = p * law.offload_zero_wait_mean_s
            else:
                offload_mean = route_mean_s(law.lengths, law.route, law.threshold_tokens, law.link_stretch)[1]
            laws.append((share, law, state, offload_mean))
        shares = {tm.sites[int(tm.pair_site[q])]: region.shares[tm.sites[int(tm.pair_site[q])]] for q in used}
        if unstable is not None:
            out.append(
                RegionLoadedTtft(
                    cluster=region.cluster,
                    rate_req_per_s=rate,
                    offload_fraction=p,
                    shares=shares,
                    ttft=None,
                    unstable=unstable,
                    utilization=utilization,
                )
            )
            continue
        if not laws:  # nothing offloaded: the region's own single-pool law
            local_law = ttft_law(model, own, base)
            local_state = base
        else:
            local_law, local_state = laws[0][1], laws[0][2]
        w_local = _scalar(local_state.local_wait.mean_s)
        w_decode = _scalar(local_state.decode_wait.mean_s)
        local_mean = route_mean_s(local_law.lengths, local_law.route, local_law.threshold_tokens)[0]
        mean = local_mean + (1.0 - p) * (w_local + w_decode)
        low, high = ttft_bracket(local_law.lengths, local_law.route, local_law.threshold_tokens)
        tail = _wait_tail(local_state.local_wait) if p < 1 else 0.0
        for share, law, state, offload_mean in laws:
            mean += share * (offload_mean + p * (_scalar(state.prfaas_wait.mean_s) + w_decode))
            lo, hi = ttft_bracket(law.lengths, law.route, law.threshold_tokens, law.link_stretch)
            if law.offload_sojourn:
                g = law.offload_spread.latency_s
                lo, hi = min(lo, float(g[0])), max(hi, float(g[-1]))
            low, high = min(low, lo), max(high, hi)
            tail = max(tail, _wait_tail(state.prfaas_wait))
        high += tail + _wait_tail(local_state.decode_wait)

        def cdf(xs: np.ndarray, local_law: TtftLaw = local_law, laws: list = laws) -> np.ndarray:  # type: ignore[type-arg]
            total = local_law.local_part(xs)
            for share, law, _, _ in laws:
                total = total + share * law.offload_part(xs)
            return np.asarray(total, dtype=np.float64)

        p50, p90, p99 = (float(v) for v in solve_quantiles(cdf, np.asarray(TTFT_LEVELS), low, high))
        out.append(
            RegionLoadedTtft(
                cluster=region.cluster,
                rate_req_per_s=rate,
                offload_fraction=p,
                shares=shares,
                ttft=TtftSummary(mean_s=mean, p50_s=p50, p90_s=p90, p99_s=p99),
                unstable=None,
                utilization=utilization,
            )
        )
    return TopologyLoadedTtft(
        load=load,
        regions=tuple(out),
        site_utilization={s: sites[k].utilization for k, s in enumerate(tm.sites)},
    )
