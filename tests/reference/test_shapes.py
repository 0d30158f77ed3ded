"""The small-M GEMM shape curve: its fit, its place in the roofline, and its round trip through a profile."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.io.hardware import load_hardware
from prfaas_plan.io.profile_writer import write_accelerator_profile
from prfaas_plan.physics.ops import forward_ops
from prfaas_plan.physics.roofline import Instance, roofline_time, shape_penalty
from prfaas_plan.reference.machine import SHAPE_ROWS, fit_half_rows
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
    shapes = KernelShapes(gemm_half_rows=21.5, source="test")
    path = write_accelerator_profile(ACCELERATOR, tmp_path / "m.yaml", "note", shapes)
    loaded = load_hardware(path)
    assert loaded.kernel_shapes == shapes
    assert load_hardware(write_accelerator_profile(ACCELERATOR, tmp_path / "n.yaml")).kernel_shapes is None
