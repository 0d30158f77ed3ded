"""A topology's plan at given thresholds, and its global plan alone (without the alternatives): what
``evaluate`` and ``sweep`` report for a topology (issue 23)."""

from __future__ import annotations

import numpy as np

from prfaas_plan.optimize.topology import GRID_POINTS, TopologyPlan, global_search, plan_at, topology_model
from prfaas_plan.spec.topology import Topology

GIVEN_LABEL = "given thresholds"
GLOBAL_LABEL = "global"


def plan_at_threshold(topology: Topology, threshold_tokens: float) -> TopologyPlan:
    """Every PD cluster routing at ``threshold_tokens``; the shares of its long requests over the sites are the
    routing LP's (exact at fixed thresholds) and each cluster's prefill/decode split is chosen at its threshold
    as the global plan's are. InfeasibleError when nothing can be carried."""
    tm = topology_model(topology)
    return plan_at(tm, np.full(tm.n_regions, float(threshold_tokens)), GIVEN_LABEL)


def global_plan(topology: Topology, grid_points: int = GRID_POINTS) -> tuple[TopologyPlan, float]:
    """The global plan (``optimize.topology.global_search``) and its proven bound on λ."""
    tm = topology_model(topology)
    found = global_search(tm, grid_points=grid_points)
    return plan_at(tm, found.thresholds, GLOBAL_LABEL, found.lp_solves), found.bound
