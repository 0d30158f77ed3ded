"""Roofline time of a forward pass on an instance (accelerator x GPUs), and what an instance can hold.

    T = overhead + sum over operations of max(matmul FLOPs / (F · e_c), bytes / (B · e_m)) + communication

with F = GPUs x dense peak FLOP/s of the compute dtype, B = GPUs x HBM bandwidth (weights, activations and
cache are assumed evenly sharded), e_c and e_m the achieved fractions of peak, and communication the
tensor-parallel all-reduces over the scale-up link: two per layer (after attention and after the FFN), each
a ring all-reduce of tokens x hidden activations, 2(g-1)/g of the message per GPU at the per-direction link
bandwidth (NVLink figures are bidirectional totals, so half of it) times e_n. Element-wise work is priced
by its bytes (it runs on vector units far from the tensor-core peak, and is memory-bound at these sizes).

The efficiencies and the overhead are named parameters (``RooflineParams``) with documented defaults; where
measured points exist they are fitted by least squares (``calibrate``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from prfaas_plan.physics.ops import ACTIVATION_BYTES, Op
from prfaas_plan.spec.hardware import Accelerator, RooflineParams
from prfaas_plan.spec.model import Architecture

Array = NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class Instance:
    """``gpus`` accelerators serving one model replica with tensor parallelism across all of them."""

    accelerator: Accelerator
    gpus: int
    usable_memory_fraction: float = 0.9  # the rest: CUDA context, activations, fragmentation (vLLM default 0.9)

    def flop_per_s(self, dtype: str) -> float:
        """Aggregate dense peak FLOP/s for matmuls in ``dtype`` (bf16 when fp8/fp4 peaks are not listed)."""
        peaks = self.accelerator.dense_flop_per_s
        if dtype in peaks:
            return self.gpus * peaks[dtype]
        if "bf16" in peaks:
            return self.gpus * peaks["bf16"]
        raise KeyError(dtype)

    @property
    def bytes_per_s(self) -> float:
        """Aggregate HBM bandwidth, bytes/s."""
        return self.gpus * self.accelerator.hbm_bandwidth_bytes_per_s

    @property
    def memory_bytes(self) -> float:
        """Usable device memory across the instance, bytes."""
        return self.gpus * self.accelerator.memory_bytes * self.usable_memory_fraction


def compute_dtype(arch: Architecture) -> str:
    """The matmul dtype implied by the weights: fp8/fp4 checkpoints run their GEMMs at that rate; int4 (and
    int8) weight-only checkpoints dequantise to bf16 and run at the bf16 rate."""
    return arch.dtypes.weights if arch.dtypes.weights in ("fp8", "fp4") else "bf16"


def missing_peak(arch: Architecture, accelerator: Accelerator) -> str | None:
    """Why ``accelerator`` cannot price ``arch``'s matmuls (no dense rate for its compute dtype nor bf16), or None."""
    dtype = compute_dtype(arch)
    if dtype in accelerator.dense_flop_per_s or "bf16" in accelerator.dense_flop_per_s:
        return None
    listed = ", ".join(sorted(accelerator.dense_flop_per_s)) or "none"
    wanted = "bf16" if dtype == "bf16" else f"{dtype} (nor bf16)"
    return f"has no dense_tflops.{wanted} for this model's {arch.dtypes.weights} weights; it lists: {listed}"


@dataclass(frozen=True, slots=True, kw_only=True)
class RooflineTime:
    """A priced forward pass, seconds (arrays when the ops were vectorised over lengths)."""

    total_s: Array
    compute_bound_s: Array
    memory_bound_s: Array
    communication_s: Array
    overhead_s: float


def communication_s(arch: Architecture, instance: Instance, tokens: Array, params: RooflineParams) -> Array:
    """Tensor-parallel all-reduce time: 2 per layer of tokens x hidden activations (module docstring)."""
    g = instance.gpus
    link = instance.accelerator.scale_up_bandwidth_bytes_per_s
    if g <= 1 or link is None:
        return np.zeros_like(np.asarray(tokens, dtype=np.float64))
    per_direction = link / 2
    message = np.asarray(tokens, dtype=np.float64) * arch.hidden_size * ACTIVATION_BYTES
    per_all_reduce = 2 * (g - 1) / g * message / (per_direction * params.communication_efficiency)
    return 2 * arch.n_layers * per_all_reduce


def roofline_time(
    ops: list[Op],
    arch: Architecture,
    instance: Instance,
    params: RooflineParams,
    tokens: Array,
    *,
    overhead_s: float | None = None,
) -> RooflineTime:
    """Price ``ops`` (from physics.ops.forward_ops) on ``instance`` (module docstring). The fixed overhead is
    ``params.overhead_s`` (per prefill request) unless ``overhead_s`` is given (a decode step passes
    ``params.decode_step_overhead_s``)."""
    overhead = params.overhead_s if overhead_s is None else overhead_s
    flops_rate = instance.flop_per_s(compute_dtype(arch)) * params.compute_efficiency
    bytes_rate = instance.bytes_per_s * params.memory_efficiency
    compute = [op.matmul_flops / flops_rate for op in ops]
    memory = [op.bytes / bytes_rate for op in ops]
    per_op = np.sum(np.broadcast_arrays(*(np.maximum(c, m) for c, m in zip(compute, memory, strict=True))), axis=0)
    comm = communication_s(arch, instance, tokens, params)
    return RooflineTime(
        total_s=np.asarray(overhead + per_op + comm, dtype=np.float64),
        compute_bound_s=np.asarray(np.sum(np.broadcast_arrays(*compute), axis=0), dtype=np.float64),
        memory_bound_s=np.asarray(np.sum(np.broadcast_arrays(*memory), axis=0), dtype=np.float64),
        communication_s=comm,
        overhead_s=overhead,
    )
