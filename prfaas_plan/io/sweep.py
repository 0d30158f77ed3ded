"""Parameter sweeps: the grid (axes the caller parsed, or a YAML sweep file), each point's scenario
document (the base scenario's YAML mapping with fields replaced by dotted path, validated by the scenario
loader), the row each point becomes, and the rows file (JSON Lines or CSV) that a sweep streams to and
resumes from.

A point is identified by a digest of its parameter values (``point_id``); a rows file also records a digest
of the base scenario and the evaluation options (``run_digest``), so that a resumed sweep never mixes rows of
different scenarios or options in one file.

Problems name the caller's fields: an axis carries its own origin, and the functions that report on the grid
as a whole or on the rows file take the name the caller gives them (the library does not know the command
line's vocabulary).
"""

from __future__ import annotations

import copy
import csv
import hashlib
import io
import itertools
import json
import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from prfaas_plan.errors import InputError, PlanError, Problem
from prfaas_plan.io.paths import display_path
from prfaas_plan.io.yamlsrc import Checker, Document, KeyPath, dotted, load_yaml
from prfaas_plan.optimize.sweep import PointOutcome, SweepOptions, evaluate_point
from prfaas_plan.spec.scenario import Scenario
from prfaas_plan.units import GBIT_PER_S

#: Limits that keep a hostile grid bounded: each point is a scenario load and a search (about 0.1 s), so
#: 100,000 points is hours of a large machine; more is a typo (a product of long lists).
MAX_POINTS = 100_000
MAX_VALUES_PER_AXIS = 64
MAX_AXES = 16
#: Longest key path (parts); no scenario field needs more.
MAX_PATH_PARTS = 16
#: Problems shown before the rest are summarised in one line.
MAX_PROBLEMS_SHOWN = 40
#: Version of the row layout; part of ``run_digest``, so a file of another layout is never resumed.
ROW_SCHEMA = 1

_INT = re.compile(r"[+-]?\d+")
_KEY = r"[^.\[\]]+"
_PATH = re.compile(rf"{_KEY}(?:\.{_KEY}|\[\d+\])*")
_PART = re.compile(rf"({_KEY})|\[(\d+)\]")


# --------------------------------------------------------------------------------------------------- grid


@dataclass(frozen=True, slots=True, kw_only=True)
class Axis:
    """One swept field: its key path in the scenario document, its values, and where it was given (for
    messages: ``origin``, the caller's name for the field, or the sweep file's line)."""

    path: KeyPath
    values: tuple[Any, ...]
    origin: str
    file: str | None = None
    lines: tuple[int | None, ...] = ()

    @property
    def name(self) -> str:
        """The dotted path, as rows and messages name the field."""
        return dotted(self.path)

    def where(self, index: int) -> Problem:
        """A problem skeleton locating value ``index`` (``origin=value``, or its line in the sweep file)."""
        value = self.values[index]
        if self.file is None:
            text = value_text(value)
            shown = text if len(text) <= 60 else text[:57] + "..."
            return Problem(field=f"{self.origin}={shown}", message="")
        line = self.lines[index] if index < len(self.lines) else None
        return Problem(file=self.file, line=line, field=f"set.{self.name}[{index}]", message="")


@dataclass(frozen=True, slots=True, kw_only=True)
class Grid:
    """The Cartesian product of the axes; a point is one value per axis."""

    axes: tuple[Axis, ...]

    @property
    def size(self) -> int:
        """Number of points."""
        return math.prod(len(axis.values) for axis in self.axes)

    def points(self) -> Iterator[dict[str, Any]]:
        """Each point as ``{dotted path: value}``, in axis order (the last axis varies fastest)."""
        names = [axis.name for axis in self.axes]
        for combo in itertools.product(*(axis.values for axis in self.axes)):
            yield dict(zip(names, combo, strict=True))


def value_text(value: Any) -> str:
    """A value as text on one line: scalars as written (true/false, null), mappings and lists as compact
    JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float) or value is None:
        return "null" if value is None else str(value)
    return json.dumps(value, separators=(",", ":"))


def parse_path(text: str) -> KeyPath | None:
    """``a.b[2].c`` (or ``a.b.2.c``) as a key path; None if malformed. A numeric part stays a string here:
    whether it indexes a list is decided against the document."""
    text = text.strip()
    if not _PATH.fullmatch(text):
        return None
    parts: list[str | int] = []
    for key, index in _PART.findall(text):
        parts.append(int(index) if index else key.strip())
    if any(part == "" for part in parts) or len(parts) > MAX_PATH_PARTS:
        return None
    return tuple(parts)


def repeated(values: Sequence[Any]) -> list[int]:
    """The indices of values equal to an earlier one (compared as canonical JSON, so ``1`` and ``True``
    differ)."""
    seen: set[str] = set()
    out = []
    for index, value in enumerate(values):
        key = _canonical(value)
        if key in seen:
            out.append(index)
        seen.add(key)
    return out


def load_grid_file(path: Path) -> list[Axis]:
    """A YAML sweep file: ``set: {dotted.path: [value, ...] | value}`` (values may be any YAML, e.g. a whole
    length distribution). Every problem is reported with its file, line and field."""
    doc = load_yaml(path, display_path(path))
    checker = Checker(doc)
    root = checker.root(required=("set",), optional=("description",))
    root.string("description", default="")
    axes = []
    grid = root.raw("set")
    if root.has("set") and (not isinstance(grid, dict) or not grid):
        checker.report(("set",), "expected a mapping of dotted field path -> list of values")
    elif isinstance(grid, dict):
        if len(grid) > MAX_AXES:
            checker.report(("set",), f"{len(grid)} fields, at most {MAX_AXES}")
        for key, raw in grid.items():
            where: KeyPath = ("set", str(key))
            key_path = parse_path(str(key))
            if key_path is None:
                checker.report(where, "not a dotted field path such as deployment.link.bandwidth_gbit_per_s")
                continue
            items = raw if isinstance(raw, list) else [raw]
            lines = [
                doc.line_of((*where, i)) if isinstance(raw, list) else doc.line_of(where) for i in range(len(items))
            ]
            if not items:
                checker.report(where, "must not be empty")
                continue
            if len(items) > MAX_VALUES_PER_AXIS:
                checker.report(where, f"{len(items)} values, at most {MAX_VALUES_PER_AXIS} per field")
                continue
            bad = False
            for i, item in enumerate(items):
                why = _non_finite(item)
                if why is not None:
                    checker.report((*where, i) if isinstance(raw, list) else where, why)
                    bad = True
            for i in repeated(items):
                checker.report((*where, i) if isinstance(raw, list) else where, f"{value_text(items[i])} given twice")
                bad = True
            if not bad:
                axes.append(
                    Axis(
                        path=key_path,
                        values=tuple(items),
                        origin=f"{doc.file} set.{dotted(key_path)}",
                        file=doc.file,
                        lines=tuple(lines),
                    )
                )
    checker.raise_if_any()
    return axes


def _non_finite(value: Any) -> str | None:
    """Why a value holds a NaN or an infinity (anywhere inside it), or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {value}"
    if isinstance(value, dict):
        return next((w for w in map(_non_finite, value.values()) if w is not None), None)
    if isinstance(value, list):
        return next((w for w in map(_non_finite, value) if w is not None), None)
    return None


def make_grid(axes: Sequence[Axis], *, field: str) -> Grid:
    """Check the axes together: at least one, at most MAX_AXES, no field given twice or inside another,
    at most MAX_POINTS points. Problems of the grid as a whole name ``field`` (the caller's name for it)."""
    if not axes:
        raise InputError(Problem(field=field, message="nothing to sweep"))
    problems = []
    if len(axes) > MAX_AXES:
        problems.append(Problem(field=field, message=f"{len(axes)} fields swept, at most {MAX_AXES}"))
    for i, axis in enumerate(axes):
        for other in axes[:i]:
            a, b = _loose(axis.path), _loose(other.path)
            if a[: len(b)] == b or b[: len(a)] == a:
                problems.append(
                    Problem(field=axis.origin, message=f"overlaps {other.origin}: sweep each field in one place")
                )
    grid = Grid(axes=tuple(axes))
    if not problems and grid.size > MAX_POINTS:
        sizes = " x ".join(str(len(a.values)) for a in axes)
        problems.append(Problem(field=field, message=f"{sizes} = {grid.size:,} points, at most {MAX_POINTS:,}"))
    if problems:
        raise InputError(problems)
    return grid


def _flat(field: str) -> str:
    """A dotted field with list indices written as parts: ``a[1].b`` -> ``a.1.b``."""
    return re.sub(r"\[(\d+)\]", r".\1", field)


def _loose(path: KeyPath) -> tuple[str, ...]:
    """A key path with list indices as strings: ``a[1]`` and ``a.1`` are the same field."""
    return tuple(str(part) for part in path)


# --------------------------------------------------------------------------------------- point documents


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseScenario:
    """The scenario a sweep varies: its file (references resolve next to it), parsed document, and digest."""

    path: Path
    document: Document

    @property
    def display(self) -> str:
        """The scenario file as messages name it."""
        return self.document.file


def load_base(path: Path) -> tuple[BaseScenario, Scenario]:
    """Read the base scenario and check it loads as it is (errors with their lines, before any point)."""
    from prfaas_plan.io.scenario import load_scenario

    scenario = load_scenario(path)
    return BaseScenario(path=path, document=load_yaml(path, display_path(path))), scenario


def apply_edits(data: Any, edits: Mapping[KeyPath, Any]) -> Any:
    """A deep copy of ``data`` with each path set to its value. Missing mapping keys are created (the loader
    then rejects an unknown one, with a suggestion); a list is indexed by a whole number within its length.
    Raises ValueError naming the part of the path that cannot be followed."""
    out = copy.deepcopy(data)
    for path, value in edits.items():
        node = out
        for depth, part in enumerate(path):
            last = depth == len(path) - 1
            where = dotted(path[:depth]) or "the document"
            if isinstance(node, dict):
                key = str(part)
                if last:
                    node[key] = copy.deepcopy(value)
                else:
                    if node.get(key) is None:  # absent or empty (``cost:``): the edit creates the mapping
                        node[key] = {}
                    node = node[key]
            elif isinstance(node, list):
                index = part if isinstance(part, int) else int(part) if _INT.fullmatch(str(part)) else None
                if index is None or not 0 <= index < len(node):
                    raise ValueError(f"{where} is a list of {len(node)} items; '{part}' is not one of its indices")
                if last:
                    node[index] = copy.deepcopy(value)
                else:
                    node = node[index]
            else:
                raise ValueError(f"{where} is a single value, not a mapping with a field '{part}'")
    return out


def load_document(base: BaseScenario, data: Any) -> Scenario:
    """Validate an edited scenario document with the scenario loader (``io.scenario.scenario_from_document``),
    references resolved next to the base file."""
    from prfaas_plan.io.scenario import scenario_from_document

    doc = Document(file=base.display, data=data, lines=base.document.lines)
    return scenario_from_document(doc, base.path.parent)


def load_point(base: BaseScenario, grid_axes: Sequence[Axis], params: Mapping[str, Any]) -> Scenario:
    """The scenario of one point (``params``: dotted path -> value, as ``Grid.points`` yields). InputError's
    problems name the swept fields (``point_problems``)."""
    edits = {axis.path: params[axis.name] for axis in grid_axes}
    try:
        data = apply_edits(base.document.data, edits)
        return load_document(base, data)
    except ValueError as exc:
        raise InputError(Problem(message=str(exc))) from None


def point_problems(base: BaseScenario, problems: Sequence[Problem]) -> list[Problem]:
    """Problems of an edited document without the base file's name and lines (they would point at lines
    the edit replaced); problems in other files (a hardware profile a point names) keep theirs."""
    return [Problem(message=p.message, field=p.field) if p.file in (None, base.display) else p for p in problems]


def check_axes(base: BaseScenario, axes: Sequence[Axis], *, field: str) -> None:
    """Load the base scenario with each value of each axis alone (the other fields as in the base), and raise
    one InputError naming the axis's origin or sweep-file line of every value the loader rejects; beyond
    MAX_PROBLEMS_SHOWN, one more problem on ``field`` counts the rest. Combinations of values are checked
    when their point runs (a rejected one becomes a row with status ``invalid``)."""
    problems: list[Problem] = []
    for axis in axes:
        for index, value in enumerate(axis.values):
            try:
                load_point(base, [axis], {axis.name: value})
            except InputError as exc:
                where = axis.where(index)
                for p in point_problems(base, exc.problems):
                    if p.file is not None:  # in a file the value names (a hardware profile, a model card)
                        message = str(p)
                    elif p.field is None or _flat(p.field) == _flat(axis.name):
                        message = p.message
                    else:
                        message = f"{p.field}: {p.message}"
                    problems.append(Problem(file=where.file, line=where.line, field=where.field, message=message))
    if len(problems) > MAX_PROBLEMS_SHOWN:
        rest = len(problems) - MAX_PROBLEMS_SHOWN
        problems = [*problems[:MAX_PROBLEMS_SHOWN], Problem(field=field, message=f"and {rest} more problems")]
    if problems:
        raise InputError(problems)


# ---------------------------------------------------------------------------------------------- identity


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def point_id(params: Mapping[str, Any]) -> str:
    """A stable id of a point: a digest of its parameter values by field (independent of the order fields
    were given in). 16 hex digits: collisions are negligible below billions of points."""
    return hashlib.sha256(_canonical(sorted(params.items())).encode()).hexdigest()[:16]


def run_digest(base: BaseScenario, options: SweepOptions) -> str:
    """A digest of what every row depends on besides its parameters: the base scenario's data, the
    evaluation options and the row layout. Rows of a resumed sweep must carry the same one."""
    state = {
        "schema": ROW_SCHEMA,
        "scenario": base.document.data,
        "resolution_tokens": options.resolution_tokens,
        "goodput": options.goodput,
        "ttft_p90_s": options.ttft_p90_s,
        "load_fraction": options.load_fraction,
        "verify": [options.verify, options.replications, options.requests, options.seed] if options.verify else None,
    }
    return hashlib.sha256(_canonical(state).encode()).hexdigest()[:16]


# -------------------------------------------------------------------------------------------------- rows

#: Result fields of a row, after ``point_id``, ``run_digest``, the parameters, ``status`` and ``reason``.
RESULT_FIELDS = (
    "scenario",
    "throughput_req_per_s",
    "stability_limit_req_per_s",
    "threshold_tokens",
    "n_prfaas",
    "n_pd_prefill",
    "n_pd_decode",
    "offload_fraction",
    "bottleneck",
    "egress_gbit_per_s",
    "link_utilization",
    "ttft_unloaded_p90_s",
    "usd_per_hour",
    "usd_per_million_output_tokens",
)
GOODPUT_FIELDS = (
    "goodput_ttft_p90_slo_s",
    "goodput_req_per_s",
    "goodput_limited_by",
    "goodput_threshold_tokens",
    "goodput_n_pd_prefill",
    "goodput_n_pd_decode",
    "goodput_usd_per_million_output_tokens",
    "goodput_reason",
)


LOAD_FIELDS = (
    "load_fraction",
    "load_rate_req_per_s",
    "ttft_p90_s",
    "ttft_p90_method",
    "ttft_p90_simulated_s",
    "ttft_p90_simulated_half_width_s",
    "simulation_disagreements",
    "load_reason",
)


def columns(axes: Sequence[Axis], options: SweepOptions) -> list[str]:
    """The CSV header: identity, one column per swept field, status, results."""
    return [
        "point_id",
        "run_digest",
        *(axis.name for axis in axes),
        "status",
        "reason",
        *RESULT_FIELDS,
        *(GOODPUT_FIELDS if options.goodput else ()),
        *(LOAD_FIELDS if options.load_fraction is not None else ()),
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class PointTask:
    """Everything a worker needs to run one point (picklable: sent to processes or a cluster)."""

    base: BaseScenario
    axes: tuple[Axis, ...]
    params: dict[str, Any]
    options: SweepOptions
    digest: str


def run_point(task: PointTask) -> dict[str, Any]:
    """Load, evaluate and report one point as a row (a JSON-ready mapping). A point whose combination of
    values the loader rejects is a row with status ``invalid``; one no plan can serve, ``infeasible``."""
    head: dict[str, Any] = {"point_id": point_id(task.params), "run_digest": task.digest, "params": task.params}
    try:
        scenario = load_point(task.base, task.axes, task.params)
    except InputError as exc:
        reason = "; ".join(str(p) for p in point_problems(task.base, exc.problems))
        return {**head, "status": "invalid", "reason": reason}
    outcome = evaluate_point(scenario, task.options)
    return {**head, **outcome_fields(scenario, outcome, task.options)}


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def outcome_fields(scenario: Scenario, outcome: PointOutcome, options: SweepOptions) -> dict[str, Any]:
    """A point's status, reason and result fields (``RESULT_FIELDS`` and, with goodput, ``GOODPUT_FIELDS``)."""
    from prfaas_plan.io.report import plan_cost_dict

    out: dict[str, Any] = {"status": outcome.status, "reason": outcome.reason, "scenario": scenario.name}
    plan = outcome.best
    if plan is not None:
        cost = plan_cost_dict(scenario, plan, {"at": plan.throughput_req_per_s})
        out.update(
            throughput_req_per_s=plan.throughput_req_per_s,
            stability_limit_req_per_s=_finite(plan.stability_limit_req_per_s),
            threshold_tokens=_finite(plan.threshold_tokens),
            n_prfaas=plan.n_prfaas,
            n_pd_prefill=plan.n_pd_prefill,
            n_pd_decode=plan.n_pd_decode,
            offload_fraction=plan.offload_fraction,
            bottleneck=plan.bottleneck,
            egress_gbit_per_s=plan.egress_bytes_per_s / GBIT_PER_S,
            link_utilization=_finite(plan.link_utilization),
            ttft_unloaded_p90_s=_finite(plan.ttft_unloaded_p90_s),
            usd_per_hour=None if cost is None else cost["at"]["usd_per_hour"],
            usd_per_million_output_tokens=None if cost is None else cost["at"]["usd_per_million_output_tokens"],
        )
    if options.goodput and plan is not None:
        good = outcome.goodput_plan
        rate = outcome.goodput_req_per_s
        cost = None if good is None or rate is None else plan_cost_dict(scenario, good, {"at": rate})
        out.update(
            goodput_ttft_p90_slo_s=outcome.goodput_slo_s,
            goodput_req_per_s=rate,
            goodput_limited_by=outcome.goodput_limited_by,
            goodput_threshold_tokens=None if good is None else _finite(good.threshold_tokens),
            goodput_n_pd_prefill=None if good is None else good.n_pd_prefill,
            goodput_n_pd_decode=None if good is None else good.n_pd_decode,
            goodput_usd_per_million_output_tokens=None if cost is None else cost["at"]["usd_per_million_output_tokens"],
            goodput_reason=outcome.goodput_reason,
        )
    if options.load_fraction is not None and plan is not None and outcome.model is not None:
        try:
            out.update(_loaded_fields(scenario, outcome.model, plan, options))
        except PlanError as exc:  # e.g. a formula outside its domain at this point: the row says so
            out.update(load_fraction=options.load_fraction, load_reason=str(exc))
    return out


def _loaded_fields(scenario: Scenario, model: Any, plan: Any, options: SweepOptions) -> dict[str, Any]:
    """The best plan at ``load_fraction`` of its Λ_max: closed-form overall P90 TTFT and, with ``verify``,
    the simulated one with its 95 % half-width and the percentiles where the two disagree."""
    from prfaas_plan.sim.closed_form import Traffic
    from prfaas_plan.sim.verify import check_loaded

    assert options.load_fraction is not None
    rate = options.load_fraction * plan.throughput_req_per_s
    check = check_loaded(
        model,
        plan.threshold_tokens if plan.threshold_tokens is not None else math.inf,
        plan.n_pd_prefill,
        plan.n_pd_decode,
        rate,
        Traffic(output_lengths=scenario.traffic.output_length),
        verify=options.verify,
        replications=options.replications,
        requests=options.requests,
        seed=options.seed,
    )
    simulated = None if check.simulated is None else check.simulated.figures.get("overall", {}).get("p90")
    return {
        "load_fraction": options.load_fraction,
        "load_rate_req_per_s": rate,
        "ttft_p90_s": _finite(check.figure_closed("overall", "p90")),
        "ttft_p90_method": check.method,
        "ttft_p90_simulated_s": None if simulated is None else _finite(simulated.value),
        "ttft_p90_simulated_half_width_s": None if simulated is None else _finite(simulated.half_width),
        "simulation_disagreements": None if check.simulated is None else "; ".join(check.disagreements),
    }


# -------------------------------------------------------------------------------------------- rows file


def rows_format(path: str, *, field: str) -> str:
    """``jsonl`` or ``csv`` from the file name; InputError on ``field`` (the caller's name for the file) for
    anything else."""
    suffix = Path(path).suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".csv":
        return "csv"
    raise InputError(Problem(field=field, message=f"'{path}': expected a .jsonl or .csv file name"))


def _cell(value: Any) -> str:
    """A CSV cell on one line: empty for null, JSON for lists and mappings, newlines escaped."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = _canonical(value) if isinstance(value, dict | list) else str(value)
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _json_safe(value: Any) -> Any:
    """JSON has no NaN or infinity: any that a result holds is written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(item) for item in value]
    return value


def format_row(row: Mapping[str, Any], kind: str, header: Sequence[str]) -> str:
    """One row as a line of its file (with the newline)."""
    row = _json_safe(dict(row))
    if kind == "jsonl":
        return json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n"
    flat = {**row, **row.get("params", {})}
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow([_cell(flat.get(name)) for name in header])
    return buffer.getvalue()


class RowsFile:
    """The rows file a sweep streams to: each row is written whole and flushed, so that an interruption
    leaves every finished row readable (a kill mid-write can leave a partial last line, which
    ``resume_ids`` drops). A context manager."""

    def __init__(self, path: str, kind: str, header: Sequence[str], *, append: bool) -> None:
        self.kind = kind
        self.header = list(header)
        new = not append or not os.path.exists(path) or os.path.getsize(path) == 0
        self._stream: IO[str] = open(path, "a" if append else "w", encoding="utf-8", newline="")  # noqa: SIM115
        if new and kind == "csv":
            self._write(format_row(dict(zip(self.header, self.header, strict=True)), "csv", self.header))

    def _write(self, line: str) -> None:
        self._stream.write(line)
        self._stream.flush()

    def write(self, row: Mapping[str, Any]) -> None:
        """Append one row."""
        self._write(format_row(row, self.kind, self.header))

    def close(self) -> None:
        """Close the file."""
        self._stream.close()

    def __enter__(self) -> RowsFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def resume_ids(
    path: str, kind: str, header: Sequence[str], digest: str, *, resume_field: str, out_field: str
) -> set[str]:
    """The ids of the points a rows file already holds. A partial last line (from a kill mid-write) is cut
    off the file. InputError if the file was written by another sweep (other scenario, options or layout:
    another ``run_digest`` or CSV header), naming ``resume_field`` (the caller's name for the request to
    resume) and ``out_field`` (its name for the file), or if it holds a line that is not a row."""
    if not os.path.exists(path):
        return set()
    try:
        with open(path, "rb") as stream:
            raw = stream.read()
    except OSError as exc:
        raise InputError(Problem(file=path, message=f"cannot read: {exc.strerror or exc}")) from None
    end = raw.rfind(b"\n") + 1
    if end < len(raw):
        with open(path, "r+b") as stream:
            stream.truncate(end)
    try:
        text = raw[:end].decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(Problem(file=path, message="not UTF-8 text: not a rows file of a sweep")) from None
    lines = text.splitlines()
    other = f"{resume_field}: written by another sweep (another scenario, options or columns); use a new {out_field}"
    done: set[str] = set()
    if kind == "csv":
        if not lines:
            return done
        if next(csv.reader([lines[0]])) != list(header):
            raise InputError(Problem(file=path, line=1, message=f"{other} (its header differs)"))
        for number, record in enumerate(csv.reader(lines[1:]), start=2):
            if len(record) != len(header):
                raise InputError(
                    Problem(file=path, line=number, message=f"{len(record)} cells, expected {len(header)}")
                )
            if record[1] != digest:
                raise InputError(Problem(file=path, line=number, message=other))
            done.add(record[0])
        return done
    for number, line in enumerate(lines, start=1):
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        if not isinstance(row, dict) or not isinstance(row.get("point_id"), str):
            raise InputError(Problem(file=path, line=number, message="not a row of a sweep (a JSON object)"))
        if row.get("run_digest") != digest:
            raise InputError(Problem(file=path, line=number, message=other))
        done.add(row["point_id"])
    return done
