"""Writes and checks the stored parses of the shipped YAML files (``prfaas_plan/io/parsed/``, read by
``prfaas_plan.io.parsed_builtin``): ``python3 -m tests.io.parsed_entries --write`` after editing a shipped file,
``--check`` to list stale entries. A development tool beside the tests, not part of the installed tool (``io``
reads inputs only)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from prfaas_plan.io.parsed_builtin import FORMAT, PARSED_DIR, STORE_MAX_BYTES, entry_name, shipped_files
from prfaas_plan.io.paths import builtin_root
from prfaas_plan.io.yaml_parser import parse_text
from prfaas_plan.io.yamlsrc import read_text_bounded


def _json_exact(value: Any) -> bool:
    """Whether JSON carries ``value`` back as it is (types included): plain data with string keys."""
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)  # JSON has no infinities or NaN (the entries are written with allow_nan=False)
    if isinstance(value, list):
        return all(_json_exact(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(key, str) and _json_exact(item) for key, item in value.items())
    return False


def build_entries(root: Path) -> dict[str, str]:
    """Entry file name -> JSON text, for every shipped file under ``root`` that is stored: at most
    STORE_MAX_BYTES, and data that JSON carries back exactly (others are left to the parser). Raises ValueError
    where two different texts would share an entry name."""
    entries: dict[str, str] = {}
    texts: dict[str, str] = {}
    for path in shipped_files(root):
        source = path.relative_to(root).as_posix()
        text = read_text_bounded(path, source, "a YAML file")  # as load_yaml reads it: no newline translation
        if len(text.encode("utf-8")) > STORE_MAX_BYTES:
            continue
        doc = parse_text(text, source)
        if not _json_exact(doc.data):
            continue
        name = entry_name(text)
        if name in texts:
            if texts[name] == text:
                continue  # two shipped files with the same text share one entry (the first one's source)
            raise ValueError(f"{source}: another shipped file's text has the same entry name {name}")
        texts[name] = text
        payload = {
            "format": FORMAT,
            "source": source,
            "text": text,
            "data": doc.data,
            "lines": [[list(key), line] for key, line in doc.lines.items()],
        }
        entries[name] = json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n"
    return entries


def main(argv: list[str]) -> int:
    """``--write``: replace the stored entries with those of the checkout's shipped files; ``--check``: exit 1
    where they differ."""
    if argv not in (["--write"], ["--check"]):
        print("usage: python3 -m tests.io.parsed_entries --write | --check", file=sys.stderr)
        return 2
    wanted = build_entries(builtin_root())
    present = {path.name: path.read_text(encoding="utf-8") for path in sorted(PARSED_DIR.glob("*.json"))}
    if argv == ["--check"]:
        stale = sorted(set(wanted.items()) ^ set(present.items()))
        for name, _ in stale:
            print(f"stale or missing: {PARSED_DIR.name}/{name}", file=sys.stderr)
        return 1 if stale else 0
    PARSED_DIR.mkdir(exist_ok=True)
    for name in set(present) - set(wanted):
        (PARSED_DIR / name).unlink()
    for name, body in wanted.items():
        if present.get(name) != body:
            (PARSED_DIR / name).write_text(body, encoding="utf-8")
    print(f"{len(wanted)} entries in {PARSED_DIR}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
