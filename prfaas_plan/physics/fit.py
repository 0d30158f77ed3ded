"""Whether a model fits an instance: weights plus one request's cache against usable memory, by how much it
misses, and what would fit instead (more GPUs per instance, a lower weight dtype).

    fits  <=>  W + C(context) <= g · M · f

W = weight bytes (``memory.weight_bytes``), C = one request's cache at the decode context
(``memory.cache_bytes``), g GPUs of M bytes each, f the usable fraction (``roofline.Instance``).

Also whether the model's attention can be split g ways at all (``tensor_parallel_problem``), and whether the
hardware profile models g GPUs in one instance (``scale_up_problem``).
"""

from __future__ import annotations

import math
from dataclasses import replace

from prfaas_plan._frozen import frozen
from prfaas_plan.physics.memory import cache_bytes, weight_bytes
from prfaas_plan.physics.roofline import Instance
from prfaas_plan.spec.hardware import Accelerator
from prfaas_plan.spec.model import DTYPE_BYTES, Architecture

#: Weight dtypes tried, largest first, when suggesting a lower one.
_WEIGHT_DTYPES = ("bf16", "fp8", "int4")
#: GPUs per instance tried when suggesting more (tensor-parallel sizes in use).
_GPU_COUNTS = (1, 2, 4, 8, 16, 32, 64, 72)


@frozen
class MemoryFit:
    """Weights and one request's cache against an instance's usable memory (bytes)."""

    weights_bytes: float
    request_bytes: float
    usable_bytes: float
    gpus: int
    #: Smallest GPU count of ``_GPU_COUNTS`` at which it fits (None: not even 72).
    gpus_that_fit: int | None
    #: Weight dtypes (all weight groups stored in it) at which it fits on ``gpus``; empty: none of them.
    dtypes_that_fit: tuple[str, ...]

    @property
    def fits(self) -> bool:
        """Weights plus one request fit."""
        return self.weights_bytes + self.request_bytes <= self.usable_bytes

    @property
    def shortfall_bytes(self) -> float:
        """How many bytes are missing (0 when it fits)."""
        return max(0.0, self.weights_bytes + self.request_bytes - self.usable_bytes)

    def describe(self, dtype_hint: str = "(model: {card: ..., dtypes: ...})") -> str:
        """One sentence: the figures, and what would fit (a lower weight dtype followed by ``dtype_hint``, how to
        ask for it)."""
        gb = 1e9
        text = (
            f"weights {self.weights_bytes / gb:,.0f} GB + one request's cache {self.request_bytes / gb:,.1f} GB "
            f"exceed the {self.gpus} GPUs' usable {self.usable_bytes / gb:,.0f} GB by "
            f"{self.shortfall_bytes / gb:,.0f} GB"
        )
        hints = []
        if self.gpus_that_fit is not None:
            hints.append(f"{self.gpus_that_fit} GPUs per instance")
        if self.dtypes_that_fit:
            hints.append(f"weights in {' or '.join(self.dtypes_that_fit)} {dtype_hint}")
        return text + ("; would fit: " + ", or ".join(hints) if hints else "; no GPU count or weight dtype tried fits")


def _all_weights_in(arch: Architecture, dtype: str) -> Architecture:
    groups = {f: dtype for f in ("weights", "experts", "embeddings") if hasattr(arch.dtypes, f)}
    return replace(arch, dtypes=replace(arch.dtypes, **groups))


def memory_fit(arch: Architecture, accelerator: Accelerator, gpus: int, context_tokens: float) -> MemoryFit:
    """Weights and one request of ``context_tokens`` against ``gpus`` of ``accelerator``."""
    instance = Instance(accelerator=accelerator, gpus=gpus)
    weights = weight_bytes(arch)
    request = float(cache_bytes(arch, context_tokens))
    need = weights + request
    per_gpu = accelerator.memory_bytes * instance.usable_memory_fraction
    more = next((g for g in _GPU_COUNTS if g > gpus and g * per_gpu >= need), None)
    current = DTYPE_BYTES.get(arch.dtypes.weights, math.inf)
    lower = tuple(
        d
        for d in _WEIGHT_DTYPES
        if DTYPE_BYTES[d] < current and weight_bytes(_all_weights_in(arch, d)) + request <= instance.memory_bytes
    )
    return MemoryFit(
        weights_bytes=weights,
        request_bytes=request,
        usable_bytes=instance.memory_bytes,
        gpus=gpus,
        gpus_that_fit=more,
        dtypes_that_fit=lower,
    )


#: Attention kinds whose query heads tensor parallelism splits (and, for GQA/SWA, KV heads). Linear-attention
#: layers are left out: a hybrid's few linear layers may run data-parallel beside tensor-parallel attention
#: (workloads/models/paper-1t-hybrid.yaml: 60 KDA heads on 8 GPUs as TP 4 x DP 2).
_SPLIT_KINDS = ("gqa", "swa", "mla")


def tensor_parallel_problem(arch: Architecture, gpus: int) -> str | None:
    """Why tensor parallelism over ``gpus`` cannot split the model's attention, as vLLM and SGLang check it at
    start-up; None when it can. The query heads of every full, sliding-window or MLA attention block must be a
    multiple of g (so g may not exceed them); a GQA/SWA block's KV heads a multiple of g, or, where g is at
    least their number, g a multiple of them (the engines then replicate each KV head)."""
    if gpus <= 1:
        return None
    blocks = {(g.attention.heads, g.attention.kv_heads, g.attention.kind) for g in (*arch.layers, *arch.mtp_layers)}
    for heads, kv_heads, kind in sorted(blocks):
        if kind not in _SPLIT_KINDS:
            continue
        if gpus > heads:
            return f"tensor parallelism over {gpus} GPUs exceeds the model's {heads} attention heads"
        if heads % gpus:
            return f"tensor parallelism over {gpus} GPUs does not divide the model's {heads} attention heads"
        if kind == "mla" or kv_heads <= 0:
            continue
        if (kv_heads % gpus) if gpus < kv_heads else (gpus % kv_heads):
            return f"tensor parallelism over {gpus} GPUs does not divide the model's {kv_heads} KV heads, nor they it"
    return None


def scale_up_problem(accelerator: Accelerator, gpus: int) -> str | None:
    """Why the hardware profile does not model ``gpus`` GPUs in one instance; None when it does. An instance
    larger than the profile's scale-up domain (``scale_up_gpus``) is priced across nodes over its scale-out NICs
    (``roofline.communication_s``); a profile without scale-out (the PCIe cards: ``scale_up_gpus: 1``, "PCIe TP
    is not modelled as scale-up") has no such path, and its ``scale_up`` link (PCIe) is then priced as if it
    were a scale-up fabric."""
    domain = accelerator.scale_up_gpus
    if domain is None or gpus <= domain or accelerator.scale_out_bandwidth_bytes_per_s is not None:
        return None
    return (
        f"{accelerator.key}'s profile has a scale-up domain of {domain} GPU{'s' if domain > 1 else ''} "
        f"(scale_up_gpus) and no scale-out: tensor parallelism over {gpus} GPUs (over PCIe on a PCIe card) is "
        f"not modelled; the communication here prices its scale_up link as if it were a scale-up fabric"
    )
