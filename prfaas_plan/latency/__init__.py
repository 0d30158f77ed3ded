"""Time to first token and goodput under load: every stage as a queue, composed into a TTFT distribution.

``moments``: the routes' service moments, the stages' utilisations and the stability limit; ``stages``:
per-stage queueing (G/G/c prefill pools, a processor-sharing link, decode-slot admission); ``distribution``: the
TTFT law and ``loaded_ttft``; ``goodput``: the largest rate within a TTFT SLO (the search over plans is
``optimize.goodput_search``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prfaas_plan._lazy import lazy_getattr

if TYPE_CHECKING:
    from prfaas_plan.latency.distribution import ROUTES, LoadedTtft, TtftSummary, loaded_ttft
    from prfaas_plan.latency.goodput import Goodput, goodput_rates, plan_goodput, plans_goodput
    from prfaas_plan.latency.moments import route_moments, stability_limit_req_per_s
    from prfaas_plan.latency.stages import stage_state, stage_utilization

_EXPORTS = {
    "Goodput": "prfaas_plan.latency.goodput",
    "LoadedTtft": "prfaas_plan.latency.distribution",
    "ROUTES": "prfaas_plan.latency.distribution",
    "TtftSummary": "prfaas_plan.latency.distribution",
    "goodput_rates": "prfaas_plan.latency.goodput",
    "loaded_ttft": "prfaas_plan.latency.distribution",
    "plan_goodput": "prfaas_plan.latency.goodput",
    "plans_goodput": "prfaas_plan.latency.goodput",
    "route_moments": "prfaas_plan.latency.moments",
    "stability_limit_req_per_s": "prfaas_plan.latency.moments",
    "stage_state": "prfaas_plan.latency.stages",
    "stage_utilization": "prfaas_plan.latency.stages",
}
__all__ = [
    "ROUTES",
    "Goodput",
    "LoadedTtft",
    "TtftSummary",
    "goodput_rates",
    "loaded_ttft",
    "plan_goodput",
    "plans_goodput",
    "route_moments",
    "stability_limit_req_per_s",
    "stage_state",
    "stage_utilization",
]
__getattr__ = lazy_getattr(__name__, _EXPORTS)
