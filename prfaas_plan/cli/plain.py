"""Tables and lines written without rich, where rich would write plain text: the same characters, faster; and
the one rule for what text means.

**Text is printed as written**, except the known style tags (``[bold]...[/bold]``, ``[dim]``, colours: see
``STYLE_TAGS``) where they pair up properly: those style the text on a terminal and are dropped elsewhere.
Anything else that looks like rich markup (``[x]``, ``[/]``, a backslash, a tag left open) is text, so that a name
from a user's file (a scenario called ``a[b]`` or ``x[/bold]``) is shown as written rather than eaten or ending in
a markup error. :func:`shown` gives the characters; :func:`rich_markup` gives rich the markup that shows them.

Piped output (no terminal) carries no colour, so rich's work comes down to laying out boxes; importing its console
and table modules and rendering one table took about 35 ms on a 2-core Xeon VM, more than the rest of
``optimize`` after the interpreter and its libraries (issue 19's start-up target). The functions here lay out what
they can exactly as rich lays it out and give up (return None) on anything else, which then goes to rich:

- a table of one-line text cells with the options the commands use (a title, left/center/right justification,
  sections) whose natural width fits the console and whose title fits over it (rich would wrap them);
- text of single-width characters only (ASCII and the Latin, Greek, punctuation, arrow, mathematical and
  box-drawing ranges listed in ``_WIDE_FREE``, each checked against rich's own widths in the tests), no tabs or
  control characters;
- cells and titles without trailing spaces (rich strips them when it justifies a line).

``tests/cli/test_plain_render.py`` checks that what is written here is byte for byte what rich writes, on every
table the commands print for the shipped scenarios and on generated tables and texts, and that rich shows
exactly :func:`shown` for the markup :func:`rich_markup` gives it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import cache

#: Ranges (inclusive) outside ASCII whose letters, digits, punctuation and symbols are one cell wide in rich:
#: Latin-1 to IPA and spacing modifiers, Greek and Cyrillic, general punctuation to the mathematical operators,
#: and box drawing to the dingbats (checked character by character against rich in the tests).
_WIDE_FREE = ((0x00A1, 0x02FF), (0x0370, 0x04FF), (0x2010, 0x2027), (0x2030, 0x205E), (0x2070, 0x22FF),
              (0x2500, 0x25FF), (0x2700, 0x27BF))  # fmt: skip

#: How a column's cells (and a title) are justified, as rich names it.
JUSTIFY = ("left", "center", "right")
#: The style tags that style text (on a terminal; dropped elsewhere) where they pair up properly.
STYLE_TAGS = ("bold", "dim", "italic", "red", "green", "yellow", "bold red", "bold yellow", "bold green")
_TAG = re.compile(r"\[(/?)(" + "|".join(re.escape(t) for t in sorted(STYLE_TAGS, key=len, reverse=True)) + r")\]")
#: What rich reads as a tag (``rich.markup``): a ``[``, a lower-case letter, ``#``, ``/`` or ``@``, then up to ``]``;
#: backslashes before it escape it (an odd count) or stand for half as many backslashes.
_RICH_TAG = re.compile(r"(\\*)(\[[a-z#/@][^[]*?])")


def _tags(text: str) -> list[re.Match[str]] | None:
    """The known style tags of ``text`` if they pair up properly (each closed in order, none left open); else
    None (the text then has no tags: it is all text)."""
    stack: list[str] = []
    found = list(_TAG.finditer(text))
    for match in found:
        closing, name = match.groups()
        if not closing:
            stack.append(name)
        elif not stack or stack.pop() != name:
            return None
    return None if stack else found


def shown(text: str) -> str:
    """The characters ``text`` shows: the known style tags removed where they pair up properly, all else as
    written."""
    if "[" not in text:
        return text
    return text if _tags(text) is None else _TAG.sub("", text)


def _literal(segment: str, tag_follows: bool) -> str:
    """Markup that rich shows as ``segment`` itself. Rich reads three things in markup: a tag (escaped here by
    doubling the backslashes before it and adding one), backslashes before a tag (it halves them: doubled here
    where one of the known tags follows the segment), and ``\\[`` in text, which it shows as ``[`` (a backslash is
    added here before each such ``[``)."""
    pieces: list[str] = []
    start = 0
    for match in _RICH_TAG.finditer(segment):
        pieces += [segment[start : match.start()].replace("\\[", "\\\\["), match.group(1) * 2 + "\\" + match.group(2)]
        start = match.end()
    pieces.append(segment[start:].replace("\\[", "\\\\["))
    out = "".join(pieces)
    if tag_follows:
        out += "\\" * (len(out) - len(out.rstrip("\\")))
    return out


def rich_markup(text: str) -> str:
    """Markup for rich that shows :func:`shown` of ``text``, with the known style tags kept as styles."""
    if "[" not in text:  # rich reads backslashes only before a tag
        return text
    tags = _tags(text)
    if not tags:
        return _literal(text, tag_follows=False)
    pieces: list[str] = []
    start = 0
    for match in tags:
        pieces += [_literal(text[start : match.start()], tag_follows=True), match.group(0)]
        start = match.end()
    pieces.append(_literal(text[start:], tag_follows=False))
    return "".join(pieces)


@cache
def _narrow(ch: str) -> bool:
    """Whether rich writes ``ch`` as it is, one cell wide (a letter, digit, punctuation mark, symbol or space)."""
    code = ord(ch)
    if 0x20 <= code <= 0x7E:
        return True
    if not any(lo <= code <= hi for lo, hi in _WIDE_FREE):
        return False
    category = unicodedata.category(ch)
    return category[0] in "LNPS" and unicodedata.east_asian_width(ch) in ("N", "Na", "A", "H")


def single_width(text: str) -> bool:
    """Whether every character of ``text`` is one rich writes as it is, one cell wide."""
    return all(_narrow(ch) for ch in text)


def unmarked(text: str) -> str | None:
    """:func:`shown` of ``text`` where every character of it is one rich writes as it is, one cell wide; else None
    (a tab, a control character, a wide or combining character)."""
    plain = shown(text)
    return plain if all(single_width(line) for line in plain.split("\n")) else None


def text_block(text: str, width: int) -> str | None:
    """A line (or lines) as rich prints it, newline included, or None (see :func:`unmarked`, and no line wider
    than the console: rich would wrap it)."""
    plain = unmarked(text)
    if plain is None or any(len(line) > width for line in plain.split("\n")):
        return None
    return plain + "\n"


def _cell(text: str) -> str | None:
    plain = unmarked(text)
    if plain is None or "\n" in plain or plain != plain.rstrip():
        return None
    return plain


def _fit(text: str, width: int, justify: str) -> str:
    room = width - len(text)
    if justify == "right":
        return " " * room + text
    if justify == "center":
        return " " * (room // 2) + text + " " * (room - room // 2)
    return text + " " * room


def _rule(left: str, fill: str, mid: str, right: str, widths: Sequence[int]) -> str:
    return left + mid.join(fill * (w + 2) for w in widths) + right


def table_block(
    title: str | None,
    title_justify: str,
    columns: Sequence[tuple[str, str]],
    rows: Sequence[Sequence[str]],
    section_ends: frozenset[int],
    width: int,
) -> str | None:
    """A table as rich draws it with its default box (heavy head) on a console ``width`` cells wide, or None.

    ``columns`` are (header, justify) pairs; each row has one text per column; ``section_ends`` are the indexes of
    rows after which a section ends (a rule is drawn unless it is the last row)."""
    if not columns or title_justify not in JUSTIFY or any(j not in JUSTIFY for _, j in columns):
        return None
    header = [_cell(h) for h, _ in columns]
    body = [[_cell(c) for c in row] for row in rows]
    if any(h is None for h in header) or any(c is None for row in body for c in row):
        return None
    if any(len(row) != len(columns) for row in body):
        return None
    texts: list[list[str]] = [[c for c in row if c is not None] for row in [header, *body]]
    widths = [max(len(row[i]) for row in texts) for i in range(len(columns))]
    total = sum(widths) + 3 * len(widths) + 1
    if total > width:
        return None
    justs = [j for _, j in columns]
    out: list[str] = []
    if title:  # rich draws no empty title
        plain_title = _cell(title)
        if plain_title is None or len(plain_title) > total:
            return None
        out.append(_fit(plain_title, total, title_justify))
    out.append(_rule("┏", "━", "┳", "┓", widths))
    out.append("┃" + "┃".join(f" {_fit(t, w, j)} " for t, w, j in zip(texts[0], widths, justs, strict=True)) + "┃")
    out.append(_rule("┡", "━", "╇", "┩", widths))
    last = len(body) - 1
    for index, row in enumerate(texts[1:]):
        out.append("│" + "│".join(f" {_fit(t, w, j)} " for t, w, j in zip(row, widths, justs, strict=True)) + "│")
        if index in section_ends and index != last:
            out.append(_rule("├", "─", "┼", "┤", widths))
    out.append(_rule("└", "─", "┴", "┘", widths))
    return "\n".join(out) + "\n"
