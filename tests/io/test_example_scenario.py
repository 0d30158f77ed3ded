"""The annotated example scenario shows every option: it must load through the real loader with each section
present, and every top-level section and pool key the loader accepts must appear in it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from prfaas_plan.errors import InputError
from prfaas_plan.io.names import resolve_scenario_path
from prfaas_plan.io.scenario import load_scenario
from tests.conftest import REPO, run_cli

EXAMPLE = REPO / "workloads" / "example-annotated.yaml"


def test_example_loads_with_every_section() -> None:
    spec = load_scenario(resolve_scenario_path("example-annotated"))
    assert spec.model.architecture is not None
    assert spec.traffic.arrival.process == "onoff"
    assert spec.slo.ttft_p90_s == 5
    assert spec.prfaas.method == "calibrated" and spec.local.kv_transfer_bytes_per_s is not None
    assert spec.cost.link.ports and spec.cost.electricity_usd_per_kwh == 0.08 and spec.cost.gpu_usd_per_hour
    assert spec.target is not None and spec.target.rate_req_per_s == 2
    dynamics = spec.dynamics
    assert dynamics is not None
    assert dynamics.caches is not None and dynamics.bandwidth is not None and dynamics.outages
    assert dynamics.losses and dynamics.threshold is not None and dynamics.roles is not None


def test_example_names_every_top_level_section() -> None:
    raw = yaml.safe_load(EXAMPLE.read_text())
    assert set(raw) == {"scenario", "model", "traffic", "slo", "deployment", "cost", "target", "dynamics"}
    assert set(raw["deployment"]) == {"prfaas", "local", "link"}
    assert set(raw["dynamics"]) == {"link", "faults", "scheduler", "prefix_cache"}


def test_example_plans_from_the_command_line() -> None:
    result = run_cli("optimize", "example-annotated", "--json")
    assert result.returncode == 0, result.stderr


def test_bad_shape_overrides_are_named_with_line_and_field(tmp_path: Path) -> None:
    """A pool's shape overrides are checked like the other roofline fields: each bad one named by line and path;
    good ones reach the pool's RooflineParams."""
    text = EXAMPLE.read_text()
    good = tmp_path / "good.yaml"
    good.write_text(
        text.replace("expert_parallel: false", "expert_parallel: true").replace(
            "moe_load_skew: 0 ", "moe_load_skew: 0.2 "
        )
    )
    pool = load_scenario(good).prfaas
    assert pool.roofline.expert_parallel and pool.roofline.moe_load_skew == 0.2
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        text.replace("expert_parallel: false", "expert_parallel: 3")
        .replace("moe_load_skew: 0 ", "moe_load_skew: -1 ")
        .replace("attention_half_context_tokens: 318", "attention_half_context_tokens: -5")
    )
    with pytest.raises(InputError) as caught:
        load_scenario(bad)
    shown = [str(p) for p in caught.value.problems]
    for field, message in (
        ("expert_parallel", "expected true or false"),
        ("moe_load_skew", "must be >= 0"),
        ("attention_half_context_tokens", "must be >= 0"),
    ):
        assert any("bad.yaml:" in p and f"deployment.prfaas.roofline.{field}: " in p and message in p for p in shown)
