"""Instance shapes (``physics.shapes``, ``optimize.shapes``, the pool's ``shape:`` key): memory that never
shrinks as a shape grows, weights that do not fit ruled out with the numbers, a TP shape priced exactly as
the roofline priced every pool before shapes, and the loader's checks."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.errors import InputError
from prfaas_plan.io.names import load_named_hardware, load_named_model
from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.physics.engine import with_dtypes
from prfaas_plan.physics.memory import cache_bytes, parameter_count, weight_bytes
from prfaas_plan.physics.shapes import (
    candidate_shapes,
    gpu_counts,
    memory_problem,
    shape_memory,
    shaped_decode_capacity,
    shaped_decode_step,
    shaped_prefill_time,
    shapes_of,
)
from prfaas_plan.spec.hardware import RooflineParams
from prfaas_plan.spec.shape import InstanceShape
from prfaas_plan.throughput import stage_model
from tests.conftest import examples

REPO = Path(__file__).resolve().parents[2]
HARDWARE = ("h200", "h20", "b200", "gb200", "mi300x", "l40s", "h100")
MODELS = ("qwen3.5-397b-a17b", "deepseek-v3", "llama-3.1-70b", "gpt-oss-120b", "qwen3-next-80b-a3b")


def _layout(shape: InstanceShape) -> str:
    """The parallel layout apart from the GPU count: TP, TP+EP or DP+EP."""
    if shape.attention_data_parallel > 1:
        return "dp"
    return "ep" if shape.expert_parallel > 1 else "tp"


@settings(max_examples=examples(30))
@given(hw=st.sampled_from(HARDWARE), model=st.sampled_from(MODELS), dtype=st.sampled_from(("bf16", "fp8", "fp4")))
def test_a_larger_shape_never_has_less_memory(hw: str, model: str, dtype: str) -> None:
    acc = load_named_hardware(hw).accelerator
    arch = with_dtypes(load_named_model(model).architecture, weights_dtype=dtype)
    shapes = candidate_shapes(arch, acc)
    mems = [shape_memory(arch, acc, s) for s in shapes]
    for a in mems:
        for b in mems:
            if b.shape.gpus > a.shape.gpus:
                assert b.hbm_bytes > a.hbm_bytes and b.usable_bytes > a.usable_bytes
                if _layout(a.shape) == _layout(b.shape) and a.free_bytes >= 0:
                    # the same layout on more GPUs: at least as much left for caches beside the weights
                    assert b.free_bytes >= a.free_bytes


def test_gpu_counts_cover_the_domain() -> None:
    assert gpu_counts(1) == (1,)
    assert gpu_counts(8) == (1, 2, 4, 8)
    assert gpu_counts(72) == (1, 2, 4, 8, 16, 32, 64, 72)
    dense = load_named_model("llama-3.1-70b").architecture
    moe = load_named_model("qwen3.5-397b-a17b").architecture
    assert [s.label for s in shapes_of(8, dense)] == ["TP8"]
    assert [s.label for s in shapes_of(8, moe)] == ["TP8", "TP8 EP8", "DP8 EP8"]
    assert [s.label for s in shapes_of(1, moe)] == ["TP1"]
    pcie = load_named_hardware("l40s").accelerator
    assert {s.gpus for s in candidate_shapes(moe, pcie)} == {1}


def test_weights_that_do_not_fit_are_ruled_out_with_the_numbers() -> None:
    card = load_named_model("qwen3.5-397b-a17b")
    arch = with_dtypes(card.architecture, weights_dtype="bf16")
    h20 = load_named_hardware("h20").accelerator
    tp8 = InstanceShape(gpus=8, tensor_parallel=8)
    why = memory_problem(card.name, arch, h20, tp8)
    weights_gb = weight_bytes(arch) / 1e9
    assert weights_gb > 8 * 96 * 0.9  # BF16 Qwen3.5-397B does not fit 8 x H20
    assert why is not None and f"{weights_gb:,.0f} GB of weights" in why and "8 x 96 GB h20" in why and "BF16" in why
    # at FP8 the weights fit; one request of 128K tokens' KV/state fits beside them too
    fp8 = with_dtypes(card.architecture, weights_dtype="fp8")
    assert memory_problem(card.name, fp8, h20, tp8, 131_072) is None
    # weights of about half a byte per parameter: parameter count is the scale of the FP8 weights
    assert 0.9 < weight_bytes(fp8) / parameter_count(fp8) < 1.1
    # the KV of a request longer than what is left beside the weights rules the shape out, naming the KV
    left = shape_memory(fp8, h20, tp8).free_bytes
    per_token = float(cache_bytes(fp8, 2.0) - cache_bytes(fp8, 1.0))
    too_long = 2 * left / per_token
    long_why = memory_problem(card.name, fp8, h20, tp8, too_long)
    assert long_why is not None and "KV/state" in long_why


def test_data_parallel_attention_stores_the_attention_side_per_replica() -> None:
    arch = load_named_model("deepseek-v3").architecture
    acc = load_named_hardware("h200").accelerator
    tp8 = shape_memory(arch, acc, InstanceShape(gpus=8, tensor_parallel=8, expert_parallel=8))
    dp8 = shape_memory(
        arch, acc, InstanceShape(gpus=8, tensor_parallel=1, expert_parallel=8, attention_data_parallel=8)
    )
    assert dp8.weight_bytes > tp8.weight_bytes and dp8.hbm_bytes == tp8.hbm_bytes


def test_a_tensor_parallel_shape_is_priced_as_before() -> None:
    spec = load_scenario(REPO / "workloads" / "qwen3.5-capacity.yaml")
    before = stage_model(spec)
    tp8 = InstanceShape(gpus=8, tensor_parallel=8)
    shaped = replace(spec, prfaas=replace(spec.prfaas, shape=tp8), local=replace(spec.local, shape=tp8))
    after = stage_model(shaped)
    lengths = np.asarray([1_000.0, 8_000.0, 64_000.0])
    assert np.array_equal(before.prfaas_prefill(lengths), after.prfaas_prefill(lengths))
    assert np.array_equal(before.local_prefill(lengths), after.local_prefill(lengths))
    assert (before.decode_max_batch, before.decode_step_time_s) == (after.decode_max_batch, after.decode_step_time_s)


def test_data_parallel_shape_pricing_is_physical() -> None:
    arch = load_named_model("qwen3.5-397b-a17b").architecture
    acc = load_named_hardware("h200").accelerator
    params = RooflineParams()
    dp = InstanceShape(gpus=8, tensor_parallel=1, expert_parallel=8, attention_data_parallel=8)
    ep = InstanceShape(gpus=8, tensor_parallel=8, expert_parallel=8)
    lengths = np.asarray([1_000.0, 16_000.0])
    # one request's prefill runs its attention side on one replica (one GPU): slower than across eight
    assert np.all(
        shaped_prefill_time(arch, acc, dp, params, lengths).total_s
        > shaped_prefill_time(arch, acc, ep, params, lengths).total_s
    )
    # a decode step never gets faster with a larger batch, and its parts add up
    batches = np.arange(1.0, 65.0)
    step = shaped_decode_step(arch, acc, dp, params, batches, 20_000.0)
    assert np.all(np.diff(step.total_s) >= -1e-12)
    parts = step.compute_s + step.memory_s + step.communication_s + step.overhead_s
    assert np.allclose(parts, step.total_s)
    cap = shaped_decode_capacity(arch, acc, dp, params, 20_000.0, 0.025)
    assert cap is not None and cap.max_batch >= 1 and cap.step_time_s <= 0.025


def _scenario(tmp_path: Path, local_extra: str, dtype: str = "fp8") -> Path:
    text = (REPO / "workloads" / "qwen3.5-capacity.yaml").read_text()
    text = text.replace("dtypes: {weights: fp8}", f"dtypes: {{weights: {dtype}}}")
    text = text.replace("    instances: 8\n", f"    instances: 8\n{local_extra}", 1)
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path


def test_loader_reads_auto_and_named_shapes(tmp_path: Path) -> None:
    auto = load_scenario(_scenario(tmp_path, "    shape: auto\n"))
    assert auto.local.choose_shape and auto.local.shape is None and not auto.prfaas.choose_shape
    dp8 = "    shape: {tensor_parallel: 1, attention_data_parallel: 8, expert_parallel: 8}\n"
    named = load_scenario(_scenario(tmp_path, dp8))
    assert named.local.shape == InstanceShape(gpus=8, tensor_parallel=1, expert_parallel=8, attention_data_parallel=8)


@pytest.mark.parametrize(
    ("extra", "dtype", "message"),
    [
        ("    shape: {tensor_parallel: 4}\n", "fp8", "tensor_parallel x attention_data_parallel must equal"),
        ("    shape: {attention_data_parallel: 8}\n", "fp8", "needs expert_parallel"),
        ("    shape: {tensor_parallel: 8}\n", "bf16", "GB of weights > 8 x 96 GB h20"),
        ("    shape: tp8\n", "fp8", "expected auto or a mapping"),
    ],
)
def test_loader_refuses_bad_shapes(tmp_path: Path, extra: str, dtype: str, message: str) -> None:
    with pytest.raises(InputError) as err:
        load_scenario(_scenario(tmp_path, extra, dtype))
    assert message in str(err.value) and "deployment.local.shape" in str(err.value)


def test_variants_put_the_screens_best_first() -> None:
    from prfaas_plan.optimize.shapes import pool_shapes, variants

    spec = load_scenario(REPO / "workloads" / "qwen3.5-capacity.yaml")
    auto = replace(spec, local=replace(spec.local, choose_shape=True))
    local = pool_shapes(auto, "local")
    costs = [s.usd_per_request for s in local.screened]
    assert costs == sorted(costs) and all(c > 0 for c in costs)
    assert any("GB of weights" in why for why in local.ruled_out)  # 1, 2 and 4 x H20 cannot hold 403 GB
    pairs, ruled = variants(auto)
    assert pairs[0].local_shape == local.screened[0].shape
    assert pairs[0].prfaas_shape == spec.prfaas.instance_shape  # the PrfaaS pool did not ask to choose
    assert len(pairs) == 2 and ruled == local.ruled_out


def test_the_decode_step_curve_is_the_shapes_own(tmp_path: Path) -> None:
    """With attention data parallelism the stage model's decode-step curve (TPOT under load, the TPOT model's
    decode capacity, the simulator) is priced on the shape, as its batch and step are: at BS_max the curve is the
    capacity's step (priced as a plain tensor-parallel instance it was about twice as long on DeepSeek-V3 DP8 EP8)."""
    from prfaas_plan.throughput import stage_model

    dp8 = "    shape: {tensor_parallel: 1, attention_data_parallel: 8, expert_parallel: 8}\n"
    for extra in (dp8, ""):
        model = stage_model(load_scenario(_scenario(tmp_path, extra)))
        assert model.decode_step_times_s, "a roofline pool prices a curve"
        assert model.decode_step_times_s[-1] == pytest.approx(model.decode_step_time_s, rel=1e-9), extra
