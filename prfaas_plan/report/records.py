"""The simulator's outputs: per-request records as CSV (streamed in chunks, written atomically) and the
``simulate --json`` object."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from prfaas_plan.report.files import Owner, atomic_file, check_file
from prfaas_plan.report.jsonsafe import finite
from prfaas_plan.report.plans import plan_to_dict
from prfaas_plan.sim.records import COLUMNS, Records
from prfaas_plan.sim.summary import Estimate, TtftStats
from prfaas_plan.studies.simulate import Study, ThroughputCaveat
from prfaas_plan.units import GBIT_PER_S

#: Rows formatted and written per chunk: bounded memory however long the run.
CHUNK_ROWS = 65_536
# Times to the microsecond, token counts exactly (up to 10 significant digits), the route as 0/1.
_FORMATS = {"input_tokens": "%.10g", "output_tokens": "%.10g", "offloaded": "%d"}
_TIME_FORMAT = "%.6f"
#: Columns derived from the records for convenience, written after ``COLUMNS``.
DERIVED = ("prefill_wait_s", "decode_wait_s", "ttft_s")


#: How the records writer recognises its own files (an existing file is replaced only when it is one): the
#: header's first columns, which every records CSV of prfaas-plan begins with.
OWNER = Owner(
    what="a records CSV of prfaas-plan simulate",
    signatures=((",".join(["request", *COLUMNS[:2]]) + ",").encode(),),
)


def check_writable(path: str | os.PathLike[str]) -> None:
    """Check, before a long run, that the records CSV can be written at ``path`` (``report.files.check_file``:
    a regular file of this writer's or nothing, never a link, device, FIFO or another program's file, in a
    directory where a file can be created). Raises InputError naming the path."""
    check_file(path, owner=OWNER)


def write_records_csv(path: str | os.PathLike[str], records: Records, chunk_rows: int = CHUNK_ROWS) -> None:
    """Write one CSV row per request: header ``request``, ``sim.records.COLUMNS``, then ``DERIVED`` (the waits
    and TTFT); empty cells for events that had not happened by the horizon.

    Written through ``report.files.atomic_file``: a temporary sibling renamed over the target under its lock,
    so a failure or a signal never leaves a half-written file under ``path``, and nothing but a previous
    records CSV (or an empty file) is ever replaced. Raises InputError naming the path.
    """
    names = (*COLUMNS, *DERIVED)
    fmt = ",".join(["%d", *(_FORMATS.get(name, _TIME_FORMAT) for name in names)]) + "\n"
    columns = {**records.columns(), **{name: getattr(records, name) for name in DERIVED}}
    with atomic_file(path, owner=OWNER) as handle:
        handle.write(",".join(["request", *names]) + "\n")
        for start in range(0, records.n_requests, chunk_rows):
            stop = min(start + chunk_rows, records.n_requests)
            chunk = np.column_stack(
                [np.arange(start, stop, dtype=np.float64)]
                + [np.asarray(columns[name][start:stop], dtype=np.float64) for name in names]
            )
            text = "".join(fmt % tuple(row) for row in chunk.tolist())
            handle.write(text.replace("nan", ""))


def _ttft(stats: TtftStats) -> dict[str, float | None]:
    return {
        "mean": finite(stats.mean_s.value),
        **{k: finite(getattr(stats, f"{k}_s").value) for k in ("p50", "p90", "p99")},
    }


def _half_widths(stats: TtftStats) -> dict[str, float | None]:
    return {k: finite(getattr(stats, f"{k}_s").half_width) for k in ("mean", "p50", "p90", "p99")}


def _ci(estimate: Estimate) -> float | None:
    return finite(estimate.half_width)


def _caveat(caveat: ThroughputCaveat | None) -> dict[str, Any] | None:
    """Why the simulated throughput is null or biased low (``Study.throughput_caveat``), or None."""
    if caveat is None:
        return None
    return {
        "reason": "no request finished inside the measured window"
        if caveat.window_completions == 0
        else "the window opens before the requests in flight have had time to finish: biased low",
        "warmup_s": caveat.warmup_s,
        "undercount_fraction": caveat.undercount_fraction,
        "requests_needed": caveat.requests_needed,
    }


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
            "throughput_req_per_s": finite(s.throughput_req_per_s.value) if study.throughput_measured else None,
            "ttft_s": _ttft(s.ttft),
            "ttft_by_route_s": {route: _ttft(stats) for route, stats in s.ttft_by_route.items()},
            "egress_gbit_per_s": {
                "mean": s.egress_mean_bytes_per_s / GBIT_PER_S,
                "peak": s.egress_peak_bytes_per_s / GBIT_PER_S,
            },
            "utilization": {k: finite(v) for k, v in s.utilization.items()},
            "tpot_s": finite(s.tpot_mean_s),
            "queue_length": {k: finite(v) for k, v in s.occupancy.items()},
            "ci95_half_width": {
                "throughput_req_per_s": _ci(s.throughput_req_per_s) if study.throughput_measured else None,
                "ttft_s": _half_widths(s.ttft),
            },
            "measured_requests": s.measured,
            "completed_requests": s.completed,
            "window_s": list(s.window_s),
            "measured_window_completions": s.window_completions,
            "throughput_caveat": _caveat(study.throughput_caveat()),
        },
        "closed_form": {
            "throughput_req_per_s": c.throughput_req_per_s,
            "ttft_s": dict(c.ttft_s),
            "ttft_by_route_s": {k: dict(v) for k, v in c.ttft_by_route_s.items()},
            "egress_gbit_per_s": {"mean": c.egress_mean_bytes_per_s / GBIT_PER_S, "peak": None},
            "utilization": dict(c.utilization),
            "max_throughput_req_per_s": c.max_throughput_req_per_s,
            "max_throughput_mean_service_req_per_s": finite(c.max_throughput_mean_service_req_per_s),
            "saturated_throughput_req_per_s": finite(c.saturated_throughput_req_per_s),
            "stable": c.stable,
            "unstable_stage": c.unstable_stage,
            "method": c.method,
            "validity": {"in_domain": c.validity.in_domain, "reasons": list(c.validity.reasons)},
        },
        "relative_error": study.relative_error(),
        "wall_s": study.wall_s,
        "events": study.result.events,
        "events_per_s": finite(study.events_per_s),
        "requests_per_s": finite(study.requests_per_s),
    }
