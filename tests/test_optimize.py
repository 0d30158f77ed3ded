"""Laws of the stage model and the optimiser, checked over hypothesis-built physical stage models."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from prfaas_plan.errors import InfeasibleError
from prfaas_plan.optimize import evaluate, search
from prfaas_plan.physics.curves import PolyCurve
from prfaas_plan.throughput import StageModel, routing
from tests.strategies import length_distributions, stage_models

SETTINGS = settings(max_examples=30, deadline=None)
# The optimiser refines t to a 1e-3-token bracket around the Eq. 7 crossing; a plan elsewhere in the search
# space may not beat it by more than this relative amount.
RTOL = 1e-7


def _lam(model: StageModel, t: float, n_p: int) -> float:
    try:
        return evaluate(model, t, n_p).throughput_req_per_s
    except InfeasibleError:
        return 0.0


def _scaled(curve: PolyCurve, factor: float) -> PolyCurve:
    return replace(curve, coefficients=tuple(c * factor for c in curve.coefficients))


@SETTINGS
@given(stage_models(), st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(0, 15)), min_size=5, max_size=12))
def test_optimum_is_never_below_any_plan_of_its_search_space(model: StageModel, plans: list[tuple[float, int]]) -> None:
    """Λ(optimum) >= Λ(t, N_p) for every sampled plan, the naive baseline (t = 0, N_p = 0) included."""
    best = search(model).throughput_req_per_s
    candidates = [(0.0, 0)] + [(float(model.lengths.quantile(q)), n_p % model.n_local) for q, n_p in plans]
    for t, n_p in candidates:
        assert _lam(model, t, n_p) <= best * (1 + RTOL)


@SETTINGS
@given(stage_models(), st.sampled_from(["n_prfaas", "n_local"]))
def test_more_instances_never_lower_the_optimum(model: StageModel, which: str) -> None:
    """Adding a PrfaaS or a local instance never decreases the optimal Λ_max."""
    bigger = replace(model, **{which: getattr(model, which) + 1})
    assert search(bigger).throughput_req_per_s >= search(model).throughput_req_per_s * (1 - RTOL)


@SETTINGS
@given(stage_models(), st.floats(1.01, 10.0))
def test_more_bandwidth_never_lowers_the_optimum(model: StageModel, factor: float) -> None:
    """A faster link never decreases the optimal Λ_max."""
    faster = replace(model, link_bandwidth_bytes_per_s=model.link_bandwidth_bytes_per_s * factor)
    assert search(faster).throughput_req_per_s >= search(model).throughput_req_per_s * (1 - RTOL)


@SETTINGS
@given(stage_models(), st.floats(0.2, 0.99), st.sampled_from(["prfaas_prefill", "local_prefill"]))
def test_faster_prefill_never_lowers_the_optimum(model: StageModel, factor: float, which: str) -> None:
    """Scaling either pool's prefill time down never decreases the optimal Λ_max."""
    faster = replace(model, **{which: _scaled(getattr(model, which), factor)})
    assert search(faster).throughput_req_per_s >= search(model).throughput_req_per_s * (1 - RTOL)


@SETTINGS
@given(stage_models(), st.floats(0.0, 1.0), st.integers(0, 15))
def test_more_instances_never_lower_a_fixed_plan(model: StageModel, q: float, n_p: int) -> None:
    """For a fixed threshold and N_p, one more PrfaaS instance or one more decode instance never lowers Λ."""
    t = float(model.lengths.quantile(q))
    n_p = n_p % model.n_local
    base = _lam(model, t, n_p)
    assert _lam(replace(model, n_prfaas=model.n_prfaas + 1), t, n_p) >= base
    assert _lam(replace(model, n_local=model.n_local + 1), t, n_p) >= base


@SETTINGS
@given(length_distributions(), st.lists(st.floats(0.0, 1.0), min_size=2, max_size=20))
def test_offload_fraction_is_non_increasing_in_threshold(lengths, qs: list[float]) -> None:  # type: ignore[no-untyped-def]
    """p(t) = P(L > t) never increases as t grows."""
    t = np.sort(lengths.quantile(np.asarray(qs)))
    p = routing(lengths, t).offload_fraction
    assert np.all(np.diff(p) <= 1e-12)


@SETTINGS
@given(stage_models(), st.floats(0.0, 0.95), st.integers(0, 15))
def test_egress_never_exceeds_the_link(model: StageModel, q: float, n_p: int) -> None:
    """At any threshold, and in particular one where the link binds, egress at Λ_max is at most the link."""
    # Make the link scarce so that it binds for many of the sampled thresholds.
    model = replace(model, link_bandwidth_bytes_per_s=model.link_bandwidth_bytes_per_s / 50)
    t = float(model.lengths.quantile(q))
    try:
        plan = evaluate(model, t, n_p % model.n_local)
    except InfeasibleError:
        assume(False)
        return
    assert plan.egress_bytes_per_s <= model.link_bandwidth_bytes_per_s * (1 + 1e-9)
    if plan.bottleneck == "prfaas_link":
        assert plan.egress_bytes_per_s == pytest.approx(model.link_bandwidth_bytes_per_s, rel=1e-9)


def test_a_plan_with_no_capacity_names_the_binding_constraint(paper_model: StageModel) -> None:
    """Routing short requests to a local prefill pool of zero instances is infeasible, and says so."""
    with pytest.raises(InfeasibleError, match="pd_prefill"):
        evaluate(paper_model, 19_400, 0)


@SETTINGS
@given(stage_models(), st.floats(0.0, 1.0), st.integers(0, 15))
def test_queueing_saturation_never_exceeds_the_fluid_bound(model: StageModel, q: float, n_p: int) -> None:
    """With convex prefill curves, E[T(L)] >= T(E[L]) (Jensen), so the rate where a stage saturates with mean
    service times never exceeds Eq. 6's Λ_max of the same plan."""
    t = float(model.lengths.quantile(q))
    try:
        plan = evaluate(model, t, n_p % model.n_local)
    except InfeasibleError:
        assume(False)
        return
    assert plan.stability_limit_req_per_s <= plan.throughput_req_per_s * (1 + 1e-9)
