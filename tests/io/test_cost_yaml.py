"""The scenario's cost, target and model-dtype sections: parsed through the real loader, bad values named
with file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from prfaas_plan.errors import InputError
from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.physics.memory import weight_bytes
from prfaas_plan.units import GBIT_PER_S
from tests.conftest import PAPER_SCENARIO, run_cli

PAPER_TEXT = PAPER_SCENARIO.read_text()


def _edited(tmp_path: Path, old: str, new: str) -> Path:
    assert old in PAPER_TEXT, old
    path = tmp_path / "edited.yaml"
    path.write_text(PAPER_TEXT.replace(old, new, 1))
    return path


def test_paper_scenario_has_priced_link_and_target() -> None:
    spec = load_scenario(PAPER_SCENARIO)
    assert [p.bandwidth_bytes_per_s / GBIT_PER_S for p in spec.cost.link.ports] == [1, 10, 100]
    assert spec.cost.link.egress_usd_per_gb == 0.02 and "c3x.dev" in spec.cost.link.source
    assert spec.target is not None and spec.target.rate_req_per_s == 3 and spec.target.ttft_slo_s == 5


@pytest.mark.parametrize(
    ("old", "new", "field", "message"),
    [
        ("egress_usd_per_gb: 0.02", "egress_usd_per_gb: -1", "cost.link.egress_usd_per_gb", "must be >= 0"),
        (
            "{gbit_per_s: 10, usd_per_hour: 2.25}",
            "{gbit_per_s: 0, usd_per_hour: 2.25}",
            "cost.link.ports[1].gbit_per_s",
            "must be > 0",
        ),
        ("  rate_req_per_s: 3", "  rate_req_per_s: .nan", "target.rate_req_per_s", "finite"),
        ("  rate_req_per_s: 3", "  rate_per_s: 3", "target.rate_per_s", "unknown key"),
        ("cost:\n  link:", "cost:\n  gpu_usd_per_hour: {h20: -2}\n  link:", "cost.gpu_usd_per_hour.h20", "must be > 0"),
    ],
)
def test_bad_cost_and_target_fields_are_named(tmp_path: Path, old: str, new: str, field: str, message: str) -> None:
    path = _edited(tmp_path, old, new)
    with pytest.raises(InputError) as info:
        load_scenario(path)
    problems = [str(p) for p in info.value.problems]
    assert any("edited.yaml:" in p and f" {field}: " in p and message in p for p in problems), problems


def test_priced_link_without_a_source_is_refused(tmp_path: Path) -> None:
    start = PAPER_TEXT.index("    source: >-\n      AWS Direct Connect")
    end = PAPER_TEXT.index("\n\ntarget:")
    path = tmp_path / "edited.yaml"
    path.write_text(PAPER_TEXT[:start] + PAPER_TEXT[end:])
    with pytest.raises(InputError) as info:
        load_scenario(path)
    assert any("needs a 'source'" in str(p) for p in info.value.problems)


def test_gpu_price_override_and_model_dtype_override(tmp_path: Path) -> None:
    path = _edited(
        tmp_path,
        "model: paper-1t-hybrid",
        "model:\n  card: paper-1t-hybrid\n  dtypes: {weights: int4}",
    )
    text = path.read_text().replace(
        "cost:\n  link:", "cost:\n  gpu_usd_per_hour: {h20: 1.5}\n  source: test quote\n  link:"
    )
    path.write_text(text)
    spec = load_scenario(path)
    base = load_scenario(PAPER_SCENARIO)
    assert spec.cost.gpu_usd_per_hour == {"h20": 1.5}
    assert spec.model.architecture is not None and base.model.architecture is not None
    assert spec.model.architecture.dtypes.weights == "int4"
    assert weight_bytes(spec.model.architecture) < weight_bytes(base.model.architecture)
    assert "overridden by the scenario" in spec.model.source


def test_unknown_dtype_is_named(tmp_path: Path) -> None:
    path = _edited(tmp_path, "model: paper-1t-hybrid", "model:\n  card: paper-1t-hybrid\n  dtypes: {weights: int3}")
    with pytest.raises(InputError) as info:
        load_scenario(path)
    assert any("model.dtypes.weights" in str(p) and "must be one of" in str(p) for p in info.value.problems)


def test_size_cli_names_a_bad_bandwidth_list() -> None:
    result = run_cli("size", "--bandwidths", "10,abc", "--no-verify")
    assert result.returncode == 2
    assert "--bandwidths" in result.stderr and "Traceback" not in result.stderr
