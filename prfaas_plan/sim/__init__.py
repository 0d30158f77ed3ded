"""The discrete-event PrfaaS-PD cluster: arrivals, router, prefill pools, shared link, decode slots.

``simulate(ClusterConfig, Workload)`` runs one plan on pre-sampled requests and returns immutable
``Records``; ``summarize`` turns them into steady-state figures with confidence intervals; ``closed_form``
gives the analytical figures on the same definitions; ``run_study`` does all of it the way the
``simulate`` command does.

Beyond the static plan (issue 12): ``prefix_cache`` replays a trace through both clusters' hybrid prefix
caches; ``link_profile`` turns bandwidth profiles and outages into steps; ``dynamic_cluster`` loses and
restores instances and runs the dual-timescale scheduler (``scheduler``); ``faults`` reads the TTFT spike
and recovery time off the records; ``dynamic_study`` plans on a cache replay.
"""

from prfaas_plan.sim.arrivals import ArrivalProcess, OnOff, Poisson, Renewal
from prfaas_plan.sim.closed_form import ClosedForm, closed_form, saturated_throughput
from prfaas_plan.sim.cluster import ClusterConfig, simulate
from prfaas_plan.sim.engine import Engine
from prfaas_plan.sim.faults import FaultImpact, fault_impact
from prfaas_plan.sim.link_profile import bandwidth_steps
from prfaas_plan.sim.prefix_cache import CacheReplay, HitRates, replay_caches
from prfaas_plan.sim.records import COLUMNS, STATES, Records, SimResult
from prfaas_plan.sim.study import Study, choose_plan, offered_rate, run_study, trace_model
from prfaas_plan.sim.summary import Estimate, Summary, TtftStats, confidence_half_width, occupancy, replicate, summarize
from prfaas_plan.sim.workload import MAX_REQUESTS, Workload, synthetic_workload, trace_workload

__all__ = [
    "COLUMNS",
    "MAX_REQUESTS",
    "STATES",
    "ArrivalProcess",
    "CacheReplay",
    "ClosedForm",
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
    "Study",
    "Summary",
    "TtftStats",
    "Workload",
    "bandwidth_steps",
    "choose_plan",
    "closed_form",
    "confidence_half_width",
    "fault_impact",
    "occupancy",
    "offered_rate",
    "replay_caches",
    "replicate",
    "run_study",
    "saturated_throughput",
    "simulate",
    "summarize",
    "synthetic_workload",
    "trace_model",
    "trace_workload",
]
