"""The plan a study runs and the stage model of a trace's traffic: shared by the static study
(``studies.simulate``) and the study on a cache replay (``studies.dynamic``)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from prfaas_plan.errors import InputError, Problem
from prfaas_plan.lengths import Empirical
from prfaas_plan.optimize import PlanEvaluation, evaluate_given, search
from prfaas_plan.spec.plan import Plan
from prfaas_plan.spec.trace import Trace
from prfaas_plan.throughput import StageModel


def trace_model(model: StageModel, trace: Trace) -> StageModel:
    """The stage model of a trace's traffic: its uncached input lengths (empirical), its mean output length
    and its measured arrival variability: the index of dispersion of counts over windows of 100 mean gaps
    (``Trace.count_dispersion``), which estimates the SCV a renewal model should use without the inflation
    that batch-logged timestamps give the raw gap SCV; the gap SCV when the trace is too short for windows,
    and 1 when neither is defined."""
    outputs = trace.output_tokens
    mean_output = float(np.mean(outputs))
    if not mean_output > 0:
        raise InputError(Problem(file=trace.source, message="every request has 0 output tokens: nothing to decode"))
    if not trace.uncached_tokens.any():  # the threshold search would place t below every length: -1
        raise InputError(
            Problem(file=trace.source, message="every request has 0 uncached input tokens: nothing to prefill")
        )
    scv = trace.count_dispersion()
    if not math.isfinite(scv):
        scv = trace.interarrival_scv
    return replace(
        model,
        lengths=Empirical(values=trace.uncached_tokens),
        output_tokens_mean=mean_output,
        interarrival_scv=scv if math.isfinite(scv) and scv > 0 else 1.0,
    )


def given_plan(threshold_tokens: float | None, n_pd_prefill: int | None, n_pd_decode: int | None) -> Plan | None:
    """The plan three optional settings give (a command's flags): None when none is set, so that the planner
    chooses; an InputError when only some are."""
    if threshold_tokens is None and n_pd_prefill is None and n_pd_decode is None:
        return None
    if threshold_tokens is None or n_pd_prefill is None or n_pd_decode is None:
        raise InputError(
            Problem(field="threshold/n_pd_prefill/n_pd_decode", message="give all three, or none to optimise")
        )
    return Plan(threshold_tokens=threshold_tokens, n_pd_prefill=n_pd_prefill, n_pd_decode=n_pd_decode)


def choose_plan(model: StageModel, given: Plan | None) -> PlanEvaluation:
    """The plan ``optimize`` chooses (``given`` None), or the given one scored (N_p + N_d may leave local
    instances idle, never exceed the pool)."""
    return search(model) if given is None else evaluate_given(model, given)
