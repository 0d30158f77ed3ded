"""What one point of a parameter sweep computes, whatever runs it (local processes or a distributed engine):
the Λ_max-optimal plan of the point's scenario (paper §3.4.2) and, when asked, its goodput-optimal plan under
a P90 TTFT SLO. A point that no plan can serve is an outcome with its reason, not an error."""

from __future__ import annotations

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InfeasibleError, PlanError
from prfaas_plan.optimize.plans import PlanEvaluation, evaluate
from prfaas_plan.optimize.throughput_search import search
from prfaas_plan.spec.plan import TtftSlo
from prfaas_plan.spec.scenario import Scenario
from prfaas_plan.throughput import StageModel


@frozen
class SweepOptions:
    """What each point computes: the threshold search's resolution (tokens) and, with ``goodput``, the
    goodput-optimal plan under a P90 TTFT SLO of ``ttft_p90_s`` seconds (None: the scenario's own SLO)."""

    resolution_tokens: float = 10.0
    goodput: bool = False
    ttft_p90_s: float | None = None
    #: With a load fraction, each point's best plan is also scored at that fraction of its Λ_max (closed-form
    #: TTFT) and, with ``verify``, checked by ``replications`` simulations of ``requests`` requests each.
    load_fraction: float | None = None
    verify: bool = False
    replications: int = 5
    requests: int = 20_000
    seed: int = 0


@frozen
class PointOutcome:
    """One point's result. ``status`` is ``ok``, or ``infeasible`` (no plan carries load; ``reason`` says
    which constraint binds). ``goodput_*`` are set when goodput was asked for and the Λ_max search succeeded;
    ``goodput_reason`` says why a goodput was not found (no SLO, or the SLO cannot be met)."""

    status: str
    reason: str | None = None
    model: StageModel | None = None
    best: PlanEvaluation | None = None
    goodput_plan: PlanEvaluation | None = None
    goodput_req_per_s: float | None = None
    goodput_limited_by: str | None = None
    goodput_slo_s: float | None = None
    goodput_reason: str | None = None


def evaluate_point(scenario: Scenario, options: SweepOptions) -> PointOutcome:
    """Search the scenario's Λ_max-optimal plan and, with ``options.goodput``, its goodput-optimal plan (the
    largest rate whose P90 TTFT meets the SLO, ``optimize.sizing.max_rate``). Never raises for a point that
    cannot be served: the outcome carries the reason instead."""
    from prfaas_plan.throughput import stage_model

    try:
        model = stage_model(scenario)
        best = search(model, options.resolution_tokens)
    except PlanError as exc:
        return PointOutcome(status="infeasible", reason=_reason(exc))
    if not options.goodput:
        return PointOutcome(status="ok", model=model, best=best)
    slo = options.ttft_p90_s if options.ttft_p90_s is not None else scenario.slo.ttft_p90_s
    if slo is None:
        return PointOutcome(status="ok", model=model, best=best, goodput_reason="no P90 TTFT SLO (slo.ttft_p90_s)")
    from prfaas_plan.optimize.sizing import max_rate

    try:
        carried = max_rate(
            model,
            TtftSlo(limit_s=slo, quantile=0.9),
            resolution_tokens=options.resolution_tokens,
            decode_service_scv=scenario.traffic.output_length.scv,
        )
        plan = evaluate(model, carried.threshold_tokens, carried.n_pd_prefill, label="prfaas-pd-goodput")
    except PlanError as exc:
        return PointOutcome(status="ok", model=model, best=best, goodput_slo_s=slo, goodput_reason=_reason(exc))
    return PointOutcome(
        status="ok",
        model=model,
        best=best,
        goodput_plan=plan,
        goodput_req_per_s=carried.goodput_req_per_s,
        goodput_limited_by=carried.limited_by,
        goodput_slo_s=slo,
    )


def _reason(exc: PlanError) -> str:
    if isinstance(exc, InfeasibleError):
        return "; ".join(exc.reasons)
    return str(exc)
