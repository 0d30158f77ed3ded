"""The README's Python API example runs as written (from the repository root, as a reader would run it)."""

from __future__ import annotations

import os
import re

from tests.conftest import REPO


def test_readme_python_api_example_runs() -> None:
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Python API") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    here = os.getcwd()
    os.chdir(REPO)
    try:
        exec(compile(code.group(1), "README.md (Python API)", "exec"), {})
    finally:
        os.chdir(here)
