"""The kernel shape curves (small-M GEMMs, attention context, MoE load): fits, roofline, profile round trip,
and the reference kernel's routing against the load model."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.errors import InputError
from prfaas_plan.io.hardware import load_hardware
from prfaas_plan.physics.moe_load import busiest_load
from prfaas_plan.physics.ops import forward_ops
from prfaas_plan.physics.roofline import Instance, roofline_time, shape_penalty
from prfaas_plan.reference.counter import Counter
from prfaas_plan.reference.kernel import moe_block
from prfaas_plan.reference.machine import SHAPE_ROWS, fit_half_rows, measure_routing
from prfaas_plan.reference.model import build_model
from prfaas_plan.reference.shrink import shrink_architecture
from prfaas_plan.report.profile import write_accelerator_profile
from prfaas_plan.spec.hardware import Accelerator, KernelShapes, RooflineParams
from tests.conftest import examples
from tests.strategies_models import one_of_each

ACCELERATOR = Accelerator(
    key="x",
    name="x",
    memory_bytes=1e10,
    hbm_bandwidth_bytes_per_s=2e10,
    dense_flop_per_s={"bf16": 1e11},
    source="test figures",
)


@settings(max_examples=examples(30), deadline=None)
@given(st.floats(0.0, 200.0), st.floats(1e9, 1e12))
def test_fit_recovers_the_half_rate_rows(half_rows: float, rate: float) -> None:
    """Times generated as flops / F · (1 + m_half / m) are fitted back to m_half."""
    flops = [2.0 * m * 1024 * 1024 for m in SHAPE_ROWS]
    seconds = [f / rate * (1 + half_rows / m) for f, m in zip(flops, SHAPE_ROWS, strict=True)]
    assert np.isclose(fit_half_rows(SHAPE_ROWS, seconds, flops, rate), half_rows, rtol=1e-9, atol=1e-9)


@settings(max_examples=examples(30), deadline=None)
@given(st.floats(0.0, 100.0), st.integers(1, 64), st.integers(1, 8))
def test_the_curve_only_slows_gemms_and_vanishes_at_zero(half_rows: float, new: int, batch: int) -> None:
    """A positive m_half never makes a pass faster, 0 changes nothing, and attention cores are untouched."""
    arch = one_of_each("bf16")
    instance = Instance(accelerator=ACCELERATOR, gpus=1)
    base = RooflineParams().kernel_only
    shaped = RooflineParams(gemm_half_rows=half_rows).kernel_only
    for decode in (False, True):
        ops = forward_ops(arch, cached=4, new=1 if decode else new, batch=batch if decode else 1, decode=decode)
        tokens = np.asarray(float(batch if decode else new))
        plain = roofline_time(ops, arch, instance, base, tokens)
        slow = roofline_time(ops, arch, instance, shaped, tokens)
        assert float(slow.total_s) >= float(plain.total_s) * (1 - 1e-12)
    assert float(shape_penalty(1.0, half_rows)) == 1.0  # one row: the matrix-vector path
    assert float(shape_penalty(8.0, 0.0)) == 1.0
    assert np.isclose(float(shape_penalty(8.0, half_rows)), 1 + half_rows / 8)


def test_kernel_shapes_survive_a_profile_round_trip(tmp_path: Path) -> None:
    """write_accelerator_profile with shapes, then load_hardware, gives the same curve back."""
    shapes = KernelShapes(gemm_half_rows=21.5, attention_half_context_tokens=37.25, moe_load_skew=0.125, source="t")
    path = write_accelerator_profile(ACCELERATOR, tmp_path / "m.yaml", "note", shapes)
    loaded = load_hardware(path)
    assert loaded.kernel_shapes == shapes
    measured = replace(shapes, memory_efficiency=0.5825)
    assert load_hardware(write_accelerator_profile(ACCELERATOR, tmp_path / "e.yaml", "", measured)).kernel_shapes == (
        measured
    )
    assert load_hardware(write_accelerator_profile(ACCELERATOR, tmp_path / "n.yaml")).kernel_shapes is None


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("attention_half_context_tokens", "-3", "must be >= 0"),
        ("moe_load_skew", "-0.5", "must be >= 0"),
        ("moe_load_skew", "lots", "expected a number"),
        ("attention_half_tokens", "3", "unknown key"),
        ("memory_efficiency", "4.5", "must be <= 4"),
        ("memory_efficiency", "0", "must be > 0"),
    ],
)
def test_bad_kernel_shapes_are_named_with_file_line_and_field(
    tmp_path: Path, key: str, value: str, message: str
) -> None:
    """A bad shape value in a profile is an InputError naming the file, its line and the field."""
    path = write_accelerator_profile(ACCELERATOR, tmp_path / "m.yaml", "", KernelShapes(gemm_half_rows=2.0, source="t"))
    text = path.read_text()
    path.write_text(
        text.replace("kernel_shapes:\n", f"kernel_shapes:\n  {key}: {value}\n", 1).replace(f"  {key}: 0.0\n", "", 1)
    )
    with pytest.raises(InputError) as caught:
        load_hardware(path)
    shown = [str(p) for p in caught.value.problems]
    assert any("m.yaml:" in p and f"kernel_shapes.{key}" in p and message in p for p in shown), shown


def test_the_kernel_records_each_routing_decision() -> None:
    """The MoE block's recorded loads are its routing: per layer call, tokens x top-k choices in all, each
    expert at most once per token."""
    arch = shrink_architecture(one_of_each("fp32"))
    model = build_model(arch, np.random.default_rng(1), compute=np.float32)
    layer = next(layer for layer in model.layers if layer.ffn.kind == "moe")
    counter = Counter()
    rng = np.random.default_rng(2)
    for tokens in (1, 5, 40):
        moe_block(rng.standard_normal((tokens, arch.hidden_size)).astype(np.float32), layer, counter)
    (op,) = [op for op in counter.ops() if op.name == "moe.experts"]
    k = layer.ffn.active_experts
    assert [sum(load) for load in op.expert_loads] == [tokens * k for tokens in (1, 5, 40)]
    assert all(max(load) <= tokens for load, tokens in zip(op.expert_loads, (1, 5, 40), strict=True))
    assert op.experts_touched == sum(sum(1 for n in load if n) for load in op.expert_loads)


def test_reference_routing_against_the_load_model() -> None:
    """The reference kernel's routing (random router weights) over 48 layer calls: its mean busiest expert is
    at least the uniform model's (a lower bound) less four standard errors, and the fitted skew reproduces it."""
    arch = shrink_architecture(one_of_each("fp32"))
    study = measure_routing(arch, np.random.default_rng(3), tokens=64, passes=48)
    assert study is not None
    uniform = busiest_load(64, study.experts, study.active)
    spread = np.sqrt(64 * study.active / study.experts) / np.sqrt(study.layer_passes)
    assert study.uniform_busiest == uniform
    assert study.observed_busiest >= uniform - 4 * spread
    fitted = busiest_load(64, study.experts, study.active, skew=study.skew)
    assert fitted == pytest.approx(max(study.observed_busiest, uniform), rel=1e-6)


def test_a_pools_roofline_takes_the_shapes_its_hardware_profile_measured(tmp_path: Path) -> None:
    """A profile written with measured kernel shapes (as ``validate kernel --profile-out`` does) prices the
    pools that use it with those shapes; a pool's own ``roofline:`` fields still win."""
    from prfaas_plan.io.hardware import load_hardware as load
    from prfaas_plan.io.scenario import load_scenario
    from tests.conftest import REPO

    h20 = load(REPO / "hardware_profiles" / "h20.yaml").accelerator
    shapes = KernelShapes(
        gemm_half_rows=12.5, attention_half_context_tokens=40.0, moe_load_skew=0.25, memory_efficiency=0.6, source="t"
    )
    write_accelerator_profile(h20, tmp_path / "measured-h20.yaml", "", shapes)
    text = (REPO / "workloads" / "paper-case-study-roofline.yaml").read_text()
    lines = text.splitlines()
    local = next(i for i, line in enumerate(lines) if line.strip() == "local:")
    at = next(i for i in range(local, len(lines)) if lines[i].strip().startswith("hardware:"))
    lines[at] = lines[at].split("hardware:")[0] + f"hardware: {tmp_path / 'measured-h20.yaml'}"
    (tmp_path / "s.yaml").write_text("\n".join(lines) + "\n")
    scenario = load_scenario(tmp_path / "s.yaml")
    params = scenario.local.roofline
    assert (params.gemm_half_rows, params.attention_half_context_tokens, params.moe_load_skew) == (12.5, 40.0, 0.25)
    assert params.memory_efficiency == 0.6
    assert scenario.prfaas.roofline.attention_half_context_tokens == RooflineParams().attention_half_context_tokens
    assert scenario.prfaas.roofline.memory_efficiency == RooflineParams().memory_efficiency
    overridden = "\n".join(lines).replace(
        f"hardware: {tmp_path / 'measured-h20.yaml'}",
        f"hardware: {tmp_path / 'measured-h20.yaml'}\n    roofline: {{gemm_half_rows: 3.0}}",
    )
    (tmp_path / "o.yaml").write_text(overridden + "\n")
    again = load_scenario(tmp_path / "o.yaml").local.roofline
    assert (again.gemm_half_rows, again.attention_half_context_tokens) == (3.0, 40.0)
