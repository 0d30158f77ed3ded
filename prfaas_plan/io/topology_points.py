"""A topology sweep's points: the base topology's YAML mapping with fields replaced by dotted path
(``io.overrides.apply_edits``, as a scenario sweep's), validated by the topology loader (``io.topology``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prfaas_plan.errors import InputError, Problem
from prfaas_plan.io.overrides import apply_edits
from prfaas_plan.io.paths import display_path
from prfaas_plan.io.yamlsrc import Document, KeyPath, load_yaml
from prfaas_plan.spec.topology import Topology


def read_topology_document(path: Path) -> Document:
    """The topology file parsed, not validated (each point is)."""
    return load_yaml(path, display_path(path))


def load_topology_point(base: Document, path: Path, edits: Mapping[KeyPath, Any]) -> Topology:
    """The topology of one point: ``base`` with ``edits`` applied, validated by the topology loader. A problem
    on an edited document names no file line (the line it would name holds the value the edit replaced)."""
    from prfaas_plan.io.topology import topology_from_document

    try:
        data = apply_edits(base.data, edits)
    except ValueError as exc:
        raise InputError(Problem(message=str(exc))) from None
    doc = Document(file=base.file, data=data, lines=base.lines)
    try:
        return topology_from_document(doc, path.parent)
    except InputError as exc:
        raise InputError(
            [Problem(message=p.message, field=p.field) if p.file in (None, base.file) else p for p in exc.problems]
        ) from None
