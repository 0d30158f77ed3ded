"""Laws of the roofline pricing and of the curves derived from it (issue 3)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.errors import InfeasibleError
from prfaas_plan.io.hardware import load_hardware
from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.lengths import TruncatedLogNormal
from prfaas_plan.physics.calibration import calibrate
from prfaas_plan.physics.curves import PolyCurve, TabulatedCurve
from prfaas_plan.physics.decode import decode_capacity
from prfaas_plan.physics.memory import weight_bytes
from prfaas_plan.physics.ops import Op, causal_pairs, forward_ops
from prfaas_plan.physics.prefill import prefill_seconds
from prfaas_plan.physics.roofline import Instance, roofline_time
from prfaas_plan.spec.hardware import RooflineParams
from prfaas_plan.spec.model import Architecture
from prfaas_plan.throughput import stage_model
from tests.conftest import REPO, examples
from tests.strategies import architectures

H200 = load_hardware(REPO / "hardware_profiles" / "h200.yaml").accelerator
SETTINGS = settings(max_examples=examples(40), deadline=None)
LENGTHS = np.array([1.0, 100.0, 1_000.0, 8_000.0, 32_000.0, 128_000.0])


def _scaled(factor_flops: float, factor_bw: float) -> Instance:
    acc = replace(
        H200,
        dense_flop_per_s={k: v * factor_flops for k, v in H200.dense_flop_per_s.items()},
        hbm_bandwidth_bytes_per_s=H200.hbm_bandwidth_bytes_per_s * factor_bw,
    )
    return Instance(accelerator=acc, gpus=8)


@SETTINGS
@given(architectures(), st.floats(1.0, 10.0), st.floats(1.0, 10.0))
def test_more_flops_or_bandwidth_never_increases_time(arch: Architecture, more_flops: float, more_bw: float) -> None:
    """Prefill and decode times never grow when peak FLOP/s or memory bandwidth grows."""
    params = RooflineParams()
    base = prefill_seconds(arch, _scaled(1, 1), params, LENGTHS)
    assert np.all(prefill_seconds(arch, _scaled(more_flops, 1), params, LENGTHS) <= base * (1 + 1e-12))
    assert np.all(prefill_seconds(arch, _scaled(1, more_bw), params, LENGTHS) <= base * (1 + 1e-12))
    batch = np.array([1.0, 8.0, 64.0])
    decode = roofline_time(
        forward_ops(arch, cached=4096, new=1, batch=batch, decode=True), arch, _scaled(1, 1), params, batch
    )
    faster = roofline_time(
        forward_ops(arch, cached=4096, new=1, batch=batch, decode=True),
        arch,
        _scaled(more_flops, more_bw),
        params,
        batch,
    )
    assert np.all(faster.total_s <= decode.total_s * (1 + 1e-12))


@SETTINGS
@given(st.floats(0.0, 1e15), st.floats(0.0, 1e12), st.floats(0.05, 1.0), st.floats(0.05, 1.0))
def test_one_operation_costs_the_larger_of_its_bounds(flops: float, nbytes: float, ec: float, em: float) -> None:
    """For a single operation, roofline time = max(FLOPs / (F·e_c), bytes / (B·e_m))."""
    op = Op(
        name="x",
        matmul_flops=np.array(flops),
        elementwise_flops=np.array(0.0),
        weight_bytes=np.array(nbytes),
        activation_bytes=np.array(0.0),
        cache_bytes=np.array(0.0),
    )
    arch = Architecture(hidden_size=1, vocab_size=1, layers=(), dtypes=replace(_bf16()))
    instance = Instance(accelerator=H200, gpus=1)
    params = RooflineParams(compute_efficiency=ec, memory_efficiency=em).kernel_only
    result = roofline_time([op], arch, instance, params, np.array(0.0))
    expected = max(flops / (H200.dense_flop_per_s["bf16"] * ec), nbytes / (H200.hbm_bandwidth_bytes_per_s * em))
    assert float(result.total_s) == pytest.approx(expected, rel=1e-12, abs=1e-300)


def _bf16():  # type: ignore[no-untyped-def]
    from prfaas_plan.spec.model import Dtypes

    return Dtypes()


@SETTINGS
@given(architectures())
def test_time_is_bounded_by_the_summed_bounds(arch: Architecture) -> None:
    """max(Σ compute, Σ memory) <= Σ max(compute, memory) <= Σ compute + Σ memory, for every length."""
    instance = Instance(accelerator=H200, gpus=8)
    params = RooflineParams()
    result = roofline_time(forward_ops(arch, cached=0, new=LENGTHS), arch, instance, params, LENGTHS)
    body = result.compute_s + result.memory_s  # the total less communication and overhead, without cancellation
    assert np.all(body >= np.maximum(result.compute_bound_s, result.memory_bound_s) * (1 - 1e-12))
    assert np.all(body <= (result.compute_bound_s + result.memory_bound_s) * (1 + 1e-12))


@given(st.integers(0, 5000), st.integers(1, 5000), st.integers(1, 3000))
def test_causal_pairs_match_a_direct_count(cached: int, new: int, window: int) -> None:
    """The closed-form count of attended positions equals summing min(c + i, window) over new tokens."""
    direct = sum(min(cached + i, window) for i in range(1, new + 1))
    assert float(causal_pairs(cached, new, window)) == direct
    assert float(causal_pairs(cached, new)) == sum(cached + i for i in range(1, new + 1))


@settings(max_examples=examples(25), deadline=None)
@given(architectures(), st.floats(0.05, 0.95), st.floats(0.0, 0.5))
def test_calibration_recovers_known_parameters(arch: Architecture, ec: float, overhead: float) -> None:
    """Points generated by the roofline with a known compute efficiency and overhead (memory efficiency at its
    prior, which calibration keeps) are refitted to the same times within 0.1 %."""
    instance = Instance(accelerator=H200, gpus=8)
    truth = RooflineParams(compute_efficiency=ec, overhead_s=overhead)
    lengths = (1_000.0, 8_000.0, 32_000.0, 128_000.0)
    measured = tuple(float(v) for v in prefill_seconds(arch, instance, truth, np.array(lengths)))
    result = calibrate(arch, instance, lengths, measured)
    assert np.allclose(result.fitted_s, measured, rtol=1e-3)
    assert np.allclose(result.leave_one_out_s, measured, rtol=1e-2)


def test_calibration_on_an_engine_base_prices_fp8_gemms_at_the_fitted_efficiency() -> None:
    """An engine's parameters carry per-dtype GEMM efficiencies (FP8 on Hopper apart from BF16); a calibration
    fits one e_c for every GEMM, so the fitted parameters price an FP8 model's GEMMs at it too: points generated
    at a known e_c are refitted to the same times (before the fix the base's FP8 figure overrode the fitted one
    and the 'fitted' curve ran about 2x off its own points)."""
    from prfaas_plan.io.engine_profile import load_named_engine
    from prfaas_plan.io.names import load_named_model
    from prfaas_plan.physics.engine import engine_params, with_dtypes

    base = engine_params(load_named_engine("vllm"), "hopper")
    assert base.gemm_efficiency("fp8") != base.gemm_efficiency("bf16")  # else this checks nothing
    card = load_named_model("llama-3.1-70b").architecture
    assert card is not None
    arch = with_dtypes(card, weights_dtype="fp8")
    instance = Instance(accelerator=H200, gpus=8)
    truth = replace(base, compute_efficiency=0.06, dtype_compute_efficiency=(), overhead_s=0.05)
    lengths = (2_000.0, 4_000.0, 8_000.0, 16_000.0)
    measured = tuple(float(v) for v in prefill_seconds(arch, instance, truth, np.array(lengths)))
    result = calibrate(arch, instance, lengths, measured, base=base, leave_one_out=False)
    assert result.params.gemm_efficiency("fp8") == pytest.approx(result.params.compute_efficiency)
    assert result.params.compute_efficiency == pytest.approx(0.06, rel=1e-3)
    assert np.allclose(result.fitted_s, measured, rtol=1e-3)


def test_calibration_on_an_engine_base_prices_routed_experts_at_the_fitted_efficiency() -> None:
    """An engine's parameters run the routed experts' grouped GEMMs at a factor of the dense rate; a calibration
    fits one e_c for every GEMM, the experts' too, so the fitted parameters price them at it: points generated at a
    known e_c with no experts' factor are refitted to the same times (with the base's factor kept, the fitted
    curve of a mixture-of-experts model ran several times slower than its own points)."""
    from prfaas_plan.io.engine_profile import load_named_engine
    from prfaas_plan.io.names import load_named_model

    base = engine_params_of("sglang")
    assert base.expert_gemm_efficiency < 1.0  # else this checks nothing
    arch = load_named_model("qwen3-235b-a22b").architecture
    assert arch is not None and load_named_engine("sglang").expert_gemm_scale == base.expert_gemm_efficiency
    instance = Instance(accelerator=H200, gpus=8)
    truth = replace(base, compute_efficiency=0.3, dtype_compute_efficiency=(), expert_gemm_efficiency=1.0)
    lengths = (2_000.0, 4_000.0, 8_000.0, 16_000.0)
    measured = tuple(float(v) for v in prefill_seconds(arch, instance, truth, np.array(lengths)))
    result = calibrate(arch, instance, lengths, measured, base=base, leave_one_out=False)
    assert result.params.expert_gemm_efficiency == 1.0
    assert result.params.compute_efficiency == pytest.approx(0.3, rel=1e-2)
    assert np.allclose(result.fitted_s, measured, rtol=1e-3)


def engine_params_of(engine: str) -> RooflineParams:
    from prfaas_plan.io.engine_profile import load_named_engine
    from prfaas_plan.physics.engine import engine_params

    return engine_params(load_named_engine(engine), "hopper")


def test_tabulated_curve_expectations_match_its_polynomial() -> None:
    """A polynomial tabulated on a fine grid has the same partial expectations (power 1 and 2) to 1e-5."""
    lengths = TruncatedLogNormal(mu=9.9, sigma=1.0, lower_tokens=128, upper_tokens=131_072)
    poly = PolyCurve(coefficients=(0.3891, 4.2055e-5, 9.9365e-11), provenance="measured", source="Table 5 fit")
    grid = np.linspace(1.0, 200_000.0, 4001)
    table = TabulatedCurve(knots_tokens=tuple(grid), knot_values=tuple(poly(grid)), provenance="derived", source="")
    for lo, hi in ((0.0, 19_400.0), (19_400.0, 131_072.0), (5_000.0, 6_000.0)):
        for power in (1, 2):
            assert float(table.expect(lengths, lo, hi, power)) == pytest.approx(
                float(poly.expect(lengths, lo, hi, power)), rel=1e-5
            )


def test_weights_that_do_not_fit_leave_no_decode_capacity(tmp_path: Path) -> None:
    """An instance whose memory cannot hold the weights has no decode batch, and a scenario using it is
    infeasible with the decode stage named."""
    from prfaas_plan.io.models import load_model_card

    card = load_model_card(REPO / "workloads" / "models" / "qwen3-next-80b-a3b.yaml")
    assert card.architecture is not None
    tiny = Instance(accelerator=replace(H200, memory_bytes=weight_bytes(card.architecture) / 16), gpus=8)
    assert decode_capacity(card.architecture, tiny, RooflineParams(), 30_000, 0.025) is None
    roomy = Instance(accelerator=H200, gpus=8)
    capacity = decode_capacity(card.architecture, roomy, RooflineParams(), 30_000, 0.025)
    assert capacity is not None and capacity.max_batch >= 1 and capacity.step_time_s <= 0.025
    (tmp_path / "hardware_profiles").mkdir()
    (tmp_path / "workloads").mkdir()
    (tmp_path / "hardware_profiles" / "tiny.yaml").write_text(
        "hardware:\n  name: tiny\n  memory_gb: 1\n  hbm_bandwidth_tb_per_s: 4\n  dense_tflops: {bf16: 148}\n"
        "  scale_up_bandwidth_gb_per_s: 900\n  confidence: low\n  source: test\n"
    )
    scenario = (REPO / "workloads" / "paper-case-study.yaml").read_text()
    scenario = scenario.replace("model: paper-1t-hybrid", "model: qwen3-next-80b-a3b")
    scenario = scenario.replace("    hardware: h200\n", "    hardware: h200\n    method: roofline\n")
    scenario = scenario.replace("    hardware: h20\n", "    hardware: tiny\n    method: roofline\n")
    path = tmp_path / "workloads" / "tiny.yaml"
    path.write_text(scenario)
    with pytest.raises(InfeasibleError, match=r"pd_decode: .*(cache fits beside the weights|cache .* exceed)"):
        stage_model(load_scenario(path))


def test_a_profile_without_the_needed_dtype_is_an_input_error(tmp_path: Path) -> None:
    """A roofline pool on an accelerator that lists no rate for the card's compute dtype is refused, naming
    the profile file and field, through the loader and the real CLI (exit 2, no traceback)."""
    from prfaas_plan.errors import InputError
    from tests.conftest import run_cli

    result = run_cli("kv", "--model", "llama-3.1-8b", "--hardware", "rubin-cpx")
    assert result.returncode == 2 and "rubin-cpx.yaml hardware.dense_tflops: has no dense_tflops.bf16" in result.stderr
    assert "Traceback" not in result.stderr
    scenario = (REPO / "workloads" / "paper-case-study-roofline.yaml").read_text()
    path = tmp_path / "cpx.yaml"
    path.write_text(scenario.replace("    hardware: h200\n", "    hardware: rubin-cpx\n", 1))
    with pytest.raises(InputError, match=r"deployment.prfaas.hardware: .*rubin-cpx.yaml has no dense_tflops.bf16"):
        load_scenario(path)


@pytest.mark.parametrize("chunk", [512.0, 2_048.0, 8_192.0, 16_384.0, 1_000.5])
def test_the_prefill_curve_is_exact_at_chunk_boundaries(chunk: float) -> None:
    """The tabulated prefill curve (what `kv` and the planner read) equals the roofline at each chunk boundary up to
    262,144 tokens and at the first whole token past it, on a plain and on a data-parallel shape: the step of one
    chunk's per-layer cost is not smeared over a knot interval (a prompt of exactly one SGLang chunk, 8,192
    tokens, was priced about 2 % too slow for Qwen3.5-9B on one H200)."""
    from prfaas_plan.io.names import load_named_model
    from prfaas_plan.physics.prefill import CHUNK_BOUNDARY_TOKENS, prefill_curve
    from prfaas_plan.physics.shapes import shaped_prefill_curve, shaped_prefill_time
    from prfaas_plan.spec.shape import InstanceShape

    h200 = load_hardware(REPO / "hardware_profiles" / "h200.yaml").accelerator
    params = replace(RooflineParams(), prefill_chunk_tokens=chunk, layer_overhead_s=1e-3, overhead_s=0.04)
    bounds = chunk * np.arange(1, int(CHUNK_BOUNDARY_TOKENS // chunk) + 1)
    lengths = np.concatenate([bounds, np.floor(bounds) + 1.0])
    arch = load_named_model("qwen3.5-9b").architecture
    assert arch is not None
    one = Instance(accelerator=h200, gpus=1)
    curve = prefill_curve(arch, one, params, source="test")
    assert np.allclose(curve(lengths), prefill_seconds(arch, one, params, lengths), rtol=1e-12)
    moe = load_named_model("deepseek-v3").architecture
    assert moe is not None
    shape = InstanceShape(gpus=8, tensor_parallel=1, attention_data_parallel=8, expert_parallel=8)
    shaped = shaped_prefill_curve(moe, h200, shape, params, source="test")
    direct = shaped_prefill_time(moe, h200, shape, params, lengths).total_s
    assert np.allclose(shaped(lengths), direct, rtol=1e-12)
