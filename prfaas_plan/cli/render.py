"""Rendering of plans and fits for people: tables (:class:`DataTable`) and the console the commands print
through. Rich draws them where the output is a terminal or needs what only rich does; piped plain output is
written by ``cli.plain`` with the same characters, so that such a command never imports rich (start-up)."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from prfaas_plan._frozen import frozen
from prfaas_plan.cli import plain
from prfaas_plan.report.jsonsafe import finite
from prfaas_plan.units import GBIT_PER_S

if TYPE_CHECKING:  # annotations only
    from rich.console import Console
    from rich.table import Table

    from prfaas_plan.optimize import Comparison, PlanEvaluation
    from prfaas_plan.spec.scenario import Scenario

_DASH = "—"

#: A value a table holds as data (``--format csv``): a number as a number, a name, a flag, or nothing.
Datum = float | int | str | bool | None
T = TypeVar("T")


class DataTable:
    """A table for people (boxes, Markdown) that also holds its content as data for ``--format csv``:
    ``data_header`` names each column with its unit (``threshold_tokens``, ``cost_usd_per_hour``) and
    ``data_rows`` hold plain values, so that a CSV cell that is a number is written as one (no thousands
    separators, no %, x or $ signs: fractions stay fractions, the unit is in the header).

    For people it has a title, columns (a header and a justification), rows of text cells and sections, as a
    rich table with the default box has; :meth:`to_rich` makes that table. Text is shown as written, except the
    known style tags of ``cli.plain`` (``[bold]...[/bold]``, ...) where they pair up properly."""

    def __init__(self, title: str | None = None, *, title_justify: str = "center") -> None:
        if title_justify not in plain.JUSTIFY:
            raise ValueError(f"title_justify must be one of {plain.JUSTIFY}, not {title_justify!r}")
        self.title = title
        self.title_justify = title_justify
        self.columns: list[tuple[str, str]] = []
        self.rows: list[list[str]] = []
        self.section_ends: set[int] = set()
        self.data_header: list[str] = []
        self.data_rows: list[list[Datum]] = []

    def add_column(self, header: str = "", *, justify: str = "left") -> None:
        """Add a column (its header and how its cells are justified)."""
        if justify not in plain.JUSTIFY:
            raise ValueError(f"justify must be one of {plain.JUSTIFY}, not {justify!r}")
        self.columns.append((header, justify))

    def add_row(self, *cells: str) -> None:
        """Add a row: one cell per column (missing cells at the end are empty)."""
        if len(cells) > len(self.columns):
            raise ValueError(f"a row of {len(cells)} cells in a table of {len(self.columns)} columns")
        self.rows.append([*cells, *([""] * (len(self.columns) - len(cells)))])

    def add_section(self) -> None:
        """End a section after the last row (a rule is drawn before the next row)."""
        if self.rows:
            self.section_ends.add(len(self.rows) - 1)

    def add_data(self, record: Mapping[str, Datum]) -> None:
        """Append one data row; the first row fixes the header and every later row must give the same keys."""
        if not self.data_header:
            self.data_header = list(record)
        elif list(record) != self.data_header:
            raise ValueError(f"data row keys {list(record)} differ from the header {self.data_header}")
        self.data_rows.append(list(record.values()))

    def plain_text(self, width: int) -> str | None:
        """The table as rich draws it on a console without colour ``width`` cells wide, where ``cli.plain`` can
        draw it exactly; else None."""
        return plain.table_block(
            self.title, self.title_justify, self.columns, self.rows, frozenset(self.section_ends), width
        )

    def to_rich(self) -> Table:
        """The table for people as a rich table."""
        from rich.table import Table

        markup = plain.rich_markup
        title = None if self.title is None else markup(self.title)
        table = Table(title=title, title_justify=self.title_justify)  # type: ignore[arg-type]
        for header, justify in self.columns:
            table.add_column(markup(header), justify=justify)  # type: ignore[arg-type]
        for index, row in enumerate(self.rows):
            table.add_row(*(markup(cell) for cell in row), end_section=index in self.section_ends)
        return table


@frozen
class Quantity(Generic[T]):
    """One row of a table whose columns are plans or deployments: the row's label and cell for people, and
    the values it stands for as data (keys with units: one cell may show two figures, e.g. mean / P90)."""

    label: str
    text: Callable[[T], str]
    data: Callable[[T], Mapping[str, Datum]]


def one(key: str, value: Callable[[T], Datum]) -> Callable[[T], Mapping[str, Datum]]:
    """The data of a row that stands for one value."""
    return lambda item: {key: value(item)}


def quantity_table(
    items: Sequence[tuple[str, T]], quantities: Sequence[Quantity[T]], *, name_key: str, **table_args: Any
) -> DataTable:
    """A table with one row per quantity and one column per named item (for people), and, as data, one row
    per item (its name under ``name_key``) and one column per value: CSV reads as records."""
    table = DataTable(**table_args)
    table.add_column("")
    for name, _ in items:
        table.add_column(name, justify="right")
    for q in quantities:
        table.add_row(q.label, *(q.text(item) for _, item in items))
    for name, item in items:
        record: dict[str, Datum] = {name_key: name}
        for q in quantities:
            record.update(q.data(item))
        table.add_data(record)
    return table


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


def _quantities(base: float) -> list[Quantity[PlanEvaluation]]:
    def gain(p: PlanEvaluation) -> float:
        return p.throughput_req_per_s / base

    return [
        Quantity(
            label="threshold t (tokens)", text=_threshold, data=one("threshold_tokens", lambda p: p.threshold_tokens)
        ),
        Quantity(
            label="instances PrfaaS/PD-P/PD-D",
            text=_instances,
            data=lambda p: {"n_prfaas": p.n_prfaas, "n_pd_prefill": p.n_pd_prefill, "n_pd_decode": p.n_pd_decode},
        ),
        Quantity(
            label="offload fraction p",
            text=lambda p: f"{p.offload_fraction:.1%}",
            data=one("offload_fraction", lambda p: p.offload_fraction),
        ),
        Quantity(
            label="l_long / l_short (tokens)",
            text=lambda p: f"{_num(p.long_tokens, '{:,.0f}')} / {_num(p.short_tokens, '{:,.0f}')}",
            data=lambda p: {"long_tokens": p.long_tokens, "short_tokens": p.short_tokens},
        ),
        Quantity(
            label="Θ_prfaas (req/s)",
            text=lambda p: _num(finite(p.theta_prfaas_req_per_s)),
            data=one("theta_prfaas_req_per_s", lambda p: finite(p.theta_prfaas_req_per_s)),
        ),
        Quantity(
            label="Θ_pd-p (req/s)",
            text=lambda p: _num(finite(p.theta_pd_prefill_req_per_s)),
            data=one("theta_pd_prefill_req_per_s", lambda p: finite(p.theta_pd_prefill_req_per_s)),
        ),
        Quantity(
            label="Θ_pd-d (req/s)",
            text=lambda p: _num(finite(p.theta_pd_decode_req_per_s)),
            data=one("theta_pd_decode_req_per_s", lambda p: finite(p.theta_pd_decode_req_per_s)),
        ),
        Quantity(
            label="Λ_max (req/s)",
            text=lambda p: f"[bold]{p.throughput_req_per_s:.2f}[/bold]",
            data=one("throughput_req_per_s", lambda p: p.throughput_req_per_s),
        ),
        Quantity(
            label="stability limit (req/s)",
            text=lambda p: _num(finite(p.stability_limit_req_per_s)),
            data=one("stability_limit_req_per_s", lambda p: finite(p.stability_limit_req_per_s)),
        ),
        Quantity(
            label="gain vs homogeneous",
            text=lambda p: f"{gain(p):.2f}×",
            data=one("gain_vs_homogeneous_ratio", gain),
        ),
        Quantity(
            label="egress at Λ_max (Gbit/s)",
            text=lambda p: f"{p.egress_bytes_per_s / GBIT_PER_S:.1f}",
            data=one("egress_at_throughput_gbit_per_s", lambda p: p.egress_bytes_per_s / GBIT_PER_S),
        ),
        Quantity(
            label="link utilisation",
            text=lambda p: f"{p.link_utilization:.1%}",
            data=one("link_utilization_fraction", lambda p: p.link_utilization),
        ),
        Quantity(
            label="unloaded TTFT mean/P90 (s)",
            text=lambda p: f"{p.ttft_unloaded_mean_s:.2f} / {p.ttft_unloaded_p90_s:.2f}",
            data=lambda p: {
                "ttft_unloaded_mean_s": p.ttft_unloaded_mean_s,
                "ttft_unloaded_p90_s": p.ttft_unloaded_p90_s,
            },
        ),
        Quantity(
            label="binding stage",
            text=_bottleneck,
            data=lambda p: {"bottleneck": p.bottleneck, "binding_stages": " ".join(p.binding)},
        ),
    ]


def _usd(value: float | None, digits: int = 2) -> str:
    return _DASH if value is None else f"${value:,.{digits}f}"


#: Row labels of a deployment's cost at one rate (the ``at`` entry of ``report.plans.plan_cost_dict``), the same
#: words in every table: the hourly cost, its split, and ``optimize.cost.token_cost``'s three figures.
def cost_quantities(rate_label: str, rate_key: str, cost: Callable[[T], Mapping[str, Any] | None]) -> list[Quantity[T]]:
    """Rows for the cost of a deployment at one rate: USD/h, its split (GPUs, link, egress) and USD per million
    input, output and all tokens. ``rate_label`` names the rate for people (``Λ_max``), ``rate_key`` in the data
    (``throughput``); ``cost`` gives the deployment's ``at`` mapping (None: not priced)."""

    def field(key: str) -> Callable[[T], float | None]:
        def get(item: T) -> float | None:
            at = cost(item)
            return None if at is None else at[key]

        return get

    total, gpus, link, egress = (
        field(k) for k in ("usd_per_hour", "gpus_usd_per_hour", "link_usd_per_hour", "egress_usd_per_hour")
    )
    per_in, per_out, per_all = (
        field(k) for k in ("usd_per_million_input_tokens", "usd_per_million_output_tokens", "usd_per_million_tokens")
    )
    return [
        Quantity(
            label=f"cost at {rate_label} (USD/h)",
            text=lambda x: _usd(total(x), 0),
            data=one(f"cost_at_{rate_key}_usd_per_hour", total),
        ),
        Quantity(
            label="  GPUs / link / egress (USD/h)",
            text=lambda x: f"{_usd(gpus(x), 0)} / {_usd(link(x), 0)} / {_usd(egress(x), 0)}",
            data=lambda x: {
                f"gpus_at_{rate_key}_usd_per_hour": gpus(x),
                f"link_at_{rate_key}_usd_per_hour": link(x),
                f"egress_at_{rate_key}_usd_per_hour": egress(x),
            },
        ),
        Quantity(
            label=f"USD per 1M tokens at {rate_label}: input / output / all",
            text=lambda x: f"{_num(per_in(x))} / {_num(per_out(x))} / {_num(per_all(x))}",
            data=lambda x: {
                f"usd_per_million_input_tokens_at_{rate_key}": per_in(x),
                f"usd_per_million_output_tokens_at_{rate_key}": per_out(x),
                f"usd_per_million_tokens_at_{rate_key}": per_all(x),
            },
        ),
    ]


def comparison_table(
    scenario: Scenario, comparison: Comparison, *, plan_title: str = "PrfaaS-PD (optimised)", model: Any = None
) -> DataTable:
    """The plan beside homogeneous PD and naive heterogeneous PD (as data: one row per plan)."""
    from prfaas_plan.report.plans import homogeneous_shape_dict, plan_cost_dict

    plans = [comparison.plan, comparison.homogeneous_pd, comparison.naive_heterogeneous]
    bandwidth = scenario.link.bandwidth_bytes_per_s / GBIT_PER_S
    shape = homogeneous_shape_dict(scenario)
    titles = (plan_title, f"Homogeneous PD ({shape['instances']} × {shape['hardware']})", "Naive heterogeneous")
    quantities = _quantities(comparison.homogeneous_pd.throughput_req_per_s)
    costs = {id(p): plan_cost_dict(scenario, p, {"at": p.throughput_req_per_s}, model) for p in plans}
    if all(c is not None for c in costs.values()):
        quantities += cost_quantities("Λ_max", "throughput", lambda p: (costs[id(p)] or {}).get("at"))
    return quantity_table(
        list(zip(titles, plans, strict=True)),
        quantities,
        name_key="plan",
        title=f"{scenario.name}: {scenario.prfaas.gpus}×{scenario.prfaas.hardware_key} PrfaaS + "
        f"{scenario.local.gpus}×{scenario.local.hardware_key} local PD, {bandwidth:g} Gbit/s link",
        title_justify="left",
    )


def provenance_note(prov: dict[str, str]) -> str:
    """A footnote naming the inputs that are not measurements."""
    soft = [f"{k}: {v}" for k, v in prov.items() if not v.startswith("measured") or "extrapolated past" in v]
    text = "TTFT is unloaded (no queueing), as in the paper's Table 6."
    if soft:
        text += " Not measured: " + "; ".join(soft) + "."
    return text


def fit_table(curves: list[dict[str, Any]]) -> DataTable:
    """Fitted or calibrated curves with each point's residual (and leave-one-out error where computed); as
    data, one row per point with its curve's unit, method and parameters."""
    table = DataTable(title="Profile fits", title_justify="left")
    for col in ("curve", "provenance", "length (tokens)", "given", "fitted", "residual", "leave-one-out"):
        table.add_column(col, justify="left" if col in ("curve", "provenance") else "right")
    for curve in curves:
        unit = curve["unit"]
        params = ", ".join(f"{k} {v:.4g}" for k, v in curve["parameters"].items())
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
            table.add_data(
                {
                    "curve": curve["curve"],
                    "provenance": curve["provenance"],
                    "unit": unit,
                    "length_tokens": point["length_tokens"],
                    "given": point["given"],
                    "fitted": point["fitted"],
                    "residual": point["residual"],
                    "relative_residual_fraction": point["relative_residual"],
                    "leave_one_out": point.get("leave_one_out"),
                    "leave_one_out_relative_error_fraction": loo,
                    "method": curve["method"],
                    "parameters": "; ".join(f"{k}={v!r}" for k, v in curve["parameters"].items()),
                }
            )
        table.add_row("", f"[dim]{curve['method']}[/dim]", "", "", "", f"[dim]{params}[/dim]", "")
        table.add_section()
    return table


def kv_table(payload: dict[str, Any]) -> DataTable:
    """The paper's Table 3 layout: S_kv, T_prefill (batch-1 prefill, then with the KV handoff of a disaggregated
    prefill instance) and Φ_kv over the latter, per length."""
    table = DataTable(title=f"{payload['model']} on {payload['hardware']}", title_justify="left")
    columns = ("length (tokens)", "S_kv (MiB)", "T_prefill (s)", "T_prefill + KV handoff (s)", "Φ_kv (Gbit/s)")
    for col in columns:
        table.add_column(col, justify="right")
    for row in payload["rows"]:
        table.add_row(
            f"{row['length_tokens']:,.0f}",
            f"{row['kv_bytes'] / 2**20:,.1f}",
            f"{row['prefill_s']:.3f}",
            f"{row['disaggregated_prefill_s']:.3f}",
            f"{row['kv_gbit_per_s']:.2f}",
        )
        table.add_data(
            {
                "length_tokens": row["length_tokens"],
                "kv_mib": row["kv_bytes"] / 2**20,
                "prefill_s": row["prefill_s"],
                "disaggregated_prefill_s": row["disaggregated_prefill_s"],
                "kv_gbit_per_s": row["kv_gbit_per_s"],
            }
        )
    return table


#: Width used when output is piped (and COLUMNS is not set): wide enough that no table wraps.
PIPED_WIDTH = 1000


#: Table formats of ``--format``: rich boxes, GitHub Markdown, CSV.
TABLE_FORMATS = ("table", "md", "csv")
_table_format = ["table"]


#: ``--table N``: the one table (1-based, in the order the command prints them) that ``--format csv|md`` prints;
#: None is csv's first table and every table in Markdown. CSV is one table: a file with several tables, each with
#: its own header, is not a table a spreadsheet or a data frame reads.
_table_pick: list[int | None] = [None]
#: What each table printed to stdout in csv or md was (its title, or its first columns), in order.
_tables_seen: list[str] = []


def set_table_format(name: str, pick: int | None = None) -> None:
    """Set how tables print for the rest of the command (``prfaas-plan --format md|csv [--table N] ...``)."""
    if name not in TABLE_FORMATS:
        raise ValueError(f"unknown table format {name!r}")
    if pick is not None and (name == "table" or pick < 1):
        raise ValueError("--table picks a table (1, 2, ...) of --format csv or md")
    _table_format[0] = name
    _table_pick[0] = pick


def table_format() -> str:
    """The ``--format`` this command prints tables in."""
    return _table_format[0]


def table_label(table: DataTable) -> str:
    """A table as a note names it: its title, or its first columns where it has none."""
    if table.title:
        return plain.shown(table.title)
    header = table.data_header or [plain.shown(h) for h, _ in table.columns]
    return "columns " + ", ".join(header[:3]) + (", ..." if len(header) > 3 else "")


def table_selection_close() -> tuple[str | None, str | None]:
    """Once the command is done: (a note naming the tables csv left out, an error where ``--table N`` asked for
    a table the command did not print); both None where there is nothing to say."""
    fmt, pick, seen = _table_format[0], _table_pick[0], _tables_seen
    listed = "; ".join(f"{i} = {label}" for i, label in enumerate(seen, 1))
    if pick is not None and pick > len(seen):
        printed = f"{len(seen)} table{'s' if len(seen) != 1 else ''}: {listed}" if seen else "no table"
        return None, f"--table {pick}: this command printed {printed}"
    if fmt == "csv" and pick is None and len(seen) > 1:
        return (
            f"note: --format csv printed table 1 of {len(seen)}; print another with --table N before the command "
            f"(prfaas-plan --format csv --table 2 ...): {listed}",
            None,
        )
    return None, None


def table_rows(table: DataTable) -> tuple[list[str], list[list[str]]]:
    """A table's header and rows as the characters they show (style tags removed)."""
    return [plain.shown(h) for h, _ in table.columns], [[plain.shown(c) for c in row] for row in table.rows]


def table_as_markdown(table: DataTable) -> str:
    """A table as a GitHub Markdown table, its title as a heading line above it."""
    header, rows = table_rows(table)

    def line(values: list[str]) -> str:
        return "| " + " | ".join(v.replace("|", "\\|").replace("\n", " ") for v in values) + " |"

    title = None if table.title is None else plain.shown(table.title)
    out = [f"**{title}**", ""] if title else []
    out += [line(header), "|" + "|".join("---" for _ in header) + "|", *(line(r) for r in rows)]
    return "\n".join(out) + "\n"


def csv_cell(value: Datum) -> str:
    """A datum as a CSV cell: a number as a plain number (``repr``-exact, no separators or signs), nothing or a
    non-finite number as an empty cell, a flag as true/false."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    return value


def table_as_csv(table: DataTable) -> str:
    """A table as CSV, header row first (the title is not part of it), written from its data (units in the header,
    plain numbers in the cells), or from its cells as shown where it holds no data."""
    import csv
    import io

    if table.data_header:
        header, rows = table.data_header, [[csv_cell(v) for v in r] for r in table.data_rows]
    else:
        header, rows = table_rows(table)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


#: Environment variables with which rich may write something else than plain text to a pipe, or another width
#: (colour forced, a terminal assumed, a width given, a notebook): where any is set, rich prints everything.
RICH_ENVIRONMENT = ("FORCE_COLOR", "TTY_COMPATIBLE", "COLUMNS", "JUPYTER_COLUMNS", "DATABRICKS_RUNTIME_VERSION")


class Printer:
    """What the commands print through, to stdout or stderr: tables in the chosen ``--format`` (Markdown and CSV
    written here); with ``table``, piped output that is plain text written by ``cli.plain`` (the characters rich
    would write: see that module), and everything else by a rich console, made when first needed."""

    def __init__(self, stderr: bool = False) -> None:
        self.stderr = stderr
        self._rich: Console | None = None

    @property
    def file(self) -> Any:
        """The stream written to (looked up at each print, as rich does)."""
        return sys.stderr if self.stderr else sys.stdout

    def _piped_width(self) -> int | None:
        """The width rich would lay plain text out to (PIPED_WIDTH), or None where rich prints: a terminal, an
        environment variable that changes what rich writes, or a stream whose encoding is not UTF (rich then
        draws boxes in ASCII)."""
        stream = self.file
        encoding = (getattr(stream, "encoding", None) or "utf-8").lower()
        if stream.isatty() or not encoding.startswith("utf") or any(name in os.environ for name in RICH_ENVIRONMENT):
            return None
        return PIPED_WIDTH

    def _plain(self, obj: object, width: int) -> str | None:
        if isinstance(obj, str):
            return plain.text_block(obj, width)
        if isinstance(obj, DataTable):
            return obj.plain_text(width)
        return None

    def print(self, *objects: Any, **kwargs: Any) -> None:
        """Print one object (a table or text) or several, as ``rich.console.Console.print`` does; a ``style`` is
        drawn on a terminal only."""
        if self.file is None:  # a closed stream (``2>&-``): nothing can be shown, as rich writes to a null file
            return
        fmt = _table_format[0]
        if fmt != "table" and len(objects) == 1 and isinstance(objects[0], DataTable):
            if not self.stderr:
                _tables_seen.append(table_label(objects[0]))
                wanted = _table_pick[0] or (1 if fmt == "csv" else len(_tables_seen))
                if len(_tables_seen) != wanted:
                    return  # csv is one table (--table N picks it); md prints every table unless --table picks one
            if fmt == "md":
                self.file.write(table_as_markdown(objects[0]) + "\n")  # a blank line between tables
            else:
                self.file.write(table_as_csv(objects[0]))
            return
        if fmt == "csv" or (fmt == "md" and _table_pick[0] is not None and not self.stderr):
            return  # CSV output is the tables alone, so that it can be read as data; so is a table --table picks
        width = self._piped_width()
        if width is not None and len(objects) == 1 and set(kwargs) <= {"style"}:
            drawn = self._plain(objects[0], width)
            if drawn is not None:
                self.file.write(drawn)
                self.file.flush()
                return
        self._console().print(*(_for_rich(o) for o in objects), **kwargs)

    def _console(self) -> Console:
        if self._rich is None:
            from rich.console import Console

            stream = self.file
            width = PIPED_WIDTH if not stream.isatty() and "COLUMNS" not in os.environ else None
            self._rich = Console(stderr=self.stderr, highlight=False, soft_wrap=False, width=width, emoji=False)
        return self._rich


def _for_rich(obj: object) -> object:
    """What rich is given to print ``obj``: a table or text as markup that shows it as written (``cli.plain``)."""
    if isinstance(obj, DataTable):
        return obj.to_rich()
    if isinstance(obj, str):
        return plain.rich_markup(obj)
    return obj


def console(stderr: bool = False) -> Printer:
    """A console for tables (stdout) or messages (stderr). Piped output is not wrapped at 80 columns: tables
    keep their natural width unless COLUMNS says otherwise. ``--format md|csv`` prints tables as Markdown or
    CSV (with CSV, notes around the tables are left out, and one table is printed: the first, or ``--table N``).
    Text is printed as written, except the known style tags (``cli.plain``): no other markup is read and no
    ``:name:`` emoji codes are replaced (names from a user's files stay as written, and rich's 3,600-entry emoji
    table is never loaded)."""
    return Printer(stderr=stderr)
