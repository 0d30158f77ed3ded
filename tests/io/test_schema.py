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
    [("scenario", "workloads"), ("hardware", "hardware_profiles"), ("model", "workloads/models")],
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


def test_schema_command_prints_json_and_refuses_an_unknown_kind() -> None:
    result = run_cli("schema", "hardware")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["title"] == "prfaas-plan hardware profile"
    assert run_cli("schema", "nonsense").returncode == 2
