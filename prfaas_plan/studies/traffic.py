"""The traffic a plan is scored on: the scenario's own, or a trace's (its lengths replace the scenario's length
distribution), replayed first through the scenario's finite prefix caches when it has them."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InputError, Problem
from prfaas_plan.studies.offered import Traffic

if TYPE_CHECKING:
    # Annotations only: the cache replay (the simulator's) loads when a scenario has caches, the trace reader
    # and the planning helpers when a trace is given (start-up time).
    from prfaas_plan.optimize import PlanEvaluation
    from prfaas_plan.sim.prefix_cache import CacheReplay
    from prfaas_plan.spec.dynamics import PrefixCaches
    from prfaas_plan.spec.plan import Plan
    from prfaas_plan.spec.scenario import Scenario
    from prfaas_plan.spec.trace import Trace
    from prfaas_plan.throughput import StageModel


@frozen(eq=False)
class OfferedTraffic:
    """The stage model of the offered traffic, the traffic itself, the trace it came from (None: the
    scenario's), the cache replay it went through (None: none), and a note for the reader (None: none)."""

    model: StageModel
    traffic: Traffic
    trace_label: str | None
    cache_replay: CacheReplay | None
    note: str | None


def offered_traffic(
    model: StageModel, spec: Scenario, trace: str | None, *, prefix_cache: bool, loaded: bool
) -> OfferedTraffic:
    """The stage model and the offered traffic: the scenario's, or a trace's (its lengths replace the
    scenario's length distribution, as in ``simulate``). Figures under load (``loaded``) need a
    trace with two distinct arrival times.

    With a trace and the scenario's ``dynamics.prefix_cache``, the trace is first replayed through the
    finite caches (``studies.dynamic.plan_with_caches``): the plan sees the incremental lengths they leave,
    and the summary holds the hit rates for the report."""
    caches = spec.dynamics.caches if spec.dynamics is not None else None
    if trace is None:
        if prefix_cache:
            raise InputError(Problem(field="--prefix-cache", message="applies only with --trace"))
        note = None
        if caches is not None:
            note = (
                "dynamics.prefix_cache is replayed on traces only (--trace); the scenario's lengths are taken as "
                "uncached"
            )
        traffic = Traffic(output_lengths=spec.traffic.output_length)
        return OfferedTraffic(model=model, traffic=traffic, trace_label=None, cache_replay=None, note=note)
    from prfaas_plan.io.traces import read_trace, resolve_trace_path
    from prfaas_plan.studies.planning import trace_model

    replay = read_trace(resolve_trace_path(trace), prefix_cache=prefix_cache)
    if loaded and not (replay.n_requests >= 2 and float(replay.arrival_s[-1] - replay.arrival_s[0]) > 0):
        raise InputError(
            Problem(
                file=replay.source,
                message="figures under load rescale the trace to a rate, which needs two distinct arrival times",
            )
        )
    if caches is not None:
        if prefix_cache:
            raise InputError(
                Problem(
                    field="--prefix-cache",
                    message="the scenario's dynamics.prefix_cache models finite caches; drop --prefix-cache "
                    "(an infinite cache)",
                )
            )
        from prfaas_plan.studies.dynamic import plan_with_caches

        cached_model, _, cache_replay = plan_with_caches(model, replay, caches, given=None)
        cached = replace(replay, cached_tokens=cache_replay.cached_tokens)
        return OfferedTraffic(
            model=cached_model, traffic=Traffic(trace=cached), trace_label=trace, cache_replay=cache_replay, note=None
        )
    return OfferedTraffic(
        model=trace_model(model, replay), traffic=Traffic(trace=replay), trace_label=trace, cache_replay=None, note=None
    )


def planned_traffic(
    model: StageModel,
    replay: Trace | None,
    caches: PrefixCaches | None,
    given: Plan | None,
) -> tuple[StageModel, PlanEvaluation, Trace | None, CacheReplay | None]:
    """The stage model, the plan (the ``given`` one, or the one ``optimize`` chooses when it is None), the
    trace as the cluster will see it and its cache replay, for a simulation: with finite prefix caches the
    trace is replayed through them first (the plan sees the incremental lengths they leave); a trace alone
    replaces the scenario's lengths; neither leaves the scenario's."""
    from prfaas_plan.studies.planning import choose_plan, trace_model

    if caches is not None:
        if replay is None:
            raise InputError(Problem(field="--dynamics", message="prefix caches need --trace (a Mooncake trace)"))
        from prfaas_plan.studies.dynamic import plan_with_caches

        model, plan, cache_replay = plan_with_caches(model, replay, caches, given=given)
        return model, plan, replace(replay, cached_tokens=cache_replay.cached_tokens), cache_replay
    if replay is not None:
        model = trace_model(model, replay)
    return model, choose_plan(model, given), replay, None
