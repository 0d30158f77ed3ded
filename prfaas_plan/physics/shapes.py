"""Instance shapes: which shapes an accelerator and a model allow, what each holds, and what it costs.

A shape (``spec.shape.InstanceShape``) is g GPUs of one scale-up domain (``Accelerator.scale_up_gpus``: an
NVLink or Infinity Fabric domain; 1 for PCIe cards) split as tensor parallelism (TP), expert parallelism
(EP: each routed expert whole on one GPU, the tokens sent to it by an all-to-all) and attention data
parallelism (DP: replicas of the attention side, each over TP GPUs, sharing the experts).

Memory. Weights are stored once per replica of what holds them: the routed experts once per instance, the
attention side (everything but the routed experts) once per DP replica, so

    weights(shape) = attention-side bytes x DP + routed-expert bytes   (at the model's storage dtypes)

and a shape is ruled out when its weights, or its weights plus one request's KV/state at the longest length
it must hold, exceed the usable memory g x HBM x 0.9 (``roofline.Instance``). What is left holds the KV
caches and linear-attention states of the decode batch.

Time. A shape with DP 1 is priced by the roofline as before on an ``Instance`` of g GPUs (TP over all g;
with EP the routed experts are spread, ``RooflineParams.expert_parallel``). With DP > 1 a forward pass is
priced in two parts that run one after the other layer by layer: the attention side of one replica (on TP
GPUs, with the replica's share ceil(B / DP) of a decode batch; a prefill of one request runs on one replica)
and the routed experts of all the tokens, spread over all g GPUs (EP, with the busiest GPU's load). Their
collectives: the replica's tensor-parallel all-reduces (two per layer, as ``roofline.communication_s``, when
TP > 1) and, per MoE layer, a dispatch and a combine all-to-all, each ``all_to_all_latency_s`` plus the
top-k copies of a GPU's tokens (tokens of its replica / TP) that leave it, (g - 1) / g of them, at the
per-direction scale-up rate.

Candidate shapes (``candidate_shapes``): g in 1, 2, 4, ... up to the domain, and the domain itself; for each
g, TPg; and for a model with routed experts and g > 1, TPg EPg and DPg EPg.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.physics.decode import DecodeCapacity, decode_capacity, decode_overhead_s, decode_step_time
from prfaas_plan.physics.memory import cache_bytes, expert_parameter_count, weight_bytes
from prfaas_plan.physics.ops import ACTIVATION_BYTES, Op, forward_ops
from prfaas_plan.physics.pool_costs import SPLIT_LENGTHS_TOKENS, PoolCosts
from prfaas_plan.physics.prefill import (
    kv_transfer_curve,
    prefill_chunks,
    prefill_knots,
    prefill_time,
    serving_overhead_s,
)
from prfaas_plan.physics.roofline import Instance, RooflineTime, moe_layers, roofline_time, time_splits
from prfaas_plan.physics.tabulated import TabulatedCurve
from prfaas_plan.spec.hardware import Accelerator, RooflineParams
from prfaas_plan.spec.model import Architecture
from prfaas_plan.spec.scenario import ModelCard
from prfaas_plan.spec.shape import InstanceShape

Array = NDArray[np.float64]

#: Decode batches searched (as ``physics.decode.decode_capacity``).
_MAX_BATCH = 4096


def has_experts(arch: Architecture) -> bool:
    """Whether the model has routed experts (so expert and attention data parallelism apply)."""
    return any(g.ffn.kind == "moe" for g in (*arch.layers, *arch.mtp_layers))


def gpu_counts(domain: int) -> tuple[int, ...]:
    """GPUs per instance a domain of ``domain`` GPUs offers: the powers of two below it and the domain itself."""
    counts = {domain}
    g = 1
    while g < domain:
        counts.add(g)
        g *= 2
    return tuple(sorted(counts))


def shapes_of(gpus: int, arch: Architecture) -> tuple[InstanceShape, ...]:
    """The parallel layouts of ``gpus`` GPUs: TP, and with routed experts TP+EP and DP+EP."""
    shapes = [InstanceShape(gpus=gpus, tensor_parallel=gpus)]
    if gpus > 1 and has_experts(arch):
        shapes.append(InstanceShape(gpus=gpus, tensor_parallel=gpus, expert_parallel=gpus))
        shapes.append(InstanceShape(gpus=gpus, tensor_parallel=1, expert_parallel=gpus, attention_data_parallel=gpus))
    return tuple(shapes)


def candidate_shapes(arch: Architecture, accelerator: Accelerator) -> tuple[InstanceShape, ...]:
    """Every shape ``accelerator``'s scale-up domain offers ``arch`` (module docstring), memory not yet checked.
    Raises ValueError when the accelerator's profile gives no ``scale_up_gpus``."""
    if accelerator.scale_up_gpus is None:
        raise ValueError(f"hardware '{accelerator.key}' gives no scale_up_gpus to choose instance shapes within")
    return tuple(s for g in gpu_counts(accelerator.scale_up_gpus) for s in shapes_of(g, arch))


@frozen
class ShapeMemory:
    """What one shape holds, bytes: its HBM, the usable part, the weights it stores and what is left."""

    shape: InstanceShape
    hbm_bytes: float
    usable_bytes: float
    weight_bytes: float

    @property
    def free_bytes(self) -> float:
        """Usable memory left beside the weights (for KV caches and states); negative when they do not fit."""
        return self.usable_bytes - self.weight_bytes


def expert_weight_bytes(arch: Architecture) -> float:
    """Bytes of the routed experts (MTP modules' included), in the experts' storage dtype."""
    return expert_parameter_count(arch) * arch.dtypes.bytes_of("experts")


def shape_weight_bytes(arch: Architecture, shape: InstanceShape) -> float:
    """Weights one instance of ``shape`` stores: the attention side once per DP replica, the experts once."""
    experts = expert_weight_bytes(arch)
    return (weight_bytes(arch) - experts) * shape.attention_data_parallel + experts


def shape_memory(arch: Architecture, accelerator: Accelerator, shape: InstanceShape) -> ShapeMemory:
    """``shape``'s memory on ``accelerator`` (module docstring)."""
    instance = Instance(accelerator=accelerator, gpus=shape.gpus)
    return ShapeMemory(
        shape=shape,
        hbm_bytes=shape.gpus * accelerator.memory_bytes,
        usable_bytes=instance.memory_bytes,
        weight_bytes=shape_weight_bytes(arch, shape),
    )


def memory_problem(
    model_name: str, arch: Architecture, accelerator: Accelerator, shape: InstanceShape, length_tokens: float = 0.0
) -> str | None:
    """Why ``shape`` cannot hold the model (its weights, or its weights and one request's KV/state at
    ``length_tokens``), with the numbers; None when it can."""
    mem = shape_memory(arch, accelerator, shape)
    gb = 1e9
    where = (
        f"{shape.gpus} x {accelerator.memory_bytes / gb:.0f} GB {accelerator.key} "
        f"({mem.usable_bytes / gb:,.0f} GB usable at {mem.usable_bytes / mem.hbm_bytes:.0%})"
    )
    dtype = arch.dtypes.weights.upper()
    copies = (
        f" ({shape.attention_data_parallel} replicas of the attention side)"
        if shape.attention_data_parallel > 1
        else ""
    )
    if mem.free_bytes < 0:
        return f"{model_name} {dtype}, {shape.label}: {mem.weight_bytes / gb:,.0f} GB of weights{copies} > {where}"
    need = float(cache_bytes(arch, length_tokens)) if length_tokens > 0 else 0.0
    if need > mem.free_bytes:
        return (
            f"{model_name} {dtype}, {shape.label}: {mem.weight_bytes / gb:,.0f} GB of weights{copies} + "
            f"{need / gb:,.1f} GB of KV/state for one {length_tokens:,.0f}-token request > {where}"
        )
    return None


def shape_params(params: RooflineParams, shape: InstanceShape) -> RooflineParams:
    """``params`` with expert parallelism as ``shape`` says."""
    ep = shape.expert_parallel > 1
    return params if params.expert_parallel == ep else replace(params, expert_parallel=ep)


def _split(ops: list[Op]) -> tuple[list[Op], list[Op]]:
    """(attention side, routed experts) of a forward pass's operations."""
    return [op for op in ops if op.routing is None], [op for op in ops if op.routing is not None]


def data_parallel_collectives_s(
    arch: Architecture,
    accelerator: Accelerator,
    shape: InstanceShape,
    params: RooflineParams,
    replica_tokens: ArrayLike,
    passes: ArrayLike = 1.0,
) -> Array:
    """Collective time of a DP > 1 forward pass whose busiest replica holds ``replica_tokens`` tokens: its
    tensor-parallel all-reduces (2 per layer per pass, TP > 1) and the MoE layers' dispatch and combine
    all-to-alls over all g GPUs (module docstring). Nothing without a scale-up link."""
    t = np.asarray(replica_tokens, dtype=np.float64)
    link = accelerator.scale_up_bandwidth_bytes_per_s
    if link is None or shape.gpus <= 1:
        return np.zeros_like(t)
    per_direction = link / 2 * params.communication_efficiency
    n_passes = np.asarray(passes, dtype=np.float64)
    tp, g = shape.tensor_parallel, shape.gpus
    total = np.zeros_like(t)
    if tp > 1:
        ring = 2 * (tp - 1) / tp * t * arch.hidden_size * ACTIVATION_BYTES / per_direction
        total = total + 2 * arch.n_layers * (ring + n_passes * params.all_reduce_latency_s)
    layers, top_k = moe_layers(arch)
    if layers:
        sent = t / tp * top_k * arch.hidden_size * ACTIVATION_BYTES * (g - 1) / g
        total = total + 2 * layers * (sent / per_direction + n_passes * params.all_to_all_latency_s)
    return np.asarray(total, dtype=np.float64)


def _combined(side: RooflineTime, experts: RooflineTime, collectives: Array, overhead: Array | float) -> RooflineTime:
    return RooflineTime(
        total_s=np.asarray(side.total_s + experts.total_s + collectives, dtype=np.float64),
        compute_bound_s=np.asarray(side.compute_bound_s + experts.compute_bound_s, dtype=np.float64),
        memory_bound_s=np.asarray(side.memory_bound_s + experts.memory_bound_s, dtype=np.float64),
        communication_s=collectives,
        overhead_s=overhead,
        compute_s=np.asarray(side.compute_s + experts.compute_s, dtype=np.float64),
        memory_s=np.asarray(side.memory_s + experts.memory_s, dtype=np.float64),
    )


def _silent(accelerator: Accelerator) -> Accelerator:
    """``accelerator`` with no scale-up link, so the roofline adds no collectives (this module prices them)."""
    return replace(accelerator, scale_up_bandwidth_bytes_per_s=None)


def shaped_prefill_time(
    arch: Architecture,
    accelerator: Accelerator,
    shape: InstanceShape,
    params: RooflineParams,
    lengths: ArrayLike,
    cached: ArrayLike = 0.0,
) -> RooflineTime:
    """One request's prefill of ``lengths`` new tokens after ``cached`` ones on ``shape`` (module docstring)."""
    if shape.attention_data_parallel == 1:
        return prefill_time(
            arch, Instance(accelerator=accelerator, gpus=shape.gpus), shape_params(params, shape), lengths, cached
        )
    new = np.asarray(lengths, dtype=np.float64)
    side_ops, expert_ops = _split(forward_ops(arch, cached=cached, new=new))
    overhead = serving_overhead_s(arch, params, new)
    quiet = _silent(accelerator)
    side = roofline_time(
        side_ops, arch, Instance(accelerator=quiet, gpus=shape.tensor_parallel), params, new, overhead_s=overhead
    )
    experts = roofline_time(
        expert_ops,
        arch,
        Instance(accelerator=quiet, gpus=shape.gpus),
        replace(params, expert_parallel=True),
        new,
        overhead_s=0.0,
    )
    comm = data_parallel_collectives_s(arch, accelerator, shape, params, new, prefill_chunks(params, new))
    return _combined(side, experts, comm, overhead)


def shaped_decode_step(
    arch: Architecture,
    accelerator: Accelerator,
    shape: InstanceShape,
    params: RooflineParams,
    batch: ArrayLike,
    context_tokens: float,
) -> RooflineTime:
    """One decode step of ``batch`` sequences at ``context_tokens`` each on ``shape`` (module docstring); with
    DP > 1 the busiest replica holds ceil(batch / DP) of them."""
    b = np.asarray(batch, dtype=np.float64)
    if shape.attention_data_parallel == 1:
        return decode_step_time(
            arch, Instance(accelerator=accelerator, gpus=shape.gpus), shape_params(params, shape), b, context_tokens
        )
    per_replica = np.ceil(b / shape.attention_data_parallel)
    side_ops, _ = _split(forward_ops(arch, cached=context_tokens, new=1.0, batch=per_replica, decode=True))
    _, expert_ops = _split(forward_ops(arch, cached=context_tokens, new=1.0, batch=b, decode=True))
    overhead = decode_overhead_s(arch, params)
    quiet = _silent(accelerator)
    side = roofline_time(
        side_ops,
        arch,
        Instance(accelerator=quiet, gpus=shape.tensor_parallel),
        params,
        per_replica,
        overhead_s=overhead,
    )
    experts = roofline_time(
        expert_ops,
        arch,
        Instance(accelerator=quiet, gpus=shape.gpus),
        replace(params, expert_parallel=True),
        b,
        overhead_s=0.0,
    )
    comm = data_parallel_collectives_s(arch, accelerator, shape, params, per_replica)
    return _combined(side, experts, comm, overhead)


def shaped_decode_capacity(
    arch: Architecture,
    accelerator: Accelerator,
    shape: InstanceShape,
    params: RooflineParams,
    context_tokens: float,
    tpot_s: float,
) -> DecodeCapacity | None:
    """The largest decode batch of ``shape`` whose caches fit beside its weights and whose step meets
    ``tpot_s`` (``physics.decode.decode_capacity``; with DP > 1 each replica holds the caches of its share
    beside its copy of the attention side and its 1/DP of the experts). None when not one request fits."""
    if shape.attention_data_parallel == 1:
        return decode_capacity(
            arch,
            Instance(accelerator=accelerator, gpus=shape.gpus),
            shape_params(params, shape),
            context_tokens,
            tpot_s,
        )
    dp = shape.attention_data_parallel
    replica = shape_memory(arch, accelerator, shape)
    per_replica_free = replica.free_bytes / dp
    per_request = float(cache_bytes(arch, context_tokens))
    memory_limit = dp * int(per_replica_free // per_request) if per_replica_free > 0 else 0
    if memory_limit < 1:
        return None
    batches = np.arange(1, min(memory_limit, _MAX_BATCH) + 1, dtype=np.float64)
    steps = shaped_decode_step(arch, accelerator, shape, params, batches, context_tokens).total_s
    meets = np.flatnonzero(steps <= tpot_s)
    if meets.size == 0:
        return DecodeCapacity(
            max_batch=0, step_time_s=float(steps[0]), limited_by="tpot_slo", context_tokens=context_tokens
        )
    best = int(meets[-1])
    limited_by = "tpot_slo"
    if best + 1 == batches.size:
        limited_by = "memory" if memory_limit <= _MAX_BATCH else f"batch_cap_{_MAX_BATCH}"
    return DecodeCapacity(
        max_batch=int(batches[best]),
        step_time_s=float(steps[best]),
        limited_by=limited_by,
        context_tokens=context_tokens,
    )


def shaped_prefill_curve(
    arch: Architecture,
    accelerator: Accelerator,
    shape: InstanceShape,
    params: RooflineParams,
    source: str,
    cached_tokens: float = 0.0,
) -> TabulatedCurve:
    """T_prefill(l) of ``shape`` tabulated on the prefill grid (as ``physics.prefill.prefill_curve``)."""
    knots = prefill_knots(params)
    seconds = shaped_prefill_time(arch, accelerator, shape, params, knots, cached_tokens).total_s
    return TabulatedCurve(
        knots_tokens=tuple(float(k) for k in knots),
        knot_values=tuple(float(v) for v in seconds),
        provenance="derived",
        source=source,
    )


def shaped_pool_costs(
    accelerator: Accelerator,
    shape: InstanceShape,
    card: ModelCard,
    params: RooflineParams,
    label: str,
    *,
    context_tokens: float,
    tpot_s: float,
    with_decode: bool,
    prefix_tokens: float,
) -> PoolCosts:
    """What the stage model needs of a roofline or calibrated pool of ``shape`` instances (``physics.pools``,
    which applies the pool's time scales): the prefill curve, the KV-size curve and the decode capacity at
    ``context_tokens`` against ``tpot_s``, with the time splits at the Table 3 lengths."""
    arch = card.architecture
    assert arch is not None  # roofline and calibrated pools have an architecture (the loader checks)
    label = f"{label}; shape {shape.label} on {shape.gpus} GPUs"
    capacity = shaped_decode_capacity(arch, accelerator, shape, params, context_tokens, tpot_s) if with_decode else None
    decode_split = None
    if capacity is not None and capacity.max_batch >= 1:
        batch = np.asarray(float(capacity.max_batch))
        decode_split = time_splits(shaped_decode_step(arch, accelerator, shape, params, batch, context_tokens), batch)[
            0
        ]
    split_lengths = np.asarray(SPLIT_LENGTHS_TOKENS)
    if capacity is not None:
        decode_source = (
            f"{label}: batch {capacity.max_batch} at {capacity.context_tokens:,.0f} tokens of context, "
            f"limited by {capacity.limited_by}"
        )
    else:
        decode_source = f"{label}: not one request's cache fits beside the weights" if with_decode else "not computed"
    return PoolCosts(
        kv_handoff_s=params.kv_handoff_s,
        prefill=shaped_prefill_curve(arch, accelerator, shape, params, label, prefix_tokens),
        prefill_source=label + (f", after a cached prefix of {prefix_tokens:,.0f} tokens" if prefix_tokens else ""),
        kv_bytes=kv_transfer_curve(arch, prefix_tokens),
        kv_source=f"model card '{card.key}' architecture" + (" (inferred dimensions)" if card.inferred else ""),
        decode_max_batch=capacity.max_batch if capacity else None,
        decode_step_time_s=capacity.step_time_s if capacity else None,
        decode_source=decode_source,
        roofline=shape_params(params, shape),
        prefill_split=time_splits(
            shaped_prefill_time(arch, accelerator, shape, params, split_lengths, prefix_tokens), split_lengths
        ),
        decode_split=decode_split,
    )
