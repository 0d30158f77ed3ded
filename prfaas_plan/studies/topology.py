"""A topology's global plan beside its alternatives, priced: what ``prfaas-plan topology plan`` reports.

Prices: every cluster's GPUs at its own ``gpu_usd_per_hour`` (else the topology's cost section, else the
hardware profile's, ``optimize.cost.gpu_hour_price``), and each link that carries traffic in the plan at its
ports or committed bandwidth plus egress at the plan's KV bytes per second (a link the plan does not use is
not bought).
"""

from __future__ import annotations

from pathlib import Path

from prfaas_plan._frozen import frozen
from prfaas_plan.optimize.cost import egress_usd_per_hour, gpu_hour_price, link_fixed_usd_per_hour
from prfaas_plan.optimize.topology import GRID_POINTS, TopologyPlan, topology_model
from prfaas_plan.optimize.topology_compare import TopologyComparison, compare
from prfaas_plan.optimize.topology_faults import FaultResult, better_seeds, n_minus_one
from prfaas_plan.optimize.topology_ttft import TopologyLoadedTtft, topology_loaded_ttft
from prfaas_plan.spec.topology import Topology
from prfaas_plan.studies.topology_sim import TopologySimulation, fault_runs, simulate_plan

_SECONDS_PER_HOUR = 3600.0
#: Times the global search is restarted from a re-planned loss that beat it (``topology_study``).
RESEARCH_ROUNDS = 3


@frozen
class PlanPrice:
    """What a plan costs per hour at its λ, and per million requests carried (None: a GPU has no price)."""

    gpu_usd_per_hour: float | None
    link_usd_per_hour: float
    egress_usd_per_hour: float
    unpriced: tuple[str, ...]

    def total_usd_per_hour(self) -> float | None:
        """GPUs + links + egress."""
        if self.gpu_usd_per_hour is None:
            return None
        return self.gpu_usd_per_hour + self.link_usd_per_hour + self.egress_usd_per_hour


def plan_price(topology: Topology, plan: TopologyPlan) -> PlanPrice:
    """The hourly price of ``plan`` (see the module docstring)."""
    gpus = 0.0
    unpriced = []
    for cluster in topology.clusters:
        price = cluster.gpu_usd_per_hour
        if price is None:
            price, why = gpu_hour_price(cluster.pool.hardware_key, cluster.pool.accelerator, topology.cost)
            if price is None:
                unpriced.append(f"{cluster.name}: {why}")
                continue
        gpus += price * cluster.pool.gpus
    fixed = egress = 0.0
    for load in plan.links:
        link = topology.link(load.prfaas, load.pd)
        if link is None or not load.req_per_s > 0:
            continue
        fixed += link_fixed_usd_per_hour(link.pricing, link.bandwidth_bytes_per_s)
        egress += float(egress_usd_per_hour(link.pricing, load.kv_bytes_per_s))
    return PlanPrice(
        gpu_usd_per_hour=None if unpriced else gpus,
        link_usd_per_hour=fixed,
        egress_usd_per_hour=egress,
        unpriced=tuple(unpriced),
    )


@frozen
class TopologyStudy:
    """A topology, its comparison (global plan, bound, alternatives) and each plan's price."""

    topology: Topology
    comparison: TopologyComparison
    prices: dict[str, PlanPrice]
    #: N-1 on the global plan (``optimize.topology_faults``); empty unless asked for.
    faults: tuple[FaultResult, ...] = ()
    #: The global plan simulated (``studies.topology_sim``; with faults: every loss too); empty unless asked for.
    simulations: tuple[TopologySimulation, ...] = ()
    #: The global plan's closed-form loaded TTFT per region (``optimize.topology_ttft``); None unless asked for.
    loaded: TopologyLoadedTtft | None = None

    def usd_per_million_requests(self, plan: TopologyPlan) -> float | None:
        """The plan's hourly price over what it carries in an hour, per million requests."""
        total = self.prices[plan.label].total_usd_per_hour()
        if total is None or not plan.throughput_req_per_s > 0:
            return None
        return total / (plan.throughput_req_per_s * _SECONDS_PER_HOUR) * 1e6


@frozen
class SimulationRequest:
    """Simulate the global plan at ``load`` x λ with ``requests_per_region`` requests per region."""

    load: float
    requests_per_region: int
    seed: int = 0


def topology_study(
    topology: Topology,
    grid_points: int = GRID_POINTS,
    *,
    faults: bool = False,
    simulate: SimulationRequest | None = None,
    ttft_load: float | None = None,
    ttft_rate_req_per_s: float | None = None,
) -> TopologyStudy:
    """With ``ttft_load`` (a fraction of the global plan's λ) or ``ttft_rate_req_per_s`` (all regions together,
    at the plan's mix), the closed-form loaded TTFT per region.

    Price the topology, plan it globally and by both alternatives, price each plan, and with ``faults`` run
    N-1 on the global plan. A site or link lost and re-planned is a restriction of the topology, so when one
    carries more than the global plan the search stopped short: it is run again from that loss's thresholds
    and N-1 is redone on the better plan (at most ``RESEARCH_ROUNDS`` times)."""
    tm = topology_model(topology)
    result = compare(tm, grid_points)
    losses: list[FaultResult] = []
    if faults:
        losses = n_minus_one(tm, result.plan, grid_points)
        for _ in range(RESEARCH_ROUNDS):
            seeds = better_seeds(result.plan, losses)
            if not seeds:
                break
            # a loss re-planned carries more: the search stopped short; search again from there
            result = compare(tm, grid_points, seeds)
            losses = n_minus_one(tm, result.plan, grid_points)
    plans = (result.plan, result.nearest.plan, result.no_sharing.plan)
    runs: list[TopologySimulation] = []
    if simulate is not None:
        load, n, seed = simulate.load, simulate.requests_per_region, simulate.seed
        if faults:
            runs = fault_runs(tm, result.plan, load=load, requests_per_region=n, seed=seed)
        else:
            runs = [simulate_plan(tm, result.plan, load=load, requests_per_region=n, seed=seed, label="no loss")]
    if ttft_rate_req_per_s is not None and result.plan.throughput_req_per_s > 0:
        ttft_load = ttft_rate_req_per_s / result.plan.throughput_req_per_s
    loaded = None if ttft_load is None else topology_loaded_ttft(tm, result.plan, ttft_load)
    return TopologyStudy(
        topology=topology,
        loaded=loaded,
        comparison=result,
        prices={p.label: plan_price(topology, p) for p in plans},
        faults=tuple(losses),
        simulations=tuple(runs),
    )


def study_file(
    path: Path,
    grid_points: int = GRID_POINTS,
    *,
    faults: bool = False,
    simulate: SimulationRequest | None = None,
    ttft_load: float | None = None,
    ttft_rate_req_per_s: float | None = None,
) -> TopologyStudy:
    """``topology_study`` of a topology or scenario file."""
    from prfaas_plan.io.topology import load_topology

    return topology_study(
        load_topology(path),
        grid_points,
        faults=faults,
        simulate=simulate,
        ttft_load=ttft_load,
        ttft_rate_req_per_s=ttft_rate_req_per_s,
    )
