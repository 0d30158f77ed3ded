"""The JSON Schemas against the loader, judged by an independent validator (``jsonschema``): on every built-in
input and on broken variants of the paper scenario, each document is accepted by both or refused by both,
except the differences the schema's description lists (rules that read other files)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from prfaas_plan.errors import InputError
from prfaas_plan.io.engine_profile import load_engine_profile
from prfaas_plan.io.hardware import load_hardware
from prfaas_plan.io.models import load_model_card
from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.io.schema import schema
from tests.conftest import REPO

jsonschema = pytest.importorskip("jsonschema")

_LOADERS = {
    "scenario": load_scenario,
    "hardware": load_hardware,
    "model": lambda p: load_model_card(p, str(p)),
    "engine": load_engine_profile,
}
_FOLDERS = {
    "scenario": "workloads",
    "hardware": "hardware_profiles",
    "model": "workloads/models",
    "engine": "hardware_profiles/serving/engines",
}


def _loader_accepts(kind: str, path: Path) -> bool:
    try:
        _LOADERS[kind](path)
    except InputError:
        return False
    return True


def _schema_accepts(spec: dict[str, Any], path: Path) -> bool:
    return jsonschema.Draft202012Validator(spec).is_valid(yaml.safe_load(path.read_text()))


def test_the_schemas_are_valid_json_schema() -> None:
    for kind in _LOADERS:
        jsonschema.Draft202012Validator.check_schema(schema(kind))


@pytest.mark.parametrize("kind", list(_LOADERS))
def test_schema_and_loader_agree_on_every_builtin_input(kind: str) -> None:
    spec = schema(kind)
    files = sorted((REPO / _FOLDERS[kind]).glob("*.yaml"))
    assert files
    disagree = [p.name for p in files if _loader_accepts(kind, p) != _schema_accepts(spec, p)]
    assert disagree == []


_PORTS = (
    "    ports:                     # AWS Direct Connect dedicated ports, US regions: port-hours by size\n"
    "      - {gbit_per_s: 1, usd_per_hour: 0.30}\n"
    "      - {gbit_per_s: 10, usd_per_hour: 2.25}\n"
    "      - {gbit_per_s: 100, usd_per_hour: 22.50}"
)

# (what, old text of the paper scenario, new text); every variant is refused by the loader.
BROKEN = [
    ("unknown key", "  name: paper-case-study", "  name: paper-case-study\n  nmae: typo"),
    ("missing required key", "slo:\n  decode_tokens_per_s: 40", "slo:\n  ttft_p90_s: 5"),
    ("wrong type", "    instances: 4               # 32 x H200", "    instances: four"),
    ("below a bound", "  bandwidth_gbit_per_s: 100", "  bandwidth_gbit_per_s: 0"),
    ("above a bound", "    sigma: 1.00", "    sigma: 50"),
    ("not a choice", "    distribution: lognormal", "    distribution: weibull"),
    ("not an integer", "    gpus_per_instance: 8\n    instances: 4", "    gpus_per_instance: 8.5\n    instances: 4"),
    ("negative price", "egress_usd_per_gb: 0.02", "egress_usd_per_gb: -1"),
    ("unknown hardware name", "    hardware: h200", "    hardware: h2000"),
    (
        "priced link without source",
        "    source: >-\n      AWS Direct Connect",
        "    note: >-\n      AWS Direct Connect",
    ),
    ("lognormal without mu", "    mu: 9.90\n", ""),
    (
        "unknown key under roofline",
        "    instances: 4               # 32 x H200",
        "    instances: 4\n    method: roofline\n    roofline: {compute_efficency: 0.5}",
    ),
    (
        "roofline efficiency above 1",
        "    instances: 4               # 32 x H200",
        "    instances: 4\n    method: roofline\n    roofline: {compute_efficiency: 1.5}",
    ),
    ("fixed length with a lognormal's key", "    tokens: 1024", "    tokens: 1024\n    mu: 6"),
    ("empty name", "  name: paper-case-study", "  name: ''"),
    ("empty port list", _PORTS, "    ports: []"),
    ("unknown arrival process", "    process: poisson", "    process: hawkes"),
    ("boolean where a number goes", "  rate_req_per_s: 3", "  rate_req_per_s: true"),
    ("unprofiled pool without method", "    hardware: h20\n", "    hardware: b200\n"),
    ("unknown model card", "model: paper-1t-hybrid", "model: paper-2t-hybrid"),
]

#: Variants the schema cannot refuse, each listed in the schema's description: (what, the clause naming it).
KNOWN = {"unprofiled pool without method": "needs method: calibrated or roofline"}


def test_twenty_broken_variants_disagree_only_where_the_schema_says(tmp_path: Path) -> None:
    assert len(BROKEN) == 20
    spec = schema("scenario")
    text = (REPO / "workloads" / "paper-case-study.yaml").read_text()
    disagree = []
    for i, (what, old, new) in enumerate(BROKEN):
        assert old in text, what
        edited = text.replace(old, new, 1)
        if what != "unknown model card":
            edited = edited.replace("model: paper-1t-hybrid", f"model: {REPO}/workloads/models/paper-1t-hybrid.yaml")
        path = tmp_path / f"broken{i}.yaml"
        path.write_text(edited)
        assert not _loader_accepts("scenario", path), what
        if _schema_accepts(spec, path):
            disagree.append(what)
    assert sorted(disagree) == sorted(KNOWN)
    for clause in KNOWN.values():
        assert clause in spec["description"]


def test_every_key_has_a_description_and_numbers_their_unit_where_the_name_says_it() -> None:
    def walk(node: dict[str, Any], path: str) -> list[str]:
        out = []
        for key, child in node.get("properties", {}).items():
            if "description" not in child:
                out.append(f"{path}.{key}")
            out += walk(child, f"{path}.{key}")
        for option in node.get("oneOf", []):
            out += walk(option, path)
        items = node.get("items")
        if isinstance(items, dict):
            out += walk(items, f"{path}[]")
        return out

    for kind in _LOADERS:
        spec = schema(kind)
        assert walk(spec, kind) == []
    link = schema("scenario")["properties"]["deployment"]["properties"]["link"]["properties"]
    assert link["bandwidth_gbit_per_s"]["x-unit"] == "Gbit/s"
    method = schema("scenario")["properties"]["deployment"]["properties"]["prfaas"]["properties"]["method"]
    assert method["default"] == "measured"


@pytest.mark.parametrize(
    ("what", "edit"),
    [
        ("as calibrate writes it", None),
        ("a value above its bound", ("terms", "attention_efficiency", "value", 1.5)),
        ("a prior of the wrong type", ("terms", "all_reduce_latency_s", "prior", "fast")),
        ("an empty fitted_on", ("fit", "fitted_on", [])),
        ("a blank fitted name", ("fit", "fitted", [""])),
        ("an unknown key", ("terms", "request_overhead_s", "valeu", 1.0)),
    ],
)
def test_engine_schema_and_loader_agree_on_a_calibrated_profile(tmp_path: Path, what: str, edit: Any) -> None:
    """A profile written by ``prfaas-plan calibrate`` (with its ``fit`` and ``calibration`` sections), as written
    and broken one way at a time: the engine schema and the loader accept or refuse it alike."""
    from prfaas_plan.report.engine_calibration import write_calibration
    from prfaas_plan.studies.bench_calibration import calibrate_files

    fixture = REPO / "tests" / "fixtures" / "bench_results" / "vllm-bench-serve-minimax-m2.5-conc4.json"
    cal = calibrate_files([fixture], model="minimax-m2.5", hardware="h200", gpus=8, engine="vllm")
    path = write_calibration(cal, tmp_path / "cal.yaml")
    if edit is not None:
        data = yaml.safe_load(path.read_text())
        *parents, key, value = edit
        node = data
        for part in parents:
            node = node[part]
        node[key] = value
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    accepted = _loader_accepts("engine", path)
    assert accepted == (edit is None), what
    assert _schema_accepts(schema("engine"), path) == accepted, what
