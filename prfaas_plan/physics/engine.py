"""Engine-aware serving parameters: an engine profile (``spec.hardware.EngineProfile``) on an accelerator
generation becomes the ``RooflineParams`` the roofline prices with.

    prefill(l) = kernels + request_overhead + ceil(l / chunk) x (layers x prefill_layer_overhead
                                                   + MoE layers x prefill_moe_layer_overhead)
                 + collectives (each all-reduce: alpha + bytes / link, per chunk)
    decode(B)  = kernels(B) + s_gen x (step_overhead + layers x decode_layer_overhead (CUDA graphs or eager)
                 + matmul kernels x decode_op_overhead) + collectives (alpha + bytes / link)

(s_gen: the engine's fitted factor for the accelerator generation, 1 unless listed; a collective over more GPUs
than one scale-up domain crosses the scale-out NICs at the inter-node alpha, ``physics.roofline``.)

GEMMs run at the engine's efficiency for the accelerator's generation and the weights' compute dtype (bf16, fp8,
fp4), attention cores at its attention efficiency; routed experts are grouped GEMMs whose rate follows the
tokens each touched expert receives (``expert_gemm_half_rows``), and a decode step reads the weights of the
E(1 - (1 - k/E)^B) distinct experts a batch of B touches (``physics.ops``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from prfaas_plan.physics.decode import decode_step_time
from prfaas_plan.physics.prefill import prefill_time
from prfaas_plan.physics.roofline import Instance, TimeSplit, time_splits
from prfaas_plan.spec.engine import EngineProfile
from prfaas_plan.spec.hardware import RooflineParams
from prfaas_plan.spec.model import Architecture

#: Compute dtypes whose GEMM efficiency an engine profile prices apart from bf16.
LOW_PRECISION = ("fp8", "fp4")


def engine_params(
    engine: EngineProfile,
    generation: str,
    *,
    cuda_graphs: bool = True,
    expert_parallel: bool = False,
    base: RooflineParams | None = None,
) -> RooflineParams:
    """``engine``'s terms on an accelerator of ``generation`` as roofline parameters. ``base`` (default the
    serving defaults) keeps what the engine does not set: memory and link efficiencies and the kernels' shape
    curves (attention context, dense small-M, MoE skew)."""
    base = base or RooflineParams()
    graphs = cuda_graphs
    scale = engine.overhead_scale_of(generation)
    step = engine.decode_step_overhead_s if graphs else engine.decode_step_overhead_eager_s
    layer = engine.decode_layer_overhead_s if graphs else engine.decode_layer_overhead_eager_s
    return replace(
        base,
        compute_efficiency=engine.gemm_efficiency_of(generation, "bf16"),
        dtype_compute_efficiency=tuple((d, engine.gemm_efficiency_of(generation, d)) for d in LOW_PRECISION),
        attention_efficiency=engine.attention_efficiency,
        overhead_s=engine.request_overhead_s,
        layer_overhead_s=engine.prefill_layer_overhead_s,
        moe_layer_overhead_s=engine.prefill_moe_layer_overhead_s,
        prefill_chunk_tokens=engine.prefill_chunk_tokens,
        decode_step_overhead_s=scale * step,
        decode_layer_overhead_s=scale * layer,
        decode_op_overhead_s=scale * engine.decode_op_overhead_s,
        all_reduce_latency_s=engine.all_reduce_latency_s,
        all_to_all_latency_s=engine.all_to_all_latency_s,
        inter_node_latency_s=engine.inter_node_latency_s,
        kv_handoff_s=engine.kv_handoff_s,
        expert_gemm_half_rows=engine.expert_gemm_half_rows,
        expert_gemm_efficiency=engine.expert_gemm_scale,
        expert_parallel=expert_parallel,
        source=f"engine {engine.key} on {generation}"
        + ("" if graphs else ", eager decode")
        + f" ({engine.file})"
        + base.kernel_shapes_note,  # the base's curves are kept, and so is their note
    )


def with_dtypes(
    arch: Architecture,
    weights_dtype: str | None = None,
    kv_dtype: str | None = None,
    experts_dtype: str | None = None,
) -> Architecture:
    """``arch`` served with its weights (attention, dense and expert matrices; the embeddings stay as the card
    stores them) in ``weights_dtype``, its routed experts in ``experts_dtype`` where that is given (a
    checkpoint that quantises only the experts, as gpt-oss's MXFP4) and its KV cache in ``kv_dtype``; None
    keeps the card's."""
    dtypes = arch.dtypes
    if weights_dtype is not None:
        dtypes = replace(dtypes, weights=weights_dtype, experts=None, embeddings=dtypes.dtype_of("embeddings"))
    if experts_dtype is not None:
        dtypes = replace(dtypes, experts=experts_dtype)
    if kv_dtype is not None:
        dtypes = replace(dtypes, kv_cache=kv_dtype)
    return replace(arch, dtypes=dtypes)


def prefill_splits(
    arch: Architecture, instance: Instance, params: RooflineParams, lengths_tokens: tuple[float, ...]
) -> tuple[TimeSplit, ...]:
    """Batch-1 prefill of each length (no cached prefix) split into compute, memory, communication and engine
    overhead, seconds."""
    lengths = np.asarray(lengths_tokens, dtype=np.float64)
    return time_splits(prefill_time(arch, instance, params, lengths), lengths)


def decode_split(
    arch: Architecture, instance: Instance, params: RooflineParams, batch: int, context_tokens: float
) -> TimeSplit:
    """One decode step of ``batch`` sequences at ``context_tokens`` each, split as ``prefill_splits``."""
    b = np.asarray([float(batch)])
    return time_splits(decode_step_time(arch, instance, params, b, context_tokens), b)[0]
