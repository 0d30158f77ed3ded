"""The discrete-event PrfaaS-PD cluster: arrivals, router, prefill pools, shared link, decode slots.

``simulate(ClusterConfig, Workload)`` runs one plan on pre-sampled requests and returns immutable
``Records``; ``summarize`` turns them into steady-state figures with confidence intervals. The engine
imports neither the closed form nor the optimiser: the workflows that choose a plan, simulate it and compare
it with the closed form live in ``prfaas_plan.studies``.

Beyond the static plan (issue 12): ``prefix_cache`` replays a trace through both clusters' hybrid prefix
caches; ``link_profile`` turns bandwidth profiles and outages into steps; ``dynamic`` is the cluster's
changing world (a strategy the one ``cluster.Cluster`` is given): it loses and restores instances and runs
the dual-timescale scheduler (``scheduler``); ``faults`` reads the TTFT spike and recovery time off the
records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prfaas_plan._lazy import lazy_getattr

if TYPE_CHECKING:
    from prfaas_plan.sim.arrivals import ArrivalProcess, OnOff, Poisson, Renewal
    from prfaas_plan.sim.cluster import ClusterConfig
    from prfaas_plan.sim.engine import Engine
    from prfaas_plan.sim.faults import FaultImpact, fault_impact
    from prfaas_plan.sim.link_profile import bandwidth_steps
    from prfaas_plan.sim.prefix_cache import CacheReplay, HitRates, replay_caches
    from prfaas_plan.sim.records import COLUMNS, STATES, Records, SimResult
    from prfaas_plan.sim.run import simulate
    from prfaas_plan.sim.summary import (
        Estimate,
        Summary,
        TtftStats,
        confidence_half_width,
        occupancy,
        replicate,
        summarize,
    )
    from prfaas_plan.sim.workload import MAX_REQUESTS, Workload, synthetic_workload, trace_workload

_EXPORTS = {
    "ArrivalProcess": "prfaas_plan.sim.arrivals",
    "COLUMNS": "prfaas_plan.sim.records",
    "CacheReplay": "prfaas_plan.sim.prefix_cache",
    "ClusterConfig": "prfaas_plan.sim.cluster",
    "Engine": "prfaas_plan.sim.engine",
    "Estimate": "prfaas_plan.sim.summary",
    "FaultImpact": "prfaas_plan.sim.faults",
    "HitRates": "prfaas_plan.sim.prefix_cache",
    "MAX_REQUESTS": "prfaas_plan.sim.workload",
    "OnOff": "prfaas_plan.sim.arrivals",
    "Poisson": "prfaas_plan.sim.arrivals",
    "Records": "prfaas_plan.sim.records",
    "Renewal": "prfaas_plan.sim.arrivals",
    "STATES": "prfaas_plan.sim.records",
    "SimResult": "prfaas_plan.sim.records",
    "Summary": "prfaas_plan.sim.summary",
    "TtftStats": "prfaas_plan.sim.summary",
    "Workload": "prfaas_plan.sim.workload",
    "bandwidth_steps": "prfaas_plan.sim.link_profile",
    "confidence_half_width": "prfaas_plan.sim.summary",
    "fault_impact": "prfaas_plan.sim.faults",
    "occupancy": "prfaas_plan.sim.summary",
    "replay_caches": "prfaas_plan.sim.prefix_cache",
    "replicate": "prfaas_plan.sim.summary",
    "simulate": "prfaas_plan.sim.run",
    "summarize": "prfaas_plan.sim.summary",
    "synthetic_workload": "prfaas_plan.sim.workload",
    "trace_workload": "prfaas_plan.sim.workload",
}
__all__ = [
    "COLUMNS",
    "MAX_REQUESTS",
    "STATES",
    "ArrivalProcess",
    "CacheReplay",
    "ClusterConfig",
    "Engine",
    "Estimate",
    "FaultImpact",
    "HitRates",
    "OnOff",
    "Poisson",
    "Records",
    "Renewal",
    "SimResult",
    "Summary",
    "TtftStats",
    "Workload",
    "bandwidth_steps",
    "confidence_half_width",
    "fault_impact",
    "occupancy",
    "replay_caches",
    "replicate",
    "simulate",
    "summarize",
    "synthetic_workload",
    "trace_workload",
]
__getattr__ = lazy_getattr(__name__, _EXPORTS)
