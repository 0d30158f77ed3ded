"""A topology's review as files (issue 23): report.md, review.json, a CSV per table and topology.png (the
global plan drawn, ``report.topology_figure``), all from the ``topology plan --json`` mapping
(``report.topology.topology_study_dict``), so the directory says what the command prints."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

from prfaas_plan.report.jsonsafe import json_safe
from prfaas_plan.report.topology_figure import topology_png

FIGURE = "topology.png"


def _csv(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow(["" if v is None else json.dumps(v, sort_keys=True) if isinstance(v, dict) else v for v in row])
    return buffer.getvalue()


def _plans(payload: dict[str, Any]) -> list[dict[str, Any]]:
    return [payload["global_plan"], *payload["alternatives"].values()]


def _tables(payload: dict[str, Any]) -> dict[str, tuple[list[str], list[list[Any]]]]:
    best = payload["global_plan"]["scale"]
    plans = _plans(payload)
    tables: dict[str, tuple[list[str], list[list[Any]]]] = {
        "plans": (
            ["plan", "scale", "throughput_req_per_s", "total_usd_per_hour", "usd_per_million_requests", "vs_global"],
            [
                [
                    p["label"],
                    p["scale"],
                    p["throughput_req_per_s"],
                    p["price"]["total_usd_per_hour"],
                    p["price"]["usd_per_million_requests"],
                    p["scale"] / best,
                ]
                for p in plans
            ],
        ),
        "regions": (
            [
                "plan",
                "cluster",
                "threshold_tokens",
                "offload_fraction",
                "n_pd_prefill",
                "n_pd_decode",
                "carried_req_per_s",
                "long_share_by_site",
            ],
            [
                [
                    p["label"],
                    r["cluster"],
                    r["threshold_tokens"],
                    r["offload_fraction"],
                    r["n_pd_prefill"],
                    r["n_pd_decode"],
                    r["carried_req_per_s"],
                    r["long_share_by_site"],
                ]
                for p in plans
                for r in p["regions"]
            ],
        ),
        "links": (
            ["plan", "prfaas", "pd", "req_per_s", "kv_gbit_per_s", "bandwidth_gbit_per_s", "utilization"],
            [
                [
                    p["label"],
                    lk["prfaas"],
                    lk["pd"],
                    lk["req_per_s"],
                    lk["kv_gbit_per_s"],
                    lk["bandwidth_gbit_per_s"],
                    lk["utilization"],
                ]
                for p in plans
                for lk in p["links"]
            ],
        ),
    }
    regions = list(payload["rates_req_per_s"])
    if payload["n_minus_one"]:
        tables["n_minus_one"] = (
            [
                "loss",
                "kind",
                "scale",
                "throughput_req_per_s",
                "throughput_vs_plan",
                *(f"{r}_req_per_s" for r in regions),
            ],
            [
                [
                    f["fault"],
                    f["kind"],
                    f["scale"],
                    f["throughput_req_per_s"],
                    f["throughput_vs_plan"],
                    *(f["carried_req_per_s"][r] for r in regions),
                ]
                for f in payload["n_minus_one"]
            ],
        )
    loaded = payload.get("loaded_ttft")
    if loaded:
        simulated = {}
        for run in payload["simulation"]:
            if run["run"] == "no loss" and run["load"] == loaded["load"]:
                simulated = {r["cluster"]: r["ttft_p90_s"] for r in run["regions"]}
        tables["loaded_ttft"] = (
            [
                "cluster",
                "load",
                "rate_req_per_s",
                "closed_form_ttft_p50_s",
                "closed_form_ttft_p90_s",
                "simulated_ttft_p90_s",
                "unstable_stage",
            ],
            [
                [
                    r["cluster"],
                    loaded["load"],
                    r["rate_req_per_s"],
                    r["ttft_p50_s"],
                    r["ttft_p90_s"],
                    simulated.get(r["cluster"]),
                    r["unstable_stage"],
                ]
                for r in loaded["regions"]
            ],
        )
    if payload["simulation"]:
        tables["simulation"] = (
            ["run", "load", "cluster", "offered_req_per_s", "ttft_p50_s", "ttft_p90_s", "arrived", "completed"],
            [
                [
                    run["run"],
                    run["load"],
                    r["cluster"],
                    r["offered_req_per_s"],
                    r["ttft_p50_s"],
                    r["ttft_p90_s"],
                    r["arrived"],
                    r["completed"],
                ]
                for run in payload["simulation"]
                for r in run["regions"]
            ],
        )
    return tables


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k} {v:.0%}" for k, v in value.items() if v > 0) or "—"
    return str(value)


def _markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _markdown(payload: dict[str, Any], tables: dict[str, tuple[list[str], list[list[Any]]]]) -> str:
    bound, gain = payload["bound"], payload["gain"]
    parts = [
        f"# Topology review: {payload['topology']}",
        f"Input: `{payload['file']}`. Every region carries λ times its own rate "
        f"({', '.join(f'{k} {v:g} req/s' for k, v in payload['rates_req_per_s'].items())}); the global plan "
        "maximises λ.",
        f"![the global plan drawn]({FIGURE})",
        f"Bound on λ over every threshold: {bound['scale']:.4g} (the global plan is within {bound['gap']:.2%}; "
        f"{bound['method']}). Gain of sharing: {gain['vs_no_sharing']:.3f}x over no sharing, "
        f"{gain['vs_nearest_site_only']:.3f}x over nearest site only.",
        "## Global plan and alternatives",
        _markdown_table(*tables["plans"]),
        "## Per region (each plan)",
        _markdown_table(*tables["regions"]),
        "## Links (each plan)",
        _markdown_table(*tables["links"]),
    ]
    if "loaded_ttft" in tables:
        parts += [
            "## Loaded TTFT per region (global plan)",
            f"{payload['loaded_ttft']['method']}. Simulated: the topology simulator's no-loss run at the same load "
            "(empty without --verify).",
            _markdown_table(*tables["loaded_ttft"]),
        ]
    if "n_minus_one" in tables:
        parts += ["## N-1 on the global plan (fluid throughput)", _markdown_table(*tables["n_minus_one"])]
    else:
        parts.append("N-1 not reviewed.")
    if "simulation" in tables:
        parts += ["## The global plan simulated (topology simulator)", _markdown_table(*tables["simulation"])]
        kept = all(run["conserved"] for run in payload["simulation"])
        parts.append("Every request that arrived was completed." if kept else "**Requests were not all completed.**")
    else:
        parts.append("Not simulated (--no-verify).")
    parts.append(
        "Not in this review yet: goodput, sizing to a target (`prfaas-plan size` on the topology), sensitivity, "
        "hardware alternatives."
    )
    return "\n\n".join(parts) + "\n"


def topology_review_files(payload: dict[str, Any]) -> dict[str, str | bytes]:
    """File name -> content of a topology's review directory."""
    tables = _tables(payload)
    files: dict[str, str | bytes] = {
        "report.md": _markdown(payload, tables),
        "review.json": json.dumps(json_safe(payload), indent=2, allow_nan=False) + "\n",
        FIGURE: topology_png(payload["topology"], payload["clusters"], payload["global_plan"]),
    }
    files.update({f"{name}.csv": _csv(*table) for name, table in tables.items()})
    return files
