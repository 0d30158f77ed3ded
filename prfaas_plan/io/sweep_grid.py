"""A sweep's grid and its points' scenario documents: the axes the caller parsed (or a YAML sweep file), and
each point's scenario as the base scenario's YAML mapping with fields replaced by dotted path
(``io.overrides``, as a command's flags edit a scenario), validated by the scenario loader (the same loader,
checks and limits as any scenario file).

Problems name the caller's fields: an axis carries its own origin, and the functions that report on the grid
as a whole take the name the caller gives them (the library does not know the command line's vocabulary).
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InputError, Problem

# The document edits are io.overrides' (shared with the commands' flags); named here too for the sweep's callers.
from prfaas_plan.io.overrides import BaseScenario as BaseScenario
from prfaas_plan.io.overrides import apply_edits as apply_edits
from prfaas_plan.io.overrides import load_base as load_base
from prfaas_plan.io.overrides import load_document as load_document
from prfaas_plan.io.overrides import point_problems as point_problems
from prfaas_plan.io.paths import display_path
from prfaas_plan.io.yamlsrc import Checker, KeyPath, dotted, load_yaml
from prfaas_plan.spec.scenario import Scenario

#: Limits that keep a hostile grid bounded: each point is a scenario load and a search (about 0.1 s), so
#: 100,000 points is hours of a large machine; more is a typo (a product of long lists).
MAX_POINTS = 100_000
MAX_VALUES_PER_AXIS = 64
MAX_AXES = 16
#: Longest key path (parts); no scenario field needs more.
MAX_PATH_PARTS = 16
#: Problems shown before the rest are summarised in one line.
MAX_PROBLEMS_SHOWN = 40

_KEY = r"[^.\[\]]+"
_PATH = re.compile(rf"{_KEY}(?:\.{_KEY}|\[\d+\])*")
_PART = re.compile(rf"({_KEY})|\[(\d+)\]")


# --------------------------------------------------------------------------------------------------- grid


@frozen
class Axis:
    """One swept field: its key path in the scenario document, its values, and where it was given (for
    messages: ``origin``, the caller's name for the field, or the sweep file's line)."""

    path: KeyPath
    values: tuple[Any, ...]
    origin: str
    file: str | None = None
    lines: tuple[int | None, ...] = ()

    @property
    def name(self) -> str:
        """The dotted path, as rows and messages name the field."""
        return dotted(self.path)

    def where(self, index: int) -> Problem:
        """A problem skeleton locating value ``index`` (``origin=value``, or its line in the sweep file)."""
        value = self.values[index]
        if self.file is None:
            text = value_text(value)
            shown = text if len(text) <= 60 else text[:57] + "..."
            return Problem(field=f"{self.origin}={shown}", message="")
        line = self.lines[index] if index < len(self.lines) else None
        return Problem(file=self.file, line=line, field=f"set.{self.name}[{index}]", message="")


@frozen
class Grid:
    """The Cartesian product of the axes; a point is one value per axis."""

    axes: tuple[Axis, ...]

    @property
    def size(self) -> int:
        """Number of points."""
        return math.prod(len(axis.values) for axis in self.axes)

    def points(self) -> Iterator[dict[str, Any]]:
        """Each point as ``{dotted path: value}``, in axis order (the last axis varies fastest)."""
        names = [axis.name for axis in self.axes]
        for combo in itertools.product(*(axis.values for axis in self.axes)):
            yield dict(zip(names, combo, strict=True))


def value_text(value: Any) -> str:
    """A value as text on one line: scalars as written (true/false, null), mappings and lists as compact
    JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float) or value is None:
        return "null" if value is None else str(value)
    return json.dumps(value, separators=(",", ":"))


def parse_path(text: str) -> KeyPath | None:
    """``a.b[2].c`` (or ``a.b.2.c``) as a key path; None if malformed. A numeric part stays a string here:
    whether it indexes a list is decided against the document."""
    text = text.strip()
    if not _PATH.fullmatch(text):
        return None
    parts: list[str | int] = []
    for key, index in _PART.findall(text):
        parts.append(int(index) if index else key.strip())
    if any(part == "" for part in parts) or len(parts) > MAX_PATH_PARTS:
        return None
    return tuple(parts)


def repeated(values: Sequence[Any]) -> list[int]:
    """The indices of values equal to an earlier one (compared as canonical JSON, so ``1`` and ``True``
    differ)."""
    seen: set[str] = set()
    out = []
    for index, value in enumerate(values):
        key = canonical(value)
        if key in seen:
            out.append(index)
        seen.add(key)
    return out


def load_grid_file(path: Path) -> list[Axis]:
    """A YAML sweep file: ``set: {dotted.path: [value, ...] | value}`` (values may be any YAML, e.g. a whole
    length distribution). Every problem is reported with its file, line and field."""
    doc = load_yaml(path, display_path(path))
    checker = Checker(doc)
    root = checker.root(required=("set",), optional=("description",))
    root.string("description", default="")
    axes = []
    grid = root.raw("set")
    if root.has("set") and (not isinstance(grid, dict) or not grid):
        checker.report(("set",), "expected a mapping of dotted field path -> list of values")
    elif isinstance(grid, dict):
        if len(grid) > MAX_AXES:
            checker.report(("set",), f"{len(grid)} fields, at most {MAX_AXES}")
        for key, raw in grid.items():
            where: KeyPath = ("set", str(key))
            key_path = parse_path(str(key))
            if key_path is None:
                checker.report(where, "not a dotted field path such as deployment.link.bandwidth_gbit_per_s")
                continue
            items = raw if isinstance(raw, list) else [raw]
            lines = [
                doc.line_of((*where, i)) if isinstance(raw, list) else doc.line_of(where) for i in range(len(items))
            ]
            if not items:
                checker.report(where, "must not be empty")
                continue
            if len(items) > MAX_VALUES_PER_AXIS:
                checker.report(where, f"{len(items)} values, at most {MAX_VALUES_PER_AXIS} per field")
                continue
            bad = False
            for i, item in enumerate(items):
                why = _non_finite(item)
                if why is not None:
                    checker.report((*where, i) if isinstance(raw, list) else where, why)
                    bad = True
            for i in repeated(items):
                checker.report((*where, i) if isinstance(raw, list) else where, f"{value_text(items[i])} given twice")
                bad = True
            if not bad:
                axes.append(
                    Axis(
                        path=key_path,
                        values=tuple(items),
                        origin=f"{doc.file} set.{dotted(key_path)}",
                        file=doc.file,
                        lines=tuple(lines),
                    )
                )
    checker.raise_if_any()
    return axes


def _non_finite(value: Any) -> str | None:
    """Why a value holds a NaN or an infinity (anywhere inside it), or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {value}"
    if isinstance(value, dict):
        return next((w for w in map(_non_finite, value.values()) if w is not None), None)
    if isinstance(value, list):
        return next((w for w in map(_non_finite, value) if w is not None), None)
    return None


def make_grid(axes: Sequence[Axis], *, field: str) -> Grid:
    """Check the axes together: at least one, at most MAX_AXES, no field given twice or inside another,
    at most MAX_POINTS points. Problems of the grid as a whole name ``field`` (the caller's name for it)."""
    if not axes:
        raise InputError(Problem(field=field, message="nothing to sweep"))
    problems = []
    if len(axes) > MAX_AXES:
        problems.append(Problem(field=field, message=f"{len(axes)} fields swept, at most {MAX_AXES}"))
    for i, axis in enumerate(axes):
        for other in axes[:i]:
            a, b = _loose(axis.path), _loose(other.path)
            if a[: len(b)] == b or b[: len(a)] == a:
                problems.append(
                    Problem(field=axis.origin, message=f"overlaps {other.origin}: sweep each field in one place")
                )
    grid = Grid(axes=tuple(axes))
    if not problems and grid.size > MAX_POINTS:
        sizes = " x ".join(str(len(a.values)) for a in axes)
        problems.append(Problem(field=field, message=f"{sizes} = {grid.size:,} points, at most {MAX_POINTS:,}"))
    if problems:
        raise InputError(problems)
    return grid


def _flat(field: str) -> str:
    """A dotted field with list indices written as parts: ``a[1].b`` -> ``a.1.b``."""
    return re.sub(r"\[(\d+)\]", r".\1", field)


def _loose(path: KeyPath) -> tuple[str, ...]:
    """A key path with list indices as strings: ``a[1]`` and ``a.1`` are the same field."""
    return tuple(str(part) for part in path)


# --------------------------------------------------------------------------------------- point documents


def load_point(base: BaseScenario, grid_axes: Sequence[Axis], params: Mapping[str, Any]) -> Scenario:
    """The scenario of one point (``params``: dotted path -> value, as ``Grid.points`` yields). InputError's
    problems name the swept fields (``point_problems``)."""
    edits = {axis.path: params[axis.name] for axis in grid_axes}
    try:
        data = apply_edits(base.document.data, edits)
        return load_document(base, data)
    except ValueError as exc:
        raise InputError(Problem(message=str(exc))) from None


def check_axes(base: BaseScenario, axes: Sequence[Axis], *, field: str) -> None:
    """Load the base scenario with each value of each axis alone (the other fields as in the base), and raise
    one InputError naming the axis's origin or sweep-file line of every value the loader rejects; beyond
    MAX_PROBLEMS_SHOWN, one more problem on ``field`` counts the rest. Combinations of values are checked
    when their point runs (a rejected one becomes a row with status ``invalid``)."""
    problems: list[Problem] = []
    for axis in axes:
        for index, value in enumerate(axis.values):
            try:
                load_point(base, [axis], {axis.name: value})
            except InputError as exc:
                where = axis.where(index)
                for p in point_problems(base, exc.problems):
                    if p.file is not None:  # in a file the value names (a hardware profile, a model card)
                        message = str(p)
                    elif p.field is None or _flat(p.field) == _flat(axis.name):
                        message = p.message
                    else:
                        message = f"{p.field}: {p.message}"
                    problems.append(Problem(file=where.file, line=where.line, field=where.field, message=message))
    if len(problems) > MAX_PROBLEMS_SHOWN:
        rest = len(problems) - MAX_PROBLEMS_SHOWN
        problems = [*problems[:MAX_PROBLEMS_SHOWN], Problem(field=field, message=f"and {rest} more problems")]
    if problems:
        raise InputError(problems)


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
