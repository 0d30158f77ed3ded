"""The simulator's outputs: per-request records as CSV (streamed in chunks, written atomically) and the
``simulate --json`` object."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from prfaas_plan.errors import InputError, Problem
from prfaas_plan.report.plans import plan_to_dict
from prfaas_plan.sim.records import COLUMNS, Records
from prfaas_plan.sim.summary import Estimate, TtftStats
from prfaas_plan.studies.simulate import Study
from prfaas_plan.units import GBIT_PER_S

#: Rows formatted and written per chunk: bounded memory however long the run.
CHUNK_ROWS = 65_536
# Times to the microsecond, token counts exactly (up to 10 significant digits), the route as 0/1.
_FORMATS = {"input_tokens": "%.10g", "output_tokens": "%.10g", "offloaded": "%d"}
_TIME_FORMAT = "%.6f"
#: Columns derived from the records for convenience, written after ``COLUMNS``.
DERIVED = ("prefill_wait_s", "decode_wait_s", "ttft_s")


def _partial_name(target: Path) -> Path:
    """The temporary name beside ``target`` that ``write_records_csv`` writes first."""
    return target.with_name(f".{target.name}.{os.getpid()}.tmp")


def check_writable(path: str | os.PathLike[str]) -> None:
    """Check, before a long run, that a file can be written at ``path``: a non-empty name that is not a
    directory, in a directory where a file can be created (tried by creating and removing the temporary
    file ``write_records_csv`` would use). Raises InputError naming the path."""
    text = os.fspath(path)
    target = Path(text)
    if not text.strip() or target.name in ("", ".", ".."):
        raise InputError(Problem(file=repr(text), message="not a file name"))
    if target.is_dir():
        raise InputError(Problem(file=text, message="is a directory, expected a file name"))
    partial = _partial_name(target)
    try:
        with partial.open("x", encoding="utf-8"):
            pass
    except FileExistsError:
        raise InputError(Problem(file=str(partial), message="a temporary file of this name is in the way")) from None
    except (OSError, ValueError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise InputError(Problem(file=text, message=f"cannot write: {reason}")) from None
    partial.unlink(missing_ok=True)


def write_records_csv(path: str | os.PathLike[str], records: Records, chunk_rows: int = CHUNK_ROWS) -> None:
    """Write one CSV row per request: header ``request``, ``sim.records.COLUMNS``, then ``DERIVED`` (the waits
    and TTFT); empty cells for events that had not happened by the horizon.

    The file is written to a temporary name in the same directory and renamed into place, so a failure
    never leaves a half-written file under ``path``. Raises InputError when the directory cannot be written.
    """
    target = Path(path)
    names = (*COLUMNS, *DERIVED)
    fmt = ",".join(["%d", *(_FORMATS.get(name, _TIME_FORMAT) for name in names)]) + "\n"
    columns = {**records.columns(), **{name: getattr(records, name) for name in DERIVED}}
    # A unique name beside the target (same filesystem, so the rename is atomic), created with mode "x" so
    # that it gets the user's usual permissions (tempfile's are 0600).
    if target.name in ("", ".", ".."):
        raise InputError(Problem(file=repr(os.fspath(path)), message="not a file name"))
    partial = _partial_name(target)
    try:
        with partial.open("x", encoding="utf-8", newline="") as handle:
            handle.write(",".join(["request", *names]) + "\n")
            for start in range(0, records.n_requests, chunk_rows):
                stop = min(start + chunk_rows, records.n_requests)
                chunk = np.column_stack(
                    [np.arange(start, stop, dtype=np.float64)]
                    + [np.asarray(columns[name][start:stop], dtype=np.float64) for name in names]
                )
                text = "".join(fmt % tuple(row) for row in chunk.tolist())
                handle.write(text.replace("nan", ""))
        os.replace(partial, target)
    except BaseException as error:
        partial.unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise InputError(Problem(file=str(target), message=f"cannot write: {error.strerror or error}")) from None
        raise


def _num(value: float | None) -> float | None:
    """JSON has no NaN or inf: report them as null."""
    return None if value is None or not math.isfinite(value) else float(value)


def _ttft(stats: TtftStats) -> dict[str, float | None]:
    return {
        "mean": _num(stats.mean_s.value),
        **{k: _num(getattr(stats, f"{k}_s").value) for k in ("p50", "p90", "p99")},
    }


def _half_widths(stats: TtftStats) -> dict[str, float | None]:
    return {k: _num(getattr(stats, f"{k}_s").half_width) for k in ("mean", "p50", "p90", "p99")}


def _ci(estimate: Estimate) -> float | None:
    return _num(estimate.half_width)


def study_to_dict(study: Study) -> dict[str, Any]:
    """The ``simulate --json`` object: simulated and closed-form figures side by side, their relative
    differences ((simulated − closed form) / closed form), the plan and the run's speed."""
    s, c = study.summary, study.closed
    return {
        "requests": study.requests,
        "seed": study.seed,
        "trace": study.trace_source,
        "rate_req_per_s": study.rate_req_per_s,
        "load": study.load,
        "plan": plan_to_dict(study.plan),
        "simulated": {
            "throughput_req_per_s": _num(s.throughput_req_per_s.value),
            "ttft_s": _ttft(s.ttft),
            "ttft_by_route_s": {route: _ttft(stats) for route, stats in s.ttft_by_route.items()},
            "egress_gbit_per_s": {
                "mean": s.egress_mean_bytes_per_s / GBIT_PER_S,
                "peak": s.egress_peak_bytes_per_s / GBIT_PER_S,
            },
            "utilization": {k: _num(v) for k, v in s.utilization.items()},
            "tpot_s": _num(s.tpot_mean_s),
            "queue_length": {k: _num(v) for k, v in s.occupancy.items()},
            "ci95_half_width": {
                "throughput_req_per_s": _ci(s.throughput_req_per_s),
                "ttft_s": _half_widths(s.ttft),
            },
            "measured_requests": s.measured,
            "completed_requests": s.completed,
            "window_s": list(s.window_s),
        },
        "closed_form": {
            "throughput_req_per_s": c.throughput_req_per_s,
            "ttft_s": dict(c.ttft_s),
            "ttft_by_route_s": {k: dict(v) for k, v in c.ttft_by_route_s.items()},
            "egress_gbit_per_s": {"mean": c.egress_mean_bytes_per_s / GBIT_PER_S, "peak": None},
            "utilization": dict(c.utilization),
            "max_throughput_req_per_s": c.max_throughput_req_per_s,
            "max_throughput_mean_service_req_per_s": _num(c.max_throughput_mean_service_req_per_s),
            "saturated_throughput_req_per_s": _num(c.saturated_throughput_req_per_s),
            "stable": c.stable,
            "unstable_stage": c.unstable_stage,
            "method": c.method,
            "validity": {"in_domain": c.validity.in_domain, "reasons": list(c.validity.reasons)},
        },
        "relative_error": study.relative_error(),
        "wall_s": study.wall_s,
        "events": study.result.events,
        "events_per_s": _num(study.events_per_s),
        "requests_per_s": _num(study.requests_per_s),
    }
