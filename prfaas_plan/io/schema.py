"""JSON Schemas of the YAML inputs (scenario, hardware profile, model card), generated from the loaders' own
checks rather than written beside them.

The loaders check every field through ``io.yamlsrc`` (``Section`` for mappings with their required and
optional keys, ``number``/``string``/``boolean`` with their bounds and choices, ``items`` for lists). While
``SCHEMA_RECORD`` is set, each check notes what it checks and where; the schema is the union of what the
loaders check on a set of documents that between them take every branch: the built-in inputs, the annotated
example scenario, and variants of it for the alternatives a single document cannot hold (each length
distribution, arrival process, pool method and link profile). A check the loader makes only on a branch none
of these documents takes would be missing; ``tests/io/test_schema.py`` checks that every key of every built-in
input is in its schema.

Where a mapping's keys depend on a choice inside it (an attention layer's kind, a length distribution), the
schema allows the union of the variants' keys and requires the keys every variant requires: it refuses what no
variant accepts, and the loader refuses the rest with its own message.

Bounds: ``gt`` becomes ``exclusiveMinimum``, ``ge`` ``minimum``, ``le`` ``maximum``. A mapping checked as a
``Section`` refuses unknown keys (``additionalProperties: false``), as the loader does; mappings whose keys are
names (prices per accelerator) allow any key.
"""

from __future__ import annotations

import contextlib
import copy
import functools
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from prfaas_plan.errors import InputError
from prfaas_plan.io.hardware import load_hardware
from prfaas_plan.io.models import load_model_card
from prfaas_plan.io.paths import builtin_root
from prfaas_plan.io.scenario import load_scenario, scenario_from_document
from prfaas_plan.io.yamlsrc import SCHEMA_RECORD, Document, load_yaml

KINDS = ("scenario", "hardware", "model")
SCHEMA_DRAFT = "https://json-schema.org/draft/2020-12/schema"

Record = dict[tuple[str, ...], dict[str, Any]]
#: The root key that tells each kind's documents apart (a scenario also loads its card and profiles).
_MARKER = {"scenario": "deployment", "hardware": "profiles", "model": "architecture"}

# Alternatives of the annotated example a single document cannot hold: (dotted path, value) edits.
_SCENARIO_VARIANTS: tuple[tuple[tuple[str, Any], ...], ...] = (
    (("traffic.input_length", {"distribution": "uniform", "min_tokens": 128, "max_tokens": 4096}),),
    (("traffic.input_length", {"distribution": "fixed", "tokens": 4096}),),
    (("traffic.input_length", {"distribution": "empirical", "trace": "traces/conversation_trace.jsonl"}),),
    (
        (
            "traffic.output_length",
            {"distribution": "lognormal", "mu": 6.0, "sigma": 0.5, "min_tokens": 1, "max_tokens": 4096},
        ),
    ),
    (("traffic.arrival", {"process": "renewal", "interarrival_scv": 2.0}),),
    (("traffic.arrival", {"process": "diurnal", "amplitude": 0.5, "period_s": 86400}),),
    (("deployment.local.method", "calibrated"), ("deployment.local.calibrate_from", "h200")),
    (("deployment.prfaas.method", "roofline"),),
    (("dynamics.link", {"steps": [{"at_s": 0, "gbit_per_s": 100}]}),),
    (("dynamics.link", {"periodic": {"period_s": 100, "steps": [{"at_s": 0, "gbit_per_s": 100}]}}),),
)


def _edited(data: Any, edits: Iterable[tuple[str, Any]]) -> Any:
    out = copy.deepcopy(data)
    for dotted, value in edits:
        *parents, last = dotted.split(".")
        node = out
        for part in parents:
            node = node[part]
        node[last] = copy.deepcopy(value)
    return out


def _recorded(kind: str, loaders: Iterable[Callable[[], Any]]) -> Record:
    """What the loaders checked on the documents of ``kind`` (told apart by their root keys), merged."""
    by_file: dict[str, Record] = {}
    token = SCHEMA_RECORD.set(by_file)
    try:
        for load in loaders:
            # A variant may fail on a later check; what it checked is recorded all the same.
            with contextlib.suppress(InputError):
                load()
    finally:
        SCHEMA_RECORD.reset(token)
    merged: Record = {}
    for record in by_file.values():
        root = record.get((), {})
        if _MARKER[kind] not in {*root.get("required", set()), *root.get("optional", set())}:
            continue
        if kind == "hardware" and "deployment" in root.get("required", set()):
            continue
        for path, facts in record.items():
            entry = merged.setdefault(path, {})
            if "kind" in facts:
                entry.setdefault("kinds", set()).add(facts["kind"])
            for name, value in facts.items():
                if name == "required" and name in entry:
                    entry[name] &= value  # required in every document that checks this path
                elif isinstance(value, set):
                    entry.setdefault(name, set()).update(value)
                else:
                    entry.setdefault(name, value)
    return merged


def _scenario_loaders() -> list[Callable[[], Any]]:
    workloads = builtin_root() / "workloads"
    example = workloads / "example-annotated.yaml"
    doc = load_yaml(example)
    loaders: list[Callable[[], Any]] = [functools.partial(load_scenario, p) for p in sorted(workloads.glob("*.yaml"))]
    for edits in _SCENARIO_VARIANTS:
        variant = Document(file=doc.file, data=_edited(doc.data, edits), lines=doc.lines)
        loaders.append(functools.partial(scenario_from_document, variant, workloads))
    return loaders


def _builtin_files(sub: str) -> list[Path]:
    return sorted((builtin_root() / sub).glob("*.yaml"))


def _node(record: Record, path: tuple[str, ...], only: str | None = None) -> dict[str, Any]:
    facts = record.get(path, {})
    kinds = sorted(facts.get("kinds", set()))
    if only is None and len(kinds) > 1:  # e.g. ``model: NAME`` or ``model: {card: NAME, dtypes: ...}``
        return {"oneOf": [_node(record, path, k) for k in kinds]}
    kind = only if only is not None else (kinds[0] if kinds else None)
    children = sorted({p[len(path)] for p in record if len(p) > len(path) and p[: len(path)] == path})
    if kind == "array" or children == ["[]"]:
        items = (
            _node(record, (*path, "[]"))
            if (*path, "[]") in record or any(p[: len(path) + 1] == (*path, "[]") for p in record)
            else {}
        )
        return {"type": "array", "items": items}
    if kind in ("number", "integer"):
        out: dict[str, Any] = {"type": kind}
        if facts.get("gt") is not None:
            out["exclusiveMinimum"] = facts["gt"]
        if facts.get("ge") is not None:
            out["minimum"] = facts["ge"]
        if facts.get("le") is not None:
            out["maximum"] = facts["le"]
        return out
    if kind == "string":
        return {"type": "string", "enum": list(facts["enum"])} if facts.get("enum") else {"type": "string"}
    if kind == "boolean":
        return {"type": "boolean"}
    if kind != "object":
        if not children:
            return {}  # checked by hand in the loader (a raw value): no constraint recorded
        # A mapping whose keys are names (prices per accelerator): any key, each value as checked.
        return {"type": "object", "additionalProperties": _node(record, (*path, children[0]))}
    keys = sorted({*facts.get("required", set()), *facts.get("optional", set()), *(c for c in children if c != "[]")})
    out = {"type": "object", "properties": {k: _node(record, (*path, k)) for k in keys}, "additionalProperties": False}
    if facts.get("required"):
        out["required"] = sorted(facts["required"])
    return out


def schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of one input kind: ``scenario``, ``hardware`` (a hardware profile) or ``model`` (a model
    card). Raises ValueError for another kind."""
    if kind == "scenario":
        record = _recorded(kind, _scenario_loaders())
        title = "prfaas-plan scenario"
    elif kind == "hardware":
        record = _recorded(kind, (functools.partial(load_hardware, p) for p in _builtin_files("hardware_profiles")))
        title = "prfaas-plan hardware profile"
    elif kind == "model":
        record = _recorded(
            kind, (functools.partial(load_model_card, p, str(p)) for p in _builtin_files("workloads/models"))
        )
        title = "prfaas-plan model card"
    else:
        raise ValueError(f"unknown input kind {kind!r}; one of {', '.join(KINDS)}")
    body = _node(record, ())
    return {"$schema": SCHEMA_DRAFT, "title": title, **body}
