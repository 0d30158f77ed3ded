"""The global plan of a topology beside its two natural alternatives (issue 23):

- **nearest site only**: every PD cluster offloads to one PrfaaS site, the one with the shortest round-trip
  time (links without ``rtt_ms`` count as farther than any with one; ties and links without RTT go to the
  widest link), and the thresholds and routing are optimised as for the global plan on that sub-topology;
- **no sharing** (a PrfaaS site per region): each PrfaaS cluster's instances are split among the PD clusters it
  links to in proportion to their rates r_j (a fractional split: the rule is a relaxation of buying each
  region its own instances), every region is planned alone on its slices and links, and the common scale
  factor is the smallest region's, min_j λ_j (every region must carry λ · r_j).

Both are feasible points of the global LP at their thresholds (fewer links, or capacity partitioned), so the
global search starts from their thresholds, and because it only accepts improvements the global plan is never
below either (tests/topology/test_properties.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InfeasibleError
from prfaas_plan.optimize.topology import (
    GRID_POINTS,
    Array,
    GlobalSearch,
    LinkLoad,
    RegionPlan,
    TopologyModel,
    TopologyPlan,
    global_search,
    plan_at,
    region_only,
    restricted,
)

#: Topologies of at most this many links also restart the global search from the plans of the topology with
#: one link removed (``compare``), at most RESTART_ROUNDS times.
RESTART_LINKS = 16
RESTART_ROUNDS = 3


def _distance(tm: TopologyModel, q: int) -> tuple[float, float]:
    """Pair q's order as a nearest site: its RTT (none: after any given), then the widest link first."""
    link = tm.topology.link(tm.sites[int(tm.pair_site[q])], tm.regions[int(tm.pair_region[q])])
    assert link is not None
    return (np.inf if link.rtt_s is None else link.rtt_s, -link.bandwidth_bytes_per_s)


def nearest_pairs(tm: TopologyModel) -> NDArray[np.bool_]:
    """Per linked pair: whether its site is its region's nearest (shortest RTT, then widest link)."""
    keep = np.zeros(tm.pair_region.size, dtype=bool)
    for j in range(tm.n_regions):
        pairs = np.flatnonzero(tm.pair_region == j).tolist()
        if pairs:
            keep[min(pairs, key=lambda q: _distance(tm, q))] = True
    return keep


@frozen
class Alternative:
    """An alternative's plan, its thresholds (one per region) and the LPs its search solved."""

    plan: TopologyPlan
    thresholds: Array
    lp_solves: int


def nearest_only(tm: TopologyModel, grid_points: int = GRID_POINTS) -> Alternative:
    """Every PD cluster with its nearest PrfaaS site only, optimised like the global plan."""
    sub = restricted(tm, nearest_pairs(tm))
    found = global_search(sub, grid_points=grid_points)
    plan = plan_at(sub, found.thresholds, "nearest site only", found.lp_solves)
    return Alternative(plan=_with_all_links(tm, plan), thresholds=found.thresholds, lp_solves=found.lp_solves)


def no_sharing_instances(tm: TopologyModel) -> NDArray[np.float64]:
    """Region x site: the PrfaaS instances each region gets of each site it links to, in proportion to the
    regions' rates among the site's linked regions (the no-sharing rule)."""
    share = np.zeros((tm.n_regions, tm.n_sites))
    share[tm.pair_region, tm.pair_site] = tm.rate_req_per_s[tm.pair_region]
    totals = share.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(np.where(totals > 0, share / totals * tm.site_instances, 0.0), dtype=np.float64)


def no_sharing(tm: TopologyModel, grid_points: int = GRID_POINTS) -> Alternative:
    """Each region alone on its share of every site it links to; the common λ is the smallest region's."""
    instances = no_sharing_instances(tm)
    plans: list[TopologyPlan] = []
    thresholds = np.empty(tm.n_regions)
    solves = 0
    for j in range(tm.n_regions):
        sub = region_only(tm, j, instances[j])
        found = global_search(sub, grid_points=grid_points)
        solves += found.lp_solves
        thresholds[j] = found.thresholds[0]
        plans.append(plan_at(sub, found.thresholds, tm.regions[j]))
    scale = min(p.scale for p in plans)
    regions: list[RegionPlan] = []
    links: dict[tuple[str, str], LinkLoad] = {}
    busy = dict.fromkeys(tm.sites, 0.0)
    for j, own in enumerate(plans):
        shrink = scale / own.scale
        region = own.regions[0]
        regions.append(
            RegionPlan(
                cluster=region.cluster,
                threshold_tokens=region.threshold_tokens,
                offload_fraction=region.offload_fraction,
                n_pd_prefill=region.n_pd_prefill,
                n_pd_decode=region.n_pd_decode,
                carried_req_per_s=scale * float(tm.rate_req_per_s[j]),
                local_bound_req_per_s=region.local_bound_req_per_s,
                long_req_per_s_by_site={k: v * shrink for k, v in region.long_req_per_s_by_site.items()},
            )
        )
        for link in own.links:
            links[(link.prfaas, link.pd)] = LinkLoad(
                prfaas=link.prfaas,
                pd=link.pd,
                req_per_s=link.req_per_s * shrink,
                kv_bytes_per_s=link.kv_bytes_per_s * shrink,
                bandwidth_bytes_per_s=link.bandwidth_bytes_per_s,
            )
        for k, site in enumerate(tm.sites):
            if instances[j, k] > 0:
                busy[site] += own.site_utilization[site] * instances[j, k] * shrink
    plan = TopologyPlan(
        label="no sharing (a site per region)",
        scale=scale,
        regions=tuple(regions),
        links=tuple(links[(lk.prfaas, lk.pd)] for lk in _all_links(tm)),
        site_utilization={s: float(busy[s] / tm.site_instances[k]) for k, s in enumerate(tm.sites)},
        lp_solves=solves,
    )
    return Alternative(plan=plan, thresholds=thresholds, lp_solves=solves)


def _all_links(tm: TopologyModel) -> list[LinkLoad]:
    return [
        LinkLoad(
            prfaas=tm.sites[int(tm.pair_site[q])],
            pd=tm.regions[int(tm.pair_region[q])],
            req_per_s=0.0,
            kv_bytes_per_s=0.0,
            bandwidth_bytes_per_s=float(tm.bandwidth_bytes_per_s[q]),
        )
        for q in range(tm.pair_region.size)
    ]


def _with_all_links(tm: TopologyModel, plan: TopologyPlan) -> TopologyPlan:
    """``plan`` (of a sub-topology) listing every link of ``tm``, unused ones at zero load."""
    used = {(lk.prfaas, lk.pd): lk for lk in plan.links}
    links = tuple(used.get((lk.prfaas, lk.pd), lk) for lk in _all_links(tm))
    return TopologyPlan(
        label=plan.label,
        scale=plan.scale,
        regions=plan.regions,
        links=links,
        site_utilization=plan.site_utilization,
        lp_solves=plan.lp_solves,
    )


@frozen
class TopologyComparison:
    """The global plan, its proven bound, and the two alternatives."""

    plan: TopologyPlan
    search: GlobalSearch
    nearest: Alternative
    no_sharing: Alternative

    @property
    def sharing_gain(self) -> float:
        """λ of the global plan over λ without sharing (the gain of sharing PrfaaS sites)."""
        return self.plan.scale / self.no_sharing.plan.scale

    @property
    def nearest_gain(self) -> float:
        """λ of the global plan over λ with every region on its nearest site only."""
        return self.plan.scale / self.nearest.plan.scale


def compare(tm: TopologyModel, grid_points: int = GRID_POINTS, seeds: Sequence[Array] = ()) -> TopologyComparison:
    """The two alternatives, then the global plan searched from their thresholds and ``seeds`` (never below
    either alternative nor any seed's LP)."""
    near = nearest_only(tm, grid_points)
    alone = no_sharing(tm, grid_points)
    found = global_search(tm, (near.thresholds, alone.thresholds, *seeds), grid_points=grid_points)
    solves = found.lp_solves
    if tm.pair_region.size <= RESTART_LINKS:
        # The topology with one link fewer is a restriction: a plan of it is feasible here. Its search starts
        # elsewhere, and when it ends higher, the global search restarts from it (until none does).
        for _ in range(RESTART_ROUNDS):
            better = []
            for q in range(tm.pair_region.size):
                keep = np.arange(tm.pair_region.size) != q
                fewer = global_search(restricted(tm, keep), (found.thresholds,), grid_points=grid_points)
                solves += fewer.lp_solves
                if fewer.scale > found.scale * (1 + 1e-9):
                    better.append(fewer.thresholds)
            if not better:
                break
            again = global_search(tm, (found.thresholds, *better), grid_points=grid_points)
            solves += again.lp_solves
            found = again if again.scale > found.scale else found
    found = replace(found, lp_solves=solves)
    if not found.scale > 0:
        raise InfeasibleError("no load can be carried: a region has no capacity at any threshold")
    plan = plan_at(tm, found.thresholds, "global plan", found.lp_solves)
    return TopologyComparison(plan=plan, search=found, nearest=near, no_sharing=alone)
