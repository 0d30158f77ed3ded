"""Machine-readable reports: plain JSON-ready dictionaries (SI-derived display units named in every key)."""

from __future__ import annotations

import math
from typing import Any

from prfaas_plan.optimize import Comparison, PlanEvaluation
from prfaas_plan.physics.derived import FitReport, KvRow
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
        "provenance": dict(comparison.sources),
    }
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
    """The ``kv --json`` object: per length S_kv (bytes), T_prefill (s) and Φ_kv (Gbit/s)."""
    return {
        "model": model,
        "hardware": hardware,
        "rows": [
            {
                "length_tokens": row.length_tokens,
                "kv_bytes": row.kv_bytes,
                "prefill_s": row.prefill_s,
                "kv_gbit_per_s": row.kv_bytes_per_s / GBIT_PER_S,
                "source": row.source,
            }
            for row in rows
        ],
    }
