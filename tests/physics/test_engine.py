"""Engine-aware serving physics: engine profiles priced into the roofline, monotonicity laws, the fit refitting
its own synthetic measurements, and the loaders' errors."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.errors import InputError
from prfaas_plan.io.engine_profile import builtin_engines, load_engine_profile, load_named_engine
from prfaas_plan.io.hardware import load_hardware
from prfaas_plan.io.names import load_named_model
from prfaas_plan.physics.corpus_fit import (
    FIT_TERMS,
    CorpusCase,
    _pieces,
    _predict_pieces,
    engine_theta,
    fit_corpus,
    fit_engine,
    predict,
)
from prfaas_plan.physics.decode import decode_step_seconds
from prfaas_plan.physics.engine import engine_params, with_dtypes
from prfaas_plan.physics.ops import forward_ops, matmul_kernels
from prfaas_plan.physics.prefill import prefill_seconds
from prfaas_plan.physics.roofline import Instance, communication_s, moe_layers
from prfaas_plan.spec.engine import CorpusMeasurement, EngineProfile
from prfaas_plan.spec.hardware import RooflineParams
from prfaas_plan.spec.model import Architecture
from tests.conftest import REPO, examples
from tests.strategies import architectures

H200 = load_hardware(REPO / "hardware_profiles" / "h200.yaml").accelerator
A100 = load_hardware(REPO / "hardware_profiles" / "a100-80gb.yaml").accelerator
INSTANCE = Instance(accelerator=H200, gpus=8)
SETTINGS = settings(max_examples=examples(25), deadline=None)
SGLANG = load_named_engine("sglang")
LENGTHS = np.array([1.0, 128.0, 1_000.0, 8_192.0, 8_193.0, 32_000.0])
BATCHES = np.arange(1.0, 257.0)

#: Terms that only add time (overheads and collective latencies), with a scale to grow them by.
ADDITIVE = (
    "overhead_s",
    "layer_overhead_s",
    "moe_layer_overhead_s",
    "decode_step_overhead_s",
    "decode_layer_overhead_s",
    "decode_op_overhead_s",
    "all_reduce_latency_s",
    "all_to_all_latency_s",
    "inter_node_latency_s",
)


def test_builtin_engines_load_with_a_source_for_every_term() -> None:
    assert set(builtin_engines()) >= {"sglang", "vllm", "trtllm"}
    for key in ("sglang", "vllm", "trtllm"):
        engine = load_named_engine(key)
        named = {term for term, source in engine.sources if source.strip()}
        assert {"request_overhead_s", "decode_layer_overhead_s", "all_reduce_latency_s", "gemm_efficiency"} <= named


def test_engine_params_price_generation_and_dtype() -> None:
    """Hopper FP8 weights run at the engine's Hopper FP8 figure, BF16 at its BF16 one; an unknown generation
    falls back to `other`."""
    hopper = engine_params(SGLANG, "hopper")
    assert hopper.gemm_efficiency("fp8") == SGLANG.gemm_efficiency_of("hopper", "fp8")
    assert hopper.gemm_efficiency("bf16") == SGLANG.gemm_efficiency_of("hopper", "bf16")
    assert engine_params(SGLANG, "nonesuch").compute_efficiency == SGLANG.gemm_efficiency_of("other", "bf16")
    eager = engine_params(SGLANG, "hopper", cuda_graphs=False)
    assert eager.decode_layer_overhead_s == SGLANG.decode_layer_overhead_eager_s


def test_fp8_weights_change_the_gemm_time_by_the_dtype_efficiency() -> None:
    """The same card in fp8 and bf16 on a part with an fp8 rate: the fp8 GEMM time follows the fp8 efficiency."""
    arch = load_named_model("llama-3.1-8b").architecture
    assert arch is not None
    one = Instance(accelerator=H200, gpus=1)
    base = RooflineParams().kernel_only
    slow = replace(base, dtype_compute_efficiency=(("fp8", 0.2),))
    fast = replace(base, dtype_compute_efficiency=(("fp8", 0.8),))
    fp8 = with_dtypes(arch, "fp8")
    long = np.array([32_000.0])
    assert prefill_seconds(fp8, one, slow, long)[0] > prefill_seconds(fp8, one, fast, long)[0]
    bf16 = with_dtypes(arch, "bf16")  # bf16 weights do not read the fp8 entry
    assert prefill_seconds(bf16, one, slow, long)[0] == prefill_seconds(bf16, one, fast, long)[0]


def test_alpha_beta_collectives() -> None:
    """Each all-reduce adds its latency: 2 per layer per pass; all-to-alls only under expert parallelism."""
    arch = load_named_model("qwen3-235b-a22b").architecture
    assert arch is not None
    tokens = np.array([1_000.0])
    bare = communication_s(arch, INSTANCE, tokens, RooflineParams())
    alpha = replace(RooflineParams(), all_reduce_latency_s=1e-5, all_to_all_latency_s=3e-5)
    with_alpha = communication_s(arch, INSTANCE, tokens, alpha, 3.0)
    assert with_alpha[0] - bare[0] == pytest.approx(2 * arch.n_layers * 3.0 * 1e-5)
    ep = communication_s(arch, INSTANCE, tokens, replace(alpha, expert_parallel=True), 3.0)
    assert ep[0] > with_alpha[0] + 2 * arch.n_layers * 3.0 * 3e-5 * 0.999
    assert communication_s(arch, Instance(accelerator=H200, gpus=1), tokens, alpha)[0] == 0.0


@pytest.mark.parametrize("gpus", [2, 8, 16])
def test_an_all_to_all_moves_each_gpus_own_share_at_once(gpus: int) -> None:
    """Under expert parallelism every GPU sends the routed copies of its own 1/g of the tokens over its own link,
    all at once: the dispatch and combine add, per MoE layer, twice (t / g) x top-k x hidden x 2 bytes x (g - 1) / g
    over the per-direction link rate (no latency here). Pricing the whole batch's copies over one link made an
    8-GPU prefill's all-to-alls 8 times too long (Qwen3.5-397B, 8,192 tokens on 8 x H200 at EP 8: about 0.2 s too
    much, against a measured TTFT of 0.22 s)."""
    from prfaas_plan.physics.ops import ACTIVATION_BYTES
    from prfaas_plan.physics.roofline import moe_layers

    arch = load_named_model("qwen3-235b-a22b").architecture
    assert arch is not None
    instance = Instance(accelerator=H200, gpus=gpus)  # one NVLink domain of 8; 16 spans two nodes
    params = replace(RooflineParams(), all_reduce_latency_s=0.0, all_to_all_latency_s=0.0, inter_node_latency_s=0.0)
    tokens = np.array([8_192.0])
    added = communication_s(arch, instance, tokens, replace(params, expert_parallel=True))[0]
    added -= communication_s(arch, instance, tokens, params)[0]
    layers, top_k = moe_layers(arch)
    per_gpu = 8_192.0 / gpus * top_k * arch.hidden_size * ACTIVATION_BYTES
    link = H200.scale_up_bandwidth_bytes_per_s / 2 * params.communication_efficiency
    local = min(gpus, H200.scale_up_gpus or gpus)
    one = per_gpu * (local - 1) / gpus / link
    if gpus > local:
        nic = H200.scale_out_bandwidth_bytes_per_s
        assert nic is not None
        one += per_gpu * (gpus - local) / gpus / (nic * params.communication_efficiency)
    assert added == pytest.approx(2 * layers * one, rel=1e-9)


def test_decode_reads_the_experts_a_batch_touches() -> None:
    """Batch 1 reads k experts' weights per MoE layer; a large batch approaches all E of them."""
    arch = load_named_model("qwen3-235b-a22b").architecture
    assert arch is not None
    moe = next(g.ffn for g in arch.layers if g.ffn.kind == "moe")

    def expert_bytes(batch: float) -> float:
        ops = forward_ops(arch, cached=1_000.0, new=1.0, batch=np.array([batch]), decode=True)
        return float(next(op for op in ops if op.name == "moe.experts").weight_bytes[0])

    per_expert = expert_bytes(1.0) / moe.active_experts
    assert expert_bytes(1.0) == pytest.approx(per_expert * moe.active_experts)
    touched = moe.experts * (1 - (1 - moe.active_experts / moe.experts) ** 64)
    assert expert_bytes(64.0) == pytest.approx(per_expert * touched)
    assert expert_bytes(4096.0) == pytest.approx(per_expert * moe.experts, rel=1e-6)


def _params(draw_scale: list[float]) -> RooflineParams:
    base = engine_params(SGLANG, "hopper")
    return replace(base, **{k: getattr(base, k) * s + 1e-5 * s for k, s in zip(ADDITIVE, draw_scale, strict=True)})


@SETTINGS
@given(
    architectures(),
    st.lists(st.floats(0.0, 4.0), min_size=len(ADDITIVE), max_size=len(ADDITIVE)),
    st.sampled_from(ADDITIVE),
    st.floats(1e-6, 0.05),
    st.booleans(),
)
def test_more_engine_overhead_never_speeds_anything_up(
    arch: Architecture, scales: list[float], term: str, extra: float, expert_parallel: bool
) -> None:
    """Growing any overhead or collective latency never shortens a prefill or a decode step."""
    params = replace(_params(scales), expert_parallel=expert_parallel)
    more = replace(params, **{term: getattr(params, term) + extra})
    assert np.all(prefill_seconds(arch, INSTANCE, more, LENGTHS) >= prefill_seconds(arch, INSTANCE, params, LENGTHS))
    for context in (100.0, 30_000.0):
        step = decode_step_seconds(arch, INSTANCE, params, BATCHES, context)
        assert np.all(decode_step_seconds(arch, INSTANCE, more, BATCHES, context) >= step)


@SETTINGS
@given(
    architectures(),
    st.lists(st.floats(0.0, 4.0), min_size=len(ADDITIVE), max_size=len(ADDITIVE)),
    st.sampled_from((1, 2, 8, 16)),
    st.booleans(),
    st.floats(1.0, 200_000.0),
    st.floats(1.0, 4.0),
)
def test_a_longer_prompt_never_prefills_sooner(
    arch: Architecture, scales: list[float], gpus: int, expert_parallel: bool, short: float, longer: float
) -> None:
    """Prefill time is non-decreasing in the prompt's length, whatever the engine terms, GPU count and
    parallelism (chunk boundaries, routed-expert tiles and collectives included). The corpus report leans on
    it: two sources' measurements of one configuration where the longer prompt was timed faster cannot both be
    priced within the square root of their ratio (tests/benchmarks/corpus_cv.py, contradictions)."""
    params = replace(_params(scales), expert_parallel=expert_parallel)
    instance = Instance(accelerator=H200, gpus=gpus)
    grid = np.sort(np.concatenate([short * np.linspace(1.0, longer, 64), LENGTHS]))
    times = prefill_seconds(arch, instance, params, grid)
    assert np.all(np.diff(times) >= -1e-12 * times[1:]), (grid, times)


@SETTINGS
@given(st.sampled_from(("minimax-m2.5", "kimi-linear-48b-a3b")), st.floats(0.0, 2.0), st.floats(1e-4, 1.0))
def test_a_longer_kv_handoff_lowers_phi_kv_only(model: str, handoff: float, extra: float) -> None:
    """Φ_kv's T_prefill is the batch-1 prefill plus the KV handoff: a longer handoff lowers Φ_kv by exactly that
    and leaves the prefill (what the planner prices) as it was."""
    from prfaas_plan.io.names import pool_for
    from prfaas_plan.physics.table3 import kv_rows

    pool, card = pool_for(model, "h200", 8, "roofline")
    params = replace(engine_params(SGLANG, "hopper"), kv_handoff_s=handoff)
    lengths = (1_000.0, 32_000.0)
    short = kv_rows(replace(pool, roofline=params), card, lengths)
    long = kv_rows(replace(pool, roofline=replace(params, kv_handoff_s=handoff + extra)), card, lengths)
    for a, b in zip(short, long, strict=True):
        assert b.prefill_s == a.prefill_s
        assert b.kv_bytes_per_s < a.kv_bytes_per_s
        assert b.kv_bytes / b.kv_bytes_per_s == pytest.approx(a.kv_bytes / a.kv_bytes_per_s + extra)


def test_a_calibrated_pool_adds_no_separate_handoff() -> None:
    """A pool calibrated on a hardware profile's measured prefill points carries whatever per-request time they
    were timed with in its fitted overhead: kv adds no handoff on top (the paper's H200 points, Table 5)."""
    from prfaas_plan.io.names import pool_for
    from prfaas_plan.physics.table3 import kv_rows

    pool, card = pool_for("paper-1t-hybrid", "h200", 8, "calibrated")
    pool = replace(pool, roofline=engine_params(SGLANG, "hopper"))
    assert SGLANG.kv_handoff_s > 0
    for row in kv_rows(pool, card, (1_000.0, 128_000.0)):
        assert row.handoff_s == 0.0 and row.disaggregated_prefill_s == row.prefill_s


@SETTINGS
@given(
    architectures(),
    st.lists(st.floats(0.0, 4.0), min_size=len(ADDITIVE), max_size=len(ADDITIVE)),
    st.floats(10.0, 100_000.0),
    st.booleans(),
)
def test_a_larger_decode_batch_never_shortens_a_step(
    arch: Architecture, scales: list[float], context: float, expert_parallel: bool
) -> None:
    params = replace(_params(scales), expert_parallel=expert_parallel, expert_gemm_half_rows=64.0)
    steps = decode_step_seconds(arch, INSTANCE, params, BATCHES, context)
    assert np.all(np.diff(steps) >= -1e-12 * steps[1:]), steps


# ------------------------------------------------------------------ the fit refits its own synthetic corpus


def _measurement(
    i: int, phase: str, model: str, hardware: str, gpus: int, batch: int, tokens: float
) -> CorpusMeasurement:
    return CorpusMeasurement(
        id=f"synthetic-{i}",
        source=f"synthetic-source-{i % 3}",
        engine="sglang",
        engine_version="synthetic",
        model=model,
        hardware=hardware,
        gpus=gpus,
        tensor_parallel=gpus,
        expert_parallel=1,
        weights_dtype="fp8" if i % 2 else "bf16",
        kv_dtype="bf16",
        cuda_graphs=True,
        phase=phase,  # type: ignore[arg-type]
        batch=batch,
        tokens=tokens,
        measured_s=1.0,
    )


def _synthetic_cases() -> list[CorpusCase]:
    cases = []
    plan = [
        ("prefill", "llama-3.1-8b", "h100", 1, 1, 128.0),
        ("prefill", "llama-3.1-8b", "a100-80gb", 1, 1, 2_048.0),
        ("prefill", "llama-3.1-70b", "h200", 4, 1, 16_000.0),
        ("prefill", "qwen3-235b-a22b", "h200", 8, 1, 1_000.0),
        ("prefill", "qwen3-235b-a22b", "h200", 8, 1, 9_000.0),
        ("prefill", "llama-3.1-70b", "h100", 8, 1, 64_000.0),
        ("decode", "llama-3.1-8b", "h100", 1, 1, 1_000.0),
        ("decode", "llama-3.1-70b", "h200", 4, 64, 2_000.0),
        ("decode", "qwen3-235b-a22b", "h200", 8, 4, 4_000.0),
        ("decode", "qwen3-235b-a22b", "h200", 8, 256, 1_000.0),
        ("decode", "llama-3.1-8b", "a100-80gb", 1, 512, 500.0),
    ]
    gen = {"h100": "hopper", "h200": "hopper", "a100-80gb": "ampere"}
    hw = {"h100": load_hardware(REPO / "hardware_profiles" / "h100.yaml").accelerator, "h200": H200, "a100-80gb": A100}
    for i, (phase, model, hardware, gpus, batch, tokens) in enumerate(plan):
        m = _measurement(i, phase, model, hardware, gpus, batch, tokens)
        arch = load_named_model(model).architecture
        assert arch is not None
        cases.append(
            CorpusCase(
                measurement=m,
                arch=with_dtypes(arch, m.weights_dtype),
                instance=Instance(accelerator=hw[hardware], gpus=gpus),
                generation=gen[hardware],
            )
        )
    return cases


CASES = _synthetic_cases()


def _interleaved_moe_decode() -> CorpusCase:
    """A decode metric of a MoE model that carries the arriving requests' prefills (mean ITL at batch 16)."""
    case = next(c for c in CASES if c.measurement.phase == "decode" and c.measurement.model == "qwen3-235b-a22b")
    m = replace(case.measurement, id="synthetic-interleaved", batch=16, interleaved_input_tokens=9_000.0)
    return replace(case, measurement=replace(m, interleaved_output_tokens=500.0))


def _expert_parallel_mxfp4_prefill() -> CorpusCase:
    """gpt-oss-120b (MXFP4 routed experts, BF16 elsewhere) prefilled on 8 x H200 with expert parallelism 8."""
    m = replace(
        _measurement(90, "prefill", "gpt-oss-120b", "h200", 8, 1, 4_000.0),
        expert_parallel=8,
        experts_dtype="fp4",
    )
    arch = load_named_model("gpt-oss-120b").architecture
    assert arch is not None
    return CorpusCase(
        measurement=m, arch=with_dtypes(arch, experts_dtype="fp4"), instance=INSTANCE, generation="hopper"
    )


@pytest.mark.parametrize(("scale", "experts"), [(0.9, 0.4), (3.0, 0.5), (1.2, 1.5)])
def test_the_fit_prices_as_the_roofline_does(scale: float, experts: float) -> None:
    """The fit's pre-priced pieces, one case at a time and batched, give the same time as the physics path for
    every case (a decode metric carrying a MoE model's interleaved prefills, of two chunks each, and an
    expert-parallel prefill with MXFP4 experts among them), including where the dense rate is capped at 1 before
    the experts' factor applies (scale 3) and where the factor would lift the experts past 1 (1.5)."""
    from prfaas_plan.physics.corpus_fit import _Batch

    engine = replace(
        SGLANG,
        gemm_efficiency_scale=scale,
        expert_gemm_scale=experts,
        decode_layer_overhead_s=3e-5,
        prefill_moe_layer_overhead_s=2e-3,
    )
    cases = (*CASES, _interleaved_moe_decode(), _expert_parallel_mxfp4_prefill())
    theta = engine_theta(engine)
    pieces = [_pieces(case, engine, None) for case in cases]
    batched = _Batch.of(pieces).predict(np.tile(theta, (len(cases), 1)))
    for case, piece, together in zip(cases, pieces, batched, strict=True):
        fast = _predict_pieces(piece, theta)
        assert fast == pytest.approx(predict(case, engine), rel=1e-9), case.measurement.id
        assert together == pytest.approx(fast, rel=1e-12), case.measurement.id


@settings(max_examples=examples(4), deadline=None)
@given(
    st.floats(0.5, 1.5),
    st.floats(0.005, 0.3),
    st.floats(2e-5, 5e-4),
    st.floats(5e-4, 0.01),
    st.floats(5e-6, 2e-4),
)
def test_a_fit_refits_its_own_synthetic_measurements(
    scale: float, request_s: float, chunk_s: float, step_s: float, layer_s: float
) -> None:
    """Measurements priced by known terms, fitted from other starting priors without regularisation: the fit
    finds the terms again and reproduces every measurement."""
    truth = replace(
        SGLANG,
        gemm_efficiency_scale=scale,
        request_overhead_s=request_s,
        prefill_layer_overhead_s=chunk_s,
        decode_step_overhead_s=step_s,
        decode_layer_overhead_s=layer_s,
    )
    cases = [replace(c, measurement=replace(c.measurement, measured_s=predict(c, truth))) for c in CASES]
    fit = fit_engine(cases, SGLANG, prior_weight=0.0)
    assert set(fit.values) == set(FIT_TERMS)
    refit = fit.apply(SGLANG)
    for case in cases:
        assert predict(case, refit) == pytest.approx(case.measurement.measured_s, rel=1e-4)
    assert fit.values["request_overhead_s"] == pytest.approx(request_s, rel=2e-2, abs=1e-4)
    assert fit.values["decode_step_overhead_s"] == pytest.approx(step_s, rel=5e-2, abs=5e-5)


def test_the_corpus_fit_tells_the_moe_layer_cost_from_the_per_layer_cost() -> None:
    """Measurements priced with a per-layer and a per-MoE-layer prefill cost, fitted without regularisation by the
    corpus fit from priors 10x off: dense and MoE prefills separate the two, and both come back."""
    truth = replace(SGLANG, prefill_layer_overhead_s=2e-4, prefill_moe_layer_overhead_s=1.5e-3)
    cases = [replace(c, measurement=replace(c.measurement, measured_s=predict(c, truth))) for c in CASES]
    prior = replace(SGLANG, prefill_layer_overhead_s=2e-3, prefill_moe_layer_overhead_s=1.5e-4)
    fit = fit_corpus(cases, {"sglang": prior}, prior_weight=0.0)["sglang"]
    assert "prefill_moe_layer_overhead_s" in fit.values
    assert fit.values["prefill_layer_overhead_s"] == pytest.approx(2e-4, rel=2e-2)
    assert fit.values["prefill_moe_layer_overhead_s"] == pytest.approx(1.5e-3, rel=2e-2)
    dense_only = [c for c in cases if not moe_layers(c.arch)[0]]
    assert "prefill_moe_layer_overhead_s" not in fit_corpus(dense_only, {"sglang": prior})["sglang"].values


def test_the_corpus_fit_tells_the_experts_gemm_rate_from_the_dense_one() -> None:
    """Measurements priced with a dense GEMM scale and a routed experts' factor apart, fitted without
    regularisation from priors of 1: dense and MoE prefills separate the two, and both come back; with dense
    models alone the experts' factor is not fitted."""
    truth = replace(SGLANG, gemm_efficiency_scale=1.1, expert_gemm_scale=0.3)
    cases = [replace(c, measurement=replace(c.measurement, measured_s=predict(c, truth))) for c in CASES]
    prior = replace(SGLANG, gemm_efficiency_scale=1.0, expert_gemm_scale=1.0)
    fit = fit_corpus(cases, {"sglang": prior}, prior_weight=0.0)["sglang"]
    assert fit.values["gemm_efficiency_scale"] == pytest.approx(1.1, rel=2e-2)
    assert fit.values["expert_gemm_scale"] == pytest.approx(0.3, rel=2e-2)
    dense_only = [c for c in cases if not moe_layers(c.arch)[0]]
    assert "expert_gemm_scale" not in fit_corpus(dense_only, {"sglang": prior})["sglang"].values


@SETTINGS
@given(st.floats(0.05, 1.0), st.floats(0.05, 1.0), st.booleans())
def test_a_slower_expert_gemm_never_speeds_a_moe_model_and_leaves_a_dense_one(
    factor: float, lower: float, expert_parallel: bool
) -> None:
    """The routed experts' factor multiplies only their grouped GEMMs' efficiency: lowering it never shortens a
    MoE model's prefill or decode step, and changes no dense model's."""
    params = replace(engine_params(SGLANG, "hopper"), expert_parallel=expert_parallel, expert_gemm_efficiency=factor)
    slower = replace(params, expert_gemm_efficiency=factor * lower)
    for model in ("qwen3-235b-a22b", "deepseek-v3", "llama-3.1-70b"):
        arch = load_named_model(model).architecture
        assert arch is not None
        before = prefill_seconds(arch, INSTANCE, params, LENGTHS)
        after = prefill_seconds(arch, INSTANCE, slower, LENGTHS)
        step, step_after = (decode_step_seconds(arch, INSTANCE, p, BATCHES, 4_000.0) for p in (params, slower))
        if moe_layers(arch)[0]:
            assert np.all(after >= before) and np.all(step_after >= step)
        else:
            assert np.array_equal(after, before) and np.array_equal(step_after, step)


def test_a_dense_prefill_pays_no_moe_layer_cost() -> None:
    """The per-MoE-layer cost adds chunks x MoE layers x the term to a MoE model's prefill, nothing to a dense
    model's."""
    params = engine_params(SGLANG, "hopper")
    more = replace(params, moe_layer_overhead_s=params.moe_layer_overhead_s + 1e-3)
    lengths = np.array([1_000.0, 20_000.0])  # one chunk and three of SGLang's 8,192
    for model, layers in (("llama-3.1-70b", 0), ("qwen3-235b-a22b", 94), ("deepseek-v3", 58)):  # 3 dense + 58
        arch = load_named_model(model).architecture
        assert arch is not None and moe_layers(arch)[0] == layers
        added = prefill_seconds(arch, INSTANCE, more, lengths) - prefill_seconds(arch, INSTANCE, params, lengths)
        assert added == pytest.approx(np.array([1.0, 3.0]) * layers * 1e-3, abs=1e-12)


def test_a_phase_without_measurements_keeps_its_priors() -> None:
    prefill_only = [c for c in CASES if c.measurement.phase == "prefill"]
    fit = fit_engine(prefill_only, SGLANG)
    assert "decode_step_overhead_s" not in fit.values and "request_overhead_s" in fit.values
    assert fit.apply(SGLANG).decode_step_overhead_s == SGLANG.decode_step_overhead_s


# ------------------------------------------------------------------ loaders


def test_unknown_engine_is_named() -> None:
    with pytest.raises(InputError, match=r"no engine named .sglnag.*sglang"):
        load_named_engine("sglnag")


def test_a_term_without_source_is_refused(tmp_path: Path) -> None:
    text = (REPO / "hardware_profiles" / "serving" / "engines" / "vllm.yaml").read_text()
    broken = tmp_path / "custom.yaml"
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("request_overhead_s:"))
    source_line = next(i for i in range(at + 1, len(lines)) if lines[i].strip().startswith("source:"))
    end = source_line + 1
    while end < len(lines) and lines[end].startswith(" " * 6):
        end += 1
    broken.write_text("\n".join(lines[:source_line] + lines[end:]) + "\n")
    with pytest.raises(InputError, match=r"request_overhead_s.*source"):
        load_engine_profile(broken)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ("  expert_scale: 0.0\n", r"gemm_efficiency\.expert_scale: must be > 0"),
        ("  expert_scale: 11\n", r"gemm_efficiency\.expert_scale: must be <= 10"),
        ("  expert_scale: fast\n", r"gemm_efficiency\.expert_scale: expected a number"),
    ],
)
def test_a_bad_experts_factor_is_named(tmp_path: Path, edit: str, message: str) -> None:
    text = (REPO / "hardware_profiles" / "serving" / "engines" / "vllm.yaml").read_text()
    lines = [line for line in text.splitlines(keepends=True) if not line.startswith("  expert_scale:")]
    at = next(i for i, line in enumerate(lines) if line.startswith("  scale_prior:"))
    broken = tmp_path / "custom.yaml"
    broken.write_text("".join([*lines[: at + 1], edit, *lines[at + 1 :]]))
    with pytest.raises(InputError, match=message):
        load_engine_profile(broken)


def test_a_profile_without_an_experts_factor_prices_experts_at_the_dense_rate(tmp_path: Path) -> None:
    text = (REPO / "hardware_profiles" / "serving" / "engines" / "vllm.yaml").read_text()
    plain = tmp_path / "plain.yaml"
    plain.write_text("".join(line for line in text.splitlines(keepends=True) if "expert_scale" not in line))
    engine = load_engine_profile(plain)
    assert engine.expert_gemm_scale == 1.0 and load_named_engine("vllm").expert_gemm_scale < 1.0


def test_a_custom_profile_loads_by_path(tmp_path: Path) -> None:
    custom = tmp_path / "mine.yaml"
    custom.write_text((REPO / "hardware_profiles" / "serving" / "engines" / "trtllm.yaml").read_text())
    engine: EngineProfile = load_named_engine(str(custom))
    assert engine.key == "trtllm" and engine.file.endswith("mine.yaml")


def test_a_custom_engines_borrowed_band_says_whose_measurements_it_counts() -> None:
    """An engine nobody cross-validated borrows the widest built-in band; a note drawn from its counts names the
    engine they are of, and a built-in engine's own note does not say "borrowed"."""
    from prfaas_plan.io.error_bands import engine_band, load_error_bands

    _, _, table = load_error_bands()
    widest = max((k for k in table if k != "defaults"), key=lambda k: table[k]["prefill"].factor)
    band = engine_band("my-own-engine", "prefill")
    assert band.borrowed_from == widest and band.factor == table[widest]["prefill"].factor
    note = band.beyond("prefill", None, kind="dense", model="some-dense-model", generation="other")
    assert f"borrowed from {widest}" in note
    own = table[widest]["prefill"].beyond("prefill", None, kind="dense", model="some-dense-model", generation="other")
    assert own and "borrowed" not in own


# ------------------------------------------------------------------ the kv command


def _kv_json(*flags: str) -> dict[str, Any]:
    import json

    from tests.conftest import run_cli

    result = run_cli("kv", "--json", *flags)
    assert result.returncode == 0, result.stderr
    payload: dict[str, Any] = json.loads(result.stdout)
    return payload


def test_kv_prices_prefill_and_a_decode_step_with_an_engine() -> None:
    """`kv --engine` gives the batch-1 prefill time and a decode step, each split into parts that add up; the
    engine's overheads are the overhead parts."""
    flags = ("--model", "qwen3-235b-a22b", "--hardware", "h200", "--gpus", "8", "--weights-dtype", "fp8")
    payload = _kv_json(*flags, "--engine", "vllm", "--length", "2000", "--decode-batch", "4", "--context", "3000")
    (row,) = payload["rows"]
    split = row["prefill_split"]
    assert sum(split.values()) == pytest.approx(row["prefill_s"], rel=2e-3)  # the row interpolates a table
    decode = payload["decode"]
    assert isinstance(decode, dict)
    parts = decode["compute_s"] + decode["memory_s"] + decode["communication_s"] + decode["overhead_s"]
    assert decode["step_s"] == pytest.approx(parts, rel=1e-12)
    arch = load_named_model("qwen3-235b-a22b").architecture
    assert arch is not None
    vllm = load_named_engine("vllm")
    assert decode["overhead_s"] == pytest.approx(
        vllm.decode_step_overhead_s
        + arch.n_layers * vllm.decode_layer_overhead_s
        + matmul_kernels(arch) * vllm.decode_op_overhead_s
    )
    per_chunk = arch.n_layers * vllm.prefill_layer_overhead_s + moe_layers(arch)[0] * vllm.prefill_moe_layer_overhead_s
    assert moe_layers(arch)[0] == 94 and vllm.prefill_moe_layer_overhead_s > 0  # the MoE term is priced here
    assert split["overhead_s"] == pytest.approx(vllm.request_overhead_s + per_chunk)


def test_kv_without_an_engine_is_priced_by_the_default_engine_and_its_flags_override_it() -> None:
    """`kv` without --engine prices as --engine sglang; --engine paper-fit with the serving defaults; a roofline flag
    (--overhead-s, --compute-efficiency) changes the engine's figure, not the other way round."""
    flags = ("--model", "llama-3.1-70b", "--hardware", "h100", "--gpus", "4", "--length", "128", "--length", "8000")
    plain, sglang = _kv_json(*flags), _kv_json(*flags, "--engine", "sglang")
    assert plain["rows"] == sglang["rows"] and plain["engine"] == sglang["engine"]
    paper = _kv_json(*flags, "--engine", "paper-fit")
    assert "paper-fit" in paper["engine"]
    assert paper["rows"][0]["prefill_split"]["overhead_s"] > plain["rows"][0]["prefill_split"]["overhead_s"]
    sglang_engine = load_named_engine("sglang")
    assert plain["rows"][0]["prefill_split"]["overhead_s"] == pytest.approx(
        sglang_engine.request_overhead_s + 80 * sglang_engine.prefill_layer_overhead_s
    )
    slower = _kv_json(*flags, "--overhead-s", "0.5", "--compute-efficiency", "0.1")
    assert slower["rows"][0]["prefill_split"]["overhead_s"] == pytest.approx(
        0.5 + 80 * sglang_engine.prefill_layer_overhead_s
    )
    assert slower["rows"][1]["prefill_split"]["compute_s"] > 2 * plain["rows"][1]["prefill_split"]["compute_s"]


def test_a_compute_efficiency_given_runs_the_routed_experts_at_it_too() -> None:
    """--compute-efficiency sets every GEMM's rate, the routed experts' too: a MoE model priced with it alone
    has the same compute time whatever the engine's experts' factor (kv --compute-efficiency 0.5 at 0.5 with
    the factor dropped, not at 0.5 x the factor)."""
    flags = ("--model", "qwen3-235b-a22b", "--hardware", "h200", "--gpus", "8", "--length", "16000")
    given = _kv_json(*flags, "--compute-efficiency", "0.5")
    sglang = load_named_engine("sglang")
    assert sglang.expert_gemm_scale < 1.0  # else this checks nothing
    arch = load_named_model("qwen3-235b-a22b").architecture
    assert arch is not None
    params = replace(engine_params(sglang, "hopper"), compute_efficiency=0.5, dtype_compute_efficiency=())
    lengths = np.array([16_000.0])
    every = prefill_seconds(arch, INSTANCE, replace(params, expert_gemm_efficiency=1.0), lengths)[0]
    factored = prefill_seconds(arch, INSTANCE, params, lengths)[0]
    assert factored > every * 1.05
    assert given["rows"][0]["prefill_s"] == pytest.approx(every, rel=1e-3)


def test_kv_calibrated_splits_and_decode_step_are_the_fitted_pools() -> None:
    """`kv --method calibrated` prices its rows, their splits and the decode step with the parameters the
    calibration fitted (the splits add up to T_prefill; the decode step is the planner's, from the same fit);
    --kernel-only drops the fitted overheads after the fit instead of letting the fit put them back; the flags the
    fit sets are refused."""
    from prfaas_plan.io.names import pool_for
    from prfaas_plan.physics.engine import decode_split
    from prfaas_plan.physics.pools import pool_costs
    from prfaas_plan.physics.roofline import Instance
    from tests.conftest import run_cli

    flags = ("--model", "paper-1t-hybrid", "--hardware", "h200", "--method", "calibrated", "--length", "8000")
    served = _kv_json(*flags, "--length", "32000", "--decode-batch", "512")
    for row in served["rows"]:
        assert sum(row["prefill_split"].values()) == pytest.approx(row["prefill_s"], rel=2e-3)
    pool, card = pool_for("paper-1t-hybrid", "h200", 8, "calibrated")
    fitted = pool_costs(
        replace(pool, roofline=engine_params(SGLANG, "hopper", base=pool.roofline)),
        card,
        context_tokens=0.0,
        tpot_s=1.0,
        with_decode=False,
    ).roofline
    assert fitted is not None and card.architecture is not None
    expected = decode_split(card.architecture, Instance(accelerator=H200, gpus=8), fitted, 512, 8000.0)
    assert served["decode"]["step_s"] == pytest.approx(expected.total_s, rel=1e-9)
    kernel = _kv_json(*flags, "--length", "32000", "--kernel-only")
    for row, full in zip(kernel["rows"], served["rows"], strict=True):
        assert row["prefill_split"]["overhead_s"] == 0.0
        assert sum(row["prefill_split"].values()) == pytest.approx(row["prefill_s"], rel=2e-3)
        assert row["prefill_s"] == pytest.approx(full["prefill_s"] - full["prefill_split"]["overhead_s"], rel=2e-3)
    for flag in ("--compute-efficiency", "--overhead-s"):
        result = run_cli("kv", *flags, flag, "0.3")
        assert result.returncode == 2 and flag in result.stderr and "Traceback" not in result.stderr
    # Its rows are judged against the calibration's own band (its points' lengths), not the engine's.
    short, inside = _kv_json(*flags[:6], "--length", "500", "--length", "32000")["rows"]
    assert "1,000-128,000" in short["outside_band"] and "outside_band" not in inside


def test_kv_refuses_an_engine_for_measured_points() -> None:
    from tests.conftest import run_cli

    result = run_cli(
        "kv", "--model", "paper-1t-hybrid", "--hardware", "h200", "--method", "measured", "--engine", "sglang"
    )
    assert result.returncode == 2 and "--engine" in result.stderr and "Traceback" not in result.stderr


# ------------------------------------------------------------------ a pool names its engine


def _scenario_with(tmp_path: Path, local: str) -> Path:
    text = (REPO / "workloads" / "paper-case-study-roofline.yaml").read_text()
    old = (
        "    method: calibrated         # the same efficiencies as H200: no H20 measurement exists to fit\n"
        "    calibrate_from: h200\n"
        "    engine: paper-fit\n"
    )
    assert old in text
    path = tmp_path / "s.yaml"
    path.write_text(text.replace(old, local))
    return path


def test_a_pool_priced_by_its_engine(tmp_path: Path) -> None:
    """`engine: vllm` on a roofline pool prices it with vLLM's terms on the H20's generation; the pool's own
    `roofline:` fields still override them."""
    from prfaas_plan.io.scenario import load_scenario

    scenario = load_scenario(_scenario_with(tmp_path, "    method: roofline\n    engine: vllm\n"))
    vllm = load_named_engine("vllm")
    params = scenario.local.roofline
    assert params.decode_layer_overhead_s == vllm.decode_layer_overhead_s
    assert params.overhead_s == vllm.request_overhead_s
    assert params.gemm_efficiency("fp8") == vllm.gemm_efficiency_of("hopper", "fp8")
    over = "    method: roofline\n    engine: vllm\n    roofline: {overhead_s: 0.5}\n"
    assert load_scenario(_scenario_with(tmp_path, over)).local.roofline.overhead_s == 0.5
    assert scenario.prfaas.roofline.decode_layer_overhead_s == 0.0  # engine: paper-fit: the serving defaults


def test_a_pool_that_names_no_engine_is_priced_by_the_default_engine(tmp_path: Path) -> None:
    """A roofline pool without `engine:` takes SGLang's terms (``DEFAULT_ENGINE``) and SGLang's error band;
    `engine: paper-fit` takes the paper-fitted serving defaults and their band."""
    from prfaas_plan.io.engine_profile import DEFAULT_ENGINE
    from prfaas_plan.io.error_bands import DEFAULTS, builtin_band
    from prfaas_plan.io.scenario import load_scenario
    from prfaas_plan.spec.hardware import RooflineParams

    default = load_named_engine(DEFAULT_ENGINE)
    local = load_scenario(_scenario_with(tmp_path, "    method: roofline\n")).local
    assert local.engine is not None and local.engine.key == default.key
    assert local.roofline.overhead_s == default.request_overhead_s
    assert local.roofline.decode_op_overhead_s == default.decode_op_overhead_s > 0
    assert local.time_band == builtin_band(default.key)
    paper = load_scenario(_scenario_with(tmp_path, "    method: roofline\n    engine: paper-fit\n")).local
    assert paper.engine is None and paper.roofline == RooflineParams()
    assert paper.time_band == builtin_band(DEFAULTS)


@pytest.mark.parametrize(
    ("local", "message"),
    [
        ("    method: roofline\n    engine: sglnag\n", r"engine.*no engine named 'sglnag'"),
        ("    method: measured\n    engine: sglang\n", r"engine.*roofline or calibrated"),
    ],
)
def test_a_bad_engine_is_named(tmp_path: Path, local: str, message: str) -> None:
    from prfaas_plan.io.scenario import load_scenario

    with pytest.raises(InputError, match=message):
        load_scenario(_scenario_with(tmp_path, local))


# ------------------------------------------------------------------ KV replication, interleaved prefills, exclusions


def test_a_cache_of_fewer_heads_than_gpus_is_read_by_every_copy() -> None:
    """MLA's latent (one head) on 8 GPUs is read 8 times; GQA with 8 KV heads on 8 GPUs once, on 16 twice;
    weights and activations are not replicated."""
    from prfaas_plan.physics.roofline import memory_bytes

    deepseek = load_named_model("deepseek-v3").architecture
    llama = load_named_model("llama-3.1-70b").architecture
    assert deepseek is not None and llama is not None
    batch = np.asarray([16.0])
    for arch, core, heads in ((deepseek, "mla.core", 1.0), (llama, "gqa.core", 8.0)):
        op = next(o for o in forward_ops(arch, cached=4_000.0, new=1.0, batch=batch, decode=True) if o.name == core)
        assert float(op.cache_bytes[0]) > 0
        for gpus in (1, 8, 16):
            moved = memory_bytes(op, Instance(accelerator=H200, gpus=gpus))
            copies = max(1.0, gpus / heads)
            assert float(moved[0]) == pytest.approx(float(op.bytes[0] + (copies - 1) * op.cache_bytes[0]))
        qkv = next(o for o in forward_ops(arch, cached=4_000.0, new=1.0, batch=batch, decode=True) if o.cache_heads)
        assert np.isinf(qkv.cache_heads) or qkv.name == core


def test_interleaved_prefills_add_the_other_requests_share() -> None:
    """A decode metric that averages over a request's steps carries (B - 1) / l_out prefills of l_in tokens per
    step, priced without the per-request cost; at batch 1 there is no other request; the fit's pieces agree."""
    case = next(c for c in CASES if c.measurement.phase == "decode" and c.measurement.batch == 64)
    plain = predict(case, SGLANG)
    m = replace(case.measurement, interleaved_input_tokens=2_000.0, interleaved_output_tokens=500.0)
    mixed = replace(case, measurement=m)
    prefill_case = replace(
        case, measurement=replace(m, phase="prefill", batch=1, tokens=2_000.0, includes_request_overhead=False)
    )
    share = 63 / 500
    assert predict(mixed, SGLANG) == pytest.approx(plain + share * predict(prefill_case, SGLANG), rel=1e-9)
    assert _predict_pieces(_pieces(mixed, SGLANG, None), engine_theta(SGLANG)) == pytest.approx(
        predict(mixed, SGLANG), rel=1e-9
    )
    alone = replace(case, measurement=replace(m, batch=1))
    assert predict(alone, SGLANG) == pytest.approx(
        predict(replace(alone, measurement=replace(m, batch=1, interleaved_output_tokens=0.0)), SGLANG), rel=1e-12
    )


def test_an_excluded_measurement_is_never_fitted() -> None:
    """A measurement with exclude_from_fit is left out of the fit (and of fitted_on), whatever it measured."""
    wild = replace(CASES[3], measurement=replace(CASES[3].measurement, measured_s=50.0, exclude_from_fit="test"))
    cases = [*CASES[:3], wild, *CASES[4:]]
    fit = fit_engine(cases, SGLANG)
    assert wild.measurement.id not in fit.fitted_on
    assert fit.values == fit_engine([c for c in cases if c is not wild], SGLANG).values


def test_experts_dtype_overrides_only_the_experts() -> None:
    arch = load_named_model("gpt-oss-120b").architecture
    assert arch is not None
    served = with_dtypes(arch, "bf16", None, "fp4")
    assert served.dtypes.dtype_of("experts") == "fp4" and served.dtypes.dtype_of("weights") == "bf16"
    assert with_dtypes(arch, "fp4").dtypes.dtype_of("weights") == "fp4"


@pytest.mark.parametrize(
    ("anchor", "bad", "message"),
    [
        ("  interleaved_prefill: {input_tokens: 500, output_tokens: 2000}\n", "{input_tokens: 100}", "exactly"),
        (
            "  interleaved_prefill: {input_tokens: 500, output_tokens: 2000}\n",
            "{input_tokens: 1, output_tokens: 0}",
            "must be numbers",
        ),
        ("  measured_s: 0.007\n", "{input_tokens: 1, output_tokens: 2}", "only a decode measurement"),
    ],
)
def test_a_bad_interleaved_prefill_is_named(tmp_path: Path, anchor: str, bad: str, message: str) -> None:
    from prfaas_plan.io.engine_profile import load_corpus

    text = (REPO / "hardware_profiles/serving/corpus/public-measurements.yaml").read_text()
    head, sep, tail = text.partition(anchor)
    assert sep
    keep = sep if sep.startswith("  measured_s") else ""
    path = tmp_path / "corpus.yaml"
    path.write_text(head + keep + f"  interleaved_prefill: {bad}\n" + tail)
    with pytest.raises(InputError, match=f"interleaved_prefill.*{message}"):
        load_corpus(path)


@pytest.mark.parametrize(("value", "expected"), [("false", False), ("true", True), ("'no'", None)])
def test_an_engine_only_timing_in_the_corpus_pays_no_request_cost(
    tmp_path: Path, value: str, expected: bool | None
) -> None:
    """`includes_request_overhead: false` (a timing inside the engine, as bench_one_batch) is read by the corpus
    loader; a value that is not a boolean is named."""
    from prfaas_plan.io.engine_profile import load_corpus

    text = (REPO / "hardware_profiles/serving/corpus/public-measurements.yaml").read_text()
    head, sep, tail = text.partition("\nmeasurements:\n")
    first, nl, rest = tail.partition("\n- id:")
    path = tmp_path / "corpus.yaml"
    path.write_text(head + sep + first + f"\n  includes_request_overhead: {value}" + nl + rest)
    if expected is None:
        with pytest.raises(InputError, match=r"includes_request_overhead.*true or false"):
            load_corpus(path)
        return
    corpus = load_corpus(path)
    assert corpus[0].includes_request_overhead is expected
    # The others keep what the file says of them: true by default, false only where an entry states it.
    stated_false = text.count("\n  includes_request_overhead: false\n")
    assert stated_false >= 1  # the corpus holds an engine-only timing (SGLang PR 5432's bench_one_batch prefill)
    assert sum(not m.includes_request_overhead for m in corpus[1:]) == stated_false


def test_the_corpus_records_why_a_point_is_excluded() -> None:
    from prfaas_plan.io.engine_profile import load_corpus

    corpus = load_corpus()
    excluded = [m for m in corpus if m.exclude_from_fit]
    assert excluded and all(len(m.exclude_from_fit) > 40 for m in excluded)
    assert any(m.interleaved_output_tokens > 0 for m in corpus)


def test_a_calibrated_profile_keeps_every_term_it_was_priced_with(tmp_path: Path) -> None:
    """A profile written by `calibrate` and loaded back prices as the calibration did: the per-kernel decode cost,
    the inter-node alpha and the generations' decode-overhead factors of the base engine are written too."""
    from prfaas_plan.report.engine_calibration import write_calibration
    from prfaas_plan.studies.bench_calibration import calibrate_files
    from tests.studies.test_bench_calibration import CASES as BENCH_CASES
    from tests.studies.test_bench_calibration import FIXTURES

    file, model, hardware, gpus, engine = BENCH_CASES["vllm-real"]
    cal = calibrate_files([FIXTURES / file], model=model, hardware=hardware, gpus=gpus, engine=engine)
    back = load_engine_profile(write_calibration(cal, tmp_path / "cal.yaml"))
    assert cal.engine.decode_op_overhead_s > 0 and cal.engine.overhead_scale
    assert cal.engine.kv_handoff_s == load_named_engine(engine or "sglang").kv_handoff_s > 0
    terms = ("decode_op_overhead_s", "inter_node_latency_s", "decode_step_overhead_s", "request_overhead_s")
    for term in (*terms, "kv_handoff_s"):
        assert getattr(back, term) == pytest.approx(getattr(cal.engine, term), rel=1e-5), term
    assert dict(back.overhead_scale) == pytest.approx(dict(cal.engine.overhead_scale), rel=1e-4)
    assert back.expert_gemm_scale == pytest.approx(cal.engine.expert_gemm_scale, rel=1e-4) != 1.0


def test_collectives_across_nodes_cross_the_nic_at_the_inter_node_alpha() -> None:
    """An instance larger than one scale-up domain pays the inter-node alpha per collective and its 1/k shard's
    bytes over the NIC: never faster than the same GPUs pretended to share one NVLink domain, and equal to it when
    the alpha and the NIC bytes are taken out."""
    h100 = load_hardware(REPO / "hardware_profiles" / "h100.yaml").accelerator
    arch = load_named_model("deepseek-v3").architecture
    assert arch is not None and h100.scale_up_gpus == 8 and h100.scale_out_bandwidth_bytes_per_s
    params = RooflineParams(all_reduce_latency_s=6e-6, inter_node_latency_s=6.2e-5)
    tokens = np.array([1.0, 4.0, 8_192.0])
    two_nodes = communication_s(arch, Instance(accelerator=h100, gpus=16), tokens, params)
    one_domain = replace(h100, scale_up_gpus=16)
    flat = communication_s(arch, Instance(accelerator=one_domain, gpus=16), tokens, params)
    assert np.all(two_nodes > flat)
    alpha = 2 * arch.n_layers * (6.2e-5 - 6e-6)
    assert two_nodes[0] - flat[0] == pytest.approx(alpha, rel=0.05)  # one token: the latency dominates
    eight = communication_s(arch, Instance(accelerator=h100, gpus=8), tokens, params)
    assert np.allclose(eight, communication_s(arch, Instance(accelerator=one_domain, gpus=8), tokens, params))


def test_matmul_kernels_count_each_layers_products() -> None:
    """A dense GQA layer launches 5 matrix-multiply kernels (qkv, attention core, out, gate-up, down), an MLA
    layer with routed and shared experts 12; plus the LM head once."""
    llama = load_named_model("llama-3.1-8b").architecture
    deepseek = load_named_model("deepseek-v3").architecture
    assert llama is not None and deepseek is not None
    assert matmul_kernels(llama) == 5 * llama.n_layers + 1
    moe_layers = sum(g.count for g in deepseek.layers if g.ffn.kind != "dense")
    dense_layers = deepseek.n_layers - moe_layers
    assert matmul_kernels(deepseek) == 12 * moe_layers + 9 * dense_layers + 1


def test_a_generations_factor_scales_only_the_decode_overheads() -> None:
    """The CDNA 3 factor multiplies the per-step, per-layer and per-kernel decode costs and nothing else."""
    engine = replace(SGLANG, overhead_scale=(("cdna3", 2.0),))
    amd, nvidia = engine_params(engine, "cdna3"), engine_params(engine, "hopper")
    for term in ("decode_step_overhead_s", "decode_layer_overhead_s", "decode_op_overhead_s"):
        assert getattr(amd, term) == pytest.approx(2.0 * getattr(nvidia, term))
    for term in ("overhead_s", "layer_overhead_s", "all_reduce_latency_s", "inter_node_latency_s"):
        assert getattr(amd, term) == getattr(nvidia, term)
    assert engine.overhead_scale_cdna3 == 2.0 and engine.overhead_scale_of("blackwell") == 1.0


def test_paper_fit_names_the_serving_defaults_not_a_profile() -> None:
    """`paper-fit` selects the serving defaults for a pool or `kv`; where an engine profile is needed (calibrate's
    base engine) it is refused with the built-in names."""
    from prfaas_plan.io.engine_profile import PAPER_FIT, engine_choice, engine_path

    assert engine_choice(PAPER_FIT) is None
    assert engine_choice(None) == "sglang"
    assert engine_choice("vllm") == "vllm"
    with pytest.raises(InputError, match=r"--engine.*'paper-fit' \(the serving defaults\) is not an engine profile"):
        engine_path(PAPER_FIT, "--engine")


def test_engine_names_resolve_to_the_built_ins_whatever_the_working_directory_holds(tmp_path: Path) -> None:
    """A bare engine name (sglang, vllm, trtllm, paper-fit) is a built-in even where a file or directory of that
    name is in the working directory; only a value with a path separator or a .yaml/.yml suffix is a path."""
    from tests.conftest import run_cli

    for name in ("sglang", "trtllm", "paper-fit"):
        (tmp_path / name).mkdir()
    (tmp_path / "vllm").write_text("not: [an, engine\n")
    (tmp_path / "mine").write_text("not: [an, engine\n")
    kv = ("kv", "--model", "llama-3.1-70b", "--hardware", "h200", "--length", "1000", "--json")
    for engine in ((), ("--engine", "sglang"), ("--engine", "vllm"), ("--engine", "trtllm"), ("--engine", "paper-fit")):
        here, home = run_cli(*kv, *engine, cwd=tmp_path), run_cli(*kv, *engine)
        assert here.returncode == 0, (engine, here.stderr)
        assert json.loads(here.stdout)["rows"][0]["prefill_s"] == json.loads(home.stdout)["rows"][0]["prefill_s"]
    scenario = str(REPO / "workloads" / "qwen3.5-capacity.yaml")  # engine: sglang in both pools
    here, home = run_cli("optimize", scenario, "--json", cwd=tmp_path), run_cli("optimize", scenario, "--json")
    assert here.returncode == 0, here.stderr
    assert json.loads(here.stdout)["plan"] == json.loads(home.stdout)["plan"]
    result = run_cli(*kv, "--engine", "./vllm", cwd=tmp_path)  # a path is still read as one
    assert result.returncode == 2 and "vllm:2: malformed YAML" in result.stderr and "Traceback" not in result.stderr
    result = run_cli(*kv, "--engine", "mine", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--engine: no engine named 'mine'" in result.stderr and "write ./mine" in result.stderr


def test_kv_says_where_a_time_lies_outside_its_error_bands_measurements() -> None:
    """A prompt longer than any the engine's error band was measured on, or a decode batch larger than any, is
    flagged on its row (``outside_band``) with the measured range; a prompt inside the range is not."""
    from prfaas_plan.io.error_bands import builtin_band

    band = builtin_band("sglang")
    assert band.prefill.tokens is not None and band.decode.batch is not None
    inside, longest = band.prefill.tokens[1] / 2, band.prefill.tokens[1]
    flags = ("--model", "minimax-m2.5", "--hardware", "h200", "--engine", "sglang")
    payload = _kv_json(*flags, "--length", f"{inside:.0f}", "--length", f"{4 * longest:.0f}")
    first, second = payload["rows"]
    assert "outside_band" not in first
    assert f"{4 * longest:,.0f} prompt tokens" in second["outside_band"]
    assert f"{band.prefill.tokens[0]:,.0f}-{longest:,.0f} tokens" in second["outside_band"]
    big = int(band.decode.batch[1]) * 2
    payload = _kv_json(*flags, "--length", f"{inside:.0f}", "--decode-batch", str(big), "--context", "2000")
    assert f"batch {big:,}" in payload["decode"]["outside_band"]
    assert (
        "outside_band" not in _kv_json(*flags, "--decode-batch", "2", "--context", "2000", "--length", "900")["decode"]
    )


def _bands_file(tmp_path: Path, prefill_fields: str) -> Path:
    """A new error-bands file in ``tmp_path`` whose defaults' prefill band (3 points) adds ``prefill_fields``."""
    path = tmp_path / f"bands-{len(list(tmp_path.iterdir()))}.yaml"
    phase = "{factor: 1.5, points: 3, basis: b, " + prefill_fields + "}"
    path.write_text(
        "source: s\ncoverage: 0.8\nbands:\n  defaults:\n"
        f"    prefill: {phase}\n    decode: {{factor: 1.2, points: 3, basis: b}}\n"
    )
    return path


def test_a_band_range_is_read_checked_and_named_in_its_basis(tmp_path: Path) -> None:
    """An error band's measured range (``tokens``, ``batch``) is read into the band and its basis; a range that
    is not two ascending positive numbers is refused naming the field."""
    from prfaas_plan.io.error_bands import load_error_bands
    from prfaas_plan.spec.uncertainty import PhaseBand

    def bands(tokens: str) -> Path:
        return _bands_file(tmp_path, "tokens: " + tokens)

    _, _, table = load_error_bands(bands("[100, 8000]"))
    prefill = table["defaults"]["prefill"]
    assert prefill.tokens == (100.0, 8000.0) and "prompts of 100-8,000 tokens" in prefill.basis
    assert table["defaults"]["decode"].tokens is None
    for bad in ("[8000, 100]", "[0, 100]", "[100]", "['a', 'b']", "100"):
        with pytest.raises(InputError, match=r"bands\.defaults\.prefill\.tokens"):
            load_error_bands(bands(bad))
    assert PhaseBand(factor=2.0, points=1, basis="b").beyond("prefill", 1e9) == ""  # no range: nothing said


def test_kv_says_when_the_band_holds_too_few_points_of_the_models_kind_or_the_gpus_generation() -> None:
    """The shipped bands count their measurements per model (by kind) and GPU generation; `kv` says so where a
    time is of a kind the band holds fewer than MIN_POINTS_OF_A_KIND of (a dense model on vLLM's prefill band), of
    a kind all of whose points are one other model (DeepSeek-V3 on vLLM's prefill band, all gpt-oss-120b; Qwen3-235B
    on TensorRT-LLM's, all DeepSeek-V3), or of a generation it holds too few of (TensorRT-LLM's decode on
    Ampere); and nothing where it holds enough (a mixture of experts on Hopper for SGLang, gpt-oss-120b itself on
    vLLM)."""
    from prfaas_plan.io.error_bands import builtin_band
    from prfaas_plan.spec.uncertainty import MIN_POINTS_OF_A_KIND

    def of(band: Any, kind: str) -> dict[str, int]:
        return {m: n for k, m, n in band.kinds if k == kind}

    vllm, trt, sglang = builtin_band("vllm"), builtin_band("trtllm"), builtin_band("sglang")
    assert sum(of(vllm.prefill, "dense").values()) < MIN_POINTS_OF_A_KIND
    assert list(of(vllm.prefill, "moe")) == ["gpt-oss-120b"]
    assert list(of(trt.prefill, "moe")) == ["deepseek-v3"]
    assert dict(trt.decode.generations).get("ampere", 0) < MIN_POINTS_OF_A_KIND
    assert sum(of(sglang.prefill, "moe").values()) >= MIN_POINTS_OF_A_KIND and len(of(sglang.prefill, "moe")) > 1
    assert dict(sglang.prefill.generations)["hopper"] >= MIN_POINTS_OF_A_KIND
    one = ("--gpus", "1", "--length", "1024")
    dense = _kv_json("--model", "llama-3.1-8b", "--hardware", "h100", "--engine", "vllm", *one)
    assert "prefill of a dense model is outside" in dense["rows"][0]["outside_band"]
    count = sum(of(vllm.prefill, "dense").values())
    assert f"dense models: {count} of its {vllm.prefill.points} points" in dense["rows"][0]["outside_band"]
    other = _kv_json("--model", "deepseek-v3", "--hardware", "h200", "--engine", "vllm", "--length", "1024")
    assert "mixture-of-experts model other than gpt-oss-120b is outside" in other["rows"][0]["outside_band"]
    assert (
        "outside_band"
        not in _kv_json("--model", "gpt-oss-120b", "--hardware", "h200", "--engine", "vllm", *one)["rows"][0]
    )
    moe = _kv_json("--model", "qwen3-235b-a22b", "--hardware", "h200", "--engine", "trtllm", "--length", "1024")
    assert "mixture-of-experts model other than deepseek-v3 is outside" in moe["rows"][0]["outside_band"]
    flags = ("--model", "llama-3.1-8b", "--hardware", "a100-80gb", "--engine", "trtllm", *one)
    ampere = _kv_json(*flags, "--decode-batch", "8", "--context", "2000")
    assert "outside_band" not in ampere["rows"][0]  # TensorRT-LLM's prefill band holds Ampere points
    assert "on ampere GPUs is outside" in ampere["decode"]["outside_band"]
    fine = _kv_json("--model", "qwen3-next-80b-a3b", "--hardware", "h200", "--engine", "sglang", "--length", "1024")
    assert "outside_band" not in fine["rows"][0]


def test_a_bands_counts_are_read_and_checked(tmp_path: Path) -> None:
    """An error band's counts per model (by kind) and generation are read into the band; a malformed map, an
    unknown kind, or counts that do not add up to its points are refused naming the field; a band that does not
    count says nothing of kinds or generations."""
    from prfaas_plan.io.error_bands import load_error_bands
    from prfaas_plan.spec.uncertainty import PhaseBand

    def bands(kinds: str, generations: str = "{hopper: 3}") -> Path:
        return _bands_file(tmp_path, "kinds: " + kinds + ", generations: " + generations)

    _, _, table = load_error_bands(bands("{dense: {a: 1}, moe: {b: 2}}"))
    prefill = table["defaults"]["prefill"]
    assert prefill.kinds == (("dense", "a", 1), ("moe", "b", 2)) and prefill.generations == (("hopper", 3),)
    note = prefill.beyond("prefill", None, kind="moe", model="c", generation="ampere")
    assert note.startswith("prefill of a mixture-of-experts model on ampere GPUs is outside")
    assert "ampere GPUs: none of its 3 points (others: hopper 3)" in note
    assert prefill.beyond("prefill", None, kind="dense", model="a", generation="hopper").startswith(
        "prefill of a dense model is"
    )
    assert "GPUs of no listed generation" in prefill.beyond("prefill", None, kind="moe", generation="other")
    _, _, table = load_error_bands(bands("{moe: {b: 3}}"))
    one_model = table["defaults"]["prefill"]
    assert one_model.beyond("prefill", None, kind="moe", model="b", generation="hopper") == ""
    assert "all of b" in one_model.beyond("prefill", None, kind="moe", model="c", generation="hopper")
    assert table["defaults"]["decode"].beyond("decode", None, kind="dense", generation="ampere") == ""
    for bad in ("{dense: {a: -1}}", "{dense: {a: 1.5}}", "[dense]", "{}", "{dense: 3}", "{Dense: {a: 3}}"):
        with pytest.raises(InputError, match=r"bands\.defaults\.prefill\.kinds"):
            load_error_bands(bands(bad))
    with pytest.raises(InputError, match=r"prefill\.kinds: counts 2 measurements, but points is 3"):
        load_error_bands(bands("{dense: {a: 2}}"))
    with pytest.raises(InputError, match=r"prefill\.generations: counts 4 measurements"):
        load_error_bands(bands("{dense: {a: 3}}", "{hopper: 4}"))
    assert PhaseBand(factor=2.0, points=1, basis="b").beyond("prefill", None, kind="dense", generation="x") == ""


def test_cross_validation_predicts_each_source_by_a_fit_without_it() -> None:
    """Leave-one-source-out (``cross_validate_corpus``, its plain fold fit and a supplied one): each held-out
    prediction is the one a fit on the other sources gives; the in-sample one the all-source fit's; a supplied
    ``fold_fit`` is called once per source and once for all, told which source it leaves out."""
    from prfaas_plan.physics.corpus_fit import cross_validate_corpus, fit_corpus

    truth = replace(SGLANG, gemm_efficiency_scale=0.8, request_overhead_s=0.05)
    skew = {"synthetic-source-0": 1.0, "synthetic-source-1": 1.4, "synthetic-source-2": 0.7}  # sources disagree
    cases = [
        replace(c, measurement=replace(c.measurement, measured_s=predict(c, truth) * skew[c.measurement.source]))
        for c in CASES
    ]
    engines = {"sglang": SGLANG}
    fits, points = cross_validate_corpus(cases, engines)
    assert fits["sglang"].values == fit_corpus(cases, engines)["sglang"].values
    sources = sorted({c.measurement.source for c in cases})
    assert len(sources) == 3 and len(points) == len(cases)
    everything = fits["sglang"].apply(SGLANG)
    for source in sources:
        without = fit_corpus([c for c in cases if c.measurement.source != source], engines)["sglang"].apply(SGLANG)
        mine = [c for c in cases if c.measurement.source == source]
        assert any(predict(c, without) != pytest.approx(predict(c, everything), rel=1e-3) for c in mine)
        for c, p in zip(cases, points_of(points, cases), strict=True):
            if c.measurement.source == source:
                assert p.held_out_s == pytest.approx(predict(c, without), rel=1e-12)
    calls: list[str | None] = []

    def fold(keep: Any, held_out: str | None) -> Any:
        calls.append(held_out)
        return {}, engines  # the priors everywhere

    _, points = cross_validate_corpus(cases, engines, fold_fit=fold)
    assert calls == [None, *dict.fromkeys(c.measurement.source for c in cases)]
    for c, p in zip(cases, points_of(points, cases), strict=True):
        assert p.held_out_s == pytest.approx(predict(c, SGLANG), rel=1e-12)


def points_of(points: Any, cases: list[CorpusCase]) -> list[Any]:
    """The held-out points in the order of ``cases``."""
    by_id = {p.id: p for p in points}
    return [by_id[c.measurement.id] for c in cases]


def test_the_gemm_efficiency_label_names_the_dtype_the_gemms_run_in() -> None:
    """The pool's source line shows e_c of the dtypes the model's GEMMs multiply in: FP8 weights show the FP8
    figure (not bf16's), and a dtype the part has no peak for is named as run at its bf16 peak."""
    from prfaas_plan.physics.pools import gemm_label

    vllm = load_named_engine("vllm")
    params = engine_params(vllm, "hopper")
    llama = load_named_model("llama-3.1-70b").architecture
    assert llama is not None
    fp8 = vllm.gemm_efficiency_of("hopper", "fp8")
    bf16 = vllm.gemm_efficiency_of("hopper", "bf16")
    assert f"{fp8:.2f}" != f"{bf16:.2f}"  # else the label could not tell them apart
    assert gemm_label(with_dtypes(llama, weights_dtype="fp8"), params, H200) == f"e_c {fp8:.2f} (fp8)"
    assert gemm_label(with_dtypes(llama, weights_dtype="bf16"), params, H200) == f"e_c {bf16:.2f}"
    oss = load_named_model("gpt-oss-120b").architecture  # BF16 attention and MXFP4 routed experts
    assert oss is not None
    fp4 = vllm.gemm_efficiency_of("hopper", "fp4")
    experts = f", experts x {vllm.expert_gemm_scale:.2f}"  # the routed experts' factor, for a MoE model only
    assert gemm_label(oss, params, H200) == f"e_c {bf16:.2f} / {fp4:.2f} (fp4 at the bf16 peak){experts}"
    b200 = load_hardware(REPO / "hardware_profiles" / "b200.yaml").accelerator
    assert "fp4" in b200.dense_flop_per_s
    blackwell = engine_params(vllm, "blackwell")
    dense, experts = (vllm.gemm_efficiency_of("blackwell", d) for d in ("bf16", "fp4"))
    factor = vllm.expert_gemm_scale
    assert gemm_label(oss, blackwell, b200) == f"e_c {dense:.2f} / {experts:.2f} (fp4), experts x {factor:.2f}"
