"""Errors of an engine profile given by path: one line per problem, naming the file, line and field."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import REPO, run_cli

VLLM = REPO / "hardware_profiles" / "serving" / "engines" / "vllm.yaml"
KV = ("kv", "--model", "llama-3.1-70b", "--hardware", "h200", "--length", "1000", "--engine")


def _with(tmp_path: Path, old: str, new: str) -> Path:
    text = VLLM.read_text()
    assert text.count(old) == 1
    path = tmp_path / "edited.yaml"
    path.write_text(text.replace(old, new))
    return path


def test_a_bad_fitted_term_is_one_error_not_two(tmp_path: Path) -> None:
    """A fitted term whose value is refused is reported once, at its value; the fit list naming it is no second
    error (it printed 'fit.fitted: names no term: request_overhead_s' as well)."""
    done = run_cli(*KV, str(_with(tmp_path, "value: 0.01274", "value: -0.01")))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, lines
    assert "edited.yaml:9 terms.request_overhead_s.value: must be >= 0" in lines[0]


def test_a_fit_list_naming_no_term_is_still_refused(tmp_path: Path) -> None:
    done = run_cli(*KV, str(_with(tmp_path, "  - request_overhead_s\n", "  - request_overhead_z\n")))
    assert done.returncode == 2 and "fit.fitted: names no term: request_overhead_z" in done.stderr, done.stderr


def test_a_scenario_pools_bad_engine_is_one_line_naming_both_files(tmp_path: Path) -> None:
    """A pool's engine profile with a bad term: one line at the pool's engine: field that names the profile's
    own file, line and field (it gave the scenario's line with the bare message, then the profile's error again);
    a missing profile likewise."""
    bad = _with(tmp_path, "value: 0.01274", "value: -0.01")
    template = (REPO / "workloads" / "qwen3.5-capacity.yaml").read_text()
    marker = "    engine: sglang             # terms"
    assert template.count(marker) == 1
    for engine, inside in (
        (bad, f"{bad}:9 terms.request_overhead_s.value: must be >= 0"),
        (tmp_path / "no.yaml", "file not found"),
    ):
        scenario = tmp_path / "scenario.yaml"
        scenario.write_text(template.replace(marker, f"    engine: {engine}  # terms"))
        done = run_cli("optimize", str(scenario))
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, lines
        assert f"{scenario}:" in lines[0] and "deployment.prfaas.engine: " in lines[0] and inside in lines[0], lines
