"""N-1 on a topology's global plan (fluid throughput; no queueing): what each single loss costs.

- **a PrfaaS site lost, rerouted**: the site and its links are gone; thresholds, splits and routing are
  planned again (the global search, started from the plan's thresholds);
- **a PrfaaS site lost, kept local**: nothing is re-planned; each region keeps its threshold and its other
  sites' shares, and prefills the long requests it sent to the lost site on its own PD cluster (at the local
  curve's cost of l_long), re-splitting its instances between prefill and decode (best integer split);
- **a link lost**: the link is gone; planned again;
- **a PD cluster drained**: the cluster and its traffic leave the topology (served elsewhere, outside this
  model); the others are planned again on the sites it no longer uses.

Each loss reports the common scale factor λ and every remaining region's carried rate, beside the plan's.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.optimize.topology import (
    GRID_POINTS,
    Array,
    TopologyModel,
    TopologyPlan,
    global_search,
    region_terms,
    restricted,
)
from prfaas_plan.throughput import routing


@frozen
class FaultResult:
    """One loss: what it is, λ after it, and the rate every region carries (0 for a drained one)."""

    fault: str
    kind: str
    scale: float
    carried_req_per_s: dict[str, float]
    #: The thresholds of the plan after the loss (one per remaining region).
    thresholds: tuple[float, ...] = ()

    @property
    def throughput_req_per_s(self) -> float:
        """What all regions carry together."""
        return sum(self.carried_req_per_s.values())


def _without_site(tm: TopologyModel, k: int) -> TopologyModel:
    sub = restricted(tm, tm.pair_site != k)
    instances = tm.site_instances.copy()
    instances[k] = 0.0
    return replace(sub, site_instances=instances)


def _without_region(tm: TopologyModel, j: int) -> TopologyModel:
    sub = restricted(tm, tm.pair_region != j)
    keep = np.arange(tm.n_regions) != j
    remap = np.cumsum(keep) - 1
    return replace(
        sub,
        regions=tuple(r for i, r in enumerate(tm.regions) if i != j),
        rate_req_per_s=tm.rate_req_per_s[keep],
        local=tuple(m for i, m in enumerate(tm.local) if i != j),
        pair_region=remap[sub.pair_region].astype(np.int64),
        local_instances=tm.local_instances[keep],
    )


def _replanned(fault: str, kind: str, tm: TopologyModel, seed: Array, grid_points: int) -> FaultResult:
    found = global_search(tm, (seed,), grid_points=grid_points)
    return FaultResult(
        fault=fault,
        kind=kind,
        scale=found.scale,
        carried_req_per_s={r: found.scale * float(tm.rate_req_per_s[j]) for j, r in enumerate(tm.regions)},
        thresholds=tuple(float(t) for t in found.thresholds),
    )


def _best_split(n: int, prefill_s_per_scale: float, decode_per_instance: float) -> float:
    """max over integer N_p in 0..n-1 of min(N_p / a, (n - N_p) θ) with a = prefill seconds per unit of λ
    (inf when nothing is prefilled locally) and θ = decode instances' scale factor per instance."""
    if prefill_s_per_scale <= 0:
        return n * decode_per_instance
    n_p = np.arange(n, dtype=np.float64)
    return float(np.max(np.minimum(n_p / prefill_s_per_scale, (n - n_p) * decode_per_instance)))


def kept_local(tm: TopologyModel, plan: TopologyPlan, k: int) -> FaultResult:
    """Site k lost with nothing re-planned: its share of every region's long requests is prefilled locally."""
    lost = tm.sites[k]
    limits: list[float] = []
    site_load = np.zeros(tm.n_sites)
    for j, region in enumerate(plan.regions):
        model = tm.local[j]
        rate = float(tm.rate_req_per_s[j])
        terms = region_terms(tm, j, np.array([region.threshold_tokens]))
        route = routing(model.lengths, region.threshold_tokens)
        p = float(route.offload_fraction)
        shares = region.shares
        moved = shares.get(lost, 0.0) if p > 0 else 0.0
        local_prefill = 0.0
        if p < 1:
            local_prefill += (1 - p) * float(model.local_prefill(float(route.short_tokens)))
        if moved > 0:
            local_prefill += p * moved * float(model.local_prefill(float(route.long_tokens)))
        theta = model.decode_req_per_s_per_instance / rate
        limits.append(_best_split(int(tm.local_instances[j]), rate * local_prefill, theta))
        for row, q in enumerate(np.flatnonzero(tm.pair_region == j)):
            site = int(tm.pair_site[q])
            share = shares.get(tm.sites[site], 0.0) if site != k else 0.0
            flow = rate * p * share  # long requests per second per unit of λ
            if flow > 0:
                site_load[site] += flow * float(terms.site_seconds_per_req[row, 0])
                limits.append(float(tm.bandwidth_bytes_per_s[q] / (flow * terms.kv_bytes_per_req[row, 0])))
    for site in range(tm.n_sites):
        if site != k and site_load[site] > 0:
            limits.append(float(tm.site_instances[site] / site_load[site]))
    scale = min(limits)
    return FaultResult(
        fault=f"site {lost} lost, kept local",
        kind="site_kept_local",
        scale=scale,
        carried_req_per_s={r: scale * float(tm.rate_req_per_s[j]) for j, r in enumerate(tm.regions)},
        thresholds=tuple(r.threshold_tokens for r in plan.regions),
    )


def better_seeds(plan: TopologyPlan, faults: list[FaultResult]) -> list[Array]:
    """Thresholds of re-planned losses of a site or link (restrictions of the topology, so feasible for it)
    that carry more than ``plan``: each proves the global search stopped short, and seeds it again."""
    return [
        np.array(f.thresholds)
        for f in faults
        if f.kind in ("site_rerouted", "link") and f.scale > plan.scale * (1 + 1e-9)
    ]


def n_minus_one(tm: TopologyModel, plan: TopologyPlan, grid_points: int = GRID_POINTS) -> list[FaultResult]:
    """Every single loss of the module docstring, in order: sites (rerouted, kept local), links, PD clusters."""
    thresholds = np.array([r.threshold_tokens for r in plan.regions])
    out: list[FaultResult] = []
    for k, site in enumerate(tm.sites):
        lost = _without_site(tm, k)
        out.append(_replanned(f"site {site} lost, rerouted", "site_rerouted", lost, thresholds, grid_points))
        out.append(kept_local(tm, plan, k))
    for q in range(tm.pair_region.size):
        name = f"link {tm.sites[int(tm.pair_site[q])]} → {tm.regions[int(tm.pair_region[q])]} lost"
        keep: NDArray[np.bool_] = np.arange(tm.pair_region.size) != q
        out.append(_replanned(name, "link", restricted(tm, keep), thresholds, grid_points))
    if tm.n_regions > 1:
        for j, region in enumerate(tm.regions):
            sub = _without_region(tm, j)
            result = _replanned(f"{region} drained", "pd_drained", sub, np.delete(thresholds, j), grid_points)
            carried = {r: 0.0 if r == region else result.carried_req_per_s[r] for r in tm.regions}
            out.append(replace(result, carried_req_per_s=carried))
    return out
