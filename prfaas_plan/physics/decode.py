"""Decode capacity of one instance: the largest batch whose cache fits beside the weights and whose roofline
step time meets the TPOT SLO."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.physics.memory import cache_bytes, weight_bytes
from prfaas_plan.physics.ops import forward_ops, matmul_kernels
from prfaas_plan.physics.roofline import Instance, RooflineTime, roofline_time
from prfaas_plan.spec.hardware import RooflineParams
from prfaas_plan.spec.model import Architecture


@frozen
class DecodeCapacity:
    """The largest decode batch of one instance and its step time; ``limited_by`` names the binding limit."""

    max_batch: int
    step_time_s: float
    limited_by: str
    context_tokens: float


def decode_overhead_s(arch: Architecture, params: RooflineParams) -> float:
    """What the engine adds to a decode step's kernels, seconds: ``decode_step_overhead_s`` plus
    ``decode_layer_overhead_s`` per decoder layer plus ``decode_op_overhead_s`` per matrix-multiply kernel
    (``physics.ops.matmul_kernels``; ``RooflineParams``)."""
    fixed = params.decode_step_overhead_s + arch.n_layers * params.decode_layer_overhead_s
    if params.decode_op_overhead_s > 0:
        fixed += matmul_kernels(arch) * params.decode_op_overhead_s
    return fixed


def decode_step_time(
    arch: Architecture, instance: Instance, params: RooflineParams, batch: NDArray[np.float64], context_tokens: float
) -> RooflineTime:
    """The priced decode step for ``batch`` sequences of ``context_tokens`` each, with its parts; the overhead
    is ``decode_overhead_s``. Routed experts read the weights of the distinct experts the batch touches,
    E(1 - (1 - k/E)^B) per layer in expectation (``physics.ops``)."""
    ops = forward_ops(arch, cached=context_tokens, new=1.0, batch=batch, decode=True)
    return roofline_time(ops, arch, instance, params, batch, overhead_s=decode_overhead_s(arch, params))


def decode_step_seconds(
    arch: Architecture, instance: Instance, params: RooflineParams, batch: NDArray[np.float64], context_tokens: float
) -> NDArray[np.float64]:
    """Roofline time of one decode step for ``batch`` sequences of ``context_tokens`` each."""
    return decode_step_time(arch, instance, params, batch, context_tokens).total_s


def memory_batch_limit(arch: Architecture, instance: Instance, context_tokens: float) -> int:
    """Most sequences of ``context_tokens`` whose caches fit beside the weights in the instance's usable memory
    (0 when not one does)."""
    free = instance.memory_bytes - weight_bytes(arch)
    per_request = float(cache_bytes(arch, context_tokens))
    return int(free // per_request) if free > 0 else 0


def decode_capacity(
    arch: Architecture, instance: Instance, params: RooflineParams, context_tokens: float, tpot_s: float
) -> DecodeCapacity | None:
    """Largest batch B whose cache fits beside the weights and whose step time meets the TPOT SLO.

    Memory: weights + B · cache_bytes(context) <= usable instance memory. Time: step(B) <= tpot_s; the step
    time is non-decreasing in B, so the answer is the smaller of the two limits. None when not even one
    request fits (the binding limit is then reported by the caller).
    """
    memory_limit = memory_batch_limit(arch, instance, context_tokens)
    if memory_limit < 1:
        return None
    batches = np.arange(1, min(memory_limit, 4096) + 1, dtype=np.float64)
    steps = decode_step_seconds(arch, instance, params, batches, context_tokens)
    meets = np.flatnonzero(steps <= tpot_s)
    if meets.size == 0:
        return DecodeCapacity(
            max_batch=0, step_time_s=float(steps[0]), limited_by="tpot_slo", context_tokens=context_tokens
        )
    best = int(meets[-1])
    limited_by = "memory" if best + 1 == batches.size and memory_limit <= 4096 else "tpot_slo"
    if best + 1 == batches.size and memory_limit > 4096:
        limited_by = "batch_cap_4096"
    return DecodeCapacity(
        max_batch=int(batches[best]),
        step_time_s=float(steps[best]),
        limited_by=limited_by,
        context_tokens=context_tokens,
    )
