"""The console the commands print through (cli.render.console)."""

from __future__ import annotations

import io
import sys

import pytest
from rich.table import Table

from prfaas_plan.cli.render import console


def test_text_is_printed_as_given_without_emoji_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``:name:`` in a cell (a pool or scenario name from a user's file) is printed as written, not as an emoji."""
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    table = Table("pool")
    table.add_row("gpu:fire:pool :smile:")
    console().print(table)
    console().print(":thumbs_up: done")
    text = out.getvalue()
    assert "gpu:fire:pool :smile:" in text
    assert ":thumbs_up: done" in text
    assert "\N{FIRE}" not in text and "\N{SMILING FACE WITH OPEN MOUTH AND SMILING EYES}" not in text
