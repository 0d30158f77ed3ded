"""YAML text to a :class:`Document`: PyYAML's safe loader, bounded, keeping the line of every key and item.

``yaml.safe_load`` semantics (no tags, no objects), plus checks safe_load lacks: duplicate keys are errors, every
value's line is remembered so a later check can point at it, and the parser is bounded (nesting depth, no
aliases, no overlong numbers) so a hostile file costs bounded time and memory.

Speed: where PyYAML was built with libyaml, the text is scanned and parsed into events in C (``CParser``) and
composed, checked and constructed by the same Python code as the pure loader; a file the fast loader refuses in
any way, or whose text holds what the two scanners might read differently (tabs, carriage returns, Unicode line
breaks, a byte-order mark, characters PyYAML calls non-printable), goes through the pure-Python loader, so every
error message (and its line) is the pure loader's.

Importing PyYAML takes about 20 ms (its regular expressions), so this module is imported only when a text is
not one of the shipped files' stored parses (``io.yamlsrc.parse_yaml``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import yaml

from prfaas_plan.errors import InputError, Problem
from prfaas_plan.io.document import MAX_DEPTH, MAX_NUMBER_CHARS, Document, KeyPath, dotted

_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"

#: Plain scalars read as numbers: YAML 1.2's core schema, not PyYAML's YAML 1.1 one. So ``5e-1`` and ``1e-3`` are
#: floats (1.1 wants ``5.0e-1``); and ``1:30`` (1.1: base 60, 90), ``1_000`` (1.1: 1000), ``017`` (1.1: octal, 15)
#: and ``0b101`` stay strings, which a field expecting a number refuses (``io.yamlsrc.check_number``, naming the
#: notation) instead of reading a number the writer may not have meant. Hexadecimal ``0x10`` stays 16 (1.2 too).
_CORE_INT = re.compile(r"^(?:[-+]?(?:0|[1-9][0-9]*)|0x[0-9a-fA-F]+)$")
_CORE_FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*)(?:[eE][-+]?[0-9]+)?|[-+]?[0-9]+[eE][-+]?[0-9]+"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_CORE_RESOLVERS: dict[Any, list[tuple[str, re.Pattern[str]]]] = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_INT_TAG, _FLOAT_TAG)]
    for first, resolvers in yaml.resolver.Resolver.yaml_implicit_resolvers.items()
}
for _first in "-+0123456789":
    _CORE_RESOLVERS.setdefault(_first, []).append((_INT_TAG, _CORE_INT))
for _first in "-+0123456789.":
    _CORE_RESOLVERS.setdefault(_first, []).append((_FLOAT_TAG, _CORE_FLOAT))


class _Bounds(yaml.composer.Composer, yaml.constructor.BaseConstructor):
    """The composer and constructor checks of both loaders: refuse aliases (no shipped file uses them, and
    expanding them is the "billion laughs" bomb), nesting deeper than MAX_DEPTH, and numeric literals longer
    than MAX_NUMBER_CHARS; turn a value the constructor cannot build (``2001-02-30``) into a marked error
    instead of a ValueError; and resolve numbers as YAML 1.2 does (``_CORE_RESOLVERS``)."""

    _depth = 0
    #: The resolver's table (``yaml.resolver.BaseResolver``), numbers as YAML 1.2 reads them (``_CORE_INT``).
    yaml_implicit_resolvers = _CORE_RESOLVERS

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


def parse_text(text: str, file: str) -> Document:
    """Parse YAML text (safe subset) into a :class:`Document`; raise InputError on any problem. The caller
    bounds the text's size (``io.yamlsrc.parse_yaml``)."""
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
