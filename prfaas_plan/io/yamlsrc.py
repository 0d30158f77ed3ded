"""Stage one and the tools of stage two of YAML parsing: load a file keeping the line of every field,
then check fields one by one, collecting every problem with its file, line and dotted path.

Parsing proper (PyYAML's safe loader, bounded, with duplicate keys refused) is ``io.yaml_parser``'s; a text
identical to a shipped file's is answered from its stored parse (``io.parsed_builtin``) without importing PyYAML.
"""

from __future__ import annotations

import contextvars
import difflib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from prfaas_plan.errors import InputError, Problem
from prfaas_plan.io.document import MAX_DEPTH as MAX_DEPTH
from prfaas_plan.io.document import MAX_FILE_BYTES as MAX_FILE_BYTES
from prfaas_plan.io.document import MAX_NUMBER_CHARS as MAX_NUMBER_CHARS
from prfaas_plan.io.document import Document as Document
from prfaas_plan.io.document import KeyPath as KeyPath
from prfaas_plan.io.document import dotted as dotted
from prfaas_plan.io.guard import YAML_LIMITS, read_text
from prfaas_plan.io.parsed_builtin import stored_document

#: While ``io.schema`` records what the loaders check (to generate JSON Schemas from the checks themselves), the
#: record it fills: document -> normalised key path (list indices as "[]") -> what is checked there. None
#: otherwise.
SCHEMA_RECORD: contextvars.ContextVar[dict[str, dict[tuple[str, ...], dict[str, Any]]] | None] = contextvars.ContextVar(
    "SCHEMA_RECORD", default=None
)


def _record(file: str, path: KeyPath, **facts: Any) -> None:
    """Note a check at ``path`` of document ``file`` for schema generation (a no-op unless ``SCHEMA_RECORD``
    is set)."""
    record = SCHEMA_RECORD.get()
    if record is None:
        return
    key = tuple("[]" if isinstance(p, int) else str(p) for p in path)
    entry = record.setdefault(file, {}).setdefault(key, {})
    for name, value in facts.items():
        if name in ("default", "default_text") and value is None:
            continue  # no default: the key is required, or its absence means "not given"
        if name == "required" and name in entry:
            entry[name] &= value  # keys required in every variant checked at this path (e.g. layer kinds)
        elif isinstance(value, set):
            entry.setdefault(name, set()).update(value)
        else:
            entry.setdefault(name, value)


def read_text_bounded(path: Path, display: str, what: str) -> str:
    """Read a regular UTF-8 text file of at most MAX_FILE_BYTES (and ``guard.YAML_LIMITS``' lines and line
    length); InputError naming ``display`` otherwise.

    FIFOs, devices, sockets and directories are refused without being opened for a blocking read
    (``io.guard``), so ``/dev/zero`` or a pipe nobody writes can neither exhaust memory nor hang the run.
    """
    return read_text(path, display, replace(YAML_LIMITS, what=what))


def parse_yaml(text: str, file: str) -> Document:
    """Parse YAML text (safe subset) into a :class:`Document`; raise InputError on any problem.

    A text identical to a shipped file's is answered from that file's stored parse (``io.parsed_builtin``), so
    the built-in scenario loads without importing PyYAML; any other text is parsed (``io.yaml_parser``).
    """
    if len(text) > MAX_FILE_BYTES:
        raise InputError(Problem(file=file, message=f"larger than {MAX_FILE_BYTES // (1 << 20)} MiB"))
    stored = stored_document(text, file)
    if stored is not None:
        return stored
    from prfaas_plan.io.yaml_parser import parse_text

    return parse_text(text, file)


def load_yaml(path: Path, display: str | None = None) -> Document:
    """Read and parse one YAML file. ``display`` is the name used in messages (default: the path)."""
    name = display if display is not None else str(path)
    return parse_yaml(read_text_bounded(path, name, "a YAML file"), name)


def suggest(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest choice, or an empty string."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _type_name(value: object) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"boolean {value}"
    if isinstance(value, str):
        return f"string '{value[:60]}{'...' if len(value) > 60 else ''}'"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {_shown(value)}"


def _shown(value: object) -> str:
    """A number as written in a message: huge integers in scientific notation, never thousands of digits."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        digits = len(str(abs(value))) if abs(value) < 10**4000 else None
        return f"an integer of {digits} digits" if digits is not None and digits > 300 else f"{float(value):g}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Checker:
    """Collects problems for one document. Call :meth:`raise_if_any` once all fields are checked."""

    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.problems: list[Problem] = []

    def report(self, path: KeyPath, message: str) -> None:
        """Record one problem at ``path``."""
        self.problems.append(
            Problem(file=self.doc.file, line=self.doc.line_of(path), field=dotted(path) or None, message=message)
        )

    def root(self, *, required: Iterable[str] = (), optional: Iterable[str] = ()) -> Section:
        """The top-level mapping as a section."""
        return Section(self, (), self.doc.data, required=required, optional=optional)

    def raise_if_any(self) -> None:
        """Raise one InputError carrying every recorded problem."""
        if self.problems:
            raise InputError(self.problems)


class Section:
    """A checked view of one mapping. Getters return ``None`` after recording a problem, so checking goes on.

    A section that is missing or of the wrong type is *dead*: its getters return ``None`` silently, since
    the one problem that matters was already recorded.
    """

    def __init__(
        self,
        checker: Checker,
        path: KeyPath,
        value: Any,
        *,
        required: Iterable[str] = (),
        optional: Iterable[str] = (),
        dead: bool = False,
    ) -> None:
        self.checker = checker
        self.path = path
        self.data: Mapping[str, Any] = {}
        self.dead = dead
        if dead:
            return
        if not isinstance(value, Mapping):
            checker.report(path, f"expected a mapping of fields, got {_type_name(value)}")
            self.dead = True
            return
        self.data = value
        required = tuple(required)
        allowed = set(required) | set(optional)
        _record(checker.doc.file, path, kind="object", required=set(required), optional=set(optional))
        for key in value:
            if str(key) not in allowed:
                checker.report((*path, str(key)), f"unknown key '{key}'{suggest(str(key), allowed)}")
        for key in required:
            if key not in value:
                checker.report(path, f"missing required key '{key}'")

    def has(self, key: str) -> bool:
        """Whether ``key`` is present (and the section is alive)."""
        return not self.dead and key in self.data

    def raw(self, key: str) -> Any:
        """The unchecked value of ``key`` (None if absent)."""
        return None if self.dead else self.data.get(key)

    def sub(self, key: str, *, required: Iterable[str] = (), optional: Iterable[str] = ()) -> Section:
        """A nested mapping; dead if absent (the missing key was reported by the parent if required)."""
        if not self.has(key):
            return Section(self.checker, (*self.path, key), None, dead=True)
        return Section(self.checker, (*self.path, key), self.data[key], required=required, optional=optional)

    def items(self, key: str) -> list[tuple[KeyPath, Any]]:
        """The items of a list field with their paths; reports a non-list or empty list."""
        if not self.has(key):
            return []
        value = self.data[key]
        path = (*self.path, key)
        _record(self.checker.doc.file, path, kind="array")
        if not isinstance(value, list):
            self.checker.report(path, f"expected a list, got {_type_name(value)}")
            return []
        if not value:
            self.checker.report(path, "must not be empty")
        return [((*path, i), item) for i, item in enumerate(value)]

    def strings(self, key: str) -> tuple[str, ...]:
        """A non-empty list of non-blank strings (``items``); reports each item that is not one."""
        items = self.items(key)
        _record(self.checker.doc.file, (*self.path, key, "[]"), kind="string")
        bad = [path for path, item in items if not isinstance(item, str) or not item.strip()]
        for path in bad:
            self.checker.report(path, "expected a non-blank string")
        return () if bad else tuple(str(item) for _, item in items)

    def string(self, key: str, *, choices: Iterable[str] | None = None, default: str | None = None) -> str | None:
        """A string field, optionally one of ``choices``."""
        _record(
            self.checker.doc.file,
            (*self.path, key),
            kind="string",
            enum=None if choices is None else tuple(choices),
            default=default,
        )
        if not self.has(key):
            return default
        value = self.data[key]
        path = (*self.path, key)
        if not isinstance(value, str) or not value.strip():
            self.checker.report(path, f"expected a non-empty string, got {_type_name(value)}")
            return None
        if choices is not None:
            options = list(choices)
            if value not in options:
                self.checker.report(
                    path, f"must be one of {', '.join(options)}; got '{value}'{suggest(value, options)}"
                )
                return None
        return value

    def boolean(self, key: str, *, default: bool) -> bool | None:
        """A true/false field."""
        _record(self.checker.doc.file, (*self.path, key), kind="boolean", default=default)
        if not self.has(key):
            return default
        value = self.data[key]
        if not isinstance(value, bool):
            self.checker.report((*self.path, key), f"expected true or false, got {_type_name(value)}")
            return None
        return value

    def number(
        self,
        key: str,
        *,
        gt: float | None = None,
        ge: float | None = None,
        le: float | None = None,
        integer: bool = False,
        default: float | None = None,
        default_text: str | None = None,
    ) -> float | None:
        """A finite number within bounds (``integer=True`` demands a whole number). ``default_text`` says in
        words where the default comes from when it is not one number (the schema shows it instead of
        ``default``)."""
        _record(
            self.checker.doc.file,
            (*self.path, key),
            kind="integer" if integer else "number",
            gt=gt,
            ge=ge,
            le=le,
            default=None if default_text is not None else default,
            default_text=default_text,
        )
        if not self.has(key):
            return default
        return check_number(self.checker, (*self.path, key), self.data[key], gt=gt, ge=ge, le=le, integer=integer)


#: Numbers YAML 1.1 reads but the parser leaves as strings (``io.yaml_parser._CORE_INT``): base 60, digits
#: grouped with '_', a leading 0 (1.1: octal), binary. Compiled on first use (``re``'s cache), not at start-up.
_SEXAGESIMAL = r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?"
_GROUPED = r"[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?"
_LEADING_ZERO = r"[-+]?0[0-9]+"
_BINARY = r"[-+]?0b[01_]+"


def _yaml11_hint(value: object) -> str:
    """Why a string that YAML 1.1 would read as a number is not one here, and how to write it; '' otherwise."""
    if not isinstance(value, str):
        return ""
    text = value.strip()
    if re.fullmatch(_SEXAGESIMAL, text):
        return (
            " (base-60 notation such as 1:30, which YAML 1.1 reads as 90, is not read as a number; "
            "write the number itself)"
        )
    if "_" in text and re.fullmatch(_GROUPED, text):
        return f" (digits grouped with '_' are not read as a number; write {text.replace('_', '')})"
    if re.fullmatch(_LEADING_ZERO, text):
        return " (a leading 0, octal in YAML 1.1, is not read as a number; write it without)"
    if re.fullmatch(_BINARY, text):
        return " (binary literals are not read as numbers; write it in decimal)"
    return ""


def check_number(
    checker: Checker,
    path: KeyPath,
    value: Any,
    *,
    gt: float | None = None,
    ge: float | None = None,
    le: float | None = None,
    integer: bool = False,
) -> float | None:
    """Check one value is a finite number within the bounds; report and return None otherwise."""
    _record(checker.doc.file, path, kind="integer" if integer else "number", gt=gt, ge=ge, le=le)
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int | float):
        checker.report(path, f"expected {kind}, got {_type_name(value)}{_yaml11_hint(value)}")
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond float64's range (about 1.8e308)
        checker.report(path, f"must be a finite number, got {_shown(value)}")
        return None
    if not math.isfinite(number):
        checker.report(path, f"must be a finite number, got {value}")
        return None
    if integer and not number.is_integer():
        checker.report(path, f"expected an integer, got {_shown(value)}")
        return None
    if gt is not None and not number > gt:
        checker.report(path, f"must be > {gt:g}, got {_shown(value)}")
        return None
    if ge is not None and not number >= ge:
        checker.report(path, f"must be >= {ge:g}, got {_shown(value)}")
        return None
    if le is not None and not number <= le:
        checker.report(path, f"must be <= {le:g}, got {_shown(value)}")
        return None
    return number
