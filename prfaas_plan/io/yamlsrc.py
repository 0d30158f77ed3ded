"""Stage one and the tools of stage two of YAML parsing: load a file keeping the line of every field,
then check fields one by one, collecting every problem with its file, line and dotted path.

``yaml.safe_load`` semantics (no tags, no objects), plus two checks safe_load lacks: duplicate keys are
errors, and every value's line is remembered so a later check can point at it.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from prfaas_plan.errors import InputError, Problem

KeyPath = tuple[str | int, ...]


def dotted(path: KeyPath) -> str:
    """Render a key path as ``a.b[2].c``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
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


def _walk(node: yaml.Node, path: KeyPath, lines: dict[KeyPath, int], problems: list[Problem], file: str) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            line = key_node.start_mark.line + 1
            if key in seen:
                problems.append(
                    Problem(
                        file=file,
                        line=line,
                        field=dotted((*path, key)),
                        message=f"duplicate key (first given on line {seen[key]})",
                    )
                )
                continue
            seen[key] = line
            lines[(*path, key)] = line
            _walk(value_node, (*path, key), lines, problems, file)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines[(*path, index)] = item.start_mark.line + 1
            _walk(item, (*path, index), lines, problems, file)


def parse_yaml(text: str, file: str) -> Document:
    """Parse YAML text (safe subset) into a :class:`Document`; raise InputError on any problem."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise InputError(Problem(file=file, line=1, message="the file is empty"))
        lines: dict[KeyPath, int] = {(): node.start_mark.line + 1}
        problems: list[Problem] = []
        _walk(node, (), lines, problems, file)
        if problems:
            raise InputError(problems)
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        reason = exc.problem or exc.context or "malformed YAML"
        raise InputError(Problem(file=file, line=line, message=f"malformed YAML: {reason}")) from None
    except yaml.YAMLError as exc:
        raise InputError(Problem(file=file, message=f"malformed YAML: {exc}")) from None
    finally:
        loader.dispose()
    return Document(file=file, data=data, lines=lines)


def load_yaml(path: Path, display: str | None = None) -> Document:
    """Read and parse one YAML file. ``display`` is the name used in messages (default: the path)."""
    name = display if display is not None else str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(Problem(file=name, message="file not found")) from None
    except IsADirectoryError:
        raise InputError(Problem(file=name, message="is a directory, expected a YAML file")) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(Problem(file=name, message=f"cannot read: {exc}")) from None
    return parse_yaml(text, name)


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
        return f"string '{value}'"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"


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
        if not isinstance(value, list):
            self.checker.report(path, f"expected a list, got {_type_name(value)}")
            return []
        if not value:
            self.checker.report(path, "must not be empty")
        return [((*path, i), item) for i, item in enumerate(value)]

    def string(self, key: str, *, choices: Iterable[str] | None = None, default: str | None = None) -> str | None:
        """A string field, optionally one of ``choices``."""
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
    ) -> float | None:
        """A finite number within bounds (``integer=True`` demands a whole number)."""
        if not self.has(key):
            return default
        return check_number(self.checker, (*self.path, key), self.data[key], gt=gt, ge=ge, le=le, integer=integer)


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
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int | float):
        checker.report(path, f"expected {kind}, got {_type_name(value)}")
        return None
    number = float(value)
    if not math.isfinite(number):
        checker.report(path, f"must be a finite number, got {value}")
        return None
    if integer and not number.is_integer():
        checker.report(path, f"expected an integer, got {value}")
        return None
    if gt is not None and not number > gt:
        checker.report(path, f"must be > {gt:g}, got {value}")
        return None
    if ge is not None and not number >= ge:
        checker.report(path, f"must be >= {ge:g}, got {value}")
        return None
    if le is not None and not number <= le:
        checker.report(path, f"must be <= {le:g}, got {value}")
        return None
    return number
