"""io.paths: how paths are shown, with or without a working directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from prfaas_plan.io.paths import display_path
from tests.conftest import REPO


def test_a_path_below_the_working_directory_is_shown_relative(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert display_path(tmp_path / "a" / "b.yaml") == os.path.join("a", "b.yaml")
    assert display_path(Path("/elsewhere/x.yaml")) == "/elsewhere/x.yaml"


def test_a_deleted_working_directory_shows_the_path_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    assert display_path(Path("/abs/x.yaml")) == "/abs/x.yaml"


def test_commands_run_from_a_deleted_working_directory(tmp_path: Path) -> None:
    """``Path.cwd()`` raised FileNotFoundError, so every command loading a scenario ended in a traceback."""
    gone = tmp_path / "gone"
    gone.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    script = (
        "import os, sys, subprocess; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); "
        "sys.exit(subprocess.run([sys.executable, '-m', 'prfaas_plan', *sys.argv[2:]]).returncode)"
    )
    ok = subprocess.run(
        [sys.executable, "-c", script, str(gone), "optimize", "--json"], capture_output=True, text=True, env=env
    )
    assert ok.returncode == 0 and "Traceback" not in ok.stderr, ok.stderr
    gone.mkdir()
    missing = subprocess.run(
        [sys.executable, "-c", script, str(gone), "optimize", "rel.yaml"], capture_output=True, text=True, env=env
    )
    assert missing.returncode == 2 and missing.stderr.strip() == "error: rel.yaml: file not found"
