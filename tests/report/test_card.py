"""Writing a card: a file that cannot be written is an input problem naming the path, never a flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from prfaas_plan.errors import InputError
from prfaas_plan.report.card import write_card


def test_missing_directory_names_the_path(tmp_path: Path) -> None:
    """A card under a missing directory is refused with the path named and no CLI flag in the message."""
    target = tmp_path / "absent" / "card.yaml"
    with pytest.raises(InputError) as caught:
        write_card(target, "model: {}\n")
    (problem,) = caught.value.problems
    assert problem.file == str(target)
    assert "--" not in str(problem)


def test_target_that_is_a_directory_leaves_nothing_behind(tmp_path: Path) -> None:
    """Writing over a directory is an input problem, and the temporary file is removed."""
    target = tmp_path / "card.yaml"
    target.mkdir()
    with pytest.raises(InputError) as caught:
        write_card(target, "model: {}\n")
    assert caught.value.problems[0].file == str(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["card.yaml"]
