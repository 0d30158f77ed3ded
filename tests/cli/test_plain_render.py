"""Piped plain output written without rich (cli.plain, cli.render.Printer) is byte for byte what rich writes.

Each check compares against rich itself, configured as the commands configure it (no highlighting, no soft wrap,
no emoji codes, the piped width): the characters taken as single-width, generated tables and texts, and whole
commands run twice through the real command line, once printed here and once by rich."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from prfaas_plan.cli import plain
from prfaas_plan.cli.render import PIPED_WIDTH, RICH_ENVIRONMENT, DataTable, Printer
from tests.conftest import REPO, examples


def _rich(obj: object, width: int) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=width, highlight=False, soft_wrap=False, emoji=False).print(obj)
    return buffer.getvalue()


def test_every_character_taken_as_single_width_is_one_cell_in_rich_and_printed_as_it_is() -> None:
    chars = [chr(c) for c in range(0x20, 0x3000) if plain.single_width(chr(c))]
    assert len(chars) > 2000  # ASCII, Latin, Greek, Cyrillic, punctuation, arrows, maths, boxes, dingbats
    assert [c for c in chars if cell_len(c) != 1] == []
    text = "".join(chars)
    buffer = io.StringIO()
    Console(file=buffer, width=10**5, highlight=False, soft_wrap=False, emoji=False, markup=False).print(text)
    assert buffer.getvalue() == text + "\n"
    # Wide, combining, control and private characters are left to rich.
    for ch in ("中", "\u0301", "\t", "\x07", "\u200b", "\ue000", "😀", "\u00a0"):
        assert not plain.single_width(ch), hex(ord(ch))


# Pieces that make up generated cells and texts: plain words, the characters the commands print, the known style
# tags (whole and stray), and characters that rich treats specially (escape, brackets, tabs, wide characters).
# The plain pieces come four times over, so that most generated cases are ones the plain route draws.
_PLAIN_PIECES = ["a", "bc", "12,345", " ", "  ", "Θ", "Λ_max", "—", "×", "✓", "é", "$", "%", "/", "(x)", ":smile:"]
_MARKUP_PIECES = ["[bold]", "[/bold]", "[dim]", "[/dim]", "[red]", "[/red]", "[bold red]", "[/bold red]", "[/]"]
_MARKUP_PIECES += ["[", "]", "[x]", "[#f00]", "[@click]", "[/x]", "\\", "\\\\", "\\[bold]", "\\[x]"]
_PIECES = st.sampled_from(_PLAIN_PIECES * 4 + _MARKUP_PIECES + ["\t", "中", "\u0301"])
_TEXT = st.lists(_PIECES, max_size=8).map("".join)
_JUSTIFY = st.sampled_from(["left", "center", "right"])


@st.composite
def _tables(draw: st.DrawFn) -> tuple[DataTable, int]:
    title = draw(st.one_of(st.none(), st.just(""), _TEXT))
    table = DataTable(title=title, title_justify=draw(_JUSTIFY))
    ncols = draw(st.integers(1, 4))
    for _ in range(ncols):
        table.add_column(draw(_TEXT), justify=draw(_JUSTIFY))
    for _ in range(draw(st.integers(0, 5))):
        table.add_row(*draw(st.lists(_TEXT, min_size=0, max_size=ncols)))
        if draw(st.booleans()):
            table.add_section()
    return table, draw(st.sampled_from([12, 30, 80, PIPED_WIDTH]))


@settings(max_examples=examples(400))
@given(_tables())
def test_a_table_drawn_here_is_the_table_rich_draws(case: tuple[DataTable, int]) -> None:
    table, width = case
    drawn = table.plain_text(width)
    if drawn is not None:
        assert drawn == _rich(table.to_rich(), width)


@settings(max_examples=examples(400))
@given(st.lists(_TEXT, min_size=1, max_size=3).map("\n".join), st.sampled_from([12, 30, 80, PIPED_WIDTH]))
def test_a_text_written_here_is_the_text_rich_writes(text: str, width: int) -> None:
    drawn = plain.text_block(text, width)
    if drawn is not None:
        assert drawn == _rich(plain.rich_markup(text), width)


@settings(max_examples=examples(1000))
@given(st.lists(st.sampled_from([*_MARKUP_PIECES, "a", " ", "[b]", "x]"]), max_size=12).map("".join))
def test_text_shows_as_written_but_for_paired_style_tags(text: str) -> None:
    """What rich shows for ``rich_markup(text)`` is ``shown(text)``: the text as written, the known style tags
    removed where they pair up, and no markup error whatever brackets and backslashes it holds."""
    assert Text.from_markup(plain.rich_markup(text), emoji=False).plain == plain.shown(text)


def test_the_markup_rule_on_examples() -> None:
    assert plain.shown("[bold]3.25[/bold] req/s") == "3.25 req/s"
    for text in ("x[/bold]", "a[b]c", "[/]", "[bold]open", "[dim]a[/bold]", "back\\slash", "\\[x", "a\\[b]"):
        assert plain.shown(text) == text, text  # unpaired or unknown: all text
    assert plain.shown("a\\[bold]x[/bold]") == "a\\x"  # paired tags go, the backslash stays


def test_what_the_plain_route_draws_and_declines() -> None:
    """Examples beside the generated cases: a table shaped like ``optimize``'s (a left-justified title, a styled
    cell, literal brackets) is drawn, and as rich draws it; a title wider than its table, a line wider than the
    console and a wide character are left to rich; an unpaired tag is text."""
    table = DataTable(title="paper: plan", title_justify="left")
    table.add_column("")
    table.add_column("PrfaaS-PD", justify="right")
    table.add_row("  Λ_max (req/s)", "[bold]3.25[/bold]")
    table.add_row("gain", "1.54×")
    assert table.plain_text(PIPED_WIDTH) == _rich(table.to_rich(), PIPED_WIDTH)
    table.add_row("stray", "[x] x[/bold]")  # text, as written
    drawn = table.plain_text(PIPED_WIDTH)
    assert drawn is not None and "│ [x] x[/bold] │" in drawn
    assert drawn == _rich(table.to_rich(), PIPED_WIDTH)
    narrow = DataTable(title="a title wider than the table")
    narrow.add_column("h")
    assert narrow.plain_text(PIPED_WIDTH) is None  # rich wraps the title
    assert plain.text_block("x" * 81, 80) is None  # rich wraps the line
    assert plain.text_block("中", 80) is None  # two cells wide
    assert plain.text_block("[bold]unclosed", 80) == "[bold]unclosed\n"


def test_terminals_narrow_encodings_and_colour_settings_go_to_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdout", Tty())
    for name in RICH_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    assert Printer()._piped_width() is None
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert Printer()._piped_width() == PIPED_WIDTH
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding="ascii"))
    assert Printer()._piped_width() is None  # rich draws ASCII boxes there
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))
    assert Printer()._piped_width() == PIPED_WIDTH
    for name in RICH_ENVIRONMENT:
        monkeypatch.setenv(name, "1")
        assert Printer()._piped_width() is None, name
        monkeypatch.delenv(name)


# Commands whose table output is compared: the built-in scenario and shipped inputs, quick ones (a few seconds).
_COMMANDS = [
    ("optimize",),
    ("optimize", "--bandwidth-gbit-per-s", "10"),
    ("optimize", "--load", "0.7", "--no-verify"),
    ("optimize", "--objective", "goodput", "--ttft-p90-s", "5", "--no-verify"),
    ("evaluate", "--threshold", "19400", "--n-pd-prefill", "3", "--n-pd-decode", "5"),
    ("optimize", "workloads/qwen3-next-b200-h100.yaml"),
    ("kv", "--model", "paper-1t-hybrid", "--hardware", "h200", "--gpus", "8"),
    ("kv", "--model", "qwen3.5-397b-a17b", "--hardware", "h20", "--engine", "sglang"),
    ("cost",),
    ("fit",),
]

_PROBE = """
import sys
from prfaas_plan.cli.app import main
sys.argv = ["prfaas-plan", *sys.argv[1:]]
try:
    main()
except SystemExit as stop:
    code = stop.code
else:
    code = 0
print("RICH" if "rich.console" in sys.modules else "PLAIN", code, file=sys.stderr)
"""


def _run(args: tuple[str, ...], columns: str | None) -> tuple[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in RICH_ENVIRONMENT} | {"PYTHONPATH": str(REPO)}
    if columns is not None:
        env["COLUMNS"] = columns
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=120
    )
    return done.stdout, done.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("args", _COMMANDS, ids=" ".join)
def test_a_command_prints_here_what_rich_prints(args: tuple[str, ...]) -> None:
    """The same command, piped, printed by this module (no COLUMNS) and by rich (COLUMNS at the piped width, so
    that rich lays out to the same width): the same bytes. ``optimize`` on the built-in scenario never loads
    rich's console (issue 19's start-up)."""
    mine, how = _run(args, None)
    theirs, rich_how = _run(args, str(PIPED_WIDTH))
    assert how.endswith(" 0") and rich_how == "RICH 0", (how, rich_how)
    assert mine == theirs
    if args == ("optimize",):
        assert how == "PLAIN 0"


def test_a_rich_table_and_what_is_not_drawn_here_print_through_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rich table handed to the printer (no command builds one since calibrate and validate print DataTables) and
    text the plain route declines are printed by rich."""
    for name in RICH_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    table = Table(title="t")
    table.add_column("h")
    table.add_row("[x] dropped by rich's rules")
    Printer().print(table)
    Printer().print("中 [x] tag", style="dim")  # a wide character: rich prints it, as written
    assert out.getvalue() == _rich(table, PIPED_WIDTH) + "中 [x] tag\n"


def test_a_closed_stream_shows_nothing_and_raises_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """``2>&-``: messages to stderr are dropped, as rich drops them, and the command goes on."""
    monkeypatch.setattr(sys, "stderr", None)
    Printer(stderr=True).print("a note", style="dim")
    Printer(stderr=True).print("中 a note")


def test_a_name_with_brackets_and_backslashes_is_shown_as_written(tmp_path: Path) -> None:
    """A scenario named with rich-like markup (an unpaired closing tag, an unknown tag, a backslash, an emoji code)
    is printed as written, by this module and by rich alike; it used to end in rich's MarkupError traceback."""
    name = "x[/bold] a[b]c \\ [bold]ok[/bold] :smile:"
    text = (REPO / "workloads" / "paper-case-study.yaml").read_text()
    assert "  name: paper-case-study\n" in text
    scenario = tmp_path / "hostile.yaml"
    scenario.write_text(text.replace("  name: paper-case-study\n", f'  name: "{name.replace(chr(92), chr(92) * 2)}"\n'))
    mine, how = _run(("optimize", str(scenario)), None)
    theirs, rich_how = _run(("optimize", str(scenario)), str(PIPED_WIDTH))
    assert (how, rich_how) == ("PLAIN 0", "RICH 0")
    assert mine == theirs
    assert mine.startswith(f"{name}: 32×h200 PrfaaS")
    markdown, _ = _run(("--format", "md", "optimize", str(scenario)), None)
    assert markdown.startswith(f"**{name}: 32×h200 PrfaaS")
