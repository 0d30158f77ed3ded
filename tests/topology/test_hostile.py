"""Hostile but valid topologies (hunt18): the topology commands answer them with a plan or one clear line,
never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from prfaas_plan.cli.app import app
from tests.conftest import REPO, run_cli

EXAMPLE = REPO / "workloads" / "topologies" / "three-regions.yaml"
TRACES = REPO / "workloads" / "traces"


def _copy(tmp_path: Path, *edits: tuple[str, str], name: str = "t.yaml") -> Path:
    """The shipped example with its traces named absolutely and each (old, new) replaced once."""
    text = EXAMPLE.read_text().replace("../traces/", f"{TRACES}/")
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    path = tmp_path / name
    path.write_text(text)
    return path


# H3: rates far apart, inside the loader's bounds (> 0, <= 1e6), made HiGHS call the LPs unbounded.
_FAR_RATES = [
    ("one region at 1e6", [("rate_req_per_s: 4 ", "rate_req_per_s: 1e6 ")]),
    ("one region at 1e-8", [("rate_req_per_s: 4 ", "rate_req_per_s: 1e-8 ")]),
    (
        "1e6 beside 1e-8",
        [("rate_req_per_s: 4 ", "rate_req_per_s: 1e6 "), ("rate_req_per_s: 2 ", "rate_req_per_s: 1e-8 ")],
    ),
]


@pytest.mark.parametrize("edits", [e for _, e in _FAR_RATES], ids=[n for n, _ in _FAR_RATES])
def test_plan_solves_rates_orders_of_magnitude_apart(tmp_path: Path, edits: list[tuple[str, str]]) -> None:
    done = run_cli("topology", "plan", str(_copy(tmp_path, *edits)), "--json")
    assert "Traceback" not in done.stderr
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    scale = payload["global_plan"]["scale"]
    assert 0 < scale <= payload["bound"]["scale"] * (1 + 1e-9)
    for link in payload["global_plan"]["links"]:
        assert link["utilization"] <= 1 + 1e-6


def test_size_solves_a_region_far_below_the_others(tmp_path: Path) -> None:
    done = run_cli("topology", "size", str(_copy(tmp_path, ("rate_req_per_s: 4 ", "rate_req_per_s: 1e-8 "))))
    assert "Traceback" not in done.stderr
    assert done.returncode == 0, done.stderr


def test_a_solver_failure_is_one_line_naming_the_lp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import scipy.optimize

    real = scipy.optimize.linprog

    def failing(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        result.status, result.message = 3, "The problem is unbounded."
        return result

    monkeypatch.setattr(scipy.optimize, "linprog", failing)
    result = CliRunner().invoke(app, ["topology", "plan", str(_copy(tmp_path))])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "bound LP" in result.output and "could not be solved" in result.output
    assert "The problem is unbounded" in result.output


# H12: each problem one line, no cascade from a cluster whose kind is bad, a trace's problem at its field.


def test_a_bad_kind_is_one_line_and_links_to_the_cluster_are_not_reported(tmp_path: Path) -> None:
    path = _copy(tmp_path, ("kind: prfaas,", "kind: prefill,"))
    done = run_cli("topology", "plan", str(path))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        f"error: {path}:29 clusters[0].kind: must be one of prfaas, pd; got 'prefill'"
    ], done.stderr


def test_a_missing_trace_is_reported_once_at_the_field_that_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "nonexist.csv"
    path = _copy(
        tmp_path,
        (f"{TRACES}/AzureLLMInferenceTrace_code.csv", str(missing)),
        (f"{TRACES}/AzureLLMInferenceTrace_code.csv", str(missing)),
    )
    done = run_cli("topology", "plan", str(path))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert lines == [f"error: {path}:84 traffic[2].input_length.trace: {missing}: no such file"], done.stderr


# H13: the bound's per-cluster instances are its optimum's, not a floor per cluster (36 found beside 40.00).


def test_size_labels_the_bound_column_as_the_bounds_own_plan() -> None:
    done = run_cli("topology", "size", "three-regions")
    assert done.returncode == 0, done.stderr
    assert "at the bound's optimum" in done.stdout
    assert "bound (fractional)" not in done.stdout
    assert "may each be above or below" in " ".join(done.stdout.split())
