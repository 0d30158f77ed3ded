"""A sweep's rows: the row each point becomes (computed in the worker that evaluates the point), and the rows
file (JSON Lines or CSV) that a sweep streams to and resumes from.

A point is identified by a digest of its parameter values (``point_id``); a rows file also records a digest
of the base scenario and the evaluation options (``run_digest``), so that a resumed sweep never mixes rows of
different scenarios or options in one file.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import math
import os
import stat
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InputError, PlanError, Problem
from prfaas_plan.io.guard import no_constant
from prfaas_plan.io.sweep_grid import Axis, BaseScenario, canonical, load_point, point_problems
from prfaas_plan.report.files import (
    Owner,
    cause,
    inspect_file_target,
    is_stdout,
    open_append,
    output_lock,
    write_error,
)
from prfaas_plan.report.jsonsafe import finite, json_safe
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


@frozen
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


def outcome_fields(scenario: Scenario, outcome: PointOutcome, options: SweepOptions) -> dict[str, Any]:
    """A point's status, reason and result fields (``RESULT_FIELDS`` and, with goodput, ``GOODPUT_FIELDS``)."""
    from prfaas_plan.report.plans import plan_cost_dict

    out: dict[str, Any] = {"status": outcome.status, "reason": outcome.reason, "scenario": scenario.name}
    plan = outcome.best
    if plan is not None:
        cost = plan_cost_dict(scenario, plan, {"at": plan.throughput_req_per_s})
        out.update(
            throughput_req_per_s=plan.throughput_req_per_s,
            stability_limit_req_per_s=finite(plan.stability_limit_req_per_s),
            threshold_tokens=finite(plan.threshold_tokens),
            n_prfaas=plan.n_prfaas,
            n_pd_prefill=plan.n_pd_prefill,
            n_pd_decode=plan.n_pd_decode,
            offload_fraction=plan.offload_fraction,
            bottleneck=plan.bottleneck,
            egress_gbit_per_s=plan.egress_bytes_per_s / GBIT_PER_S,
            link_utilization=finite(plan.link_utilization),
            ttft_unloaded_p90_s=finite(plan.ttft_unloaded_p90_s),
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
            goodput_threshold_tokens=None if good is None else finite(good.threshold_tokens),
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
    from prfaas_plan.spec.plan import Plan
    from prfaas_plan.studies.closed_form import Traffic
    from prfaas_plan.studies.verify import VerifyOptions, check_loaded

    assert options.load_fraction is not None
    rate = options.load_fraction * plan.throughput_req_per_s
    chosen = Plan(
        threshold_tokens=plan.threshold_tokens if plan.threshold_tokens is not None else math.inf,
        n_pd_prefill=plan.n_pd_prefill,
        n_pd_decode=plan.n_pd_decode,
    )
    check = check_loaded(
        model,
        chosen,
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
        "ttft_p90_s": finite(check.figure_closed("overall", "p90")),
        "ttft_p90_method": check.method,
        "ttft_p90_simulated_s": None if simulated is None else finite(simulated.value),
        "ttft_p90_simulated_half_width_s": None if simulated is None else finite(simulated.half_width),
        "simulation_disagreements": None if check.simulated is None else "; ".join(check.disagreements),
    }


# -------------------------------------------------------------------------------------------- rows file


def rows_format(path: str, *, field: str) -> str:
    """``jsonl`` or ``csv`` from the file name; InputError on ``field`` (the caller's name for the file) for
    anything else. ``-`` (standard output) is JSON Lines."""
    if is_stdout(path):
        return "jsonl"
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


def format_row(row: Mapping[str, Any], kind: str, header: Sequence[str]) -> str:
    """One row as a line of its file (with the newline)."""
    row = json_safe(dict(row))
    if kind == "jsonl":
        return json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n"
    flat = {**row, **row.get("params", {})}
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow([_cell(flat.get(name)) for name in header])
    return buffer.getvalue()


#: How a sweep recognises its own rows files: a CSV begins with its header (``columns``), JSON Lines with a row
#: (``run_point``'s mapping, ``point_id`` first). Anything else is never appended to, cut or replaced.
OWNERS = {
    "csv": Owner(what="a rows file of prfaas-plan sweep", signatures=(b"point_id,run_digest,",)),
    "jsonl": Owner(what="a rows file of prfaas-plan sweep", signatures=(b'{"point_id": "',)),
}


class RowsFile:
    """The rows file a sweep streams to (or standard output): each row is written whole with one write and
    flushed, so that an interruption leaves every finished row readable; a write that fails part-way (a full
    disk) is cut back to the last whole row. A context manager."""

    def __init__(
        self, stream: IO[str], kind: str, header: Sequence[str], *, path: str, write_header: bool, created: bool = False
    ) -> None:
        self.kind = kind
        self.header = list(header)
        self.path = path
        self._stream = stream
        #: This run made the file: a failure before its first whole row removes it (nothing is left behind, not
        #: even the CSV header, or a rerun would find the name taken).
        self._created = created
        self._rows = 0
        if write_header and kind == "csv":
            self._write(format_row(dict(zip(self.header, self.header, strict=True)), "csv", self.header))

    def _write(self, line: str) -> None:
        if is_stdout(self.path):
            self._stream.write(line)
            self._stream.flush()
            return
        fd = self._stream.fileno()
        size = os.fstat(fd).st_size
        try:
            self._stream.write(line)
            self._stream.flush()
        except OSError as error:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)  # no partial row is left behind
                if self._created and self._rows == 0:  # a file of this run's making with no row: not left behind
                    os.unlink(self.path)
            raise write_error(self.path, error) from None

    def write(self, row: Mapping[str, Any]) -> None:
        """Append one row."""
        self._write(format_row(row, self.kind, self.header))
        self._rows += 1

    def close(self) -> None:
        """Close the file (standard output stays open)."""
        if not is_stdout(self.path):
            with contextlib.suppress(OSError):
                self._stream.close()

    def __enter__(self) -> RowsFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RowsTarget:
    """Where one sweep's rows go, held under the output lock from the check to the last row, so that two sweeps
    on one file never interleave (the second is refused at once). Checks the file now: a new sweep needs
    nothing there (or an empty file); ``resume`` needs one of this sweep's own rows files (``resume_ids``),
    whose finished points ``done`` lists. Standard output (``-``) takes no lock and cannot be resumed. A
    context manager: leaving it releases the lock."""

    def __init__(
        self,
        path: str,
        kind: str,
        header: Sequence[str],
        digest: str,
        point_ids: set[str],
        *,
        resume: bool,
        resume_field: str,
        out_field: str,
    ) -> None:
        self.path, self.kind, self.header = path, kind, list(header)
        self.done: set[str] = set()
        self._lock = contextlib.ExitStack()
        if is_stdout(path):
            if resume:
                raise InputError(
                    Problem(field=resume_field, message=f"cannot continue standard output ({out_field} -)")
                )
            return
        owner = OWNERS[kind]
        inspect_file_target(path, owner=owner)  # links, devices, FIFOs, other programs' files: before the lock
        self._lock.enter_context(output_lock(path, wait_s=0))
        try:
            existing = inspect_file_target(path, owner=owner)
            if existing is not None and existing.st_size > 0 and not resume:
                raise InputError(
                    Problem(field=out_field, message=f"{path} exists: {resume_field} continues it; or choose another")
                )
            if resume:
                self.done = resume_ids(
                    path, kind, header, digest, point_ids, resume_field=resume_field, out_field=out_field
                )
        except BaseException:
            self._lock.close()
            raise

    def open(self) -> RowsFile:
        """The rows file, for appending (created when absent; a CSV header written into a new or empty one)."""
        if is_stdout(self.path):
            return RowsFile(sys.stdout, self.kind, self.header, path=self.path, write_header=True)
        existed = os.path.lexists(self.path)
        stream = open_append(self.path, owner=OWNERS[self.kind])
        new = os.fstat(stream.fileno()).st_size == 0
        return RowsFile(stream, self.kind, self.header, path=self.path, write_header=new, created=not existed)

    def release(self) -> None:
        """Release the lock (idempotent)."""
        self._lock.close()

    def __enter__(self) -> RowsTarget:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def resume_ids(
    path: str,
    kind: str,
    header: Sequence[str],
    digest: str,
    point_ids: set[str] | None = None,
    *,
    resume_field: str,
    out_field: str,
) -> set[str]:
    """The ids of the points a rows file already holds. InputError, and the file left as it is, unless every
    whole line is a row of this sweep: the same CSV header, the same ``run_digest`` (scenario, options,
    layout), and a point of this grid (``point_ids``, when given: a grid may grow between runs, but a row of a
    point it does not hold is another grid's), each point once and every JSON line strict JSON (a sweep writes no
    NaN): a hand-edited file is refused. Only then is a partial last line (a kill mid-write) cut off.
    Problems name ``resume_field`` (the caller's name for the request to resume) and ``out_field`` (its name
    for the file)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return set()
    except OSError as exc:
        raise InputError(Problem(file=path, message=f"cannot read: {cause(exc)}")) from None
    with os.fdopen(fd, "rb") as stream:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError(Problem(file=path, message="not a regular file: not a rows file of a sweep"))
        raw = stream.read()
    end = raw.rfind(b"\n") + 1
    try:
        text = raw[:end].decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(Problem(file=path, message="not UTF-8 text: not a rows file of a sweep")) from None
    lines = text.splitlines()
    if raw and not OWNERS[kind].recognises(raw):
        raise InputError(
            Problem(file=path, line=1, message=f"{resume_field}: not a rows file of a sweep; not continued or changed")
        )
    other = f"{resume_field}: written by another sweep (another scenario, options or columns); use a new {out_field}"
    stray = f"{resume_field}: a row of a point this grid does not hold (rows of another grid?); use a new {out_field}"
    done: set[str] = set()
    first_seen: dict[str, int] = {}

    def once(point: str, number: int) -> None:
        """A point's row appears once in a sweep's own file: a second one is an edit, refused (not continued)."""
        if point in first_seen:
            raise InputError(
                Problem(
                    file=path,
                    line=number,
                    message=f"{resume_field}: a second row of point {point} (first on line {first_seen[point]}): "
                    "not a file this sweep wrote; not continued or changed",
                )
            )
        first_seen[point] = number

    if kind == "csv":
        if lines and next(csv.reader([lines[0]])) != list(header):
            raise InputError(Problem(file=path, line=1, message=f"{other} (its header differs)"))
        for number, record in enumerate(csv.reader(lines[1:]), start=2):
            if len(record) != len(header):
                raise InputError(
                    Problem(file=path, line=number, message=f"{len(record)} cells, expected {len(header)}")
                )
            if record[1] != digest:
                raise InputError(Problem(file=path, line=number, message=other))
            if point_ids is not None and record[0] not in point_ids:
                raise InputError(Problem(file=path, line=number, message=stray))
            once(record[0], number)
            done.add(record[0])
    else:
        for number, line in enumerate(lines, start=1):
            try:  # strict JSON, as the sweep writes it: NaN or Infinity is a hand edit
                row = json.loads(line, parse_constant=no_constant)
            except ValueError:
                row = None
            if not isinstance(row, dict) or not isinstance(row.get("point_id"), str):
                raise InputError(
                    Problem(
                        file=path,
                        line=number,
                        message=f"{resume_field}: not a row of a sweep (a JSON object, strict JSON); not continued or "
                        "changed",
                    )
                )
            if row.get("run_digest") != digest:
                raise InputError(Problem(file=path, line=number, message=other))
            if point_ids is not None and row["point_id"] not in point_ids:
                raise InputError(Problem(file=path, line=number, message=stray))
            once(row["point_id"], number)
            done.add(row["point_id"])
    if end < len(raw):  # every whole line is ours: the cut last row is dropped, to be run again
        try:
            with open(path, "r+b") as cut:
                cut.truncate(end)
        except OSError as exc:
            raise write_error(path, exc) from None
    return done
