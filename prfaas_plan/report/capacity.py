"""Machine-readable reports of the capacity questions: costs, sizing, the bandwidth knee, the equal-cost
comparison (plain JSON-ready dictionaries; units in every key)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from prfaas_plan.optimize.baselines import HomogeneousShape
from prfaas_plan.optimize.carrier import Carried, Deployment
from prfaas_plan.optimize.cost import CostBreakdown, TokenCost
from prfaas_plan.optimize.economics import CostComparison, PlanCost, Priced
from prfaas_plan.optimize.headroom import Failure, Tornado
from prfaas_plan.optimize.matrix import HardwareMatrix
from prfaas_plan.optimize.robust import RobustPlan
from prfaas_plan.optimize.sizing import BandwidthKnee, Sizing
from prfaas_plan.report.jsonsafe import finite
from prfaas_plan.report.token_cost import token_cost_dict
from prfaas_plan.spec.cost import Target
from prfaas_plan.units import GBIT_PER_S

if TYPE_CHECKING:  # only for annotations: importing the review for them would cost every capacity command
    from prfaas_plan.spec.scenario import Scenario
    from prfaas_plan.studies.review import SizingPart
    from prfaas_plan.studies.verify import LoadedCheck


def breakdown_to_dict(cost: CostBreakdown) -> dict[str, Any]:
    """Hourly cost by component (USD/h): GPUs (each pool, and both), the link's fixed price, egress."""
    return {
        "total_usd_per_hour": cost.total_usd_per_hour,
        "gpus_usd_per_hour": cost.prfaas_usd_per_hour + cost.local_usd_per_hour,
        "prfaas_gpus_usd_per_hour": cost.prfaas_usd_per_hour,
        "local_gpus_usd_per_hour": cost.local_usd_per_hour,
        "link_usd_per_hour": cost.link_usd_per_hour,
        "egress_usd_per_hour": cost.egress_usd_per_hour,
    }


def tokens_to_dict(tokens: TokenCost) -> dict[str, Any]:
    """Cost per million tokens at a rate (the names of ``report.plans.token_cost_dict``)."""
    return {"rate_req_per_s": tokens.rate_req_per_s, "usd_per_hour": tokens.usd_per_hour, **token_cost_dict(tokens)}


def target_to_dict(target: Target) -> dict[str, Any]:
    """A sizing target."""
    return {
        "rate_req_per_s": target.rate_req_per_s,
        "ttft_slo_s": target.ttft_slo_s,
        "quantile": target.quantile,
    }


def deployment_to_dict(d: Deployment) -> dict[str, Any]:
    """A sized deployment with its plan and costs."""
    return {
        "label": d.label,
        "n_prfaas": d.n_prfaas,
        "n_local": d.n_local,
        "link_bandwidth_gbit_per_s": d.bandwidth_bytes_per_s / GBIT_PER_S,
        "threshold_tokens": d.threshold_tokens,
        "n_pd_prefill": d.n_pd_prefill,
        "n_pd_decode": d.n_pd_decode,
        "offload_fraction": d.offload_fraction,
        "goodput_req_per_s": d.goodput_req_per_s,
        "stability_limit_req_per_s": finite(d.stability_limit_req_per_s),
        "egress_at_target_gbit_per_s": d.egress_at_target_bytes_per_s / GBIT_PER_S,
        "cost_at_target": breakdown_to_dict(d.cost_at_target),
        "tokens_at_target": tokens_to_dict(d.tokens_at_target),
        "tokens_at_goodput": tokens_to_dict(d.tokens_at_goodput),
        "cheaper_plan": None
        if d.cheaper_plan is None
        else {
            "threshold_tokens": d.cheaper_plan.threshold_tokens,
            "n_pd_prefill": d.cheaper_plan.n_pd_prefill,
            "n_pd_decode": d.cheaper_plan.n_pd_decode,
            "offload_fraction": d.cheaper_plan.offload_fraction,
            "egress_at_target_gbit_per_s": d.cheaper_plan.egress_at_target_bytes_per_s / GBIT_PER_S,
            "cost_at_target": breakdown_to_dict(d.cheaper_plan.cost_at_target),
            "ttft_quantile_at_target_s": d.cheaper_plan.ttft_quantile_at_target_s,
            "note": "the same deployment at a higher threshold (less egress) also carries the target, with less "
            "SLO margin than its own plan (the one with the most margin)",
        },
    }


def sizing_to_dict(sizing: Sizing) -> dict[str, Any]:
    """Both sized deployments, the search space and why a kind is missing."""
    return {
        "target": target_to_dict(sizing.target),
        "prfaas_pd": None if sizing.prfaas_pd is None else deployment_to_dict(sizing.prfaas_pd),
        "homogeneous_pd": None if sizing.homogeneous_pd is None else deployment_to_dict(sizing.homogeneous_pd),
        "search_space": {
            "link_bandwidths_gbit_per_s": [b / GBIT_PER_S for b in sizing.bandwidths_bytes_per_s],
            "max_prfaas_instances": sizing.max_prfaas,
            "max_local_instances": sizing.max_local,
            "deployments_solved": sizing.evaluations,
            "search": "exact" if sizing.cost_floor_usd_per_hour is None else "pattern",
            "cost_floor_usd_per_hour": sizing.cost_floor_usd_per_hour,
        },
        "infeasible": list(sizing.reasons),
        "prices": dict(sizing.prices_source),
    }


def carried_to_dict(carried: Carried) -> dict[str, Any]:
    """The largest rate a deployment carries within the SLO, and its plan."""
    return {
        "goodput_req_per_s": carried.goodput_req_per_s,
        "threshold_tokens": carried.threshold_tokens,
        "n_pd_prefill": carried.n_pd_prefill,
        "stability_limit_req_per_s": finite(carried.stability_limit_req_per_s),
        "limited_by": carried.limited_by,
    }


def knee_to_dict(knee: BandwidthKnee) -> dict[str, Any]:
    """Λ_max (and goodput) against bandwidth, and the knee."""
    return {
        "knee_gbit_per_s": None if knee.knee_bytes_per_s is None else knee.knee_bytes_per_s / GBIT_PER_S,
        "points": [
            {
                "link_bandwidth_gbit_per_s": p.bandwidth_bytes_per_s / GBIT_PER_S,
                "throughput_req_per_s": p.throughput_req_per_s,
                "binding": p.binding,
                "goodput_req_per_s": p.goodput_req_per_s,
                "link_usd_per_hour": p.link_usd_per_hour,
            }
            for p in knee.points
        ],
    }


def size_to_dict(scenario: Scenario, part: SizingPart) -> dict[str, Any]:
    """The ``size`` command's answer: both sized deployments, the scenario's own deployment and its largest
    rate within the SLO, and (when a PrfaaS-PD deployment was sized) the bandwidth knee and the simulation
    check (``sizing_check_to_dict``; null with --no-verify)."""
    payload: dict[str, Any] = {"scenario": scenario.name, "sizing": sizing_to_dict(part.sizing)}
    payload["given_deployment"] = {
        "n_prfaas": scenario.prfaas.instances,
        "n_local": scenario.local.instances,
        "link_bandwidth_gbit_per_s": scenario.link.bandwidth_bytes_per_s / GBIT_PER_S,
        "largest_rate_within_slo": carried_to_dict(part.own),
    }
    if part.sizing.prfaas_pd is not None:
        payload["bandwidth_knee"] = None if part.knee is None else knee_to_dict(part.knee)
        payload["simulation_check"] = (
            None if part.check is None else sizing_check_to_dict(part.check, part.sizing.target)
        )
    if part.sizing.homogeneous_pd is not None:
        payload["homogeneous_pd_simulation_check"] = (
            None if part.baseline_check is None else sizing_check_to_dict(part.baseline_check, part.sizing.target)
        )
    return payload


def sizing_check_to_dict(check: LoadedCheck, target: Target) -> dict[str, Any] | None:
    """The sized deployment's P90 TTFT at the target rate, closed form and simulation (95 % interval), with
    ``simulation_verdict`` against the SLO; None when it was not simulated (an unstable closed form)."""
    from prfaas_plan.report.plans import decision_to_dict  # lazily: it imports the simulator

    if check.simulated is None:
        return None
    figure = check.simulated.figures["overall"]["p90"]
    closed = check.closed.ttft.p90_s if check.closed.ttft is not None else None
    decision = check.decision
    return {
        "rate_req_per_s": target.rate_req_per_s,
        "closed_form_p90_s": closed,
        "simulated_p90_s": figure.value,
        "simulated_p90_half_width_s": finite(figure.half_width),
        # The sequential check's own verdict when it decided against the SLO (one verdict for size and review).
        "simulation_verdict": decision.verdict.split()[0]
        if decision is not None
        else _verdict(figure.value, figure.half_width, target.ttft_slo_s),
        "replications": check.simulated.replications,
        "requests": check.simulated.requests,
        "source": check.answer_source,
        "decision": decision_to_dict(decision),
    }


def _verdict(value: float, half_width: float, slo_s: float) -> str:
    """'meets' when the whole 95 % interval is within the SLO, 'misses' when it is all beyond, else
    'undecided' (the SLO lies inside the interval: more replications would tell)."""
    spread = half_width if math.isfinite(half_width) else 0.0
    if value + spread <= slo_s:
        return "meets"
    if value - spread > slo_s:
        return "misses"
    return "undecided"


def _shape(shape: HomogeneousShape) -> dict[str, Any]:
    return {
        "instances": shape.instances,
        "gpus_per_instance": shape.gpus_per_instance,
        "basis": shape.basis,
        "detail": shape.detail,
    }


def plan_cost_to_dict(cost: PlanCost) -> dict[str, Any]:
    """A plan's deployment priced at a rate."""
    return {
        "n_prfaas": cost.n_prfaas,
        "n_local": cost.n_local,
        "cost": breakdown_to_dict(cost.breakdown),
        "tokens": tokens_to_dict(cost.tokens),
    }


def _priced(p: Priced) -> dict[str, Any]:
    return {
        "shape": _shape(p.shape),
        "throughput_req_per_s": p.plan.throughput_req_per_s,
        "n_pd_prefill": p.plan.n_pd_prefill,
        "n_pd_decode": p.plan.n_pd_decode,
        "cost_at_throughput": plan_cost_to_dict(p.cost),
        "plan_gain": p.gain,
    }


def cost_comparison_to_dict(c: CostComparison, local_hardware: str) -> dict[str, Any]:
    """The plan priced beside homogeneous PD at equal GPU count and at equal cost, and the ratio table."""
    return {
        "plan_throughput_req_per_s": c.plan.throughput_req_per_s,
        "plan_cost_at_throughput": plan_cost_to_dict(c.plan_cost),
        "homogeneous_hardware": local_hardware,
        "equal_gpu_count": _priced(c.equal_gpu),
        "equal_cost": _priced(c.equal_cost),
        "price_ratio_prfaas_to_local_gpu_hour": c.price_ratio,
        "equal_cost_gain_by_price_ratio": [
            {
                "price_ratio_from": r.ratio_low,
                "price_ratio_to": r.ratio_high,
                "homogeneous_instances": r.homogeneous_instances,
                "homogeneous_throughput_req_per_s": r.homogeneous_throughput_req_per_s,
                "plan_gain": r.gain,
            }
            for r in c.ratio_table
        ],
        "prices": dict(c.sources),
    }


def matrix_to_dict(m: HardwareMatrix) -> dict[str, Any]:
    """Every cell (sized or why not), the cost-plane points and both frontiers."""
    cells = []
    for c in m.cells:
        cells.append(
            {
                "prefill_hardware": c.prefill,
                "local_hardware": c.local,
                "prefill_provenance": c.prefill_provenance,
                "local_provenance": c.local_provenance,
                "prfaas_pd": None
                if c.sizing is None or c.sizing.prfaas_pd is None
                else deployment_to_dict(c.sizing.prfaas_pd),
                "homogeneous_pd": None
                if c.sizing is None or c.sizing.homogeneous_pd is None
                else deployment_to_dict(c.sizing.homogeneous_pd),
                "infeasible": c.reason,
                **(
                    {
                        "shape": c.shape,
                        "next_shape": c.next_shape or None,
                        "next_shape_usd_per_hour": c.next_usd_per_hour,
                        "shapes_ruled_out": list(c.ruled_out),
                    }
                    if c.shape or c.ruled_out
                    else {}
                ),
            }
        )
    points = [
        {
            "prefill_hardware": p.prefill or None,
            "local_hardware": p.local,
            "kind": p.kind,
            "usd_per_hour": p.usd_per_hour,
            "goodput_req_per_s": p.goodput_req_per_s,
            "throughput_req_per_s": p.throughput_req_per_s,
        }
        for p in m.points
    ]
    return {
        "target": target_to_dict(m.target),
        "cells": cells,
        "points": points,
        "pareto_cost_goodput": list(m.frontier_goodput),
        "pareto_cost_throughput": list(m.frontier_throughput),
    }


def robust_to_dict(r: RobustPlan) -> dict[str, Any]:
    """The robust plan (goodput at a bandwidth quantile) beside the plan made at the mean bandwidth."""
    return {
        "bandwidth_quantile": r.quantile,
        "bandwidth_at_quantile_gbit_per_s": r.bandwidth_at_quantile_bytes_per_s / GBIT_PER_S,
        "bandwidth_mean_gbit_per_s": r.bandwidth_mean_bytes_per_s / GBIT_PER_S,
        "robust_plan": carried_to_dict(r.robust),
        "mean_plan": carried_to_dict(r.at_mean),
        "robust_plan_goodput_at_mean_req_per_s": r.robust_goodput_at_mean_req_per_s,
        "mean_plan_goodput_at_quantile_req_per_s": r.mean_plan_goodput_at_quantile_req_per_s,
    }


def headroom_to_dict(
    target: Target, t: Tornado, failures: tuple[Failure, ...], robust: RobustPlan | None = None
) -> dict[str, Any]:
    """The tornado (base and one bar per input), the N-1 cases and the robust plan (None without a link
    profile)."""
    return {
        "robust": None if robust is None else robust_to_dict(robust),
        "target": target_to_dict(target),
        "tornado": {
            "step": t.step,
            "base": {
                "throughput_req_per_s": t.throughput_req_per_s,
                "goodput_req_per_s": t.goodput_req_per_s,
                "usd_per_million_tokens_at_goodput": finite(t.usd_per_million_tokens),
            },
            "bars": [
                {
                    "input": b.input,
                    "factors": [b.low_factor, b.high_factor],
                    "throughput_req_per_s": list(b.throughput_req_per_s),
                    "goodput_req_per_s": list(b.goodput_req_per_s),
                    "usd_per_million_tokens_at_goodput": [finite(v) for v in b.usd_per_million_tokens],
                }
                for b in t.bars
            ],
            "not_applicable": list(t.skipped),
        },
        "n_minus_one": [
            {
                "case": f.case,
                "n_prfaas": f.n_prfaas,
                "n_local": f.n_local,
                "link_bandwidth_gbit_per_s": f.link_bandwidth_bytes_per_s / GBIT_PER_S,
                "throughput_req_per_s": finite(f.throughput_req_per_s),
                "goodput": carried_to_dict(f.carried),
                "carries_target": f.carries_target,
                "ttft_p90_at_target_s": f.ttft_p90_at_target_s,
            }
            for f in failures
        ],
    }
