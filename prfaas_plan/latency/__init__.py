"""Time to first token and goodput under load: every stage as a queue, composed into a TTFT distribution.

``stages``: per-stage queueing (G/G/c prefill pools, a processor-sharing link, decode-slot admission);
``distribution``: the TTFT law and ``loaded_ttft``; ``goodput``: the largest rate within a TTFT SLO.
"""

from prfaas_plan.latency.distribution import ROUTES, LoadedTtft, TtftSummary, loaded_ttft
from prfaas_plan.latency.goodput import Goodput, best_goodput_plan, goodput_rates, plan_goodput, plans_goodput
from prfaas_plan.latency.stages import route_moments, stability_limit_req_per_s, stage_state, stage_utilization

__all__ = [
    "ROUTES",
    "Goodput",
    "LoadedTtft",
    "TtftSummary",
    "best_goodput_plan",
    "goodput_rates",
    "loaded_ttft",
    "plan_goodput",
    "plans_goodput",
    "route_moments",
    "stability_limit_req_per_s",
    "stage_state",
    "stage_utilization",
]
