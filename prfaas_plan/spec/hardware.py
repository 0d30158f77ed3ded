"""What an accelerator is (datasheet), and what was measured or derived of a model running on it (profile)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field, replace
from typing import TYPE_CHECKING, Any, Literal

from prfaas_plan._frozen import frozen
from prfaas_plan._lazy import lazy_getattr

if TYPE_CHECKING:
    from prfaas_plan.spec.kernel_shapes import KernelShapes as KernelShapes

#: KernelShapes lives in its own module (spec.kernel_shapes), imported when a profile that has them is read or the
#: name is used: a run on profiles without kernel shapes never builds the class (start-up time).
_EXPORTS = {"KernelShapes": "prfaas_plan.spec.kernel_shapes"}
__getattr__ = lazy_getattr(__name__, _EXPORTS)

Provenance = Literal["measured", "derived", "assumed"]


@frozen
class Accelerator:
    """Datasheet figures of one accelerator, SI units. Tensor rates are dense (not 2:4-sparse)."""

    key: str
    name: str
    memory_bytes: float
    hbm_bandwidth_bytes_per_s: float
    dense_flop_per_s: Mapping[str, float] = field(hash=False)
    scale_up_bandwidth_bytes_per_s: float | None = None
    scale_out_bandwidth_bytes_per_s: float | None = None
    #: GPUs in one scale-up domain (NVLink or Infinity Fabric): the most one instance may span (``physics.shapes``);
    #: None where the file does not say.
    scale_up_gpus: int | None = None
    tdp_w: float | None = None
    price_usd_per_gpu_hour: float | None = None
    confidence: str = "medium"
    source: str = ""


@frozen
class ProfilePoints:
    """Measured or derived (length, value) points and the polynomial degree to fit through them.

    Values are SI: seconds for prefill latency, bytes for KV-cache size.
    """

    lengths_tokens: tuple[float, ...]
    values: tuple[float, ...]
    fit_degree: int
    provenance: Provenance
    source: str


@frozen
class DecodeProfile:
    """Decode capacity of one instance: at most ``max_batch`` concurrent requests, one token each per step."""

    max_batch: int
    step_time_s: float
    provenance: Provenance
    source: str


@frozen
class InstanceProfile:
    """What is known of one model on one instance (accelerator x GPUs): prefill curve, KV size, decode."""

    model: str
    gpus_per_instance: int
    engine: str
    prefill: ProfilePoints
    kv_cache: ProfilePoints | None = None
    decode: DecodeProfile | None = None


@frozen
class HardwareProfile:
    """One ``hardware_profiles/*.yaml`` file: the accelerator, its (model, instance) profiles and its measured
    kernel shape curves, if any."""

    accelerator: Accelerator
    profiles: tuple[InstanceProfile, ...] = ()
    file: str = ""
    kernel_shapes: KernelShapes | None = None

    def find(self, model: str, gpus_per_instance: int) -> InstanceProfile | None:
        """The profile for ``model`` on ``gpus_per_instance`` GPUs, if the file has one."""
        for profile in self.profiles:
            if profile.model == model and profile.gpus_per_instance == gpus_per_instance:
                return profile
        return None


@frozen
class RooflineParams:
    """Achieved fractions of peak (the kernels) and what the serving framework adds (the overheads).

    Serving time of a prefill of l new tokens = kernel time + overhead, with

        kernel   = sum over ops of max(FLOPs / (F · e), bytes / (B · e_m)) + all-reduces / e_n
        overhead = overhead_s + ceil(l / prefill_chunk_tokens) · (layers · layer_overhead_s
                                                     + MoE layers · moe_layer_overhead_s)

    where e is ``compute_efficiency`` for the GEMMs and ``attention_efficiency`` for the attention cores
    (softmax attention and the linear-attention recurrence). ``overhead_s`` is charged once per request
    (scheduling, tokenisation, the first sampling step, the HTTP round trip); ``layer_overhead_s`` once per
    decoder layer per forward pass of a prefill chunk (prefill runs eagerly, without CUDA graphs: kernel
    launches, Python dispatch and small unfused kernels per layer). ``prefill_chunk_tokens`` is the engines'
    chunked-prefill size; ``decode_step_overhead_s`` is charged once per decode step (CUDA-graph replay).

    The defaults are the serving model fitted to the paper's Tables 3 and 5 (five public models on 8xH200 with
    SGLang, the 1T hybrid with vLLM): ``hardware_profiles/serving/defaults.yaml`` holds them with their
    sources and cross-validated error, and a validation test re-fits them and checks they agree. e_m = 0.8 and
    e_n = 0.7 are priors, not fitted (Table 3's prefills are compute-bound, and the all-reduce and GEMM
    terms both grow as tokens x layers, so the data cannot separate them). ``kernel_only`` drops the
    overheads: what the kernels alone take.

    Kernel shape: a GEMM of m rows (tokens, or tokens per expert) runs at e_c · m / (m + ``gemm_half_rows``)
    of peak: a product with few rows cannot keep the multiply units busy (register and tile blocking, weight
    panels packed or loaded for few uses). 0 (no shape effect) for datasheet accelerators, where no per-shape
    measurements are in hand and Table 3's prefills run thousands of rows per GEMM; ``validate kernel``
    measures it on the machine it runs on (``KernelShapes``).

    Attention shape: an attention core whose queries attend on average to x keys (causal pairs / queries)
    runs at e_a · x / (x + ``attention_half_context_tokens``): a fixed cost per query (loading its tile,
    the softmax epilogue, the half-masked diagonal block of a causal kernel) that short contexts cannot
    amortise. Because the core's FLOPs are linear in each query's context, the per-query cost summed over a
    causal prefill is exactly this factor at the mean context. The default, 318 tokens, is FlashAttention-3's
    causal forward on H100 (``hardware_profiles/serving/defaults.yaml``, ``kernel_shapes``).

    Engine terms (``EngineProfile``, ``physics.engine``; all 0 in the paper-fitted defaults, which fold them into the
    two prefill overheads): ``moe_layer_overhead_s`` once more per MoE layer per prefill chunk (the routed experts'
    fixed costs in a forward pass of many tokens), ``decode_layer_overhead_s`` once per decoder layer per decode step
    (kernel launches and synchronisation that CUDA graphs shrink but do not remove), ``decode_op_overhead_s`` once per
    matrix-multiply kernel per decode step (``physics.ops.matmul_kernels``: the launch gap, ramp and tail each small
    kernel pays, so a layer of many small kernels, MLA with routed experts, costs more than a dense one),
    ``all_reduce_latency_s`` the fixed latency (alpha) of each tensor-parallel all-reduce on top of its bytes over the
    link (beta), two per layer per forward pass, ``all_to_all_latency_s`` that of each expert-parallel dispatch or
    combine (two per MoE layer per forward pass, with ``expert_parallel``), and ``inter_node_latency_s`` the alpha of a
    collective that spans more GPUs than one scale-up domain holds (its bytes then also cross the scale-out NICs:
    ``physics.roofline.communication_s``). ``dtype_compute_efficiency`` gives the GEMM efficiency of named compute
    dtypes (the engine's figure for the accelerator's generation: ``physics.engine``), overriding ``compute_efficiency``
    for them. ``expert_gemm_half_rows`` is the small-M curve of the routed experts' grouped GEMMs (tokens per touched
    expert at which they reach half their large-M rate; 0: the dense ``gemm_half_rows`` applies), and
    ``expert_gemm_efficiency`` their rate as a factor of the dense GEMM efficiency of their dtype (the engine's
    fitted ``expert_gemm_scale``; 1 in the serving defaults and wherever a compute efficiency is set directly).

    MoE load: with ``expert_parallel`` the routed experts are spread over the instance's GPUs (E/g each)
    instead of tensor-sharded, and the expert GEMMs last as long as the busiest GPU's share of the routed
    tokens (``physics.moe_load``); ``moe_load_skew`` is the hottest expert's excess share over the mean
    (0: uniform routing, only the multinomial spread of a finite batch). Tensor-parallel experts (the
    default, as the paper's SGLang deployments) split every expert over every GPU, so the load spread
    changes no GPU's work (and, the small-M curve being linear in 1/m, not the sum over experts either).
    """

    compute_efficiency: float = 0.415
    attention_efficiency: float = 0.797
    memory_efficiency: float = 0.8
    communication_efficiency: float = 0.7
    overhead_s: float = 0.297
    layer_overhead_s: float = 0.00195
    moe_layer_overhead_s: float = 0.0
    prefill_chunk_tokens: float = 8192.0  # a whole number of tokens; float so overrides type as the rest
    decode_step_overhead_s: float = 0.0
    decode_layer_overhead_s: float = 0.0
    decode_op_overhead_s: float = 0.0
    all_reduce_latency_s: float = 0.0
    all_to_all_latency_s: float = 0.0
    inter_node_latency_s: float = 0.0
    #: Per request of a disaggregated prefill instance, the wait until its KV is handed off (``EngineProfile``):
    #: in Φ_kv's T_prefill (``physics.table3``), not in the prefill curve.
    kv_handoff_s: float = 0.0
    dtype_compute_efficiency: tuple[tuple[str, float], ...] = ()
    expert_gemm_half_rows: float = 0.0
    expert_gemm_efficiency: float = 1.0
    gemm_half_rows: float = 0.0
    attention_half_context_tokens: float = 318.0
    moe_load_skew: float = 0.0
    expert_parallel: bool = False
    source: str = "serving defaults fitted to the paper's Tables 3 and 5 (hardware_profiles/serving/defaults.yaml)"
    #: Where the measured kernel-shape curves in place came from (``with_kernel_shapes``: a hardware profile's
    #: ``kernel_shapes.source``); "" while the serving defaults' are.
    kernel_shapes_source: str = ""

    @property
    def kernel_only(self) -> RooflineParams:
        """The same efficiencies with every serving overhead set to zero: kernel time alone."""
        return replace(
            self,
            overhead_s=0.0,
            layer_overhead_s=0.0,
            moe_layer_overhead_s=0.0,
            decode_step_overhead_s=0.0,
            decode_layer_overhead_s=0.0,
            decode_op_overhead_s=0.0,
            kv_handoff_s=0.0,
            source=f"kernel only ({self.source})",
        )

    def with_kernel_shapes(self, shapes: KernelShapes) -> RooflineParams:
        """These parameters with a hardware profile's measured curves in place of their own (the memory
        efficiency kept where the profile measured none); the source names them (``kernel_shapes_note``, which
        ``physics.engine`` keeps). The one merge the scenario loader, ``kv`` and the hardware matrix all use."""
        from prfaas_plan.spec.kernel_shapes import SHAPES_NOTE

        return replace(
            self,
            gemm_half_rows=shapes.gemm_half_rows,
            attention_half_context_tokens=shapes.attention_half_context_tokens,
            moe_load_skew=shapes.moe_load_skew,
            memory_efficiency=self.memory_efficiency if shapes.memory_efficiency is None else shapes.memory_efficiency,
            source=f"{self.source}{SHAPES_NOTE} ({shapes.source})",
            kernel_shapes_source=shapes.source,
        )

    @property
    def kernel_shapes_note(self) -> str:
        """How ``source`` names the measured kernel shapes in place ("" while the serving defaults' are)."""
        from prfaas_plan.spec.kernel_shapes import SHAPES_NOTE

        return f"{SHAPES_NOTE} ({self.kernel_shapes_source})" if self.kernel_shapes_source else ""

    def one_gemm_rate(self, compute_efficiency: float, **changes: Any) -> RooflineParams:
        """These parameters with every GEMM at ``compute_efficiency``, whatever its dtype and the routed experts'
        alike (no per-dtype figure and no experts' factor left to override it), and ``changes``: what a compute
        efficiency set directly means (``kv --compute-efficiency``, a pool's ``roofline: compute_efficiency``) and
        what a fit that divides every GEMM by one e_c returns (``physics.calibration``, ``physics.serving``)."""
        return replace(
            self,
            compute_efficiency=compute_efficiency,
            dtype_compute_efficiency=(),
            expert_gemm_efficiency=1.0,
            **changes,
        )

    def gemm_efficiency(self, dtype: str) -> float:
        """The GEMM efficiency for weights multiplied in ``dtype``: its entry in ``dtype_compute_efficiency``,
        else ``compute_efficiency``."""
        for name, value in self.dtype_compute_efficiency:
            if name == dtype:
                return value
        return self.compute_efficiency
