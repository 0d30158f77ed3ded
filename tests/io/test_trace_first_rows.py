"""``read_trace(max_requests=N)`` reads the first N request rows and nothing after them, and ``simulate --trace F
--requests N`` asks for exactly that: a bad, overlong or undecodable line past row N is never met, while a
problem among the first N rows is reported as a whole read reports it (same message, same line)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from prfaas_plan.cli.app import app
from prfaas_plan.errors import InputError
from prfaas_plan.io.guard import TRACE_LIMITS
from prfaas_plan.io.traces import read_trace

HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def _jsonl_rows(n: int) -> list[str]:
    return [json.dumps({"timestamp": 500 * i, "input_length": 2000 + 37 * i, "output_length": 200}) for i in range(n)]


def _csv_rows(n: int) -> list[str]:
    return [f"2023-11-16 18:{i // 60:02d}:{i % 60:02d}.0000000,{2000 + 37 * i},200" for i in range(n)]


def _trace(tmp_path: Path, suffix: str, rows: list[str], tail: bytes) -> Path:
    path = tmp_path / f"t{suffix}"
    head = (HEADER if suffix == ".csv" else "") + "\n".join(rows) + "\n"
    path.write_bytes(head.encode() + tail)
    return path


#: What follows the good rows: each would make a whole read refuse the file.
TAILS = {
    "bad row": {".jsonl": b'{"timestamp": 1e12, "input_length": -5}\n', ".csv": b"not,a,row\n"},
    "line too long": {
        ".jsonl": b"7" * (TRACE_LIMITS.max_line_bytes + 10),
        ".csv": b"7" * (TRACE_LIMITS.max_line_bytes + 10),
    },
    "not UTF-8": {".jsonl": b"\xff\xfe\xc0\n", ".csv": b"\xff\xfe\xc0\n"},
}


@pytest.mark.parametrize("tail", sorted(TAILS))
@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_nothing_past_the_first_n_rows_is_read(tmp_path: Path, suffix: str, tail: str) -> None:
    rows = _jsonl_rows(30) if suffix == ".jsonl" else _csv_rows(30)
    path = _trace(tmp_path, suffix, rows, TAILS[tail][suffix])
    with pytest.raises(InputError):
        read_trace(path)  # the whole file: refused
    for n in (1, 29, 30):
        first = read_trace(path, max_requests=n)
        assert first.n_requests == n
        assert list(first.input_tokens) == [2000 + 37 * i for i in range(n)]
    with pytest.raises(InputError):
        read_trace(path, max_requests=31)  # the 31st row is the hostile tail


def _problems(path: Path, max_requests: int | None) -> list[str]:
    with pytest.raises(InputError) as error:
        read_trace(path, max_requests=max_requests)
    return [str(problem) for problem in error.value.problems]


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_a_bad_row_among_the_first_n_is_reported_as_a_whole_read_reports_it(tmp_path: Path, suffix: str) -> None:
    """Blank lines are not rows (the bound counts requests) but keep their place in the line numbers; bad rows
    count towards N."""
    rows = _jsonl_rows(40) if suffix == ".jsonl" else _csv_rows(40)
    rows[3] = rows[3] + "\n\n"  # two blank lines after the 4th row
    rows[9] = '{"timestamp": 4500, "input_length": "many", "output_length": 200}' if suffix == ".jsonl" else "x,1,2"
    path = _trace(tmp_path, suffix, rows, b"")
    whole = _problems(path, None)
    line = 12 if suffix == ".jsonl" else 13  # the 10th row, after 2 blank lines (and the header)
    assert len(whole) == 1 and f"{path}:{line}" in whole[0], whole
    assert _problems(path, 10) == whole  # the bad row is the 10th request row
    assert read_trace(path, max_requests=9).n_requests == 9


def test_a_flood_of_blank_lines_counts_no_request(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("\n" * 5000 + "\n".join(_jsonl_rows(3)) + "\n")
    trace = read_trace(path, max_requests=2)
    assert trace.n_requests == 2


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_simulate_reads_only_the_requests_it_runs(tmp_path: Path, suffix: str) -> None:
    """A hostile line after row N does not stop ``simulate --requests N``; one within the first N does, each
    problem in one line naming the file and line."""
    rows = _jsonl_rows(60) if suffix == ".jsonl" else _csv_rows(60)
    path = _trace(tmp_path, suffix, rows, TAILS["bad row"][suffix])
    old = Path.cwd()
    os.chdir(tmp_path)
    try:
        runner = CliRunner()
        ok = runner.invoke(app, ["simulate", "--trace", str(path), "--requests", "50", "--json"])
        bad = runner.invoke(app, ["simulate", "--trace", str(path), "--requests", "61", "--json"])
    finally:
        os.chdir(old)
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["requests"] == 50
    line = 61 if suffix == ".jsonl" else 62
    lines = bad.output.strip().splitlines()
    assert bad.exit_code == 2 and all(text.startswith(f"error: {path}:{line} ") for text in lines), bad.output
