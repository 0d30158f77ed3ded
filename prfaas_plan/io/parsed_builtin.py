"""The shipped YAML files' parses, stored as JSON in ``prfaas_plan/io/parsed/``, so that loading the built-in
scenario need not import PyYAML (about 20 ms of ``prfaas-plan optimize``'s start-up on a 2-core Xeon VM).

An entry holds the text it was parsed from, the parser's data and the line of every key and item. It answers only
for a text identical, character for character, to its own: the entry's file name comes from the text's CRC-32
and length, and the comparison of the whole texts, not the checksum, decides. Any other text, and a missing or
damaged entry, goes to the parser (``io.yaml_parser``), so a user's copy of a shipped file, edited or not, reads
exactly as the parser reads it.

Entries are written by ``python3 -m tests.io.parsed_entries --write`` (in a source checkout) from the parser's
own Documents, and only where JSON carries the data exactly: string keys, and strings, integers, finite floats,
booleans, nulls and lists as values. ``tests/io/test_parsed_builtin.py`` checks that the stored entries are those
the parser writes today for every shipped file, so an edited profile without its new entry fails the tests.
"""

from __future__ import annotations

import zlib
from pathlib import Path

from prfaas_plan.errors import InputError
from prfaas_plan.io.document import Document
from prfaas_plan.io.guard import Limits, read_bytes

PARSED_DIR = Path(__file__).with_name("parsed")
#: Version of the entries' layout; an entry of another version is passed over.
FORMAT = 1
#: Shipped files larger than this are left to the parser (the 160 KB measurement corpus, read by calibration and
#: the benchmarks only, would be the one entry of any size).
STORE_MAX_BYTES = 64 * 1024
#: The largest entry read. The stored entries measure 1.7-3.8 times their text (the text, the data and every
#: line), so an entry of a text within STORE_MAX_BYTES stays well under this; a larger one is not the writer's.
_ENTRY_MAX_BYTES = 8 * STORE_MAX_BYTES
#: How an entry is read (``io.guard.read_bytes``: a regular file, opened without blocking, at most this many bytes).
_ENTRY_LIMITS = Limits(
    what="a stored parse", max_bytes=_ENTRY_MAX_BYTES, max_lines=_ENTRY_MAX_BYTES, max_line_bytes=_ENTRY_MAX_BYTES
)
#: Where the shipped YAML files live, under the root ``io.paths.builtin_root`` names.
SHIPPED_DIRS = ("hardware_profiles", "workloads")


def entry_name(text: str) -> str:
    """The entry file that would hold ``text``'s parse: CRC-32 and length in characters."""
    return f"{zlib.crc32(text.encode('utf-8', 'surrogatepass')):08x}-{len(text)}.json"


def stored_document(text: str, file: str) -> Document | None:
    """The stored parse of ``text``, named ``file``, or None where no entry holds exactly this text."""
    if len(text) > STORE_MAX_BYTES:  # as many characters means more bytes: the writer stored no such text
        return None
    entry_path = PARSED_DIR / entry_name(text)
    try:  # read as inputs are read: an entry swapped for a FIFO cannot hang a run
        raw = read_bytes(entry_path, str(entry_path), _ENTRY_LIMITS)
    except InputError:  # missing, not a regular file, unreadable or too large: the text goes to the parser
        return None
    import json  # only where an entry exists (json is not otherwise loaded by a table-printing command)

    try:
        entry = json.loads(raw)
        if entry["format"] != FORMAT or entry["text"] != text:
            return None
        lines = {tuple(key): int(line) for key, line in entry["lines"]}
        return Document(file=file, data=entry["data"], lines=lines)
    except (ValueError, TypeError, KeyError, RecursionError):
        return None


def shipped_files(root: Path) -> list[Path]:
    """Every shipped YAML file under ``root``'s built-in directories, in a fixed order."""
    return sorted(path for name in SHIPPED_DIRS for path in (root / name).rglob("*.yaml") if path.is_file())
