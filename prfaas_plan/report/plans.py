"""Machine-readable reports: plain JSON-ready dictionaries (SI-derived display units named in every key)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prfaas_plan.report.jsonsafe import finite
from prfaas_plan.report.token_cost import token_cost_dict
from prfaas_plan.units import GBIT_PER_S, MIB

if TYPE_CHECKING:
    # Annotations only: the types' modules (the loaded-TTFT law, the goodput search, the simulator) load when a
    # command computes with them, not because a report can describe them (start-up time).
    from prfaas_plan.latency import LoadedTtft, TtftSummary
    from prfaas_plan.latency.profile import Validity
    from prfaas_plan.optimize import Comparison, GoodputComparison, GoodputEvaluation, PlanEvaluation
    from prfaas_plan.physics.fits import FitReport
    from prfaas_plan.physics.table3 import KvRow
    from prfaas_plan.spec.scenario import Scenario
    from prfaas_plan.studies.verify import Decision, GoodputCheck, LoadedCheck
    from prfaas_plan.throughput import StageModel


def plan_to_dict(plan: PlanEvaluation) -> dict[str, Any]:
    """One plan in the ``--json`` schema."""
    return {
        "label": plan.label,
        "threshold_tokens": plan.threshold_tokens,
        "n_prfaas": plan.n_prfaas,
        "n_pd_prefill": plan.n_pd_prefill,
        "n_pd_decode": plan.n_pd_decode,
        "offload_fraction": plan.offload_fraction,
        "long_tokens": plan.long_tokens,
        "short_tokens": plan.short_tokens,
        "throughput_req_per_s": plan.throughput_req_per_s,
        "stability_limit_req_per_s": finite(plan.stability_limit_req_per_s),
        "stage_throughput_req_per_s": {
            "prfaas": finite(plan.theta_prfaas_req_per_s),
            "prfaas_compute": finite(plan.theta_prfaas_compute_req_per_s),
            "prfaas_link": finite(plan.theta_prfaas_link_req_per_s),
            "pd_prefill": finite(plan.theta_pd_prefill_req_per_s),
            "pd_decode": plan.theta_pd_decode_req_per_s,
        },
        "stage_bound_req_per_s": {k: finite(v) for k, v in plan.stage_bound_req_per_s.items()},
        "bottleneck": plan.bottleneck,
        "binding_stages": list(plan.binding),
        "egress_gbit_per_s": plan.egress_bytes_per_s / GBIT_PER_S,
        "link_utilization": plan.link_utilization,
        "ttft_unloaded_s": {"mean": plan.ttft_unloaded_mean_s, "p90": plan.ttft_unloaded_p90_s},
    }


def _deployment_of(scenario: Scenario, plan: PlanEvaluation) -> tuple[int, int]:
    """(N_prfaas, N_local) a plan runs on: homogeneous PD has no PrfaaS pool; the others use the scenario's
    PrfaaS pool (deployed even when a plan offloads nothing) and their own local instances."""
    n_local = plan.n_pd_prefill + plan.n_pd_decode
    if plan.label == "homogeneous-pd":
        return 0, n_local
    return scenario.prfaas.instances, n_local


def plan_cost_dict(
    scenario: Scenario, plan: PlanEvaluation, rates: dict[str, float], model: StageModel | None = None
) -> dict[str, Any] | None:
    """A plan's deployment priced at each named rate (e.g. its Λ_max, its goodput); None when a pool has no
    price. Tokens per request are the ``model``'s (a trace's lengths) when given, else the scenario's."""
    from prfaas_plan.optimize.cost import deployment_cost, token_cost, unit_prices

    prices = unit_prices(scenario)
    if not prices.complete:
        return None
    n_prfaas, n_local = _deployment_of(scenario, plan)
    out: dict[str, Any] = {"n_prfaas": n_prfaas, "n_local": n_local}
    mean_in = model.lengths.mean_tokens if model is not None else scenario.traffic.input_length.mean_tokens
    mean_out = model.output_tokens_mean if model is not None else scenario.traffic.output_length.mean_tokens
    for name, rate in rates.items():
        scale = rate / plan.throughput_req_per_s if plan.throughput_req_per_s > 0 else 0.0
        cost = deployment_cost(
            prices,
            n_prfaas=n_prfaas,
            n_local=n_local,
            bandwidth_bytes_per_s=scenario.link.bandwidth_bytes_per_s if n_prfaas > 0 else 0.0,
            egress_bytes_per_s=plan.egress_bytes_per_s * scale,
        )
        tokens = token_cost(cost.total_usd_per_hour, rate, mean_in, mean_out)
        out[name] = {
            "rate_req_per_s": rate,
            "usd_per_hour": cost.total_usd_per_hour,
            "gpus_usd_per_hour": cost.prfaas_usd_per_hour + cost.local_usd_per_hour,
            "link_usd_per_hour": cost.link_usd_per_hour,
            "egress_usd_per_hour": cost.egress_usd_per_hour,
            "link_and_egress_usd_per_hour": cost.link_usd_per_hour + cost.egress_usd_per_hour,
            **token_cost_dict(tokens),
        }
    return out


def homogeneous_shape_dict(scenario: Scenario) -> dict[str, Any]:
    """What the homogeneous-PD baseline is made of (the paper's equal-GPU-count construction)."""
    from prfaas_plan.optimize.baselines import equal_gpu_shape

    shape = equal_gpu_shape(scenario.local.instances, scenario.prfaas.gpus, scenario.local.gpus_per_instance)
    return {
        "hardware": scenario.local.hardware_key,
        "instances": shape.instances,
        "gpus_per_instance": shape.gpus_per_instance,
        "basis": shape.basis,
        "detail": shape.detail,
    }


def comparison_to_dict(scenario: Scenario, comparison: Comparison, model: StageModel | None = None) -> dict[str, Any]:
    """The plan and both baselines, with the gain of each over homogeneous PD."""
    base = comparison.homogeneous_pd.throughput_req_per_s
    out: dict[str, Any] = {
        "scenario": scenario.name,
        "scenario_file": scenario.file,
        "link_bandwidth_gbit_per_s": scenario.link.bandwidth_bytes_per_s / GBIT_PER_S,
        "plan": plan_to_dict(comparison.plan),
        "baselines": {
            "homogeneous_pd": plan_to_dict(comparison.homogeneous_pd),
            "naive_heterogeneous": plan_to_dict(comparison.naive_heterogeneous),
        },
        "gain_vs_homogeneous": {
            "plan": comparison.plan.throughput_req_per_s / base,
            "naive_heterogeneous": comparison.naive_heterogeneous.throughput_req_per_s / base,
        },
        "homogeneous_pd_shape": homogeneous_shape_dict(scenario),
        "provenance": dict(comparison.sources),
    }
    for key, plan in (
        ("plan", comparison.plan),
        ("homogeneous_pd", comparison.homogeneous_pd),
        ("naive_heterogeneous", comparison.naive_heterogeneous),
    ):
        target = out["plan"] if key == "plan" else out["baselines"][key]
        target["cost"] = plan_cost_dict(scenario, plan, {"at_throughput": plan.throughput_req_per_s}, model)
    return out


def fit_report_to_dict(report: FitReport) -> dict[str, Any]:
    """A fit report with each point's residual (and leave-one-out prediction); sizes in MiB."""
    scale = MIB if report.unit == "bytes" else 1.0
    unit = "MiB" if report.unit == "bytes" else report.unit
    points = []
    for i, (length, given, fitted) in enumerate(zip(report.lengths_tokens, report.given, report.fitted, strict=True)):
        point: dict[str, Any] = {
            "length_tokens": length,
            "given": given / scale,
            "fitted": fitted / scale,
            "residual": (fitted - given) / scale,
            "relative_residual": fitted / given - 1,
        }
        if report.leave_one_out:
            point["leave_one_out"] = report.leave_one_out[i] / scale
            point["leave_one_out_relative_error"] = report.leave_one_out[i] / given - 1
        points.append(point)
    return {
        "curve": report.name,
        "method": report.method,
        "provenance": report.provenance,
        "unit": unit,
        "parameters": dict(report.parameters),
        "points": points,
        "source": report.source,
    }


def kv_rows_to_dict(model: str, hardware: str, rows: list[KvRow]) -> dict[str, Any]:
    """The ``kv --json`` object: per length S_kv (bytes), the batch-1 prefill (s, ``prefill_s``), the KV handoff
    of a disaggregated prefill instance and the two together (s), and Φ_kv over the latter (Gbit/s)."""
    return {
        "model": model,
        "hardware": hardware,
        "rows": [
            {
                "length_tokens": row.length_tokens,
                "kv_bytes": row.kv_bytes,
                "prefill_s": row.prefill_s,
                "kv_handoff_s": row.handoff_s,
                "disaggregated_prefill_s": row.disaggregated_prefill_s,
                "kv_gbit_per_s": row.kv_bytes_per_s / GBIT_PER_S,
                "source": row.source,
            }
            for row in rows
        ],
    }


# --------------------------------------------------------------------------------------------------------
# Under load: TTFT at a rate, the TTFT-vs-load curve, goodput
# --------------------------------------------------------------------------------------------------------

_SUMMARY_KEYS = ("mean", "p50", "p90", "p99")


def ttft_summary_to_dict(summary: TtftSummary | None) -> dict[str, float | None]:
    """{"mean", "p50", "p90", "p99"} in seconds; every value null when there is no steady state."""
    if summary is None:
        return dict.fromkeys(_SUMMARY_KEYS)
    return {"mean": summary.mean_s, "p50": summary.p50_s, "p90": summary.p90_s, "p99": summary.p99_s}


def loaded_to_dict(loaded: LoadedTtft, max_throughput_req_per_s: float | None = None) -> dict[str, Any]:
    """One plan at one arrival rate: utilisation per stage, mean waits, TTFT overall and per route.

    An unstable plan (some stage at utilisation >= 1) has ``"stable": false``, ``"status": "unstable"``, the
    stage in ``"unstable_stage"`` and null TTFT figures. A route with no traffic is null in
    ``ttft_by_route_s``.
    """
    fraction = None
    if max_throughput_req_per_s:
        fraction = loaded.rate_req_per_s / max_throughput_req_per_s
    waits = loaded.wait_mean_s
    return {
        "rate_req_per_s": loaded.rate_req_per_s,
        "load_fraction": fraction,
        "stable": loaded.stable,
        "status": "stable" if loaded.stable else "unstable",
        "unstable_stage": loaded.unstable_stage,
        "stability_limit_req_per_s": finite(loaded.stability_limit_req_per_s),
        "utilization": {k: finite(v) for k, v in loaded.utilization.items()},
        "wait_mean_s": {k: (None if waits is None else waits[k]) for k in loaded.utilization},
        "ttft_s": ttft_summary_to_dict(loaded.ttft),
        "ttft_by_route_s": {
            route: (None if summary is None and loaded.stable else ttft_summary_to_dict(summary))
            for route, summary in loaded.by_route.items()
        },
    }


def validity_to_dict(validity: Validity) -> dict[str, Any]:
    """``{"in_domain": bool, "reasons": [...]}``."""
    return {"in_domain": validity.in_domain, "reasons": list(validity.reasons)}


def check_to_dict(check: LoadedCheck, max_throughput_req_per_s: float | None = None) -> dict[str, Any]:
    """A plan under load: ``loaded_to_dict``'s fields, where ``ttft_s`` and ``ttft_by_route_s`` are the figures
    presented as the answer and ``source`` says whose ("simulation" where the closed form is out of its domain
    or beyond the tolerance, else "closed form"); the closed form's always under ``closed_form_ttft_s`` and
    ``closed_form_ttft_by_route_s``; the method and its ``validity``; ``decision`` (null without an SLO or a
    simulation: ``decision_to_dict``); and ``verification``: null with --no-verify, else the simulated
    figures with 95 % half-widths, how the realisations were made, the disagreements and which figures the
    verdicts use."""
    out = loaded_to_dict(check.closed, max_throughput_req_per_s)
    out["closed_form_ttft_s"] = out["ttft_s"]
    out["closed_form_ttft_by_route_s"] = out["ttft_by_route_s"]
    out["source"] = check.answer_source
    if check.answer_source == "simulation":  # the answer presented is the simulated one; both stay above
        out["ttft_s"] = ttft_summary_to_dict(check.answer_summary("overall"))
        out["ttft_by_route_s"] = {
            route: (None if check.answer_summary(route) is None else ttft_summary_to_dict(check.answer_summary(route)))
            for route in check.closed.by_route
        }
    out["method"] = check.method
    out["validity"] = validity_to_dict(check.validity)
    out["decision"] = decision_to_dict(check.decision)
    sim = check.simulated
    out["verification"] = (
        None
        if sim is None
        else {
            "simulated_ttft_s": {
                kind: {stat: {"value": f.value, "ci95_half_width": finite(f.half_width)} for stat, f in stats.items()}
                for kind, stats in sim.figures.items()
            },
            "replications": sim.replications,
            "requests_per_replication": sim.requests,
            "seed": sim.seed,
            "realisation": sim.realisation,
            "tolerance": check.tolerance,
            "disagreements": list(check.disagreements),
            "agrees": not check.disagreements,
            "verdict_source": check.verdict_source,
            "wall_s": sim.wall_s,
        }
    )
    return out


def decision_to_dict(decision: Decision | None) -> dict[str, Any] | None:
    """A check against an SLO: the verdict ("meets", "misses", "undecided within budget"), the figure and its
    95 % interval, replications and requests simulated, wall seconds and what stopped it."""
    if decision is None:
        return None
    return {
        "verdict": decision.verdict,
        "figure": decision.figure,
        "slo_s": decision.slo_s,
        "value_s": finite(decision.value_s),
        "ci95_half_width_s": finite(decision.half_width_s),
        "replications": decision.replications,
        "requests": decision.requests,
        "wall_s": decision.wall_s,
        "stopped_by": decision.stopped_by,
    }


def add_loaded(payload: dict[str, Any], comparison: Comparison, view: Any) -> dict[str, Any]:
    """Add ``"loaded"`` (the plan; each baseline's under its own key, ``check_to_dict``) and ``"curve"`` (the
    plan's closed-form TTFT at each load, with its validity) to a comparison payload. ``view`` is what
    ``cli.latency_render.under_load`` returns (``checks``, ``curve``, ``curve_validity``), or None when nothing
    under load was asked for (the payload is returned as it is)."""
    if view is None:
        return payload
    plans = {
        "plan": comparison.plan,
        "homogeneous_pd": comparison.homogeneous_pd,
        "naive_heterogeneous": comparison.naive_heterogeneous,
    }
    checks = view.checks
    if checks is not None:
        payload["loaded"] = check_to_dict(checks["plan"], comparison.plan.throughput_req_per_s)
        for key in ("homogeneous_pd", "naive_heterogeneous"):
            payload["baselines"][key]["loaded"] = check_to_dict(checks[key], plans[key].throughput_req_per_s)
    if view.curve is not None:
        payload["curve"] = [
            {**loaded_to_dict(point, comparison.plan.throughput_req_per_s), "validity": validity_to_dict(valid)}
            for point, valid in zip(view.curve, view.curve_validity, strict=True)
        ]
    return payload


def goodput_plan_to_dict(evaluation: GoodputEvaluation) -> dict[str, Any]:
    """A plan in the ``--json`` schema plus ``"goodput"``: the rate, its stability limit, what limits it."""
    out = plan_to_dict(evaluation.plan)
    goodput = evaluation.goodput
    out["goodput"] = {
        "rate_req_per_s": goodput.rate_req_per_s,
        "fraction_of_max_throughput": goodput.rate_req_per_s / evaluation.plan.throughput_req_per_s,
        "stability_limit_req_per_s": finite(goodput.stability_limit_req_per_s),
        "limited_by": goodput.limited_by,
        "utilization_at_goodput": {k: finite(v) for k, v in evaluation.utilization_at_goodput.items()},
    }
    return out


def goodput_check_to_dict(check: GoodputCheck | None) -> dict[str, Any] | None:
    """The simulated goodput beside the closed form's (None with --no-verify)."""
    if check is None:
        return None
    at_closed = check.quantile_at_closed_s
    return {
        "closed_form_rate_req_per_s": check.closed_rate_req_per_s,
        "simulated_rate_req_per_s": check.simulated_rate_req_per_s,
        "relative_difference": finite(check.relative_difference),
        "simulated_quantile_at_closed_form_rate_s": None
        if at_closed is None
        else {"value": at_closed.value, "ci95_half_width": finite(at_closed.half_width)},
        "replications": check.replications,
        "requests_per_replication": check.requests,
        "realisation": check.realisation,
        "verdict_source": "simulation",
    }


def goodput_comparison_to_dict(
    scenario: Scenario,
    comparison: GoodputComparison,
    check: GoodputCheck | None = None,
    model: StageModel | None = None,
) -> dict[str, Any]:
    """``optimize --objective goodput``: the goodput-optimal plan, the throughput-optimal plan and both
    baselines, each with its goodput, and how far the threshold moved between the two objectives. With a
    ``check``, the plan's ``goodput.verification`` holds the simulated goodput (what the verdict uses)."""
    best, paper = comparison.plan.plan, comparison.throughput_plan.plan
    shift = None
    if best.threshold_tokens is not None and paper.threshold_tokens is not None:
        shift = best.threshold_tokens - paper.threshold_tokens
    out: dict[str, Any] = {
        "scenario": scenario.name,
        "scenario_file": scenario.file,
        "link_bandwidth_gbit_per_s": scenario.link.bandwidth_bytes_per_s / GBIT_PER_S,
        "objective": "goodput",
        "ttft_slo_s": comparison.ttft_slo_s,
        "ttft_quantile": comparison.quantile,
        "plan": {
            **goodput_plan_to_dict(comparison.plan),
            "goodput_verification": goodput_check_to_dict(check),
        },
        "throughput_plan": goodput_plan_to_dict(comparison.throughput_plan),
        "baselines": {
            "homogeneous_pd": goodput_plan_to_dict(comparison.homogeneous_pd),
            "naive_heterogeneous": goodput_plan_to_dict(comparison.naive_heterogeneous),
        },
        "threshold_shift_tokens": shift,
        "homogeneous_pd_shape": homogeneous_shape_dict(scenario),
        "provenance": dict(comparison.sources),
    }
    for key, evaluation in (
        ("plan", comparison.plan),
        ("throughput_plan", comparison.throughput_plan),
        ("homogeneous_pd", comparison.homogeneous_pd),
        ("naive_heterogeneous", comparison.naive_heterogeneous),
    ):
        target = out[key] if key in ("plan", "throughput_plan") else out["baselines"][key]
        target["cost"] = plan_cost_dict(
            scenario,
            evaluation.plan,
            {"at_throughput": evaluation.plan.throughput_req_per_s, "at_goodput": evaluation.goodput.rate_req_per_s},
            model,
        )
    return out
