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

KINDS = ("scenario", "hardware", "model", "topology", "engine")
SCHEMA_DRAFT = "https://json-schema.org/draft/2020-12/schema"

Record = dict[tuple[str, ...], dict[str, Any]]
#: The root key that tells each kind's documents apart (a scenario also loads its card and profiles).
_MARKER = {
    "scenario": "deployment",
    "hardware": "profiles",
    "model": "architecture",
    "topology": "clusters",
    "engine": "gemm_efficiency",
}

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
    (("deployment.prfaas.method", "roofline"), ("deployment.prfaas.roofline", {})),
    (("deployment.local.method", "roofline"), ("deployment.local.roofline", {})),
    (("dynamics.link", {"steps": [{"at_s": 0, "gbit_per_s": 100}]}),),
    (("dynamics.link", {"periodic": {"period_s": 100, "steps": [{"at_s": 0, "gbit_per_s": 100}]}}),),
)


# Alternatives of the three-region topology (a list item by its index): pool methods, prices, arrival processes,
# length distributions and a link's committed-bandwidth price. The pool and length keys a variant cannot reach
# are grafted from the scenario's schema (the same loader functions check them), see ``_graft_topology``.
_TOPOLOGY_VARIANTS: tuple[tuple[tuple[str, Any], ...], ...] = (
    (("clusters.0.gpu_usd_per_hour", 3.0), ("clusters.0.source", "an example price")),
    (("clusters.2.kv_transfer_gbit_per_s", 400),),
    (("slo.ttft_includes_first_decode_step", True),),
    (("topology.source", "an example"), ("topology.description", "an example")),
    (("links.0.transfer", "layerwise"), ("links.0.source", "an example")),
    (("links.0.price", {"committed_usd_per_gbit_per_s_month": 10.0, "source": "an example"}),),
    (("traffic.0.arrival", {"process": "renewal", "interarrival_scv": 2.0}), ("traffic.0.source", "an example")),
    (("cost", {"gpu_usd_per_hour": {"h100": 2.0}, "source": "an example"}),),
)


def _edited(data: Any, edits: Iterable[tuple[str, Any]]) -> Any:
    out = copy.deepcopy(data)
    for dotted, value in edits:
        *parents, last = dotted.split(".")
        node = out
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if isinstance(node, list):
            node[int(last)] = copy.deepcopy(value)
        else:
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


def _engine_loaders() -> list[Callable[[], Any]]:
    """The built-in engine profiles, and one with every optional key a profile may hold (a prior on every term,
    every generation's row and decode factor, every dtype), so that each is checked once and described."""
    from prfaas_plan.io.engine_profile import (  # this kind only
        DTYPES,
        OPTIONAL_TERMS,
        TERMS,
        engine_from_document,
        load_engine_profile,
    )
    from prfaas_plan.spec.engine import GENERATIONS

    files = _builtin_files("hardware_profiles/serving/engines")
    loaders: list[Callable[[], Any]] = [functools.partial(load_engine_profile, p) for p in files]
    doc = load_yaml(files[0])
    data = copy.deepcopy(doc.data)
    for term, low, _ in (*TERMS, *OPTIONAL_TERMS):
        entry = data["terms"].setdefault(term, {"value": low, "source": "an example"})
        entry.setdefault("prior", entry["value"])
    data["gemm_efficiency"]["prior"] = {g: {d: 0.5 for d in DTYPES} for g in GENERATIONS}
    data["overhead_scale"] = {"source": "an example", **{g: {"value": 1.0, "prior": 1.0} for g in GENERATIONS}}
    loaders.append(functools.partial(engine_from_document, Document(file=doc.file, data=data, lines=doc.lines)))
    return loaders


def _topology_loaders() -> list[Callable[[], Any]]:
    from prfaas_plan.io.topology import load_topology, topology_from_document

    folder = builtin_root() / "workloads" / "topologies"
    files = sorted(folder.glob("*.yaml"))
    loaders: list[Callable[[], Any]] = [functools.partial(load_topology, p) for p in files]
    doc = load_yaml(folder / "three-regions.yaml")
    for edits in _TOPOLOGY_VARIANTS:
        variant = Document(file=doc.file, data=_edited(doc.data, edits), lines=doc.lines)
        loaders.append(functools.partial(topology_from_document, variant, folder))
    return loaders


def _graft_topology(body: dict[str, Any], scenario: dict[str, Any]) -> None:
    """A topology's clusters are checked by the scenario's pool checks and its traffic by the scenario's length
    and arrival checks: keys the topology documents do not reach are taken from the scenario's schema."""
    clusters = body["properties"]["clusters"]["items"]["properties"]
    deployment = scenario["properties"]["deployment"]["properties"]
    for pool in ("prfaas", "local"):
        for key, node in deployment[pool]["properties"].items():
            clusters.setdefault(key, copy.deepcopy(node))
    traffic = body["properties"]["traffic"]["items"]["properties"]
    for key in ("input_length", "output_length", "arrival"):
        traffic[key] = copy.deepcopy(scenario["properties"]["traffic"]["properties"][key])


def _builtin_files(sub: str) -> list[Path]:
    return sorted((builtin_root() / sub).glob("*.yaml"))


#: A string the loader accepts: not empty, not only blanks.
_NON_BLANK = r"\S"
#: Units by the end of a key's name (the house names every number with its unit), first match wins.
_UNITS = (
    ("_usd_per_gbit_per_s_month", "USD per Gbit/s per month"),
    ("_usd_per_hour", "USD per hour"),
    ("usd_per_hour", "USD per hour"),
    ("_usd_per_gb", "USD per GB"),
    ("_usd_per_kwh", "USD per kWh"),
    ("_gbit_per_s", "Gbit/s"),
    ("_tokens_per_s", "tokens per second"),
    ("_req_per_s", "requests per second"),
    ("_bytes_per_s", "bytes per second"),
    ("_flop_per_s", "FLOP per second"),
    ("_per_s", "per second"),
    ("_tokens", "tokens"),
    ("_bytes", "bytes"),
    ("_gib", "GiB"),
    ("_gb", "GB"),
    ("_ms", "milliseconds"),
    ("_us", "microseconds"),
    ("_s", "seconds"),
    ("_w", "watts"),
    ("_fraction", "fraction (0-1)"),
)


def _unit(key: str) -> str | None:
    return next((unit for suffix, unit in _UNITS if key.endswith(suffix)), None)


def _annotated(out: dict[str, Any], path: tuple[str, ...], facts: dict[str, Any]) -> dict[str, Any]:
    """``out`` with a description (where the key sits, its unit, bounds and choices), its unit (``x-unit``) and
    the default the loader uses when the key is absent."""
    key = next((p for p in reversed(path) if p != "[]"), "")
    unit = _unit(key) if facts.get("kinds", set()) & {"number", "integer"} else None
    words = [f"{'.'.join(path) or 'document'}"]
    if unit:
        words.append(f"in {unit}")
        out["x-unit"] = unit
    bounds = [
        f"{op} {facts[name]:g}" for name, op in (("gt", ">"), ("ge", ">="), ("le", "<=")) if facts.get(name) is not None
    ]
    if bounds:
        words.append(", ".join(bounds))
    if facts.get("enum"):
        words.append("one of " + ", ".join(facts["enum"]))
    if "default_text" in facts:
        words.append(f"default: {facts['default_text']}")
    elif "default" in facts:
        out["default"] = facts["default"]
        words.append(f"default {facts['default']!r}")
    out["description"] = "; ".join(words) + "."
    return out


def _node(record: Record, path: tuple[str, ...], only: str | None = None) -> dict[str, Any]:
    return (
        _annotated(_shape(record, path, only), path, record.get(path, {}))
        if only is None
        else _shape(record, path, only)
    )


def _shape(record: Record, path: tuple[str, ...], only: str | None = None) -> dict[str, Any]:
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
        return {"type": "array", "items": items, "minItems": 1}  # the loader refuses an empty list
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
        if facts.get("enum"):
            return {"type": "string", "enum": list(facts["enum"])}
        return {"type": "string", "pattern": _NON_BLANK}  # the loader refuses an empty or blank string
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
        for k in out["required"]:
            child = out["properties"][k]
            child["description"] = child.get("description", f"{k}.").rstrip(".") + "; required."
    return out


def schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of one input kind: ``scenario``, ``hardware`` (a hardware profile), ``model`` (a model
    card), ``topology`` or ``engine`` (a serving engine's profile). Raises ValueError for another kind."""
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
    elif kind == "topology":
        record = _recorded(kind, _topology_loaders())
        title = "prfaas-plan topology"
    elif kind == "engine":
        record = _recorded(kind, _engine_loaders())
        title = "prfaas-plan engine profile"
    else:
        raise ValueError(f"unknown input kind {kind!r}; one of {', '.join(KINDS)}")
    body = _node(record, ())
    if kind == "topology":
        _graft_topology(body, schema("scenario"))
        _topology_rules(body)
        _calibrated_pool_rule(body["properties"]["clusters"]["items"])
    _apply_rules(kind, body)
    description = _DIFFERENCES + {"topology": _TOPOLOGY_DIFFERENCES, "engine": _ENGINE_DIFFERENCES}.get(kind, "")
    return {"$schema": SCHEMA_DRAFT, "title": title, **body, "description": description}


#: Where the schema and the loader can differ, and why (``tests/io/test_schema.py`` checks the list).
_DIFFERENCES = (
    "Generated from the loader's own checks. Differences from the loader, each because JSON Schema cannot "
    "express the rule: (1) a hardware, model or calibration name is checked against the built-in names or a "
    "path ending in .yaml/.yml; the loader also accepts a file of that name next to the scenario and refuses a "
    "path that does not exist; (2) rules that read another file are the loader's alone: a pool whose hardware "
    "profile has no measured profile for the model needs method: calibrated or roofline, an engine needs a "
    "roofline pool, a calibration needs rising points; (3) relations between two numbers (max_tokens > "
    "min_tokens, a lognormal's min_tokens > 0) are not expressed."
)


_TOPOLOGY_DIFFERENCES = (
    " In a topology, also the loader's alone: (4) relations between entries: cluster names are unique, a link "
    "joins an existing prfaas cluster to an existing pd cluster (one link per pair), every pd cluster has "
    "exactly one traffic entry, there is a cluster of each kind; (5) a scenario file, which the loader reads as "
    "a topology of one of each, is checked by the scenario's schema."
)


_ENGINE_DIFFERENCES = (
    " In an engine profile, also: (4) the `calibration` section that `prfaas-plan calibrate` writes is not read "
    "by this loader, so any value is described: a pool that names the profile reads its `error_band` (checked "
    "there), and ignores a section without one; (5) `fit.fitted` must name terms the profile holds."
)


def _at(node: dict[str, Any], *path: str) -> dict[str, Any] | None:
    for key in path:
        node = node.get("properties", {}).get(key)
        if node is None:
            return None
    return node


def _names(sub: str) -> list[str]:
    return sorted(p.stem for p in (builtin_root() / sub).glob("*.yaml"))


def _model_names(body: dict[str, Any], yaml_path: dict[str, Any]) -> None:
    """``model:`` (a card's name or path, or an object whose ``card`` is one) names a built-in card or a YAML."""
    model = body.get("properties", {}).get("model")
    if model is None:
        return
    cards = {"anyOf": [{"enum": _names("workloads/models")}, yaml_path]}
    for option in model.get("oneOf", [model]):
        if option.get("type") == "string":
            option.update(cards)
        elif option.get("type") == "object" and "card" in option.get("properties", {}):
            option["properties"]["card"].update(cards)


def _priced_link_needs_source(link: dict[str, Any]) -> None:
    """A link price that charges anything (ports, a committed rate or egress above 0) must name its source."""
    link["if"] = {
        "anyOf": [
            {"required": ["ports"]},
            {
                "required": ["committed_usd_per_gbit_per_s_month"],
                "properties": {"committed_usd_per_gbit_per_s_month": {"exclusiveMinimum": 0}},
            },
            {"required": ["egress_usd_per_gb"], "properties": {"egress_usd_per_gb": {"exclusiveMinimum": 0}}},
        ]
    }
    link["then"] = {"required": ["source"]}


def _topology_rules(body: dict[str, Any]) -> None:
    """A topology's rules the recorder cannot see: a priced link or cluster needs a source; names of files; how
    many clusters, links and traffic entries the loader reads."""
    yaml_path = {"type": "string", "pattern": r"\.ya?ml$"}
    link = body["properties"]["links"]["items"]["properties"].get("price")
    if link is not None:
        _priced_link_needs_source(link)
    cluster = body["properties"]["clusters"]["items"]
    cluster["if"] = {"required": ["gpu_usd_per_hour"]}
    cluster["then"] = {"required": ["source"], "properties": {"source": {"type": "string", "pattern": _NON_BLANK}}}
    hardware = {"anyOf": [{"enum": _names("hardware_profiles")}, yaml_path]}
    for key in ("hardware", "calibrate_from"):
        node = cluster["properties"].get(key)
        if node is not None:
            node.update(hardware)
    _model_names(body, yaml_path)
    from prfaas_plan.io.topology import MAX_CLUSTERS, MAX_LINKS

    for key, most in (("clusters", MAX_CLUSTERS), ("links", MAX_LINKS), ("traffic", MAX_CLUSTERS)):
        body["properties"][key]["maxItems"] = most


def _apply_rules(kind: str, body: dict[str, Any]) -> None:
    """Rules the loader states in code the recorder cannot see: a length distribution's keys by its kind,
    a priced link's source, and file names (built-in names or a YAML path)."""
    if kind != "scenario":
        return
    shapes = {
        "lognormal": ["mu", "sigma", "min_tokens", "max_tokens"],
        "fixed": ["tokens"],
        "uniform": ["min_tokens", "max_tokens"],
        "empirical": ["trace"],
    }
    for role in ("input_length", "output_length"):
        node = _at(body, "traffic", role)
        if node is None:
            continue
        node["allOf"] = [
            {
                "if": {"properties": {"distribution": {"const": k}}, "required": ["distribution"]},
                "then": {
                    "required": keys,
                    "propertyNames": {
                        "enum": [
                            "distribution",
                            *keys,
                            *(["prefix_cache"] if k == "empirical" and role == "input_length" else []),
                        ]
                    },
                },
            }
            for k, keys in shapes.items()
        ]
    link = _at(body, "cost", "link")
    if link is not None:
        _priced_link_needs_source(link)
    yaml_path = {"type": "string", "pattern": r"\.ya?ml$"}
    hardware = {"anyOf": [{"enum": _names("hardware_profiles")}, yaml_path]}
    for pool in ("prfaas", "local"):
        for key in ("hardware", "calibrate_from"):
            node = _at(body, "deployment", pool, key)
            if node is not None:
                node.update(hardware)
        _calibrated_pool_rule(_at(body, "deployment", pool))
    _model_names(body, yaml_path)


def _calibrated_pool_rule(pool: dict[str, Any] | None) -> None:
    """A calibrated pool's `roofline:` may not set what its fit sets (``io.scenario.CALIBRATION_FITS``)."""
    from prfaas_plan.io.scenario import CALIBRATION_FITS

    if pool is None:
        return
    pool.setdefault("allOf", []).append(
        {
            "if": {"properties": {"method": {"const": "calibrated"}}, "required": ["method"]},
            "then": {"properties": {"roofline": {"not": {"anyOf": [{"required": [k]} for k in CALIBRATION_FITS]}}}},
        }
    )
