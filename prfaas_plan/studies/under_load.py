"""Plans under load as the ``evaluate`` and ``optimize`` commands ask for them: every plan of a comparison at one
load (closed form, its validity, and the simulation beside it for the plan), the plan's TTFT curve, and the
goodput plan's goodput found again by simulation."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from prfaas_plan._frozen import frozen
from prfaas_plan.optimize.plans import plan_of

if TYPE_CHECKING:
    # Annotations only. The loaded-TTFT law, the simulator and the closed-form study load only when a command
    # asks for a load, a curve or a check: ``optimize`` without ``--load`` runs through this module without them
    # (start-up time).
    from prfaas_plan.latency import LoadedTtft
    from prfaas_plan.latency.profile import Validity
    from prfaas_plan.optimize import Comparison, GoodputComparison
    from prfaas_plan.spec.plan import TtftSlo
    from prfaas_plan.spec.scenario import Scenario
    from prfaas_plan.studies.closed_form import Traffic
    from prfaas_plan.studies.verify import GoodputCheck, LoadedCheck
    from prfaas_plan.studies.verify_options import VerifyOptions
    from prfaas_plan.throughput import StageModel


@frozen
class UnderLoad:
    """What ``--rate``/``--load``/``--curve`` asked for: every plan at one load (``checks``: closed form, its
    validity and the simulation beside it), and the plan's curve with each point's validity."""

    checks: dict[str, LoadedCheck] | None
    curve: list[LoadedTtft] | None
    curve_validity: list[Validity] | None
    label: str
    traffic_label: str

    @property
    def loaded(self) -> dict[str, LoadedTtft] | None:
        """The closed-form figures of each plan (``LoadedCheck.answer`` gives the figure presented)."""
        return None if self.checks is None else {k: c.closed for k, c in self.checks.items()}


def under_load(
    model: StageModel,
    comparison: Comparison,
    scenario: Scenario,
    rate: float | None,
    load: float | None,
    curve: bool,
    traffic: Traffic | None = None,
    options: VerifyOptions | None = None,
    trace_label: str | None = None,
    slo: TtftSlo | None = None,
) -> UnderLoad:
    """Score the comparison's plans under the requested load (the library calls behind the options): the
    closed form for every plan, and the simulation beside it for every plan (common random numbers) unless
    ``options.verify`` is off; with ``slo``, each plan's TTFT quantile checked against it until decided or the
    budget ends (``studies.verify.verify_plans``)."""
    plans = {
        "plan": comparison.plan,
        "homogeneous_pd": comparison.homogeneous_pd,
        "naive_heterogeneous": comparison.naive_heterogeneous,
    }
    checks = None
    label = ""
    if rate is not None or load is not None or curve:  # the closed form and the simulator load only when asked
        from prfaas_plan.studies.closed_form import Traffic

        offered = traffic if traffic is not None else Traffic(output_lengths=scenario.traffic.output_length)
    if rate is not None or load is not None:
        from prfaas_plan.studies.verify import PlanAt, verify_plans
        from prfaas_plan.studies.verify_options import VerifyOptions

        settings = options if options is not None else VerifyOptions()
        at = {
            key: PlanAt(
                n_prfaas=plan.n_prfaas,
                plan=plan_of(model, plan),
                rate_req_per_s=rate if rate is not None else (load or 0.0) * plan.throughput_req_per_s,
            )
            for key, plan in plans.items()
        }
        checks = verify_plans(model, at, offered, settings, slo=slo)
        label = f"{rate:g} req/s" if rate is not None else f"{load:.0%} of each plan's Λ_max"
    points = None
    validity = None
    if curve:
        from prfaas_plan.optimize import LOAD_CURVE_FRACTIONS
        from prfaas_plan.studies.closed_form import closed_loaded

        plan = comparison.plan
        sized = replace(model, n_prfaas=plan.n_prfaas)
        chosen = plan_of(model, plan)
        scored = [closed_loaded(sized, chosen, f * plan.throughput_req_per_s, offered) for f in LOAD_CURVE_FRACTIONS]
        points = [s[0] for s in scored]
        validity = [s[2] for s in scored]
    traffic_label = f"trace {trace_label}" if trace_label else f"{model.arrival.process} arrivals"
    return UnderLoad(checks=checks, curve=points, curve_validity=validity, label=label, traffic_label=traffic_label)


def verified_goodput(
    model: StageModel, comparison: GoodputComparison, traffic: Traffic, options: VerifyOptions
) -> GoodputCheck | None:
    """The goodput plan's goodput found again by simulation (None with --no-verify)."""
    if not options.verify:
        return None
    from prfaas_plan.studies.verify import simulated_goodput

    evaluation = comparison.plan
    plan = evaluation.plan
    sized = replace(model, n_prfaas=plan.n_prfaas)
    return simulated_goodput(
        sized,
        plan_of(model, plan),
        comparison.slo,
        evaluation.goodput.rate_req_per_s,
        evaluation.goodput.stability_limit_req_per_s,
        traffic,
        options=options,
    )
