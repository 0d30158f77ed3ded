"""Shared fixtures: paths to the repository's inputs (scenarios, shipped traces) and a CLI runner."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.spec.scenario import Scenario
from prfaas_plan.throughput import StageModel, stage_model

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO / "workloads" / "traces"
PAPER_SCENARIO = REPO / "workloads" / "paper-case-study.yaml"

# Hypothesis profiles. `ci` (the default) is reproducible: the same examples on every run and machine, no
# example database. `deep` (PRFAAS_HYPOTHESIS_PROFILE=deep) draws fresh random examples, DEEP_FACTOR times
# as many, and keeps failures in .hypothesis/ to replay them. Loaded here, at import, because pytest imports
# this file before any test module: a test's settings(...) inherits every field it does not name (derandomize
# among them) from the profile loaded when that settings object is built.
HYPOTHESIS_PROFILE_ENV = "PRFAAS_HYPOTHESIS_PROFILE"
DEEP_FACTOR = 10
_HYPOTHESIS_DEFAULT = settings.get_profile("default")
settings.register_profile("ci", _HYPOTHESIS_DEFAULT, derandomize=True, database=None, deadline=None, print_blob=True)
settings.register_profile(
    "deep",
    _HYPOTHESIS_DEFAULT,
    max_examples=DEEP_FACTOR * _HYPOTHESIS_DEFAULT.max_examples,
    deadline=None,
    print_blob=True,
)
settings.load_profile(os.environ.get(HYPOTHESIS_PROFILE_ENV, "ci"))


def examples(n: int) -> int:
    """A property test's example count: ``n`` under the `ci` profile, scaled by the loaded profile's
    max_examples over ci's (DEEP_FACTOR times under `deep`). A test's explicit max_examples overrides the
    profile's, so every settings(max_examples=...) in the suite goes through this."""
    return max(1, n * settings.default.max_examples // settings.get_profile("ci").max_examples)


# The slow tier (marker `slow`): whole-command runs in subprocesses, fuzzers, hostile-file batteries and the
# timing benchmarks. The default run (pyproject addopts: not slow and not validation) stays under 5 minutes on
# 2 cores; `.ci/run` runs both tiers. Listed here by path (a folder, a file, or a node id prefix) so that the
# tier is one place to read.
SLOW = (
    "tests/benchmarks/",
    "tests/hostile/",
    "tests/topology/test_commands.py",
    "tests/topology/test_size.py",
    "tests/io/test_fuzz_inputs.py",
    "tests/cli/test_flags_fuzz.py",
    "tests/cli/test_csv_data.py",
    "tests/report/test_figures.py",
    "tests/studies/test_review_band.py",
    "tests/studies/test_uncertainty.py",
    "tests/test_readme_api.py",
    "tests/sim/test_cli_dynamics.py",
    "tests/sim/test_cli_simulate.py",
    "tests/cli/test_shapes_chosen.py",
    "tests/cli/test_sweep_command.py",
    "tests/studies/test_recommendation.py",
    "tests/report/test_scenario_writer.py",
    "tests/topology/test_io.py::test_the_command",
    "tests/cli/test_app.py::test_every_command_has_help_with_an_example",
    "tests/latency/test_distribution.py::test_ttft_law_matches_sampling_its_components",
    "tests/studies/test_bench_calibration.py::test_written_profile_prices_a_scenario_used_by_optimize",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests under SLOW as `slow`, and every test under tests/validation as `validation`."""
    for item in items:
        node = Path(item.path).resolve().relative_to(REPO).as_posix() + "::" + item.name
        if node.startswith(SLOW):
            item.add_marker(pytest.mark.slow)
        if node.startswith("tests/validation/"):
            item.add_marker(pytest.mark.validation)


@pytest.fixture(scope="session")
def paper_scenario() -> Scenario:
    """The built-in paper case study, loaded through the real YAML loader."""
    return load_scenario(PAPER_SCENARIO)


@pytest.fixture(scope="session")
def paper_model(paper_scenario: Scenario) -> StageModel:
    """The paper case study's fitted stage model."""
    return stage_model(paper_scenario)


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real command line in a fresh interpreter (this checkout's package, a 160-column terminal)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "160"}
    return subprocess.run(
        [sys.executable, "-m", "prfaas_plan", *args],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        env=env,
        timeout=120,
        check=False,
    )


def default_signals() -> None:
    """``preexec_fn`` for a child the test signals: SIGINT, SIGTERM and SIGHUP at their default actions whatever
    the test runner inherited (under nohup SIGHUP is ignored, and the tool rightly keeps an inherited ignore)."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
