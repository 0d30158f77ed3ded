"""Edits of a scenario document, validated by the scenario loader: the one way a caller changes a scenario's
fields (a sweep's points, a command's flags such as ``--n-prfaas``), so that every value meets the same checks
and limits (``io.limits``) as the YAML it replaces.

An edit sets one field by key path in the parsed YAML mapping (missing mappings are created; the loader then
rejects an unknown key with a suggestion). A problem on an edited field names the edit's origin (the flag, the
swept field) instead of the file and line whose value the edit replaced.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InputError, Problem
from prfaas_plan.io.paths import display_path
from prfaas_plan.io.yamlsrc import Document, KeyPath, dotted, load_yaml
from prfaas_plan.spec.scenario import Scenario

_INT = re.compile(r"[+-]?\d+")


@frozen
class BaseScenario:
    """The scenario an edit changes: its file (references resolve next to it) and its parsed document."""

    path: Path
    document: Document

    @property
    def display(self) -> str:
        """The scenario file as messages name it."""
        return self.document.file


@frozen
class Override:
    """One edit: the field's key path in the scenario document, its new value, and who asked for it
    (``origin``: the caller's name for it, e.g. ``--n-prfaas``), which problems with the value name."""

    path: KeyPath
    value: Any
    origin: str


def read_base(path: Path) -> BaseScenario:
    """Parse a scenario file without validating it (the loader validates each edited document)."""
    return BaseScenario(path=path, document=load_yaml(path, display_path(path)))


def load_base(path: Path) -> tuple[BaseScenario, Scenario]:
    """Read the base scenario and check it loads as it is (errors with their lines, before any edit)."""
    from prfaas_plan.io.scenario import load_scenario

    scenario = load_scenario(path)
    return read_base(path), scenario


def apply_edits(data: Any, edits: Mapping[KeyPath, Any]) -> Any:
    """A deep copy of ``data`` with each path set to its value. Missing mapping keys are created (the loader
    then rejects an unknown one, with a suggestion); a list is indexed by a whole number within its length.
    Raises ValueError naming the part of the path that cannot be followed."""
    out = copy.deepcopy(data)
    for path, value in edits.items():
        node = out
        for depth, part in enumerate(path):
            last = depth == len(path) - 1
            where = dotted(path[:depth]) or "the document"
            if isinstance(node, dict):
                key = str(part)
                if last:
                    node[key] = copy.deepcopy(value)
                else:
                    if node.get(key) is None:  # absent or empty (``cost:``): the edit creates the mapping
                        node[key] = {}
                    node = node[key]
            elif isinstance(node, list):
                index = part if isinstance(part, int) else int(part) if _INT.fullmatch(str(part)) else None
                if index is None or not 0 <= index < len(node):
                    raise ValueError(f"{where} is a list of {len(node)} items; '{part}' is not one of its indices")
                if last:
                    node[index] = copy.deepcopy(value)
                else:
                    node = node[index]
            else:
                raise ValueError(f"{where} is a single value, not a mapping with a field '{part}'")
    return out


def load_document(base: BaseScenario, data: Any) -> Scenario:
    """Validate an edited scenario document with the scenario loader (``io.scenario.scenario_from_document``),
    references resolved next to the base file."""
    from prfaas_plan.io.scenario import scenario_from_document

    doc = Document(file=base.display, data=data, lines=base.document.lines)
    return scenario_from_document(doc, base.path.parent)


def point_problems(base: BaseScenario, problems: Sequence[Problem]) -> list[Problem]:
    """Problems of an edited document without the base file's name and lines (they would point at lines
    the edit replaced); problems in other files (a hardware profile a point names) keep theirs."""
    return [Problem(message=p.message, field=p.field) if p.file in (None, base.display) else p for p in problems]


def _flat(field: str) -> str:
    """A dotted field with list indices written as parts: ``a[1].b`` -> ``a.1.b``."""
    return re.sub(r"\[(\d+)\]", r".\1", field)


def override_problems(base: BaseScenario, overrides: Sequence[Override], problems: Sequence[Problem]) -> list[Problem]:
    """Problems of a document edited by ``overrides``: one on an edited field (or inside it) names the edit's
    origin (``--n-prfaas: must be <= 10000, got 20000``); the others keep the base file's name and line, which
    still hold for the fields the edits left alone."""
    fields = [(_flat(dotted(o.path)), o) for o in overrides]
    out = []
    for problem in problems:
        flat = _flat(problem.field) if problem.field is not None and problem.file == base.display else None
        owner = next(
            (o for name, o in fields if flat is not None and (flat == name or flat.startswith(name + "."))), None
        )
        if owner is None:
            out.append(problem)
        elif flat == _flat(dotted(owner.path)):
            out.append(Problem(field=owner.origin, message=problem.message))
        else:
            out.append(Problem(field=owner.origin, message=f"{problem.field}: {problem.message}"))
    return out


def load_overridden(path: Path, overrides: Sequence[Override]) -> Scenario:
    """The scenario file at ``path`` with ``overrides`` applied, validated once by the scenario loader (the same
    checks and limits as the file's own values); InputError's problems on an edited field name its origin."""
    from prfaas_plan.io.scenario import load_scenario

    if not overrides:
        return load_scenario(path)
    base = read_base(path)
    data = base.document.data
    for override in overrides:
        try:
            data = apply_edits(data, {override.path: override.value})
        except ValueError as exc:
            load_scenario(path)  # the file is malformed where the edit goes: its own problems, with their lines
            raise InputError(Problem(field=override.origin, message=str(exc))) from None
    try:
        return load_document(base, data)
    except InputError as exc:
        raise InputError(override_problems(base, overrides, exc.problems)) from None
