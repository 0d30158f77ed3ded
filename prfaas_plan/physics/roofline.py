"""Roofline time of a forward pass on an instance (accelerator x GPUs), and what an instance can hold.

    T = overhead + sum over operations of max(matmul FLOPs / (F · e), bytes / (B · e_m)) + communication

with F = GPUs x dense peak FLOP/s of the operation's dtype (the weights' compute dtype for GEMMs; the KV
dtype, bf16 unless the cache is fp8, for the attention cores, which multiply activations by cached keys and
values whatever the weights are stored in), B = GPUs x HBM bandwidth (weights, activations and cache are
assumed evenly sharded), e the achieved fraction of peak (``compute_efficiency`` for GEMMs,
``attention_efficiency`` for the attention cores and the linear-attention recurrence; a GEMM of m rows
further at m / (m + ``gemm_half_rows``), the small-M shape curve; an attention core whose queries see x keys
on average further at x / (x + ``attention_half_context_tokens``); routed experts under expert parallelism
further at 1 / (busiest GPU's load / mean load), ``physics.moe_load``), e_m that of HBM bandwidth, and
communication the
tensor-parallel all-reduces over the scale-up link: two per layer (after attention and after the FFN), each
a ring all-reduce of tokens x hidden activations, 2(g-1)/g of the message per GPU at the per-direction link
bandwidth (NVLink figures are bidirectional totals, so half of it) times e_n. Element-wise work is priced
by its bytes (it runs on vector units far from the tensor-core peak, and is memory-bound at these sizes).

Each operation's time is attributed to compute or memory by which of its two terms is larger, so a pass splits
into compute, memory, communication and overhead parts that add up to its total (``RooflineTime``).

The efficiencies and the overheads are named parameters (``RooflineParams``) with documented defaults; where
measured points exist they are fitted by least squares (``calibrate``, ``physics.serving``).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.physics.moe_load import imbalance_factor
from prfaas_plan.physics.ops import ACTIVATION_BYTES, Op
from prfaas_plan.spec.hardware import Accelerator, RooflineParams
from prfaas_plan.spec.model import Architecture

Array = NDArray[np.float64]


@frozen
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


def compute_dtype(arch: Architecture, which: str = "weights") -> str:
    """The matmul dtype implied by a weight group's storage (``weights``, ``experts`` or ``embeddings``):
    fp8/fp4 weights run their GEMMs at that rate; int4 (and int8) weight-only storage dequantises to bf16
    and runs at the bf16 rate."""
    dtype = arch.dtypes.dtype_of(which)
    return dtype if dtype in ("fp8", "fp4") else "bf16"


#: The weight group whose dtype sets each GEMM's rate (all others: ``weights``).
_GEMM_GROUP = {"moe.experts": "experts", "lm_head": "embeddings"}


def attention_dtype(arch: Architecture) -> str:
    """The dtype attention cores multiply in: fp8 when the KV cache is fp8 (FP8 attention kernels), else bf16."""
    return "fp8" if arch.dtypes.kv_cache == "fp8" else "bf16"


#: Operations priced at ``attention_efficiency`` and the attention dtype (the rest of the matmuls are GEMMs).
ATTENTION_OPS = frozenset({"gqa.core", "swa.core", "mla.core", "linear.recurrence"})


def shape_penalty(rows: Array | float, half_rows: float) -> Array:
    """1 + m_half / m: how much longer a GEMM of m rows takes than its large-M rate implies (``RooflineParams``
    ``gemm_half_rows``); 1 when m_half is 0, and below two rows (a single row is a matrix-vector product,
    priced by the plain roofline: it streams the weight once and is memory-bound)."""
    m = np.asarray(rows, dtype=np.float64)
    if half_rows <= 0:
        return np.ones_like(m)
    return np.asarray(np.where(m >= 2, 1.0 + half_rows / np.maximum(m, 2.0), 1.0), dtype=np.float64)


def attention_penalty(context: Array | float, half_context_tokens: float) -> Array:
    """1 + x_half / x: how much longer an attention core whose queries see x keys on average takes than its
    long-context rate implies (``RooflineParams.attention_half_context_tokens``); 1 when x_half is 0 or the
    operation has no context (x infinite)."""
    x = np.asarray(context, dtype=np.float64)
    if half_context_tokens <= 0:
        return np.ones_like(x)
    return np.asarray(1.0 + half_context_tokens / np.maximum(x, 1.0), dtype=np.float64)


def fit_half_point(points: Array, rates: Array) -> tuple[float, float]:
    """(peak, x_half) of the saturating curve rate(x) = peak · x / (x + x_half), by least squares on
    1/rate = (1 + x_half / x) / peak, which is linear in 1/x (the small-M and context curves' form); x_half is
    never negative. ``points`` are the shape variable (rows, or keys per query), ``rates`` achieved FLOP/s."""
    x = 1.0 / np.asarray(points, dtype=np.float64)
    y = 1.0 / np.asarray(rates, dtype=np.float64)
    slope, intercept = np.polyfit(x, y, 1)
    if slope <= 0:  # no slowdown at small x: a flat curve at the points' mean rate
        return float(1.0 / np.mean(y)), 0.0
    if intercept <= 0:  # still rising at the largest x: its best rate stands for the peak
        peak = float(1.0 / np.min(y))
        return peak, float(max(0.0, float(x @ (y * peak - 1.0)) / float(x @ x)))
    return float(1.0 / intercept), float(slope / intercept)


def shape_factor(op: Op, instance: Instance, params: RooflineParams) -> Array:
    """The factor (>= 1) by which ``op``'s matmul time exceeds FLOPs / (peak · efficiency): the small-M curve
    for GEMMs, the context curve for attention cores, and for routed experts under expert parallelism the
    busiest GPU's load over the mean (module docstring)."""
    if op.name in ATTENTION_OPS:
        return attention_penalty(op.context, params.attention_half_context_tokens)
    half_rows = params.expert_gemm_half_rows if op.routing is not None and params.expert_gemm_half_rows > 0 else 0.0
    factor = shape_penalty(op.rows, half_rows or params.gemm_half_rows)
    if params.expert_parallel and op.routing is not None and instance.gpus > 1:
        r = op.routing
        factor = factor * imbalance_factor(r.tokens, r.experts, r.active, instance.gpus, params.moe_load_skew)
    return factor


def memory_bytes(op: Op, instance: Instance) -> Array:
    """Bytes ``op`` moves across the whole instance: its weights and activations once, its cache reads once per
    GPU that holds a copy. Tensor parallelism shards a cache by KV head; on g GPUs a cache of k < g heads (an
    MLA latent is one) is replicated g / k times and every GPU reads its copy (vLLM and SGLang replicate KV
    heads when the TP size exceeds them)."""
    replicas = max(1.0, instance.gpus / op.cache_heads)
    if replicas == 1.0:
        return op.bytes
    return np.asarray(op.bytes + (replicas - 1.0) * op.cache_bytes, dtype=np.float64)


def op_peak_flop_per_s(op: Op, arch: Architecture, instance: Instance) -> float:
    """Peak FLOP/s at which ``op``'s matmuls run on ``instance``: the attention dtype for attention cores, else
    the compute dtype of the weight group the op multiplies by."""
    if op.name in ATTENTION_OPS:
        return instance.flop_per_s(attention_dtype(arch))
    return instance.flop_per_s(compute_dtype(arch, _GEMM_GROUP.get(op.name, "weights")))


def op_efficiency(op: Op, arch: Architecture, params: RooflineParams) -> float:
    """The fraction of peak ``op``'s matmuls reach before shape effects: ``attention_efficiency`` for attention
    cores, else the GEMM efficiency of the compute dtype of the weight group it multiplies by
    (``RooflineParams.gemm_efficiency``), times ``expert_gemm_efficiency`` (at most 1) for the routed experts'
    grouped GEMMs."""
    if op.name in ATTENTION_OPS:
        return params.attention_efficiency
    efficiency = params.gemm_efficiency(compute_dtype(arch, _GEMM_GROUP.get(op.name, "weights")))
    if op.routing is not None:  # a routed experts' grouped GEMM: the engine's factor on its dense rate
        return min(1.0, efficiency * params.expert_gemm_efficiency)
    return efficiency


def missing_peak(arch: Architecture, accelerator: Accelerator) -> str | None:
    """Why ``accelerator`` cannot price ``arch``'s matmuls (no dense rate for its compute dtype nor bf16), or None."""
    if "bf16" in accelerator.dense_flop_per_s:
        return None
    listed = ", ".join(sorted(accelerator.dense_flop_per_s)) or "none"
    for which in ("weights", "experts", "embeddings"):
        dtype = compute_dtype(arch, which)
        if dtype not in accelerator.dense_flop_per_s:
            wanted = "bf16" if dtype == "bf16" else f"{dtype} (nor bf16)"
            return (
                f"has no dense_tflops.{wanted} for this model's {arch.dtypes.dtype_of(which)} {which}; "
                f"it lists: {listed}"
            )
    return None


@frozen
class RooflineTime:
    """A priced forward pass, seconds (arrays when the ops were vectorised over lengths).

    ``compute_bound_s`` and ``memory_bound_s`` are the two roofline sums over all operations;
    ``compute_s`` and ``memory_s`` attribute each operation's time to whichever of its terms is larger, so
    ``compute_s + memory_s + communication_s + overhead_s == total_s``.
    """

    total_s: Array
    compute_bound_s: Array
    memory_bound_s: Array
    communication_s: Array
    overhead_s: Array | float
    compute_s: Array
    memory_s: Array

    @property
    def kernel_s(self) -> Array:
        """The kernels alone: total minus the serving overhead."""
        return np.asarray(self.total_s - self.overhead_s, dtype=np.float64)


@frozen
class TimeSplit:
    """One priced pass split into parts that add up to its total, seconds: ``compute_s`` and ``memory_s`` (each
    operation counted where its roofline binds), ``communication_s`` (all-reduces) and ``overhead_s``
    (serving overhead). ``tokens`` is the prefill length or the decode batch."""

    tokens: float
    compute_s: float
    memory_s: float
    communication_s: float
    overhead_s: float

    @property
    def total_s(self) -> float:
        """The whole pass."""
        return self.compute_s + self.memory_s + self.communication_s + self.overhead_s


def time_splits(priced: RooflineTime, tokens: Array) -> tuple[TimeSplit, ...]:
    """One ``TimeSplit`` per entry of a pass priced over a vector of lengths or batches."""
    n = np.broadcast(priced.total_s, np.asarray(tokens)).shape
    parts = [
        np.broadcast_to(np.asarray(x, dtype=np.float64), n)
        for x in (tokens, priced.compute_s, priced.memory_s, priced.communication_s, priced.overhead_s)
    ]
    return tuple(
        TimeSplit(tokens=float(t), compute_s=float(c), memory_s=float(m), communication_s=float(k), overhead_s=float(o))
        for t, c, m, k, o in zip(*(np.ravel(x) for x in parts), strict=True)
    )


def moe_layers(arch: Architecture) -> tuple[int, int]:
    """(MoE layers, top-k of their routing) of ``arch`` (0, 0 for a dense model; the largest top-k when groups
    differ)."""
    layers = sum(g.count for g in arch.layers if g.ffn.kind != "dense")
    top_k = max((g.ffn.active_experts for g in arch.layers if g.ffn.kind != "dense"), default=0)
    return layers, top_k


def communication_s(
    arch: Architecture, instance: Instance, tokens: Array, params: RooflineParams, passes: Array | float = 1.0
) -> Array:
    """Collective time of a forward pass over ``tokens`` tokens split into ``passes`` forward passes (prefill
    chunks; 1 for a decode step), alpha-beta: tensor-parallel all-reduces, 2 per layer per pass, each
    ``all_reduce_latency_s`` plus its ring bytes 2(g-1)/g x tokens x hidden over the per-direction link rate x
    e_n; with ``expert_parallel``, the MoE layers' dispatch and combine all-to-alls, 2 per MoE layer per pass,
    each ``all_to_all_latency_s`` plus, over each GPU's own link, the (g-1)/g of its 1/g of the tokens x top-k x
    hidden activations that leave it (every GPU sends its share at once; with tensor-parallel attention, where each
    GPU already holds every token, this is an upper bound on what dispatch adds to the all-reduces).
    Nothing on one GPU or an accelerator without a scale-up link.

    An instance of more GPUs than one scale-up domain (``scale_up_gpus`` k, n = ceil(g / k) nodes) runs each
    collective hierarchically, as NCCL does: within each node over the scale-up link (the ring above on k
    GPUs), and across nodes over the scale-out NICs, one per GPU, each GPU carrying its 1/k shard of the
    message, 2(n-1)/n of it for an all-reduce (the (g-k)/g of routed tokens bound for other nodes for an
    all-to-all) at the NIC rate x e_n; its alpha is ``inter_node_latency_s`` in place of the scale-up one."""
    g = instance.gpus
    accelerator = instance.accelerator
    link = accelerator.scale_up_bandwidth_bytes_per_s
    t = np.asarray(tokens, dtype=np.float64)
    if g <= 1 or link is None:
        return np.zeros_like(t)
    per_direction = link / 2 * params.communication_efficiency
    n_passes = np.asarray(passes, dtype=np.float64)
    k = accelerator.scale_up_gpus or g
    nic = accelerator.scale_out_bandwidth_bytes_per_s
    multi_node = g > k and nic is not None
    local = min(g, k) if multi_node else g
    nodes = -(-g // k) if multi_node else 1
    ar_latency, a2a_latency = params.all_reduce_latency_s, params.all_to_all_latency_s
    message = t * arch.hidden_size * ACTIVATION_BYTES
    ring = 2 * (local - 1) / local * message / per_direction
    if multi_node:
        assert nic is not None
        across = nic * params.communication_efficiency
        ring = ring + 2 * (nodes - 1) / nodes * (message / local) / across
        ar_latency = max(ar_latency, params.inter_node_latency_s)
        a2a_latency = max(a2a_latency, params.inter_node_latency_s)
    total = 2 * arch.n_layers * (ring + n_passes * ar_latency)
    layers, top_k = moe_layers(arch)
    if params.expert_parallel and layers:
        # Each GPU sends the routed copies of its own 1/g of the tokens, all GPUs at once over their own links.
        per_gpu = t / g * top_k * arch.hidden_size * ACTIVATION_BYTES
        moved = per_gpu * (g - 1) / g / per_direction
        if multi_node:
            assert nic is not None
            moved = per_gpu * (local - 1) / g / per_direction + per_gpu * (g - local) / g / (
                nic * params.communication_efficiency
            )
        total = total + 2 * layers * (moved + n_passes * a2a_latency)
    return np.asarray(total, dtype=np.float64)


def _sum(terms: list[Array]) -> Array:
    return np.asarray(np.sum(np.broadcast_arrays(*terms), axis=0), dtype=np.float64)


def roofline_time(
    ops: list[Op],
    arch: Architecture,
    instance: Instance,
    params: RooflineParams,
    tokens: Array,
    *,
    overhead_s: float | Array | None = None,
    passes: float | Array = 1.0,
) -> RooflineTime:
    """Price ``ops`` (from physics.ops.forward_ops) on ``instance`` (module docstring). The overhead is
    ``params.overhead_s`` (one per pass) unless ``overhead_s`` is given: a prefill passes its serving
    overhead (``physics.prefill.serving_overhead_s``) and its chunk count as ``passes`` (each pass pays the
    collectives' latency), a decode step its per-step overhead (``physics.decode.decode_overhead_s``)."""
    overhead = params.overhead_s if overhead_s is None else overhead_s
    bytes_rate = instance.bytes_per_s * params.memory_efficiency
    compute = [
        op.matmul_flops
        / (op_peak_flop_per_s(op, arch, instance) * op_efficiency(op, arch, params))
        * shape_factor(op, instance, params)
        for op in ops
    ]
    memory = [memory_bytes(op, instance) / bytes_rate for op in ops]
    compute_won = [np.where(c >= m, c, 0.0) for c, m in zip(compute, memory, strict=True)]
    memory_won = [np.where(c >= m, 0.0, m) for c, m in zip(compute, memory, strict=True)]
    compute_part, memory_part = _sum(compute_won), _sum(memory_won)
    comm = communication_s(arch, instance, tokens, params, passes)
    return RooflineTime(
        total_s=np.asarray(overhead + compute_part + memory_part + comm, dtype=np.float64),
        compute_bound_s=_sum(compute),
        memory_bound_s=_sum(memory),
        communication_s=comm,
        overhead_s=overhead,
        compute_s=compute_part,
        memory_s=memory_part,
    )
