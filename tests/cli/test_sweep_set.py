"""The ``sweep`` command's grid syntax (``cli.sweep_grid``): ``--set PATH=V1,V2,...`` options read as typed
scalars, and every problem of the options or of the grid they make naming the flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from prfaas_plan.cli.sweep_grid import grid_from_options, parse_set
from prfaas_plan.errors import InputError


def _messages(exc: pytest.ExceptionInfo[InputError]) -> str:
    return "\n".join(str(p) for p in exc.value.problems)


def test_set_values_are_typed_scalars() -> None:
    """Integers stay integers, numbers in any Python spelling are floats, true/false are booleans, the rest
    strings."""
    axis = parse_set("deployment.link.bandwidth_gbit_per_s= 10, 2.5,1e3 ,true,h200")
    assert axis.path == ("deployment", "link", "bandwidth_gbit_per_s")
    assert axis.values == (10, 2.5, 1000.0, True, "h200")
    assert [type(v) for v in axis.values] == [int, float, float, bool, str]
    assert axis.origin == "--set deployment.link.bandwidth_gbit_per_s"


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        ("a.b=nan", "must be a finite number"),
        ("a.b=1,-inf", "must be a finite number"),
        ("a.b=1,,2", "an empty value"),
        ("a.b=", "an empty value"),
        ("a.b=1,1", "given twice"),
        ("a..b=1", "not a dotted field path"),
        ("[0].a=1", "not a dotted field path"),
        ("a.b", "expected PATH=VALUE"),
        ("a.b=" + ",".join(str(i) for i in range(65)), "at most 64"),
        ("a.b=" + "9" * 5000, "longer than 4096"),
    ],
)
def test_malformed_set_options_are_input_errors(option: str, expected: str) -> None:
    """A malformed --set is an InputError naming the option, never a crash."""
    with pytest.raises(InputError) as exc:
        parse_set(option)
    assert expected in _messages(exc)
    assert all(p.field is not None and p.field.startswith("--set") for p in exc.value.problems)


def test_grid_problems_name_the_flag(tmp_path: Path) -> None:
    """Options and a sweep file make one grid; an empty, overlapping or oversized one is refused on --set."""
    grid_file = tmp_path / "sweep.yaml"
    grid_file.write_text("set:\n  c: [x, y]\n")
    assert grid_from_options(["a.b=1,2,3"], grid_file).size == 6
    with pytest.raises(InputError, match=r"^--set: nothing to sweep: give --set PATH=VALUES or --grid FILE$"):
        grid_from_options([], None)
    with pytest.raises(InputError, match=r"^--set a\.b\.c: overlaps --set a\.b: sweep each field in one place$"):
        grid_from_options(["a.b=1", "a.b.c=2"], None)
    values = ",".join(str(i) for i in range(64))
    with pytest.raises(InputError, match=r"^--set: 64 x 64 x 64 = 262,144 points, at most 100,000$"):
        grid_from_options([f"{k}={values}" for k in "abc"], None)
