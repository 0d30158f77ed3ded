"""JSON Schemas generated from the loaders' checks: every key of every built-in input is in its kind's schema,
with the bounds and choices the loader enforces; unknown keys are refused as the loader refuses them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from prfaas_plan.io.schema import schema
from tests.conftest import REPO, run_cli


def _unknown_keys(node: Any, spec: dict[str, Any], path: str = "") -> list[str]:
    """Keys of ``node`` that ``spec`` does not describe (a small walk of the schema's object/array parts)."""
    if "oneOf" in spec:
        options = [_unknown_keys(node, option, path) for option in spec["oneOf"]]
        return min(options, key=len)
    if isinstance(node, dict):
        if spec.get("type") not in (None, "object"):
            return [f"{path}: a mapping where the schema has {spec.get('type')}"]
        missing: list[str] = []
        props = spec.get("properties", {})
        extra = spec.get("additionalProperties", True)
        for key, value in node.items():
            if key in props:
                missing += _unknown_keys(value, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                missing += _unknown_keys(value, extra, f"{path}.{key}")
            elif extra is False:
                missing.append(f"{path}.{key}")
        return missing
    if isinstance(node, list) and spec.get("type") == "array":
        return [m for i, item in enumerate(node) for m in _unknown_keys(item, spec.get("items", {}), f"{path}[{i}]")]
    return []


@pytest.mark.parametrize(
    ("kind", "folder"),
    [
        ("scenario", "workloads"),
        ("hardware", "hardware_profiles"),
        ("model", "workloads/models"),
        ("engine", "hardware_profiles/serving/engines"),
    ],
)
def test_every_builtin_input_is_described_by_its_schema(kind: str, folder: str) -> None:
    spec = schema(kind)
    files = sorted(Path(REPO / folder).glob("*.yaml"))
    assert files
    for path in files:
        missing = _unknown_keys(yaml.safe_load(path.read_text()), spec)
        assert not missing, (path.name, missing)


def test_schema_carries_the_loaders_bounds_and_choices() -> None:
    spec = schema("scenario")
    link = spec["properties"]["deployment"]["properties"]["link"]
    assert link["additionalProperties"] is False and link["required"] == ["bandwidth_gbit_per_s"]
    assert link["properties"]["bandwidth_gbit_per_s"]["exclusiveMinimum"] == 0
    assert link["properties"]["transfer"]["enum"] == ["after_prefill", "layerwise"]
    lengths = spec["properties"]["traffic"]["properties"]["input_length"]["properties"]
    assert set(lengths["distribution"]["enum"]) == {"lognormal", "fixed", "uniform", "empirical"}
    assert {"mu", "sigma", "tokens", "min_tokens", "max_tokens", "trace"} <= set(lengths)
    assert "oneOf" in spec["properties"]["model"]  # a card's name, or {card, dtypes}
    assert _unknown_keys({"scenario": {"nmae": "x"}}, spec) == [".scenario.nmae"]


def test_a_roofline_fields_default_is_its_engines_not_one_number() -> None:
    """The roofline fields a pool's engine sets have no single default: the schema says where it comes from
    rather than recording whichever engine the first built-in scenario happened to use."""
    pools = schema("scenario")["properties"]["deployment"]["properties"]
    for pool in ("prfaas", "local"):
        fields = pools[pool]["properties"]["roofline"]["properties"]
        for key in ("compute_efficiency", "overhead_s", "layer_overhead_s", "prefill_chunk_tokens"):
            assert "default" not in fields[key], (pool, key)
            assert "engine" in fields[key]["description"] and "paper-fit" in fields[key]["description"]


def test_schema_command_prints_json_and_refuses_an_unknown_kind() -> None:
    result = run_cli("schema", "hardware")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["title"] == "prfaas-plan hardware profile"
    assert run_cli("schema", "nonsense").returncode == 2


def _errors(node: Any, spec: dict[str, Any], path: str = "") -> list[str]:
    """A small validator for the subset of JSON Schema the generator writes (type, enum, bounds, required,
    additionalProperties, items, oneOf): the problems of ``node``, empty when it conforms."""
    if "oneOf" in spec:
        options = [_errors(node, option, path) for option in spec["oneOf"]]
        return [] if any(not o for o in options) else min(options, key=len)
    kind = spec.get("type")
    if kind == "object":
        if not isinstance(node, dict):
            return [f"{path}: not a mapping"]
        out = [f"{path}.{k}: required" for k in spec.get("required", []) if k not in node]
        props, extra = spec.get("properties", {}), spec.get("additionalProperties", True)
        for key, value in node.items():
            if key in props:
                out += _errors(value, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                out += _errors(value, extra, f"{path}.{key}")
            elif extra is False:
                out.append(f"{path}.{key}: unknown")
        return out
    if kind == "array":
        if not isinstance(node, list):
            return [f"{path}: not a list"]
        return [e for i, item in enumerate(node) for e in _errors(item, spec.get("items", {}), f"{path}[{i}]")]
    if kind in ("number", "integer"):
        if isinstance(node, bool) or not isinstance(node, int | float):
            return [f"{path}: not a number"]
        if kind == "integer" and float(node) != int(node):
            return [f"{path}: not an integer"]
        bad = (
            ("exclusiveMinimum" in spec and not node > spec["exclusiveMinimum"])
            or ("minimum" in spec and not node >= spec["minimum"])
            or ("maximum" in spec and not node <= spec["maximum"])
        )
        return [f"{path}: out of range"] if bad else []
    if kind == "string":
        if not isinstance(node, str):
            return [f"{path}: not a string"]
        return [f"{path}: not one of {spec['enum']}"] if "enum" in spec and node not in spec["enum"] else []
    if kind == "boolean":
        return [] if isinstance(node, bool) else [f"{path}: not true/false"]
    return []


@pytest.mark.parametrize(
    ("kind", "folder"),
    [
        ("scenario", "workloads"),
        ("hardware", "hardware_profiles"),
        ("model", "workloads/models"),
        ("engine", "hardware_profiles/serving/engines"),
    ],
)
def test_schema_validates_every_yaml_input_in_the_repository(kind: str, folder: str) -> None:
    spec = schema(kind)
    for path in sorted(Path(REPO / folder).glob("*.yaml")):
        assert not _errors(yaml.safe_load(path.read_text()), spec), (
            path.name,
            _errors(yaml.safe_load(path.read_text()), spec),
        )


# Broken scenarios, one per kind of problem the loader refuses: (text edit of the paper scenario).
_BROKEN = [
    ("unknown key", "  name: paper-case-study", "  name: paper-case-study\n  nmae: typo"),
    ("missing required key", "slo:\n  decode_tokens_per_s: 40", "slo:\n  ttft_p90_s: 5"),
    ("wrong type", "    instances: 4               # 32 x H200", "    instances: four"),
    ("below a bound", "  bandwidth_gbit_per_s: 100", "  bandwidth_gbit_per_s: 0"),
    ("above a bound", "    sigma: 1.00", "    sigma: 50"),
    ("not a choice", "    distribution: lognormal", "    distribution: weibull"),
    ("not an integer", "    gpus_per_instance: 8\n    instances: 4", "    gpus_per_instance: 8.5\n    instances: 4"),
    ("negative price", "egress_usd_per_gb: 0.02", "egress_usd_per_gb: -1"),
]


@pytest.mark.parametrize(("what", "old", "new"), _BROKEN, ids=[b[0] for b in _BROKEN])
def test_schema_and_loader_refuse_the_same_broken_scenarios(tmp_path: Path, what: str, old: str, new: str) -> None:
    from prfaas_plan.errors import InputError
    from prfaas_plan.io.scenario import load_scenario

    text = (REPO / "workloads" / "paper-case-study.yaml").read_text()
    assert old in text, what
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        text.replace(old, new, 1).replace(
            "model: paper-1t-hybrid", f"model: {REPO}/workloads/models/paper-1t-hybrid.yaml"
        )
    )
    with pytest.raises(InputError):
        load_scenario(broken)
    assert _errors(yaml.safe_load(broken.read_text()), schema("scenario")), what
