"""The glue between a ``Dynamics`` section and a run: the plan on a cache replay's incremental lengths, and the
``ClusterConfig`` fields a run takes from the link profile, the faults and the scheduler."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from prfaas_plan.errors import InputError, Problem
from prfaas_plan.optimize import PlanEvaluation
from prfaas_plan.physics.tcp import deliverable_bytes_per_s
from prfaas_plan.sim.link_profile import bandwidth_steps
from prfaas_plan.sim.prefix_cache import CacheReplay, replay_caches
from prfaas_plan.spec.dynamics import Dynamics, PrefixCaches
from prfaas_plan.spec.plan import Plan
from prfaas_plan.spec.trace import Trace
from prfaas_plan.studies.planning import choose_plan, trace_model
from prfaas_plan.throughput import StageModel, link_bought_bytes_per_s

#: Lengths (tokens) between which the KV curve's slope gives the bytes per cached token: the Mooncake
#: traces' blocks are 512 tokens, and 32k spans most of their prefixes.
SLOPE_TOKENS = (512.0, 32_768.0)
#: Fixed-point rounds of plan → replay → plan (the replay routes on the plan's t, the plan is chosen on the
#: replay's lengths); two rounds move t by under 1 % on the Mooncake conversation trace.
CACHE_PLAN_ROUNDS = 2
#: Simulated time the link profile covers beyond the last arrival, s (the last step then holds for ever).
PROFILE_MARGIN_S = 3600.0


def kv_bytes_per_token(model: StageModel) -> float:
    """Full-attention KV bytes per cached token: the KV-size curve's slope over ``SLOPE_TOKENS`` (its
    constant term, per-request state, is not per token)."""
    low, high = SLOPE_TOKENS
    return float(model.kv_bytes(high) - model.kv_bytes(low)) / (high - low)


def plan_with_caches(
    model: StageModel,
    trace: Trace,
    caches: PrefixCaches,
    *,
    given: Plan | None,
    load: float = 0.7,
) -> tuple[StageModel, PlanEvaluation, CacheReplay]:
    """Replay ``trace`` through the caches and plan on the incremental lengths it leaves.

    Starts from the plan on the trace as read, then alternates replay (routing on the plan's t, the
    ``switch`` rule seeing the plan's link utilisation at ``load`` × Λ_max) and plan (on the replay's
    lengths) ``CACHE_PLAN_ROUNDS`` times; with a ``given`` plan one replay at its t. Returns the
    model of the cached traffic, the plan and the replay. InputError when the trace has no block hashes.
    """
    if not trace.has_blocks:
        raise InputError(
            Problem(file=trace.source, message="prefix caches need block hashes: replay a Mooncake .jsonl trace")
        )
    per_token = kv_bytes_per_token(model)
    if not per_token > 0:
        raise InputError(Problem(field="kv_cache", message="the KV-size curve does not grow with length"))
    current = trace_model(model, trace)
    plan = choose_plan(current, given)
    replay: CacheReplay | None = None
    for _ in range(1 if given is not None else CACHE_PLAN_ROUNDS):
        t = plan.threshold_tokens if plan.threshold_tokens is not None else math.inf
        utilization = load * plan.egress_bytes_per_s / plan.link_bandwidth_bytes_per_s
        try:
            replay = replay_caches(
                trace, caches, kv_bytes_per_token=per_token, threshold_tokens=t, link_utilization=utilization
            )
        except ValueError as error:
            raise InputError(Problem(field="dynamics.prefix_cache", message=str(error))) from None
        current = trace_model(model, replace(trace, cached_tokens=replay.cached_tokens))
        if given is None:
            plan = choose_plan(current, None)
    assert replay is not None
    return current, plan, replay


def dynamic_fields(
    dynamics: Dynamics | None, model: StageModel, *, last_arrival_s: float, seed: int
) -> dict[str, object]:
    """``ClusterConfig`` keyword arguments for the link profile, faults and scheduler of ``dynamics``.

    The random bandwidth is drawn from its own stream (``default_rng([seed, 12])``), so switching it on
    leaves the workload's draws unchanged.
    """
    if dynamics is None:
        return {}
    horizon = last_arrival_s + PROFILE_MARGIN_S
    try:
        profile = bandwidth_steps(
            dynamics.bandwidth,
            dynamics.outages,
            nominal_bytes_per_s=link_bought_bytes_per_s(model),
            horizon_s=horizon,
            rng=np.random.default_rng([seed, 12]),
        )
    except ValueError as error:
        raise InputError(Problem(field="dynamics.link", message=str(error))) from None
    # The profile's rates are the path's; the transfers get what the connections deliver of each (the rate
    # itself on a link with no TCP shape).
    profile = tuple((start_s, deliverable_bytes_per_s(rate, model.link_tcp)) for start_s, rate in profile)
    return {
        "bandwidth_profile": profile,
        "losses": dynamics.losses,
        "threshold_control": dynamics.threshold,
        "role_control": dynamics.roles,
    }
