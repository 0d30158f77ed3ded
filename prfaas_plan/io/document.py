"""A parsed YAML document (its plain data and the line of every key and item), the key paths that name its
fields, and the bounds every YAML reader keeps. No YAML parser is imported here: a document can come from the
parser (``io.yaml_parser``) or, for a shipped file, from its stored parse (``io.parsed_builtin``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from prfaas_plan._frozen import frozen
from prfaas_plan.io.guard import YAML_LIMITS

KeyPath = tuple[str | int, ...]

#: The largest input file read, in bytes: the biggest shipped YAML is under 5 KB, so 1 MiB is room for any
#: real profile or card while keeping a hostile file (or /dev/zero) from taking the memory of the machine.
MAX_FILE_BYTES = YAML_LIMITS.max_bytes
#: The deepest nesting of mappings and lists: the schemas nest at most 6 levels; YAML's composer and JSON's
#: decoder recurse per level, so an unbounded depth ends in RecursionError.
MAX_DEPTH = 32
#: The most digits a numeric literal may have: a float64 carries 17 significant digits, and Python refuses to
#: convert integers over 4,300 digits; nothing the schemas hold needs more than 40.
MAX_NUMBER_CHARS = 40


def dotted(path: KeyPath) -> str:
    """Render a key path as ``a.b[2].c``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


@frozen
class Document:
    """A parsed YAML file: its plain data and the 1-based line of every key and item."""

    file: str
    data: Any
    lines: Mapping[KeyPath, int] = field(repr=False)

    def line_of(self, path: KeyPath) -> int | None:
        """Line of ``path``, or of its nearest ancestor that exists in the file."""
        for cut in range(len(path), -1, -1):
            line = self.lines.get(path[:cut])
            if line is not None:
                return line
        return None
