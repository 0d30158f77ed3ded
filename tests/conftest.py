"""Shared fixtures: paths to the repository's inputs and the shared reference data, and a CLI runner."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.spec.scenario import Scenario
from prfaas_plan.throughput import StageModel, stage_model

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
PAPER_SCENARIO = REPO / "workloads" / "paper-case-study.yaml"


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
