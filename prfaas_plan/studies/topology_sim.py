"""A topology's plan simulated (``sim.topology``): every region at ``load`` x its share of the plan's λ, the
plan's thresholds, splits and routing shares, optionally with a site or a link lost mid-run; per region the
simulated TTFT percentiles, and whether every request that arrived was completed."""

from __future__ import annotations

import numpy as np

from prfaas_plan._frozen import frozen
from prfaas_plan.optimize.topology import TopologyModel, TopologyPlan
from prfaas_plan.sim.topology import FaultSim, PairSim, RegionSim, TopologyRun, simulate_topology


@frozen
class RegionTtft:
    """One region's simulated TTFT (s) and its request counts."""

    cluster: str
    offered_req_per_s: float
    mean_s: float
    p50_s: float
    p90_s: float
    arrived: int
    completed: int


@frozen
class TopologySimulation:
    """A simulated run of a plan: per region TTFT, the fault (if any) and requests moved by it."""

    label: str
    load: float
    regions: tuple[RegionTtft, ...]
    moved_by_faults: int

    @property
    def conserved(self) -> bool:
        """Every request that arrived was completed (nothing dropped)."""
        return all(r.arrived == r.completed for r in self.regions)


def sim_inputs(tm: TopologyModel, plan: TopologyPlan, load: float) -> tuple[list[RegionSim], list[int], list[PairSim]]:
    """The simulator's view of ``plan`` at ``load`` x λ: regions, site instances, pairs."""
    site_index = {s: k for k, s in enumerate(tm.sites)}
    regions = [
        RegionSim(
            model=tm.local[j],
            threshold_tokens=r.threshold_tokens,
            n_pd_prefill=r.n_pd_prefill,
            n_pd_decode=r.n_pd_decode,
            rate_req_per_s=load * r.carried_req_per_s,
            shares={site_index[s]: v for s, v in r.shares.items()},
        )
        for j, r in enumerate(plan.regions)
    ]
    pairs = [
        PairSim(
            region=int(tm.pair_region[q]),
            site=int(tm.pair_site[q]),
            model=tm.pair_model[q],
            bandwidth_bytes_per_s=float(tm.bandwidth_bytes_per_s[q]),
        )
        for q in range(tm.pair_region.size)
    ]
    return regions, [int(n) for n in tm.site_instances], pairs


def simulate_plan(
    tm: TopologyModel,
    plan: TopologyPlan,
    *,
    load: float,
    requests_per_region: int,
    seed: int,
    faults: tuple[FaultSim, ...] = (),
    label: str = "plan",
) -> TopologySimulation:
    """Simulate ``plan`` at ``load`` x λ (each region at its share), with ``faults``."""
    regions, sites, pairs = sim_inputs(tm, plan, load)
    run: TopologyRun = simulate_topology(
        regions, sites, pairs, requests_per_region=requests_per_region, seed=seed, faults=faults
    )
    out = []
    for j, r in enumerate(plan.regions):
        ttft = run.ttft_s[j]
        done = ttft[np.isfinite(ttft)]
        out.append(
            RegionTtft(
                cluster=r.cluster,
                offered_req_per_s=regions[j].rate_req_per_s,
                mean_s=float(np.mean(done)) if done.size else float("nan"),
                p50_s=float(np.quantile(done, 0.5)) if done.size else float("nan"),
                p90_s=float(np.quantile(done, 0.9)) if done.size else float("nan"),
                arrived=run.arrived[j],
                completed=run.completed[j],
            )
        )
    return TopologySimulation(label=label, load=load, regions=tuple(out), moved_by_faults=run.moved_by_faults)


def fault_runs(
    tm: TopologyModel, plan: TopologyPlan, *, load: float, requests_per_region: int, seed: int
) -> list[TopologySimulation]:
    """The plan with nothing lost, then each site lost (its share to the region's other sites; or prefilled
    locally) and each link lost, a quarter of the way into the run (a quarter of the slowest region's arrival
    span). Thresholds and splits are the plan's throughout: no re-planning after the loss."""
    horizon_s = requests_per_region / (load * min(r.carried_req_per_s for r in plan.regions if r.carried_req_per_s > 0))
    at_s = 0.25 * horizon_s
    runs = [simulate_plan(tm, plan, load=load, requests_per_region=requests_per_region, seed=seed, label="no loss")]
    for k, site in enumerate(tm.sites):
        for keep_local in (False, True):
            fault = FaultSim(kind="site", at_s=at_s, site=k, keep_local=keep_local)
            how = "its share prefilled locally" if keep_local else "its share to the other sites"
            label = f"site {site} lost, {how} (plan kept)"
            runs.append(
                simulate_plan(
                    tm,
                    plan,
                    load=load,
                    requests_per_region=requests_per_region,
                    seed=seed,
                    faults=(fault,),
                    label=label,
                )
            )
    for q in range(tm.pair_region.size):
        j, k = int(tm.pair_region[q]), int(tm.pair_site[q])
        fault = FaultSim(kind="link", at_s=at_s, site=k, region=j)
        label = f"link {tm.sites[k]} → {tm.regions[j]} lost (plan kept)"
        runs.append(
            simulate_plan(
                tm, plan, load=load, requests_per_region=requests_per_region, seed=seed, faults=(fault,), label=label
            )
        )
    return runs
