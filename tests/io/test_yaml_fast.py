"""The libyaml route of ``io.yaml_parser`` (C scanner and parser, the pure loader's Python composer and checks) reads
every text exactly as the pure-Python loader does: the same data, the same line for every key and item, and for
a text it cannot read, the pure loader's own error message (file, line, reason).

Differential: each text is parsed by ``parse_yaml`` (the fast route where it applies) and by the pure loader
alone, and the outcomes are compared. The texts are the shipped YAML files and damaged copies of them (characters
inserted, cut, lines shuffled, YAML syntax sprinkled in); the examples below are the forms where libyaml and
PyYAML were found to disagree, which must take the pure route.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prfaas_plan.errors import InputError
from prfaas_plan.io import yaml_parser, yamlsrc
from tests.conftest import REPO, examples

SHIPPED = sorted(p for p in REPO.rglob("*.yaml") if ".git" not in p.parts and ".hypothesis" not in p.parts)
TEXTS = [p.read_text(encoding="utf-8") for p in SHIPPED]
#: Pieces of YAML syntax (and of what the scanners disagree on) to sprinkle into damaged texts.
PIECES = [
    *":-[]{},'\"#&*!|>%@?`\\~=. \n",
    "- ",
    ": ",
    "\n  ",
    "\n- ",
    " #",
    "|-",
    ">+",
    "|2",
    "---",
    "...",
    "<<: ",
    "&a ",
    "*a",
    "!!str ",
    "! ",
    "? ",
    "0x1F",
    "0o7",
    "1e3",
    ".inf",
    ".nan",
    "null",
    "yes",
    "on",
    "2001-02-30",
    "1:20",
    "\\u00e9",
    "\t",
    "\r\n",
    "\u2028",
    "é",
]

#: Forms where libyaml accepts or reads a text otherwise than PyYAML (found by differential fuzzing).
DISAGREEMENTS = {
    "bare tag": "a: !\n",  # libyaml: '', PyYAML: null
    "question mark in a flow plain scalar": "x: {a: 1, b: c?d}\n",  # libyaml accepts, PyYAML refuses
    "comment glued to a block header": "a: |-#\n  x\n",  # libyaml accepts, PyYAML refuses
    "empty document without a final newline": "---",  # libyaml marks the empty node on line 2, PyYAML on 1
}


def _outcome(parse: Any, text: str) -> tuple[str, Any]:
    try:
        doc = parse(text, "f.yaml")
    except InputError as exc:
        return ("error", str(exc))
    return ("doc", (_canonical(doc.data), sorted(doc.lines.items(), key=repr)))


def _canonical(value: Any) -> Any:
    """Data compared by type and value, key order included (NaN equal to itself)."""
    if isinstance(value, dict):
        return ("dict", [(_canonical(k), _canonical(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [_canonical(v) for v in value])
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    return (type(value).__name__, value)


def _agree(text: str) -> None:
    """The parser (the fast route where it applies) and ``parse_yaml`` (a shipped file's stored parse where
    the text is one) both read ``text`` as the pure loader does."""
    pure = _outcome(yaml_parser._pure_document, text)
    assert _outcome(yaml_parser.parse_text, text) == pure, repr(text[:400])
    assert _outcome(yamlsrc.parse_yaml, text) == pure, repr(text[:400])


@pytest.mark.skipif(yaml_parser._FAST is None, reason="PyYAML built without libyaml")
def test_shipped_files_read_alike_and_the_paper_scenario_takes_the_fast_route() -> None:
    """Every shipped YAML file reads the same both ways; the paper scenario's four files go through libyaml
    (the start-up of every command that loads it depends on it)."""
    assert len(TEXTS) >= 20
    for text in TEXTS:
        _agree(text)
    paper = ["workloads/paper-case-study.yaml", "workloads/models/paper-1t-hybrid.yaml"]
    paper += ["hardware_profiles/h200.yaml", "hardware_profiles/h20.yaml"]
    for name in paper:
        assert yaml_parser._fast_can_read((REPO / name).read_text(encoding="utf-8")), name


@pytest.mark.parametrize("name", sorted(DISAGREEMENTS))
def test_forms_libyaml_reads_otherwise_take_the_pure_route(name: str) -> None:
    """Where the two scanners disagree, the outcome is the pure loader's."""
    text = DISAGREEMENTS[name]
    assert not yaml_parser._fast_can_read(text)
    _agree(text)


@st.composite
def damaged(draw: st.DrawFn) -> str:
    """A shipped text damaged a few times over, or a short run of YAML pieces."""
    if draw(st.integers(0, 4)) == 0:
        return "".join(draw(st.lists(st.sampled_from(PIECES + list("abc0123 \n")), max_size=40)))
    text = draw(st.sampled_from(TEXTS))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        kind = draw(st.sampled_from(["insert", "insert", "cut", "truncate", "lines"]))
        if kind == "insert":
            text = text[:at] + "".join(draw(st.lists(st.sampled_from(PIECES), min_size=1, max_size=4))) + text[at:]
        elif kind == "cut":
            text = text[:at] + text[at + draw(st.integers(1, 30)) :]
        elif kind == "truncate":
            text = text[:at]
        else:
            lines = text.split("\n")
            picked = draw(st.lists(st.sampled_from(lines), min_size=1, max_size=25)) if lines else []
            text = "\n".join(picked)
    return text if draw(st.integers(0, 4)) == 0 else text.rstrip("\n") + "\n"


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=damaged())
def test_damaged_texts_read_alike(text: str) -> None:
    """A damaged text gives the same document, or the same error line, through ``parse_yaml`` as through the
    pure loader."""
    _agree(text)


def test_no_shipped_yaml_left_out() -> None:
    """The differential runs over the repository's YAML files (workloads, hardware profiles, fixtures)."""
    assert any(Path("workloads") in p.relative_to(REPO).parents for p in SHIPPED)
