"""The README's Python API example runs as written, from a directory that is not the repository (built-in
names must resolve from anywhere, as after ``pip install``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def _example() -> str:
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Python API") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    return code.group(1)


def test_readme_python_api_example_runs_outside_the_repository(tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(_example())
    # The package is imported as installed; the repository is not on the path and not the working directory.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-I", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert len(lines) == 4, result.stdout  # one line per print() in the example
    assert not (tmp_path / "workloads").exists()
