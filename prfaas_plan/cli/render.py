"""Rich rendering of plans and fits. The only module (with app.py) that imports rich."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from prfaas_plan.optimize import Comparison, PlanEvaluation
from prfaas_plan.spec.scenario import Scenario
from prfaas_plan.units import GBIT_PER_S

_DASH = "—"


def _num(value: float | None, fmt: str = "{:.2f}") -> str:
    return _DASH if value is None else fmt.format(value)


def _threshold(plan: PlanEvaluation) -> str:
    if plan.threshold_tokens is None:
        return _DASH
    if plan.offload_fraction >= 1.0:
        return "0 (offload all)"
    if plan.offload_fraction <= 0.0:
        return f"{plan.threshold_tokens:,.0f} (offload none)"
    return f"{plan.threshold_tokens:,.0f}"


def _instances(plan: PlanEvaluation) -> str:
    prfaas = str(plan.n_prfaas) if plan.n_prfaas else _DASH
    prefill = str(plan.n_pd_prefill) if plan.n_pd_prefill else _DASH
    return f"{prfaas} / {prefill} / {plan.n_pd_decode}"


def _bottleneck(plan: PlanEvaluation) -> str:
    extra = [s for s in plan.binding if s != plan.bottleneck]
    return plan.bottleneck + (f" (+{', '.join(extra)})" if extra else "")


Row = tuple[str, Callable[[PlanEvaluation], str]]


def _rows(base: float) -> list[Row]:
    return [
        ("threshold t (tokens)", _threshold),
        ("instances PrfaaS/PD-P/PD-D", _instances),
        ("offload fraction p", lambda p: f"{p.offload_fraction:.1%}"),
        (
            "l_long / l_short (tokens)",
            lambda p: f"{_num(p.long_tokens, '{:,.0f}')} / {_num(p.short_tokens, '{:,.0f}')}",
        ),
        ("Θ_prfaas (req/s)", lambda p: _num(p.theta_prfaas_req_per_s)),
        ("Θ_pd-p (req/s)", lambda p: _num(p.theta_pd_prefill_req_per_s)),
        ("Θ_pd-d (req/s)", lambda p: _num(p.theta_pd_decode_req_per_s)),
        ("Λ_max (req/s)", lambda p: f"[bold]{p.throughput_req_per_s:.2f}[/bold]"),
        ("stability limit (req/s)", lambda p: _num(p.stability_limit_req_per_s)),
        ("gain vs homogeneous", lambda p: f"{p.throughput_req_per_s / base:.2f}×"),
        ("egress at Λ_max (Gbit/s)", lambda p: f"{p.egress_bytes_per_s / GBIT_PER_S:.1f}"),
        ("link utilisation", lambda p: f"{p.link_utilization:.1%}"),
        (
            "unloaded TTFT mean/P90 (s)",
            lambda p: f"{p.ttft_unloaded_mean_s:.2f} / {p.ttft_unloaded_p90_s:.2f}",
        ),
        ("binding stage", _bottleneck),
    ]


def comparison_table(
    scenario: Scenario, comparison: Comparison, *, plan_title: str = "PrfaaS-PD (optimised)", model: Any = None
) -> Table:
    """The plan beside homogeneous PD and naive heterogeneous PD."""
    plans = [comparison.plan, comparison.homogeneous_pd, comparison.naive_heterogeneous]
    bandwidth = scenario.link.bandwidth_bytes_per_s / GBIT_PER_S
    table = Table(
        title=f"{scenario.name}: {scenario.prfaas.gpus}×{scenario.prfaas.hardware_key} PrfaaS + "
        f"{scenario.local.gpus}×{scenario.local.hardware_key} local PD, {bandwidth:g} Gbit/s link",
        title_justify="left",
    )
    from prfaas_plan.report.plans import homogeneous_shape_dict, plan_cost_dict

    shape = homogeneous_shape_dict(scenario)
    table.add_column("")
    for title in (plan_title, f"Homogeneous PD ({shape['instances']} × {shape['hardware']})", "Naive heterogeneous"):
        table.add_column(title, justify="right")
    for label, cell in _rows(comparison.homogeneous_pd.throughput_req_per_s):
        table.add_row(label, *(cell(p) for p in plans))
    costs = [plan_cost_dict(scenario, p, {"at": p.throughput_req_per_s}, model) for p in plans]
    if all(c is not None for c in costs):
        at = [c["at"] for c in costs if c is not None]
        table.add_row("cost at Λ_max (USD/h)", *(f"${a['usd_per_hour']:,.0f}" for a in at))
        table.add_row(
            "USD per 1M input / output tokens",
            *(f"{_num(a['usd_per_million_input_tokens'])} / {_num(a['usd_per_million_output_tokens'])}" for a in at),
        )
    return table


def provenance_note(prov: dict[str, str]) -> str:
    """A footnote naming the inputs that are not measurements."""
    soft = [f"{k}: {v}" for k, v in prov.items() if not v.startswith("measured")]
    text = "TTFT is unloaded (no queueing), as in the paper's Table 6."
    if soft:
        text += " Not measured: " + "; ".join(soft) + "."
    return text


def fit_table(curves: list[dict[str, Any]]) -> Table:
    """Fitted or calibrated curves with each point's residual (and leave-one-out error where computed)."""
    table = Table(title="Profile fits", title_justify="left")
    for col in ("curve", "provenance", "length (tokens)", "given", "fitted", "residual", "leave-one-out"):
        table.add_column(col, justify="left" if col in ("curve", "provenance") else "right")
    for curve in curves:
        unit = curve["unit"]
        for i, point in enumerate(curve["points"]):
            loo = point.get("leave_one_out_relative_error")
            table.add_row(
                curve["curve"] if i == 0 else "",
                curve["provenance"] if i == 0 else "",
                f"{point['length_tokens']:,.0f}",
                f"{point['given']:.4g} {unit}",
                f"{point['fitted']:.4g} {unit}",
                f"{point['residual']:+.3g} {unit} ({point['relative_residual']:+.1%})",
                "" if loo is None else f"{point['leave_one_out']:.4g} {unit} ({loo:+.1%})",
            )
        params = ", ".join(f"{k} {v:.4g}" for k, v in curve["parameters"].items())
        table.add_row("", f"[dim]{curve['method']}[/dim]", "", "", "", f"[dim]{params}[/dim]", "")
        table.add_section()
    return table


def kv_table(payload: dict[str, Any]) -> Table:
    """The paper's Table 3 layout: S_kv, T_prefill and Φ_kv per length."""
    table = Table(title=f"{payload['model']} on {payload['hardware']}", title_justify="left")
    for col in ("length (tokens)", "S_kv (MiB)", "T_prefill (s)", "Φ_kv (Gbit/s)"):
        table.add_column(col, justify="right")
    for row in payload["rows"]:
        table.add_row(
            f"{row['length_tokens']:,.0f}",
            f"{row['kv_bytes'] / 2**20:,.1f}",
            f"{row['prefill_s']:.3f}",
            f"{row['kv_gbit_per_s']:.2f}",
        )
    return table


#: Width used when output is piped (and COLUMNS is not set): wide enough that no table wraps.
PIPED_WIDTH = 1000


#: Table formats of ``--format``: rich boxes, GitHub Markdown, CSV.
TABLE_FORMATS = ("table", "md", "csv")
_table_format = ["table"]


def set_table_format(name: str) -> None:
    """Set how tables print for the rest of the command (``prfaas-plan --format md|csv ...``)."""
    if name not in TABLE_FORMATS:
        raise ValueError(f"unknown table format {name!r}")
    _table_format[0] = name


def _plain(cell: object) -> str:
    return Text.from_markup(cell).plain if isinstance(cell, str) else str(cell)


def table_rows(table: Table) -> tuple[list[str], list[list[str]]]:
    """A rich table's header and rows as plain text (markup removed)."""
    header = [_plain(c.header) for c in table.columns]
    cells = [[_plain(x) for x in c.cells] for c in table.columns]
    rows = [list(r) for r in zip(*cells, strict=True)] if cells else []
    return header, rows


def table_as_markdown(table: Table) -> str:
    """A rich table as a GitHub Markdown table, its title as a heading line above it."""
    header, rows = table_rows(table)

    def line(values: list[str]) -> str:
        return "| " + " | ".join(v.replace("|", "\\|").replace("\n", " ") for v in values) + " |"

    out = [f"**{_plain(table.title)}**", ""] if table.title else []
    out += [line(header), "|" + "|".join("---" for _ in header) + "|", *(line(r) for r in rows)]
    return "\n".join(out) + "\n"


def table_as_csv(table: Table) -> str:
    """A rich table as CSV (header row first; the title is not part of it)."""
    import csv
    import io

    header, rows = table_rows(table)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


class _FormattedConsole(Console):
    """A console that prints tables in the chosen ``--format`` and everything else as usual."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        fmt = _table_format[0]
        if fmt != "table" and len(objects) == 1 and isinstance(objects[0], Table):
            text = table_as_markdown(objects[0]) if fmt == "md" else table_as_csv(objects[0])
            self.file.write(text + "\n")  # a blank line between tables
            return
        if fmt == "csv":
            return  # CSV output is the tables alone, so that it can be read as data
        super().print(*objects, **kwargs)


def console(stderr: bool = False) -> Console:
    """A console for tables (stdout) or messages (stderr). Piped output is not wrapped at 80 columns: tables
    keep their natural width unless COLUMNS says otherwise. ``--format md|csv`` prints tables as Markdown or
    CSV (with CSV, notes around the tables are left out)."""
    stream = sys.stderr if stderr else sys.stdout
    width = None
    if not stream.isatty() and "COLUMNS" not in os.environ:
        width = PIPED_WIDTH
    return _FormattedConsole(stderr=stderr, highlight=False, soft_wrap=False, width=width)
