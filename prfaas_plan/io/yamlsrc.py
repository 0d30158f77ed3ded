"""Stage one and the tools of stage two of YAML parsing: load a file keeping the line of every field,
then check fields one by one, collecting every problem with its file, line and dotted path.

``yaml.safe_load`` semantics (no tags, no objects), plus checks safe_load lacks: duplicate keys are
errors, every value's line is remembered so a later check can point at it, and the parser is bounded (file
size, nesting depth, no aliases, no overlong numbers) so a hostile file costs bounded time and memory.

Speed: where PyYAML was built with libyaml, the text is scanned and parsed into events in C (``CParser``) and
composed, checked and constructed by the same Python code as the pure loader; a file the fast loader refuses in
any way, or whose text holds what the two scanners might read differently (tabs, carriage returns, Unicode line
breaks, a byte-order mark, characters PyYAML calls non-printable), goes through the pure-Python loader, so every
error message (and its line) is the pure loader's.
"""

from __future__ import annotations

import contextvars
import difflib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InputError, Problem
from prfaas_plan.io.guard import YAML_LIMITS, read_text

KeyPath = tuple[str | int, ...]

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


#: The largest input file read, in bytes: the biggest shipped YAML is under 5 KB, so 1 MiB is room for any
#: real profile or card while keeping a hostile file (or /dev/zero) from taking the memory of the machine.
MAX_FILE_BYTES = YAML_LIMITS.max_bytes
#: The deepest nesting of mappings and lists: the schemas nest at most 6 levels; YAML's composer and JSON's
#: decoder recurse per level, so an unbounded depth ends in RecursionError.
MAX_DEPTH = 32
#: The most digits a numeric literal may have: a float64 carries 17 significant digits, and Python refuses to
#: convert integers over 4,300 digits; nothing the schemas hold needs more than 40.
MAX_NUMBER_CHARS = 40

_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"


def read_text_bounded(path: Path, display: str, what: str) -> str:
    """Read a regular UTF-8 text file of at most MAX_FILE_BYTES (and ``guard.YAML_LIMITS``' lines and line
    length); InputError naming ``display`` otherwise.

    FIFOs, devices, sockets and directories are refused without being opened for a blocking read
    (``io.guard``), so ``/dev/zero`` or a pipe nobody writes can neither exhaust memory nor hang the run.
    """
    return read_text(path, display, replace(YAML_LIMITS, what=what))


class _Bounds(yaml.composer.Composer, yaml.constructor.BaseConstructor):
    """The composer and constructor checks of both loaders: refuse aliases (no shipped file uses them, and
    expanding them is the "billion laughs" bomb), nesting deeper than MAX_DEPTH, and numeric literals longer
    than MAX_NUMBER_CHARS; and turn a value the constructor cannot build (``2001-02-30``) into a marked error
    instead of a ValueError."""

    _depth = 0

    if TYPE_CHECKING:  # the parser's side, from ``yaml.parser.Parser`` or ``yaml.cyaml.CParser``

        def check_event(self, *choices: Any) -> bool: ...

        def peek_event(self) -> Any: ...

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) are not supported; write the value out", event.start_mark
            )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"nested deeper than {MAX_DEPTH} levels",
                    self.peek_event().start_mark,
                )
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if (
            isinstance(node, yaml.ScalarNode)
            and node.tag in (_INT_TAG, _FLOAT_TAG)
            and len(node.value) > MAX_NUMBER_CHARS
        ):
            raise yaml.composer.ComposerError(
                None, None, f"a number of {len(node.value)} characters (at most {MAX_NUMBER_CHARS})", node.start_mark
            )
        return node

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError, TypeError) as exc:
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read value {str(node.value)[:40]!r}: {exc}", node.start_mark
            ) from None


class _BoundedLoader(_Bounds, yaml.SafeLoader):
    """The pure-Python loader: PyYAML's ``SafeLoader`` with the checks of ``_Bounds``."""


#: What the C and the pure-Python scanners might read differently: a text holding one of these is read by the
#: pure loader alone. Tabs, carriage returns, NEL, the Unicode line and paragraph separators and the BOM (line
#: counting and indentation); and three forms libyaml accepts where PyYAML refuses or reads otherwise, found by
#: differential fuzzing (tests/io/test_yaml_fast.py): a bare ``!`` tag (libyaml: '', PyYAML: null), ``?`` in a
#: plain scalar of a flow mapping, and ``#`` right after a block scalar's header (``|-#``).
_PURE_ONLY = re.compile("[\t\r\x85\u2028\u2029\ufeff!?]|[|>][-+1-9]*#")

if getattr(yaml, "__with_libyaml__", False):
    from yaml._yaml import CParser

    class _FastLoader(_Bounds, CParser, yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
        """libyaml's scanner and parser (``CParser``, events in C) under the Python composer, resolver and
        constructor that the pure loader uses, with the checks of ``_Bounds``: the same nodes, lines and data."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)
            yaml.composer.Composer.__init__(self)

        # CParser's own get_single_node (composing in C, without the checks) is passed over for Composer's.
        get_single_node = yaml.composer.Composer.get_single_node

    _FAST: type[_Bounds] | None = _FastLoader
else:  # pragma: no cover - PyYAML built without libyaml
    _FAST = None


def _fast_can_read(text: str) -> bool:
    """Whether the C scanner reads ``text`` as the pure one does (see ``_PURE_ONLY``). The text must end with a
    newline: at an end without one, libyaml marks a last empty node a line further on (``---``)."""
    return (
        _FAST is not None
        and text.endswith("\n")
        and _PURE_ONLY.search(text) is None
        and yaml.reader.Reader.NON_PRINTABLE.search(text) is None
    )


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
    if len(text) > MAX_FILE_BYTES:
        raise InputError(Problem(file=file, message=f"larger than {MAX_FILE_BYTES // (1 << 20)} MiB"))
    if _FAST is not None and _fast_can_read(text):
        fast = _fast_document(_FAST, text, file)
        if fast is not None:
            return fast
    return _pure_document(text, file)


def _fast_document(loader_class: type[_Bounds], text: str, file: str) -> Document | None:
    """The document read by the C-scanning loader, or None where it refuses the text in any way (the pure
    loader then reads it again, for its own message). Problems found in the nodes (duplicate keys, an empty
    file) are the pure loader's too: the nodes are the same."""
    loader: Any = loader_class(text)  # type: ignore[call-arg]
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        lines: dict[KeyPath, int] = {(): node.start_mark.line + 1}
        problems: list[Problem] = []
        _walk(node, (), lines, problems, file)
        if problems:
            return None
        data = loader.construct_document(node)
    except (yaml.YAMLError, RecursionError, ValueError, OverflowError, TypeError):
        return None
    finally:
        loader.dispose()
    return Document(file=file, data=data, lines=lines)


def _pure_document(text: str, file: str) -> Document:
    """The document read by the pure-Python loader; InputError naming the file and line on any problem."""
    try:
        loader = _BoundedLoader(text)
    except yaml.reader.ReaderError as exc:
        at = text.count("\n", 0, exc.position) + 1
        raise InputError(
            Problem(file=file, line=at, message=f"malformed YAML: non-printable character U+{exc.character:04X}")
        ) from None
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
        checker.report(path, f"expected {kind}, got {_type_name(value)}")
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
