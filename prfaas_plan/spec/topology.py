"""What a topology is: several PrfaaS clusters and several local PD clusters of one model, the cross-datacentre
links between PrfaaS and PD clusters, and each PD cluster's own traffic.

A single-cluster scenario is the topology of one PrfaaS cluster, one PD cluster and one link
(``topology_of_scenario``); the 1 x 1 scenario of one region with one PrfaaS site (``pair_scenario``) is what
the stage model (``throughput.stage_model``) prices, so every cost curve of a topology is the one a scenario
of the same pools would have.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from types import MappingProxyType
from typing import Literal

from prfaas_plan._frozen import frozen
from prfaas_plan.spec.cost import CostInputs, LinkPricing
from prfaas_plan.spec.scenario import Link, ModelCard, Pool, Scenario, Slo, Traffic, TransferMode

ClusterKind = Literal["prfaas", "pd"]
CLUSTER_KINDS: tuple[ClusterKind, ...] = ("prfaas", "pd")

#: The rate given to the one region of a scenario turned into a topology: the common scale factor the global
#: plan maximises is then the scenario's Λ_max in req/s.
SCENARIO_RATE_REQ_PER_S = 1.0


@frozen
class Cluster:
    """One cluster of identical instances: a PrfaaS prefill cluster or a local PD cluster (split into N_p
    prefill and N_d decode instances by the plan), in a region, with an optional GPU-hour price override."""

    name: str
    kind: ClusterKind
    region: str
    pool: Pool
    #: USD per GPU-hour of this cluster (None: the topology's cost section, then the hardware profile's).
    gpu_usd_per_hour: float | None = None
    source: str = ""


@frozen
class TopologyLink:
    """A cross-datacentre link carrying KV caches from PrfaaS cluster ``prfaas`` to PD cluster ``pd``.

    ``rtt_s`` (None: not given) decides which PrfaaS site is a PD cluster's nearest; ``pricing`` is billed
    like a scenario's link (ports, committed bandwidth, egress per GB)."""

    prfaas: str
    pd: str
    bandwidth_bytes_per_s: float
    rtt_s: float | None = None
    transfer: TransferMode = "after_prefill"
    pricing: LinkPricing = field(default_factory=LinkPricing)
    source: str = ""


@frozen
class RegionTraffic:
    """The traffic of one PD cluster: its mean arrival rate (req/s, the weight of the region in the common
    scale factor), lengths and arrival process."""

    cluster: str
    rate_req_per_s: float
    traffic: Traffic
    source: str = ""


@frozen
class Topology:
    """PrfaaS and PD clusters serving one model, the links between them and every PD cluster's traffic.

    Invariants the loader guarantees: cluster names are unique; every link joins a PrfaaS cluster to a PD
    cluster, at most one link per pair; every PD cluster has exactly one traffic entry; there is at least one
    cluster of each kind."""

    name: str
    description: str
    file: str
    model: ModelCard
    slo: Slo
    clusters: tuple[Cluster, ...]
    links: tuple[TopologyLink, ...]
    traffic: tuple[RegionTraffic, ...]
    cost: CostInputs = field(default_factory=CostInputs)

    @property
    def prfaas_clusters(self) -> tuple[Cluster, ...]:
        """The PrfaaS clusters, in file order."""
        return tuple(c for c in self.clusters if c.kind == "prfaas")

    @property
    def pd_clusters(self) -> tuple[Cluster, ...]:
        """The PD clusters, in file order."""
        return tuple(c for c in self.clusters if c.kind == "pd")

    @property
    def by_name(self) -> Mapping[str, Cluster]:
        """Clusters by name."""
        return MappingProxyType({c.name: c for c in self.clusters})

    def link(self, prfaas: str, pd: str) -> TopologyLink | None:
        """The link from ``prfaas`` to ``pd``, or None."""
        return next((k for k in self.links if k.prfaas == prfaas and k.pd == pd), None)

    def traffic_of(self, pd: str) -> RegionTraffic:
        """The traffic of PD cluster ``pd`` (KeyError if it has none: a loader bug)."""
        for entry in self.traffic:
            if entry.cluster == pd:
                return entry
        raise KeyError(pd)


def topology_of_scenario(scenario: Scenario) -> Topology:
    """A scenario as a topology: PrfaaS cluster ``prfaas``, PD cluster ``pd`` (both in region ``scenario``),
    one link, the scenario's traffic at ``SCENARIO_RATE_REQ_PER_S`` and its prices (the link's on the link)."""
    return Topology(
        name=scenario.name,
        description=scenario.description,
        file=scenario.file,
        model=scenario.model,
        slo=scenario.slo,
        clusters=(
            Cluster(name="prfaas", kind="prfaas", region="scenario", pool=scenario.prfaas),
            Cluster(name="pd", kind="pd", region="scenario", pool=scenario.local),
        ),
        links=(
            TopologyLink(
                prfaas="prfaas",
                pd="pd",
                bandwidth_bytes_per_s=scenario.link.bandwidth_bytes_per_s,
                transfer=scenario.link.transfer,
                pricing=scenario.cost.link,
                source=scenario.cost.link.source,
            ),
        ),
        traffic=(RegionTraffic(cluster="pd", rate_req_per_s=SCENARIO_RATE_REQ_PER_S, traffic=scenario.traffic),),
        cost=scenario.cost,
    )


def pair_scenario(topology: Topology, pd: str, prfaas: str, bandwidth_bytes_per_s: float) -> Scenario:
    """The 1 x 1 scenario of PD cluster ``pd`` (its pool and traffic) offloading to PrfaaS cluster ``prfaas``
    over a link of ``bandwidth_bytes_per_s`` (the pair's link when there is one): what the stage model prices
    for that pair. The PD cluster's kv_transfer and the link's transfer mode carry over."""
    clusters = topology.by_name
    link = topology.link(prfaas, pd)
    return Scenario(
        name=f"{topology.name}: {pd} with {prfaas}",
        description=topology.description,
        file=topology.file,
        model=topology.model,
        traffic=topology.traffic_of(pd).traffic,
        slo=topology.slo,
        prfaas=clusters[prfaas].pool,
        local=clusters[pd].pool,
        link=Link(
            bandwidth_bytes_per_s=bandwidth_bytes_per_s,
            transfer="after_prefill" if link is None else link.transfer,
        ),
        cost=topology.cost,
    )
