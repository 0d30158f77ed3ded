"""Laws of the global plan on random small topologies (the paper's measured pools, random sizes, rates,
lengths and links):

- the global plan is never below either alternative (nearest site only, no sharing);
- no link carries more KV bytes per second than its bandwidth, no site more prefill seconds per second than
  its instances, and every region's long requests are all routed;
- adding a link or capacity anywhere never lowers the optimum: exactly for the LP at fixed thresholds and for
  the bound; for the search, when it starts from the smaller topology's thresholds; and the larger
  topology's bound is never below the smaller's plan.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.optimize.topology import global_search, plan_at, routing_at, topology_bound, topology_model
from prfaas_plan.optimize.topology_compare import compare
from prfaas_plan.spec.scenario import Scenario
from prfaas_plan.spec.topology import Topology, TopologyLink
from prfaas_plan.units import GBIT_PER_S
from tests.conftest import PAPER_SCENARIO, examples
from tests.topology.builders import grid_topology

_SCENARIO: Scenario = load_scenario(PAPER_SCENARIO)
_GRID = 17  # a coarse grid keeps each example fast; the laws hold at any grid


@st.composite
def topologies(draw: st.DrawFn) -> Topology:
    n_sites = draw(st.integers(1, 2))
    n_regions = draw(st.integers(1, 3))
    links: dict[tuple[int, int], float] = {}
    for j in range(n_regions):
        linked = draw(st.lists(st.integers(0, n_sites - 1), min_size=1, max_size=n_sites, unique=True))
        for k in linked:
            links[(k, j)] = draw(st.sampled_from([5.0, 25.0, 100.0]))
    return grid_topology(
        _SCENARIO,
        sites=draw(st.lists(st.integers(1, 6), min_size=n_sites, max_size=n_sites)),
        regions=draw(st.lists(st.integers(2, 12), min_size=n_regions, max_size=n_regions)),
        rates_req_per_s=draw(st.lists(st.floats(0.5, 5.0), min_size=n_regions, max_size=n_regions)),
        mus=draw(st.lists(st.floats(9.0, 10.5), min_size=n_regions, max_size=n_regions)),
        links=links,
        rtts_ms={key: float(draw(st.integers(1, 150))) for key in links},
    )


def _grown(topo: Topology, choice: int, index: int) -> Topology:
    """``topo`` with one thing more: a site or PD instance, a wider link, or a link it lacks."""
    clusters = list(topo.clusters)
    if choice == 0:  # one more instance somewhere
        i = index % len(clusters)
        clusters[i] = replace(clusters[i], pool=replace(clusters[i].pool, instances=clusters[i].pool.instances + 1))
        return replace(topo, clusters=tuple(clusters))
    missing = [
        (s.name, d.name) for s in topo.prfaas_clusters for d in topo.pd_clusters if topo.link(s.name, d.name) is None
    ]
    if choice == 2 and missing:  # a new link
        prfaas, pd = missing[index % len(missing)]
        new = TopologyLink(prfaas=prfaas, pd=pd, bandwidth_bytes_per_s=25 * GBIT_PER_S, rtt_s=0.05)
        return replace(topo, links=(*topo.links, new))
    links = list(topo.links)  # a wider link
    i = index % len(links)
    links[i] = replace(links[i], bandwidth_bytes_per_s=links[i].bandwidth_bytes_per_s * 2)
    return replace(topo, links=tuple(links))


@settings(max_examples=examples(6))
@given(topologies())
def test_global_plan_is_never_below_either_alternative_and_respects_every_capacity(topo: Topology) -> None:
    tm = topology_model(topo)
    result = compare(tm, _GRID)
    assert result.plan.scale >= result.nearest.plan.scale * (1 - 1e-9)
    assert result.plan.scale >= result.no_sharing.plan.scale * (1 - 1e-9)
    assert result.search.bound >= result.plan.scale * (1 - 1e-9)
    for plan in (result.plan, result.nearest.plan, result.no_sharing.plan):
        for link in plan.links:
            assert link.kv_bytes_per_s <= link.bandwidth_bytes_per_s * (1 + 1e-7)
        for use in plan.site_utilization.values():
            assert use <= 1 + 1e-7
        for j, region in enumerate(plan.regions):
            routed = sum(region.long_req_per_s_by_site.values())
            wanted = region.carried_req_per_s * region.offload_fraction
            assert abs(routed - wanted) <= 1e-7 * max(1.0, wanted)
            assert region.carried_req_per_s <= region.local_bound_req_per_s * (1 + 1e-9)
            assert region.carried_req_per_s == plan.scale * float(tm.rate_req_per_s[j])


@settings(max_examples=examples(6))
@given(topologies(), st.integers(0, 2), st.integers(0, 99))
def test_more_links_or_capacity_never_lower_the_optimum(topo: Topology, choice: int, index: int) -> None:
    small, big = topology_model(topo), topology_model(_grown(topo, choice, index))
    found = global_search(small, grid_points=_GRID)
    # at fixed thresholds the LP is exact, so it never falls
    assert routing_at(big, found.thresholds)[0].scale >= found.scale * (1 - 1e-9)
    # the search from the smaller topology's thresholds never ends lower
    assert global_search(big, (found.thresholds,), grid_points=_GRID).scale >= found.scale * (1 - 1e-9)
    # the bound never falls, and the larger topology's bound covers the smaller's plan
    big_bound = topology_bound(big, 4 * _GRID).scale
    assert big_bound >= topology_bound(small, 4 * _GRID).scale * (1 - 1e-9)
    assert big_bound >= found.scale * (1 - 1e-9)


def test_plan_at_upper_thresholds_offloads_nothing() -> None:
    topo = grid_topology(_SCENARIO, sites=[2], regions=[8], rates_req_per_s=[1.0], mus=[9.9], links={(0, 0): 100.0})
    tm = topology_model(topo)
    plan = plan_at(tm, np.array([131_072.0]), "local only")
    assert plan.regions[0].offload_fraction == 0.0
    assert plan.links[0].req_per_s == 0.0
