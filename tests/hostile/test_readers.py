"""Every reader x every hostile input, through the real command line in subprocesses with a timeout: 0
tracebacks, 0 hangs, and exit 2 with one line (or, for a CRLF copy of a valid file, a normal run)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.hostile.reader_matrix import CASES, READERS, Outcome, Reader, prepare, run_row

PAIRS = [(reader, case) for reader in READERS for case in CASES]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Outcome | None]:
    """Each reader's row of cases in one fresh interpreter through the real entry point (``run_row``), two
    rows at a time; a case that cannot be made here (mknod refused) is None."""
    root = tmp_path_factory.mktemp("hostile-readers")

    def row(reader: Reader) -> list[tuple[tuple[str, str], Outcome | None]]:
        made: list[tuple[str, Path, Path]] = []
        found: list[tuple[tuple[str, str], Outcome | None]] = []
        for case in CASES:
            directory = root / f"{reader.name}-{case}"
            path = prepare(reader, case, directory)
            if path is None:
                found.append(((reader.name, case), None))
            else:
                made.append((case, path, directory))
        found += [((reader.name, o.case), o) for o in run_row(reader, made)]
        return found

    with ThreadPoolExecutor(max_workers=2) as pool:
        return {key: value for pairs in pool.map(row, READERS) for key, value in pairs}


@pytest.mark.parametrize(("reader", "case"), [(r.name, c) for r, c in PAIRS])
def test_reader_survives(outcomes: dict[tuple[str, str], Outcome | None], reader: str, case: str) -> None:
    outcome = outcomes[(reader, case)]
    if outcome is None:
        pytest.skip(f"{case} cannot be made here (mknod refused)")
    assert outcome.kind != "hang", f"{reader} on {case}: still running after the timeout"
    assert not outcome.traceback, outcome.stderr
    assert outcome.ok, f"{reader} on {case}: {outcome.kind}, expected {outcome.expect}: {outcome.stderr}"
    if outcome.expect == "refuse":
        lines = [line for line in outcome.stderr.splitlines() if line.startswith("error:")]
        assert lines, outcome.stderr
        assert len(lines) <= 21 and all(len(line) < 400 for line in lines)  # a problem per line, each short


def test_every_reader_and_case_is_covered() -> None:
    assert {r.name for r in READERS} == {
        "scenario",
        "hardware",
        "model_card",
        "hf_config",
        "trace_jsonl",
        "trace_csv",
        "sweep_grid",
        "dynamics",
        "engine_profile",
        "bench_json",
        "bench_csv",
    }
    assert len(CASES) == 12
    assert all(isinstance(Path(r.suffix).suffix, str) for r in READERS)
