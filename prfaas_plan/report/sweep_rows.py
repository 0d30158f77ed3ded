"""A sweep's rows: the row each point becomes (computed in the worker that evaluates the point), and the rows
file (JSON Lines or CSV) that a sweep streams to and resumes from.

A point is identified by a digest of its parameter values (``point_id``); a rows file also records a digest
of the base scenario and the evaluation options (``run_digest``), so that a resumed sweep never mixes rows of
different scenarios or options in one file.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from prfaas_plan.errors import InputError, PlanError, Problem

#: Limits that keep a hostile grid bounded: each point is a scenario load and a search (about 0.1 s), so
#: 100,000 points is hours of a large machine; more is a typo (a product of long lists).
from prfaas_plan.io.sweep_grid import Axis, BaseScenario, canonical, load_point, point_problems
from prfaas_plan.spec.scenario import Scenario
from prfaas_plan.studies.sweep_point import PointOutcome, SweepOptions, evaluate_point
from prfaas_plan.units import GBIT_PER_S

#: Version of the row layout; part of ``run_digest``, so a file of another layout is never resumed.
ROW_SCHEMA = 1

# ---------------------------------------------------------------------------------------------- identity


def point_id(params: Mapping[str, Any]) -> str:
    """A stable id of a point: a digest of its parameter values by field (independent of the order fields
    were given in). 16 hex digits: collisions are negligible below billions of points."""
    return hashlib.sha256(canonical(sorted(params.items())).encode()).hexdigest()[:16]


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
    return hashlib.sha256(canonical(state).encode()).hexdigest()[:16]


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
    from prfaas_plan.report.plans import plan_cost_dict

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
    from prfaas_plan.studies.closed_form import Traffic
    from prfaas_plan.studies.verify import VerifyOptions, check_loaded

    assert options.load_fraction is not None
    rate = options.load_fraction * plan.throughput_req_per_s
    check = check_loaded(
        model,
        plan.threshold_tokens if plan.threshold_tokens is not None else math.inf,
        plan.n_pd_prefill,
        plan.n_pd_decode,
        rate,
        Traffic(output_lengths=scenario.traffic.output_length),
        options=VerifyOptions(
            verify=options.verify, replications=options.replications, requests=options.requests, seed=options.seed
        ),
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
    text = canonical(value) if isinstance(value, dict | list) else str(value)
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
