"""A review's output directory is named by its flag wherever it is refused: at the check before any work, and at
the write after it, where another run may have taken the name meanwhile (the race's loser used to print the bare
path, without ``--output:``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from prfaas_plan.cli.review import _named_by_flag
from prfaas_plan.errors import InputError
from prfaas_plan.report.review_dir import write_review_dir


def test_a_directory_taken_after_the_check_is_refused_naming_the_flag(tmp_path: Path) -> None:
    taken = tmp_path / "review"
    taken.mkdir()
    (taken / "notes.txt").write_text("someone else's\n")  # what the winner (or a person) put there meanwhile
    with pytest.raises(InputError) as refused:
        _named_by_flag(lambda: write_review_dir(taken, {"report.md": "# r\n"}))
    (problem,) = refused.value.problems
    assert problem.field == "--output" and problem.file is None
    assert str(problem).startswith(f"--output: {taken}: exists, is not empty")
    assert (taken / "notes.txt").read_text() == "someone else's\n" and sorted(p.name for p in taken.iterdir()) == [
        "notes.txt"
    ]
