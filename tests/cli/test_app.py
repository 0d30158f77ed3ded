"""The real command line, run in a fresh interpreter: tables, JSON, and the installed entry point."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PAPER_SCENARIO, REPO, run_cli

PLAN_KEYS = {
    "threshold_tokens",
    "n_prfaas",
    "n_pd_prefill",
    "n_pd_decode",
    "offload_fraction",
    "throughput_req_per_s",
    "stage_throughput_req_per_s",
    "bottleneck",
    "egress_gbit_per_s",
    "link_utilization",
    "ttft_unloaded_s",
}


def _json(*args: str) -> dict:  # type: ignore[type-arg]
    result = run_cli(*args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_optimize_json_has_the_documented_schema() -> None:
    """`optimize --json` prints one object with the plan and both baselines, each with every documented key."""
    payload = _json("optimize")
    assert payload["scenario"] == "paper-case-study"
    for plan in (payload["plan"], *payload["baselines"].values()):
        assert plan.keys() >= PLAN_KEYS
        assert {"prfaas", "pd_prefill", "pd_decode"} <= plan["stage_throughput_req_per_s"].keys()
        assert {"mean", "p90"} <= plan["ttft_unloaded_s"].keys()
    assert set(payload["baselines"]) == {"homogeneous_pd", "naive_heterogeneous"}
    assert payload["baselines"]["homogeneous_pd"]["stage_throughput_req_per_s"]["prfaas"] is None


def test_optimize_table_names_the_plan_and_baselines() -> None:
    """The default table shows the three columns, the unloaded-TTFT label and the provenance note."""
    result = run_cli("optimize")
    assert result.returncode == 0, result.stderr
    for text in ("PrfaaS-PD", "Homogeneous PD", "Naive heterogeneous", "unloaded", "derived"):
        assert text in result.stdout


def test_bandwidth_override_moves_the_threshold_up() -> None:
    """A scarce link (5 Gbit/s) binds: the optimiser raises t and the plan's egress stays within the link."""
    wide, narrow = _json("optimize"), _json("optimize", "--bandwidth-gbit-per-s", "5")
    assert narrow["plan"]["threshold_tokens"] > wide["plan"]["threshold_tokens"]
    assert narrow["plan"]["throughput_req_per_s"] < wide["plan"]["throughput_req_per_s"]
    assert narrow["plan"]["egress_gbit_per_s"] <= 5.0 + 1e-9


def test_evaluate_scores_the_given_plan() -> None:
    """`evaluate` reports exactly the plan it was given, at the optimiser's score for that plan."""
    best = _json("optimize")["plan"]
    given = _json(
        "evaluate", "--threshold", str(best["threshold_tokens"]), "--n-pd-prefill", "3", "--n-pd-decode", "5"
    )["plan"]
    assert (given["n_pd_prefill"], given["n_pd_decode"]) == (3, 5)
    assert given["throughput_req_per_s"] == pytest.approx(best["throughput_req_per_s"], rel=1e-9)


def test_evaluate_says_when_the_plan_leaves_local_instances_idle() -> None:
    """hunt20 F5: a split smaller than the local pool is priced on the instances it uses while the baselines stand
    on the whole deployment; the output says so (JSON ``note`` and a line under the table), and a whole split
    carries no such note."""
    args = ("evaluate", "--threshold", "18113", "--n-pd-prefill", "3")
    short = _json(*args, "--n-pd-decode", "4")
    assert "uses 7 of the local pool's 8 instances (1 idle, not priced)" in short["note"]
    assert "note" not in _json(*args, "--n-pd-decode", "5")
    table = run_cli(*args, "--n-pd-decode", "4")
    assert table.returncode == 0 and "Note: the given plan uses 7 of the local pool's 8" in table.stdout


def test_fit_reports_residuals() -> None:
    """`fit --json` lists each fitted curve with a residual per profile point."""
    fits = _json("fit")["fits"]
    assert {f["curve"] for f in fits} == {"prefill h200", "prefill h20", "kv_cache h200"}
    h200 = next(f for f in fits if f["curve"] == "prefill h200")
    assert len(h200["points"]) == 4 and all(abs(p["relative_residual"]) < 0.05 for p in h200["points"])


def test_every_command_has_help_with_an_example() -> None:
    """Each command (and sub-command) documents itself and shows an example invocation."""
    from typer._click import Context
    from typer.core import TyperGroup
    from typer.main import get_command

    from prfaas_plan.cli.app import app

    root = get_command(app)
    assert isinstance(root, TyperGroup)
    commands: list[list[str]] = []
    for name in root.list_commands(Context(root)):
        command = root.get_command(Context(root), name)
        if isinstance(command, TyperGroup):
            commands += [[name, sub] for sub in command.list_commands(Context(command))]
        else:
            commands.append([name])
    assert len(commands) >= 8
    for command in commands:
        result = run_cli(*command, "--help")
        assert result.returncode == 0 and "Example: prfaas-plan" in result.stdout, command


def test_scenario_given_by_path_from_another_directory(tmp_path: Path) -> None:
    """A scenario path works from any working directory; its references resolve next to it or built in."""
    result = run_cli("optimize", str(PAPER_SCENARIO), "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(shutil.which("prfaas-plan") is None, reason="the package is not installed")
def test_installed_entry_point_runs_the_builtin_scenario_anywhere(tmp_path: Path) -> None:
    """After `pip install .` the console script finds the built-in scenario and profiles from any directory."""
    exe = shutil.which("prfaas-plan")
    assert exe is not None
    result = subprocess.run([exe, "optimize", "--json"], capture_output=True, text=True, cwd=tmp_path, check=False)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["plan"]["n_prfaas"] == 4


def test_version_prints_the_package_version() -> None:
    from prfaas_plan import __version__

    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"prfaas-plan {__version__}"


def test_piped_tables_are_not_wrapped_and_json_failures_are_json() -> None:
    import os
    import sys

    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = str(REPO)
    piped = subprocess.run(
        [sys.executable, "-m", "prfaas_plan", "optimize"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )
    assert piped.returncode == 0
    assert max(len(line) for line in piped.stdout.splitlines()) > 100  # the full table, not wrapped at 80
    assert any("Homogeneous PD (12 × h20)" in line for line in piped.stdout.splitlines())
    failed = run_cli("optimize", "--n-prfaas", "0", "--json")
    assert failed.returncode == 2
    error = json.loads(failed.stdout)["error"]
    assert error["kind"] == "input" and error["exit_status"] == 2
    assert error["problems"][0]["field"] == "--n-prfaas"


def test_table_past_the_count_writes_no_file_and_keeps_the_previous_one(tmp_path: Path) -> None:
    """Whether a command prints table N is known only once it has; a command that also writes a file (simulate
    --records) holds that file back until then: past the count it exits 2, nothing on stdout, no file and no
    temporary left, a previous records file unchanged; a table it prints lets the file through."""
    records = tmp_path / "records.csv"
    run = ("simulate", "--requests", "300", "--records", str(records))
    beyond = run_cli("--format", "csv", "--table", "3", *run)
    assert beyond.returncode == 2 and beyond.stdout == "" and "--table 3: this command printed 1 table" in beyond.stderr
    assert f"nothing written (held back until now: {records})" in beyond.stderr and os.listdir(tmp_path) == []
    picked = run_cli("--format", "csv", "--table", "1", *run)
    assert picked.returncode == 0 and picked.stdout.startswith("quantity,unit,simulated")
    written = records.read_bytes()
    assert written.startswith(b"request,") and os.listdir(tmp_path) == ["records.csv"]
    again = run_cli("--format", "md", "--table", "2", "simulate", "--requests", "400", "--records", str(records))
    assert again.returncode == 2 and again.stdout == "" and records.read_bytes() == written
    assert os.listdir(tmp_path) == ["records.csv"]


def test_tables_print_as_markdown_or_csv() -> None:
    import csv
    import io

    md = run_cli("--format", "md", "optimize")
    assert md.returncode == 0, md.stderr
    lines = md.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("|  | PrfaaS-PD"))
    assert lines[header + 1].startswith("|---|")
    assert any(line.startswith("| Λ_max (req/s) | 3.25 |") for line in lines)
    table = run_cli("--format", "csv", "optimize")
    assert table.returncode == 0, table.stderr
    rows = list(csv.reader(io.StringIO(table.stdout.split("\n\n")[0])))
    # CSV is data: one row per plan, units in the header, plain numbers (tests/cli/test_csv_data.py checks all).
    assert rows[0][0] == "plan" and rows[1][0] == "PrfaaS-PD (optimised)" and len({len(r) for r in rows}) == 1
    assert round(float(rows[1][rows[0].index("throughput_req_per_s")]), 2) == 3.25
    assert run_cli("--format", "xml", "optimize").returncode == 2


def test_a_tpot_slo_is_named_where_it_caps_the_limit_and_the_goodput() -> None:
    """hunt20 F4 and F7: with a P90 TPOT SLO the limit row is the lower of stability and the TPOT SLO's rate, and
    the title and goodput row name the TPOT SLO; without one they read as before. A split that does not move is
    not printed as a move."""
    args = ("optimize", "--objective", "goodput", "--ttft-p90-s", "5", "--no-verify")
    capped = run_cli(*args, "--tpot-p90-ms", "50")
    assert capped.returncode == 0, capped.stderr
    assert "goodput under P90 TTFT <= 5 s, TPOT P90 <= 50 ms" in capped.stdout
    assert "stability or TPOT P90 <= 50 ms limit (req/s)" in capped.stdout
    plain = run_cli(*args)
    assert "stability limit (req/s)" in plain.stdout and "TPOT P90" not in plain.stdout
    assert "N_p/N_d 3/5 -> 4/4" in plain.stdout
    same = run_cli("optimize", "qwen3.5-capacity", "--objective", "goodput", "--ttft-p90-s", "5", "--no-verify")
    assert "at the same N_p/N_d 4/4" in same.stdout and "4/4 -> 4/4" not in same.stdout


def test_evaluate_needs_a_split_for_a_scenario_and_none_for_a_topology() -> None:
    """drift20 N3: a topology's PD clusters choose their own splits, so `evaluate TOPOLOGY --threshold T` runs
    without --n-pd-* (once demanded, then ignored); a scenario still needs both, exit 2 naming each."""
    topology = run_cli("evaluate", "three-regions", "--threshold", "20000")
    assert topology.returncode == 0 and "split is chosen at that threshold" in topology.stderr
    assert "not applied" not in topology.stderr
    scenario = run_cli("evaluate", "--threshold", "20000", "--n-pd-decode", "5")
    assert scenario.returncode == 2 and scenario.stdout == ""
    assert "error: --n-pd-prefill: required for a scenario" in scenario.stderr
    assert "--n-pd-decode:" not in scenario.stderr


def test_main_holds_files_only_for_its_own_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """review21 F3: main() sets the flag under which --table holds file commits, and clears it when the run
    ends, so the app called on its own later in the same process (a test's runner) holds nothing back."""
    import sys

    from prfaas_plan.cli import app as app_module

    monkeypatch.setattr(sys, "argv", ["prfaas-plan", "schema", "hardware"])
    try:
        app_module.main()
    except SystemExit as done:
        assert done.code in (0, None)
    assert app_module._UNDER_MAIN is False
