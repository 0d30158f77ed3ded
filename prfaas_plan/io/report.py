"""Machine-readable reports: plain JSON-ready dictionaries (SI-derived display units named in every key)."""

from __future__ import annotations

import math
from typing import Any

from prfaas_plan.optimize import Comparison, PlanEvaluation
from prfaas_plan.physics.curves import PolyCurve
from prfaas_plan.spec.scenario import Scenario
from prfaas_plan.units import GBIT_PER_S, MIB


def _clean(value: float | None) -> float | None:
    """JSON has no inf/NaN: a stage with no traffic is reported as null."""
    if value is None or not math.isfinite(value):
        return None
    return value


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
        "stage_throughput_req_per_s": {
            "prfaas": _clean(plan.theta_prfaas),
            "prfaas_compute": _clean(plan.theta_prfaas_compute),
            "prfaas_link": _clean(plan.theta_prfaas_link),
            "pd_prefill": _clean(plan.theta_pd_prefill),
            "pd_decode": plan.theta_pd_decode,
        },
        "stage_bound_req_per_s": {k: _clean(v) for k, v in plan.stage_bounds.items()},
        "bottleneck": plan.bottleneck,
        "binding_stages": list(plan.binding),
        "egress_gbit_per_s": plan.egress_bytes_per_s / GBIT_PER_S,
        "link_utilization": plan.link_utilization,
        "ttft_unloaded_s": {"mean": plan.ttft_unloaded_mean_s, "p90": plan.ttft_unloaded_p90_s},
    }


def comparison_to_dict(scenario: Scenario, comparison: Comparison) -> dict[str, Any]:
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
        "provenance": provenance(scenario),
    }
    return out


def provenance(scenario: Scenario) -> dict[str, str]:
    """Where each profile input of the model came from: measured, derived or assumed."""
    prfaas, local = scenario.prfaas.profile, scenario.local.profile
    out: dict[str, str] = {
        f"prfaas_prefill ({scenario.prfaas.hardware_key})": prfaas.prefill.provenance,
        f"local_prefill ({scenario.local.hardware_key})": local.prefill.provenance,
    }
    if prfaas.kv_cache is not None:
        out[f"kv_cache ({scenario.prfaas.hardware_key})"] = prfaas.kv_cache.provenance
    if local.decode is not None:
        out[f"decode ({scenario.local.hardware_key})"] = local.decode.provenance
    return out


def curve_to_dict(name: str, curve: PolyCurve, unit: str) -> dict[str, Any]:
    """A fitted profile curve with its points and residuals (``unit`` is 's' or 'MiB')."""
    scale = MIB if unit == "MiB" else 1.0
    return {
        "curve": name,
        "unit": unit,
        "provenance": curve.provenance,
        "coefficients_ascending": [c / scale for c in curve.coefficients],
        "points": [
            {
                "length_tokens": length,
                "given": value / scale,
                "fitted": (value + res) / scale,
                "residual": res / scale,
                "relative_residual": rel,
            }
            for length, value, res, rel in zip(
                curve.points_tokens,
                curve.points_values,
                curve.residuals,
                curve.relative_residuals,
                strict=True,
            )
        ],
        "source": curve.source,
    }
