"""Sweep grids, point documents and rows files (``io.sweep``): parsing, validation through the scenario loader,
identity and resumption."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prfaas_plan.errors import InputError
from prfaas_plan.io import sweep_grid
from prfaas_plan.report import sweep_rows
from prfaas_plan.studies.sweep_point import SweepOptions
from tests.conftest import PAPER_SCENARIO


@pytest.fixture(scope="module")
def base() -> sweep_grid.BaseScenario:
    return sweep_grid.load_base(PAPER_SCENARIO)[0]


def _messages(exc: pytest.ExceptionInfo[InputError]) -> str:
    return "\n".join(str(p) for p in exc.value.problems)


#: The names a caller gives the request to resume and the rows file, as resume_ids's messages name them.
_RESUME = {"resume_field": "resume", "out_field": "rows file"}


def _axis(name: str, *values: Any) -> sweep_grid.Axis:
    """An axis as a caller parses one, its origin the caller's name for it (here ``axis NAME``)."""
    path = sweep_grid.parse_path(name)
    assert path is not None
    return sweep_grid.Axis(path=path, values=values, origin=f"axis {name}")


def test_paths_take_dots_and_list_indices() -> None:
    """``a.b[2].c`` indexes a list; ``a.b.2.c`` keeps the part as text until a document decides."""
    assert sweep_grid.parse_path("cost.link.ports[1].usd_per_hour") == ("cost", "link", "ports", 1, "usd_per_hour")
    assert sweep_grid.parse_path("cost.link.ports.1.usd_per_hour") == ("cost", "link", "ports", "1", "usd_per_hour")
    for bad in ("", ".a", "a.", "a[x]", "a[1]b", "a b.c["):
        assert sweep_grid.parse_path(bad) is None, bad


def test_grid_is_the_product_and_is_bounded() -> None:
    """Points are the product of the axes; overlapping fields and grids over MAX_POINTS are refused."""
    grid = sweep_grid.make_grid([_axis("a.b", 1, 2, 3), _axis("c", "x", "y")], field="the grid")
    assert grid.size == 6
    points = list(grid.points())
    assert points[0] == {"a.b": 1, "c": "x"} and points[-1] == {"a.b": 3, "c": "y"}
    with pytest.raises(InputError, match="overlaps"):
        sweep_grid.make_grid([_axis("a.b", 1), _axis("a.b.c", 2)], field="the grid")
    with pytest.raises(InputError, match="overlaps"):
        sweep_grid.make_grid([_axis("a[1]", 1), _axis("a.1", 2)], field="the grid")
    with pytest.raises(InputError, match=r"^the grid: 64 x 64 x 64 = 262,144 points, at most 100,000"):
        sweep_grid.make_grid([_axis(k, *range(64)) for k in "abc"], field="the grid")
    with pytest.raises(InputError, match=r"^the grid: nothing to sweep$"):
        sweep_grid.make_grid([], field="the grid")


def test_edits_copy_create_and_index() -> None:
    """Edits never touch the base; they create missing mappings, index lists, and refuse to walk through a
    single value or past a list's end."""
    data = {"a": {"b": 1, "l": [{"x": 1}, {"x": 2}]}, "empty": None}
    out = sweep_grid.apply_edits(data, {("a", "b"): 2, ("a", "l", "1", "x"): 5, ("empty", "k"): 3, ("new", "k"): 4})
    assert out == {"a": {"b": 2, "l": [{"x": 1}, {"x": 5}]}, "empty": {"k": 3}, "new": {"k": 4}}
    assert data == {"a": {"b": 1, "l": [{"x": 1}, {"x": 2}]}, "empty": None}
    with pytest.raises(ValueError, match=r"a\.b is a single value"):
        sweep_grid.apply_edits(data, {("a", "b", "c"): 1})
    with pytest.raises(ValueError, match="list of 2 items"):
        sweep_grid.apply_edits(data, {("a", "l", 2, "x"): 1})


def test_each_value_is_checked_by_the_scenario_loader(base: sweep_grid.BaseScenario) -> None:
    """Every value the loader would reject is reported against its axis's origin (the caller's name for the
    field), with the loader's message (and suggestion), before any point runs."""
    axes = [
        _axis("deployment.link.bandwith_gbit_per_s", 10),
        _axis("deployment.local.instances", 8, 1),
        _axis("deployment.prfaas.hardware", "h200", "h300"),
    ]
    with pytest.raises(InputError) as exc:
        sweep_grid.check_axes(base, axes, field="the grid")
    text = _messages(exc)
    assert "axis deployment.link.bandwith_gbit_per_s=10: unknown key 'bandwith_gbit_per_s' (did you mean" in text
    assert "axis deployment.local.instances=1: must be >= 2" in text
    assert "axis deployment.prfaas.hardware=h300: no hardware profile named 'h300'" in text
    assert "instances=8:" not in text and "hardware=h200:" not in text


def test_valid_axes_pass(base: sweep_grid.BaseScenario) -> None:
    """Fields of every kind can be swept: bandwidth, lengths, pool sizes, prices (a new mapping), list items."""
    sweep_grid.check_axes(
        base,
        [
            _axis("deployment.link.bandwidth_gbit_per_s", 10, 25.5),
            _axis("traffic.input_length.mu", 9.5, 9.9),
            _axis("deployment.local.instances", 8, 16),
            _axis("cost.gpu_usd_per_hour.h20", 2, 3),
            _axis("cost.link.ports[1].usd_per_hour", 3),
        ],
        field="the grid",
    )


def test_point_scenario_has_the_edits(base: sweep_grid.BaseScenario) -> None:
    """A point's scenario is the base with its values, validated into the frozen spec."""
    axes = (
        _axis("deployment.link.bandwidth_gbit_per_s", 25),
        _axis("deployment.local.instances", 12),
    )
    scenario = sweep_grid.load_point(
        base, axes, {"deployment.link.bandwidth_gbit_per_s": 25, "deployment.local.instances": 12}
    )
    assert scenario.link.bandwidth_bytes_per_s == pytest.approx(25e9 / 8)
    assert scenario.local.instances == 12
    assert scenario.prfaas.instances == 4


def test_grid_file_is_validated_with_lines(tmp_path: Path, base: sweep_grid.BaseScenario) -> None:
    """A sweep file's problems carry its name, line and field, its values may be mappings, and a value the
    loader rejects is reported at its line."""
    good = tmp_path / "good.yaml"
    good.write_text(
        "set:\n"
        "  deployment.link.bandwidth_gbit_per_s: [10, 100]\n"
        "  traffic.output_length:\n"
        "    - {distribution: fixed, tokens: 512}\n"
        "    - {distribution: fixed, tokens: 1024}\n"
        "  slo.decode_tokens_per_s: 40\n"
    )
    axes = sweep_grid.load_grid_file(good)
    assert [a.name for a in axes] == [
        "deployment.link.bandwidth_gbit_per_s",
        "traffic.output_length",
        "slo.decode_tokens_per_s",
    ]
    assert sweep_grid.make_grid(axes, field="the grid").size == 4
    sweep_grid.check_axes(base, axes, field="the grid")
    bad = tmp_path / "bad.yaml"
    bad.write_text("set:\n  a..b: [1]\n  c: []\n  d: [1, .nan]\n  e: [2, 2]\n  f: 1\nextra: 1\n")
    with pytest.raises(InputError) as exc:
        sweep_grid.load_grid_file(bad)
    text = _messages(exc)
    for expected in (
        "bad.yaml:2 set.a..b: not a dotted field path",
        "bad.yaml:3 set.c: must not be empty",
        "bad.yaml:4 set.d[1]: must be a finite number",
        "bad.yaml:5 set.e[1]: 2 given twice",
        "bad.yaml:7 extra: unknown key",
    ):
        assert expected in text
    rejected = tmp_path / "rejected.yaml"
    rejected.write_text("set:\n  deployment.link.bandwidth_gbit_per_s:\n    - 10\n    - -4\n")
    with pytest.raises(InputError) as exc:
        sweep_grid.check_axes(base, sweep_grid.load_grid_file(rejected), field="the grid")
    assert "rejected.yaml:4 set.deployment.link.bandwidth_gbit_per_s[1]: must be > 0" in _messages(exc)


def test_point_id_is_stable_and_order_free() -> None:
    """The id depends on the values by field, not on the order the fields were given in."""
    a = sweep_rows.point_id({"x.y": 1, "z": "h200"})
    assert a == sweep_rows.point_id({"z": "h200", "x.y": 1})
    assert a != sweep_rows.point_id({"x.y": 2, "z": "h200"})
    assert len(a) == 16


def test_run_digest_depends_on_options(base: sweep_grid.BaseScenario) -> None:
    """Rows computed with other options never share a file."""
    assert sweep_rows.run_digest(base, SweepOptions()) != sweep_rows.run_digest(base, SweepOptions(goodput=True))


def test_resume_drops_a_partial_last_line(tmp_path: Path) -> None:
    """A line cut by a kill is removed from the file; the complete rows' ids are returned."""
    out = tmp_path / "rows.jsonl"
    rows = [{"point_id": f"p{i}", "run_digest": "d", "status": "ok"} for i in range(3)]
    out.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"point_id": "p3", "run_di')
    assert sweep_rows.resume_ids(str(out), "jsonl", [], "d", **_RESUME) == {"p0", "p1", "p2"}
    assert out.read_text().endswith('"ok"}\n')
    with pytest.raises(InputError, match=r"rows\.jsonl:1: resume: written by another sweep .*; use a new rows file$"):
        sweep_rows.resume_ids(str(out), "jsonl", [], "other", **_RESUME)
    out.write_text("not json\n")
    with pytest.raises(
        InputError, match=r"rows\.jsonl:1: resume: not a rows file of a sweep; not continued or changed"
    ):
        sweep_rows.resume_ids(str(out), "jsonl", [], "d", **_RESUME)
    assert out.read_text() == "not json\n"  # a file that is not the sweep's own is left as it was
    assert sweep_rows.resume_ids(str(tmp_path / "absent.jsonl"), "jsonl", [], "d", **_RESUME) == set()


def test_csv_rows_resume_and_stay_on_one_line(tmp_path: Path) -> None:
    """CSV rows keep every cell on one line (so a partial last line is detectable) and resume checks the
    header."""
    out = tmp_path / "rows.csv"
    header = ["point_id", "run_digest", "a", "status", "reason"]
    target = sweep_rows.RowsTarget(str(out), "csv", header, "d", set(), resume=False, **_RESUME)
    with target, target.open() as rows:
        rows.write({"point_id": "p0", "run_digest": "d", "params": {"a": "x\ny"}, "status": "ok", "reason": None})
        rows.write({"point_id": "p1", "run_digest": "d", "params": {"a": [1, 2]}, "status": "invalid", "reason": "r"})
    lines = out.read_text().splitlines()
    assert lines == ["point_id,run_digest,a,status,reason", "p0,d,x\\ny,ok,", 'p1,d,"[1,2]",invalid,r']
    assert sweep_rows.resume_ids(str(out), "csv", header, "d", **_RESUME) == {"p0", "p1"}
    with pytest.raises(InputError, match="header differs"):
        sweep_rows.resume_ids(str(out), "csv", [*header, "more"], "d", **_RESUME)


def test_rows_format_from_the_name() -> None:
    """Only .jsonl (or .ndjson) and .csv files are rows files."""
    assert (
        sweep_rows.rows_format("a.JSONL", field="out") == "jsonl"
        and sweep_rows.rows_format("b.csv", field="out") == "csv"
    )
    with pytest.raises(InputError, match=r"^out: 'rows\.json': expected a \.jsonl or \.csv"):
        sweep_rows.rows_format("rows.json", field="out")


def test_resume_refuses_a_hand_edited_rows_file(tmp_path: Path) -> None:
    """A point's row twice, or a JSON row with NaN (a sweep writes strict JSON), is not a file the sweep wrote:
    resume refuses it naming the line, and leaves it as it was."""
    row = '{"point_id": "p0", "run_digest": "d", "status": "ok"}\n'
    twice = tmp_path / "twice.jsonl"
    twice.write_text(row + row)
    with pytest.raises(InputError, match=r"twice\.jsonl:2: resume: a second row of point p0 \(first on line 1\)"):
        sweep_rows.resume_ids(str(twice), "jsonl", [], "d", **_RESUME)
    assert twice.read_text() == row + row
    nan = tmp_path / "nan.jsonl"
    nan.write_text(row + '{"point_id": "p1", "run_digest": "d", "value": NaN}\n')
    with pytest.raises(InputError, match=r"nan\.jsonl:2: resume: not a row of a sweep"):
        sweep_rows.resume_ids(str(nan), "jsonl", [], "d", **_RESUME)
    header = ["point_id", "run_digest", "status"]
    csv_twice = tmp_path / "twice.csv"
    csv_twice.write_text("point_id,run_digest,status\np0,d,ok\np0,d,ok\n")
    with pytest.raises(InputError, match=r"twice\.csv:3: resume: a second row of point p0 \(first on line 2\)"):
        sweep_rows.resume_ids(str(csv_twice), "csv", header, "d", **_RESUME)
