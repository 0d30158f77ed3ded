"""The warm-started HiGHS path of the routing LP and scipy's linprog give the same optimum."""

from __future__ import annotations

import numpy as np
import pytest

from prfaas_plan.optimize.topology import _column, region_terms, topology_model
from prfaas_plan.optimize.topology_lp import RoutingLP
from prfaas_plan.spec.scenario import Scenario
from tests.topology.builders import random_full_matrix


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fast_and_linprog_agree(paper_scenario: Scenario, seed: int) -> None:
    tm = topology_model(random_full_matrix(paper_scenario, 3, 4, seed))
    lp = RoutingLP(tm.pair_region, tm.pair_site, tm.n_regions, tm.site_instances)
    rng = np.random.default_rng(seed)
    for _ in range(8):  # successive solves exercise the warm start (changed coefficients only)
        t = rng.uniform(1_000, 80_000, tm.n_regions)
        terms = [region_terms(tm, j, t[j : j + 1]) for j in range(tm.n_regions)]
        p, bound, seconds, kv = _column(terms, 0)
        cap = float(np.min(bound / tm.rate_req_per_s))
        args = (tm.rate_req_per_s * p, cap, seconds, tm.bandwidth_bytes_per_s / kv)
        fast, slow = lp.solve(*args), lp.solve(*args, fast=False)
        assert fast[0] == pytest.approx(slow[0], rel=1e-9)
