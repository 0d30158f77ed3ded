"""The shipped files' stored parses (``prfaas_plan.io.parsed_builtin``): each is the parser's own Document of
today's file, an entry answers only for exactly its own text, a damaged entry is passed over, and the built-in
scenario's commands load without importing PyYAML (the reason the entries exist)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from prfaas_plan.io import parsed_builtin
from prfaas_plan.io.parsed_builtin import PARSED_DIR, entry_name, shipped_files, stored_document
from prfaas_plan.io.paths import builtin_root
from prfaas_plan.io.yaml_parser import parse_text
from prfaas_plan.io.yamlsrc import parse_yaml, read_text_bounded
from tests.conftest import REPO
from tests.io.parsed_entries import build_entries
from tests.io.test_yaml_fast import _outcome

SHIPPED = shipped_files(builtin_root())


@pytest.fixture(scope="module")
def written() -> dict[str, str]:
    """The entries the writer makes of today's shipped files."""
    return build_entries(builtin_root())


def test_the_stored_entries_are_todays(written: dict[str, str]) -> None:
    """Every entry is the one the parser writes for a shipped file today, and no other entry is stored (an
    edited profile without its new entry would be read by the parser: right, but slower)."""
    present = {path.name: path.read_text(encoding="utf-8") for path in PARSED_DIR.glob("*.json")}
    assert present == written, "run: python3 -m tests.io.parsed_entries --write"


def test_the_paper_scenarios_files_are_stored() -> None:
    """The four files every command on the built-in scenario reads have entries."""
    paper = ["workloads/paper-case-study.yaml", "workloads/models/paper-1t-hybrid.yaml"]
    for name in [*paper, "hardware_profiles/h200.yaml", "hardware_profiles/h20.yaml"]:
        text = read_text_bounded(REPO / name, name, "a YAML file")
        assert stored_document(text, name) is not None, name


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.relative_to(builtin_root()).as_posix())
def test_a_stored_parse_is_the_parsers(path: Path, written: dict[str, str]) -> None:
    """Data (types and key order included) and every line, as the parser reads the file, under the caller's
    name for it; a file the writer leaves out (too large, or data JSON cannot carry) is answered by the parser."""
    text = read_text_bounded(path, path.name, "a YAML file")  # as load_yaml reads it
    stored = stored_document(text, "any/name.yaml")
    if entry_name(text) not in written:
        assert stored is None
        return
    assert stored is not None, "an entry the writer makes is not read back"
    assert stored.file == "any/name.yaml"
    assert _outcome(lambda t, f: stored, text) == _outcome(parse_text, text)


def test_an_entry_answers_only_for_its_own_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry found under a text's name but holding another text (a CRC-32 collision, or a stale file) is passed
    over: the whole text decides, not the checksum."""
    own = "a: 1\n"
    other = "a: 2\n"
    entry = {"format": parsed_builtin.FORMAT, "source": "x", "text": own, "data": {"a": 1}, "lines": [[[], 1]]}
    (tmp_path / entry_name(other)).write_text(json.dumps(entry), encoding="utf-8")
    (tmp_path / entry_name(own)).write_text(json.dumps(entry), encoding="utf-8")
    monkeypatch.setattr(parsed_builtin, "PARSED_DIR", tmp_path)
    assert stored_document(other, "f.yaml") is None
    assert parse_yaml(other, "f.yaml").data == {"a": 2}
    found = stored_document(own, "f.yaml")
    assert found is not None and found.data == {"a": 1} and found.lines == {(): 1}


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[1, 2]",
        b'{"format": 99, "text": "a: 1\\n", "data": {"a": 1}, "lines": []}',
        b'{"format": 1, "text": "a: 1\\n", "data": {"a": 1}, "lines": 5}',
        b'{"format": 1, "text": "a: 1\\n", "data": {"a": 1}}',
        b"\xff\xfe",
        b"[" * 100_000,
    ],
    ids=["garbage", "a list", "another format", "bad lines", "no lines", "not utf-8", "deep"],
)
def test_a_damaged_entry_is_passed_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: bytes) -> None:
    """A damaged entry is never an error of the user's file: the parser reads the text instead."""
    text = "a: 1\n"
    (tmp_path / entry_name(text)).write_bytes(body)
    monkeypatch.setattr(parsed_builtin, "PARSED_DIR", tmp_path)
    assert stored_document(text, "f.yaml") is None
    doc = parse_yaml(text, "f.yaml")
    assert doc.data == {"a": 1} and doc.lines == {(): 1, ("a",): 1}


def test_an_edited_copy_of_a_shipped_file_reads_its_edit() -> None:
    """One character changed in the paper scenario's model card: the parser's reading, not the stored one."""
    text = (REPO / "workloads/models/paper-1t-hybrid.yaml").read_text(encoding="utf-8")
    edited = text + "# one more line\n"
    assert stored_document(edited, "m.yaml") is None
    assert _outcome(parse_yaml, edited) == _outcome(parse_text, edited)


@pytest.mark.parametrize("args", [["optimize", "--json"], ["optimize"]], ids=["json", "table"])
def test_the_built_in_scenario_loads_without_pyyaml(args: list[str]) -> None:
    """``optimize`` on the built-in scenario never imports PyYAML (about 20 ms of its start-up)."""
    code = (
        "import sys, io\n"
        f"sys.argv = ['prfaas-plan', *{args!r}]\n"
        "from prfaas_plan.cli.app import main\n"
        "out, sys.stdout = sys.stdout, io.StringIO()\n"
        "code = 0\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
        "sys.stdout = out\n"
        "print(code, sorted(m for m in sys.modules if m == 'yaml' or m.startswith('yaml.')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.stdout.strip() == "0 []", done.stdout + done.stderr


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_an_entry_that_is_not_a_regular_file_is_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """A FIFO nobody writes, or a directory, where an entry should be: passed over at once (never a hang)."""
    text = "a: 1\n"
    place = tmp_path / entry_name(text)
    if kind == "fifo":
        os.mkfifo(place)
    else:
        place.mkdir()
    monkeypatch.setattr(parsed_builtin, "PARSED_DIR", tmp_path)
    assert stored_document(text, "f.yaml") is None
    assert parse_yaml(text, "f.yaml").data == {"a": 1}


def test_the_writer_stores_only_what_json_carries_and_one_entry_per_text(tmp_path: Path) -> None:
    """Infinities and dates are left to the parser, as are files over the size bound; two shipped files with one
    text share one entry."""
    files = {
        "workloads/inf.yaml": "a: .inf\n",
        "workloads/date.yaml": "d: 2001-01-01\n",
        "workloads/same.yaml": "x: 1\n",
        "hardware_profiles/same.yaml": "x: 1\n",
        "hardware_profiles/big.yaml": "k: " + "v" * parsed_builtin.STORE_MAX_BYTES + "\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    entries = build_entries(tmp_path)
    assert list(entries) == [entry_name("x: 1\n")]
    assert json.loads(entries[entry_name("x: 1\n")])["source"] == "hardware_profiles/same.yaml"
