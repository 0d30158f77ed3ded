"""Topologies built in Python from the paper scenario's pools and traffic (measured H200 PrfaaS and H20 PD
profiles, the §4.1 lognormal), for tests and the scale benchmark."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from prfaas_plan.lengths import TruncatedLogNormal
from prfaas_plan.spec.scenario import Scenario
from prfaas_plan.spec.topology import Cluster, RegionTraffic, Topology, TopologyLink
from prfaas_plan.units import GBIT_PER_S


def grid_topology(
    scenario: Scenario,
    *,
    sites: list[int],
    regions: list[int],
    rates_req_per_s: list[float],
    mus: list[float],
    links: dict[tuple[int, int], float],
    rtts_ms: dict[tuple[int, int], float] | None = None,
) -> Topology:
    """Sites with ``sites[k]`` PrfaaS instances, PD clusters with ``regions[j]`` instances, region j's input
    lengths the scenario's lognormal with mu ``mus[j]`` at rate ``rates_req_per_s[j]``, and a link of
    ``links[(k, j)]`` Gbit/s from site k to region j (RTT ``rtts_ms[(k, j)]`` when given)."""
    base = scenario.traffic.input_length
    assert isinstance(base, TruncatedLogNormal)
    clusters = [
        Cluster(name=f"site{k}", kind="prfaas", region=f"r{k}", pool=replace(scenario.prfaas, instances=n))
        for k, n in enumerate(sites)
    ] + [
        Cluster(name=f"pd{j}", kind="pd", region=f"r{j}", pool=replace(scenario.local, instances=n))
        for j, n in enumerate(regions)
    ]
    return Topology(
        name="built",
        description="",
        file="<built>",
        model=scenario.model,
        slo=scenario.slo,
        clusters=tuple(clusters),
        links=tuple(
            TopologyLink(
                prfaas=f"site{k}",
                pd=f"pd{j}",
                bandwidth_bytes_per_s=gbit * GBIT_PER_S,
                rtt_s=None if rtts_ms is None else rtts_ms[(k, j)] / 1e3,
            )
            for (k, j), gbit in sorted(links.items())
        ),
        traffic=tuple(
            RegionTraffic(
                cluster=f"pd{j}",
                rate_req_per_s=rate,
                traffic=replace(scenario.traffic, input_length=replace(base, mu=mu)),
            )
            for j, (rate, mu) in enumerate(zip(rates_req_per_s, mus, strict=True))
        ),
        cost=scenario.cost,
    )


def random_full_matrix(scenario: Scenario, n_sites: int, n_regions: int, seed: int) -> Topology:
    """A full link matrix of ``n_sites`` x ``n_regions`` with random sizes, rates and lengths (a fixed seed)."""
    rng = np.random.default_rng(seed)
    return grid_topology(
        scenario,
        sites=[int(x) for x in rng.integers(1, 9, n_sites)],
        regions=[int(x) for x in rng.integers(4, 17, n_regions)],
        rates_req_per_s=[float(x) for x in rng.uniform(0.5, 5.0, n_regions)],
        mus=[float(x) for x in rng.uniform(9.0, 10.5, n_regions)],
        links={(k, j): float(rng.choice([10.0, 25.0, 50.0, 100.0])) for k in range(n_sites) for j in range(n_regions)},
        rtts_ms={(k, j): float(rng.uniform(1.0, 150.0)) for k in range(n_sites) for j in range(n_regions)},
    )
