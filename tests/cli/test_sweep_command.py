"""``prfaas-plan sweep``: rows per point, infeasible and invalid points as rows, input errors before any work,
resumption after an interruption, and the same sweep on a Dask cluster."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from prfaas_plan.cli.sweep import sweep
from tests.conftest import REPO, default_signals, examples

_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
_app.command()(sweep)


@_app.command()
def _unused() -> None:
    """A second command, so that ``sweep`` is addressed by name as in the real application."""


GRID = ["--set", "deployment.link.bandwidth_gbit_per_s=10,100", "--set", "deployment.local.instances=8,12"]
#: A standalone ``prfaas-plan sweep`` (until the command is registered in ``cli.app``), with the real
#: entry point's handling of Ctrl-C.
_MAIN = (
    "import typer\n"
    "from prfaas_plan.cli.common import interruptible\n"
    "from prfaas_plan.cli.sweep import sweep\n"
    "app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)\n"
    "app.command()(sweep)\n"
    "with interruptible():\n"
    "    app()\n"
)


def _sweep(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(_app, ["sweep", *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def _csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.read_text().splitlines()))


def _jsonl(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_rows_describe_each_point(tmp_path: Path) -> None:
    """One row per point with its parameters, id, status and plan; JSON Lines and CSV hold the same points."""
    out = tmp_path / "rows.jsonl"
    code, stdout, stderr = _sweep(*GRID, "-o", str(out), "--workers", "2", "--json")
    assert code == 0, stderr
    rows = _jsonl(out)
    assert len(rows) == 4 and len({r["point_id"] for r in rows}) == 4
    by_params = {tuple(r["params"].values()): r for r in rows}
    assert set(by_params) == {(10, 8), (10, 12), (100, 8), (100, 12)}
    assert all(r["status"] == "ok" and r["throughput_req_per_s"] > 0 for r in rows)
    assert by_params[(100, 12)]["throughput_req_per_s"] > by_params[(100, 8)]["throughput_req_per_s"]
    assert by_params[(10, 8)]["bottleneck"] == "prfaas_link"
    assert json.loads(stdout)["statuses"] == {"ok": 4}
    csv_out = tmp_path / "rows.csv"
    code, _, stderr = _sweep(*GRID, "-o", str(csv_out), "--workers", "1")
    assert code == 0, stderr
    table = _csv(csv_out)
    assert {r["point_id"] for r in table} == set(r["point_id"] for r in rows)
    assert list(table[0])[:4] == [
        "point_id",
        "run_digest",
        "deployment.link.bandwidth_gbit_per_s",
        "deployment.local.instances",
    ]


def test_infeasible_and_invalid_points_are_rows(tmp_path: Path) -> None:
    """A point no plan serves is an ``infeasible`` row with the binding constraint; a combination of values
    the loader rejects (each value valid alone) is an ``invalid`` row with the loader's message."""
    out = tmp_path / "rows.jsonl"
    code, _, stderr = _sweep(
        "--set", "slo.decode_tokens_per_s=40,2000",
        "--set", "traffic.input_length.min_tokens=128,50000",
        "--set", "traffic.input_length.max_tokens=131072,40000",
        "-o", str(out), "--workers", "2",
    )  # fmt: skip
    assert code == 0, stderr
    rows = {tuple(r["params"].values()): r for r in _jsonl(out)}
    assert rows[(40, 128, 131072)]["status"] == "ok"
    assert rows[(2000, 128, 131072)]["status"] == "infeasible"
    assert "decode" in rows[(2000, 128, 131072)]["reason"]
    invalid = rows[(40, 50000, 40000)]
    assert invalid["status"] == "invalid" and "must be > min_tokens" in invalid["reason"]


def test_bad_values_exit_2_before_any_work(tmp_path: Path) -> None:
    """A bad field or value exits 2 naming the --set, and no rows file is created."""
    out = tmp_path / "rows.jsonl"
    code, _, stderr = _sweep(
        "--set", "deployment.link.bandwith_gbit_per_s=10", "--set", "deployment.local.instances=8,0", "-o", str(out)
    )
    assert code == 2
    assert "error: --set deployment.link.bandwith_gbit_per_s=10: unknown key" in stderr
    assert "error: --set deployment.local.instances=0: must be >= 1" in stderr
    assert not out.exists()
    for args, expected in (
        (["--set", "a=1", "-o", str(tmp_path / "x.json")], "--out"),
        ([*GRID, "-o", str(out), "--engine", "spark"], "--engine"),
        ([*GRID, "-o", str(out), "--scheduler", "tcp://x:1"], "applies only with --engine dask"),
        ([*GRID, "-o", str(out), "--goodput"], "needs a P90 TTFT SLO"),
        ([*GRID, "-o", str(out), "--ttft-p90-s", "nan", "--goodput"], "must be a finite number"),
        (["-o", str(out)], "nothing to sweep"),
    ):
        code, _, stderr = _sweep(*args)
        assert code == 2 and expected in stderr, (args, stderr)
    assert not out.exists()


def test_an_existing_file_needs_resume(tmp_path: Path) -> None:
    """Rows are never appended to, or overwritten in, a file the user did not ask to resume."""
    out = tmp_path / "rows.jsonl"
    out.write_text('{"point_id": "x"}\n')
    code, _, stderr = _sweep(*GRID, "-o", str(out))
    assert code == 2 and "--resume" in stderr
    assert out.read_text() == '{"point_id": "x"}\n'


def test_resume_skips_done_points_and_repairs_a_cut_line(tmp_path: Path) -> None:
    """Rerunning with --resume evaluates only the points missing from the file (a cut last line counts as
    missing), so the file ends with each point exactly once."""
    out = tmp_path / "rows.csv"
    assert _sweep(*GRID, "-o", str(out), "--workers", "1")[0] == 0
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:2]) + lines[2][:30])  # header, one row, and a row cut mid-write
    code, stdout, stderr = _sweep(*GRID, "-o", str(out), "--resume", "--json", "--workers", "1")
    assert code == 0, stderr
    assert json.loads(stdout)["skipped"] == 1 and json.loads(stdout)["evaluated"] == 3
    table = _csv(out)
    assert len(table) == 4 and len({r["point_id"] for r in table}) == 4
    grown = [*GRID[:3], "deployment.local.instances=8,12,16"]
    code, stdout, _ = _sweep(*grown, "-o", str(out), "--resume", "--json")
    assert code == 0 and json.loads(stdout)["evaluated"] == 2
    code, _, stderr = _sweep(*GRID, "-o", str(out), "--resume", "--resolution-tokens", "100")
    assert code == 2 and "another sweep" in stderr


def test_goodput_rows(tmp_path: Path) -> None:
    """--goodput adds the goodput-optimal plan under the SLO, never above the point's Λ_max."""
    out = tmp_path / "rows.jsonl"
    code, _, stderr = _sweep(
        "--set", "deployment.link.bandwidth_gbit_per_s=25,100", "-o", str(out), "--goodput", "--ttft-p90-s", "5"
    )
    assert code == 0, stderr
    for row in _jsonl(out):
        assert row["goodput_ttft_p90_slo_s"] == 5
        assert 0 < row["goodput_req_per_s"] <= row["throughput_req_per_s"] * (1 + 1e-9)
        assert row["goodput_n_pd_prefill"] + row["goodput_n_pd_decode"] == 8


def test_load_with_simulation_checks(tmp_path: Path) -> None:
    """--load scores each best plan at that fraction of its Λ_max; --verify sets the simulated P90 TTFT beside
    the closed form, which it brackets within the tolerance the simulation check uses."""
    out = tmp_path / "rows.jsonl"
    args = ("--load", "0.6", "--verify", "--replications", "2", "--verify-requests", "4000", "--workers", "1")
    code, _, stderr = _sweep("--set", "deployment.link.bandwidth_gbit_per_s=25,100", "-o", str(out), *args)
    assert code == 0, stderr
    for row in _jsonl(out):
        assert row["load_rate_req_per_s"] == pytest.approx(0.6 * row["throughput_req_per_s"])
        assert row["ttft_p90_s"] > 0 and row["ttft_p90_simulated_s"] > 0
        assert row["ttft_p90_simulated_s"] == pytest.approx(row["ttft_p90_s"], rel=0.3)
    for args, expected in ((["--load", "1.5"], "(0, 1)"), (["--verify"], "give --load too")):
        code, _, stderr = _sweep(*GRID, "-o", str(tmp_path / "bad.jsonl"), *args)
        assert code == 2 and expected in stderr


def test_ctrl_c_keeps_finished_rows_and_resume_completes(tmp_path: Path) -> None:
    """SIGINT stops the sweep with status 130 and a file of whole rows; --resume then completes it."""
    out = tmp_path / "rows.jsonl"
    grid = [
        "--set",
        "deployment.link.bandwidth_gbit_per_s=10,25,50,100",
        "--set",
        "deployment.local.instances=8,10,12,16,24,32",
    ]
    cmd = [sys.executable, "-c", _MAIN, *grid, "-o", str(out), "--workers", "1"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, preexec_fn=default_signals
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not out.exists() or out.stat().st_size == 0):
        time.sleep(0.05)
    child.send_signal(signal.SIGINT)
    _, stderr = child.communicate(timeout=60)
    assert child.returncode == 130, stderr
    assert "Traceback" not in stderr
    rows = _jsonl(out)
    assert 1 <= len(rows) < 24
    done = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = _jsonl(out)
    assert len(rows) == 24 and len({r["point_id"] for r in rows}) == 24


@settings(max_examples=examples(20), deadline=None)
@given(value=st.one_of(st.text(max_size=30), st.floats().map(repr), st.integers(-(10**30), 10**30).map(str)))
def test_hostile_values_never_crash(tmp_path_factory: pytest.TempPathFactory, value: str) -> None:
    """Any --set value exits 0 (a point, possibly infeasible or invalid) or 2, never with a traceback."""
    out = tmp_path_factory.mktemp("hostile") / "rows.jsonl"
    code, _, stderr = _sweep("--set", f"deployment.link.bandwidth_gbit_per_s={value}", "-o", str(out), "--workers", "1")
    assert code in (0, 2), stderr
    assert "Traceback" not in stderr


def test_dask_engine_on_a_local_cluster(tmp_path: Path) -> None:
    """The same sweep through Dask gives the same rows: on a LocalCluster of two worker processes reached by
    its address (--scheduler), and on the local cluster the command starts itself."""
    distributed = pytest.importorskip("distributed")
    local = tmp_path / "local.jsonl"
    assert _sweep(*GRID, "-o", str(local), "--workers", "1")[0] == 0
    expected = {r["point_id"]: r["throughput_req_per_s"] for r in _jsonl(local)}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        out = tmp_path / "dask.jsonl"
        code, stdout, stderr = _sweep(
            *GRID, "-o", str(out), "--engine", "dask", "--scheduler", cluster.scheduler_address, "--json"
        )
        assert code == 0, stderr
        assert json.loads(stdout)["engine"] == "dask"
        assert {r["point_id"]: r["throughput_req_per_s"] for r in _jsonl(out)} == expected
    own = tmp_path / "own.csv"
    code, _, stderr = _sweep(*GRID, "-o", str(own), "--engine", "dask", "--workers", "2")
    assert code == 0, stderr
    assert {r["point_id"] for r in _csv(own)} == set(expected)


def test_dask_engine_without_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--engine dask without the optional extra installed is an input error that says how to install it."""
    monkeypatch.setitem(sys.modules, "distributed", None)
    code, _, stderr = _sweep(*GRID, "-o", str(tmp_path / "rows.jsonl"), "--engine", "dask")
    assert code == 2 and "pip install 'prfaas-plan[dask]'" in stderr
