"""The records CSV: one row per request, empty cells for events past the horizon, written atomically."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from prfaas_plan.errors import InputError
from prfaas_plan.report.records import DERIVED, write_records_csv
from prfaas_plan.sim.records import COLUMNS, Records
from prfaas_plan.sim.run import simulate
from prfaas_plan.sim.workload import Workload
from tests.sim.helpers import all_offloaded, queue_model


def _records(horizon_s: float = math.inf) -> Records:
    workload = Workload.of(np.arange(7) * 0.5, np.full(7, 10_000.0), np.full(7, 3.0))
    return simulate(all_offloaded(queue_model()), workload, horizon_s=horizon_s).records


def test_rows_round_trip(tmp_path: Path) -> None:
    """Every request is one row, in arrival order, with every column; values read back to 1 µs."""
    records = _records()
    path = tmp_path / "runs.csv"
    write_records_csv(path, records, chunk_rows=3)
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["request", *COLUMNS, *DERIVED]
    assert [int(r["request"]) for r in rows] == list(range(records.n_requests))
    for name in ("arrival_s", "prefill_end_s", "finish_s"):
        assert [float(r[name]) for r in rows] == pytest.approx(getattr(records, name), abs=1e-6)
    assert {r["offloaded"] for r in rows} == {"1"}
    assert [float(r["ttft_s"]) for r in rows] == pytest.approx(records.ttft_s, abs=1e-6)
    assert [r for r in tmp_path.iterdir()] == [path]


def test_events_past_the_horizon_are_empty_cells(tmp_path: Path) -> None:
    """One server, 1 s per prefill, arrivals every 0.5 s, horizon 1.7 s: the first request has finished, the
    second is in prefill (start set, end empty), the later two still queue (empty from the start on)."""
    path = tmp_path / "cut.csv"
    write_records_csv(path, _records(horizon_s=1.7))
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4  # arrivals at 0, 0.5, 1.0, 1.5
    assert rows[0]["finish_s"] != ""
    assert rows[1]["prefill_start_s"] == "1.000000" and rows[1]["prefill_end_s"] == "" and rows[1]["finish_s"] == ""
    assert rows[3]["prefill_start_s"] == "" and rows[3]["arrival_s"] == "1.500000"


def test_chunking_does_not_change_the_file(tmp_path: Path) -> None:
    """The chunk size is invisible in the output."""
    records = _records()
    write_records_csv(tmp_path / "a.csv", records, chunk_rows=2)
    write_records_csv(tmp_path / "b.csv", records)
    assert (tmp_path / "a.csv").read_text() == (tmp_path / "b.csv").read_text()


def test_unwritable_target_is_an_input_error_and_leaves_nothing(tmp_path: Path) -> None:
    """A missing directory is reported with the path; no partial or temporary file appears anywhere."""
    with pytest.raises(InputError, match="missing"):
        write_records_csv(tmp_path / "missing" / "runs.csv", _records())
    assert list(tmp_path.iterdir()) == []
