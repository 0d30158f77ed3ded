"""What a serving engine adds to the kernels and what was measured of one (``hardware_profiles/serving``): the
serving defaults' observations, the engine profiles and the public corpus of measurements. Apart from the
accelerators and profiles (``spec.hardware``), so that a scenario of measured pools loads none of them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from prfaas_plan._frozen import frozen

if TYPE_CHECKING:
    from prfaas_plan.spec.hardware import RooflineParams


@frozen
class ServingPoints:
    """Published single-request prefill measurements of one model on one instance: latencies (s) or KV
    throughputs (bytes/s, Φ_kv = S_kv / T_prefill, paper Eq. 1), by length."""

    model: str
    hardware: str
    gpus_per_instance: int
    engine: str
    quantity: Literal["latency_s", "kv_bytes_per_s"]
    lengths_tokens: tuple[float, ...]
    values: tuple[float, ...]
    source: str


@frozen
class ServingDefaults:
    """``hardware_profiles/serving/defaults.yaml``: the serving model's default parameters and the
    measurements they were fitted to."""

    params: RooflineParams
    observations: tuple[ServingPoints, ...]
    file: str = ""
    # The attention curve's published points: causal sequence lengths and achieved FLOP/s (kernel_shapes).
    attention_sequence_tokens: tuple[float, ...] = ()
    attention_flop_per_s: tuple[float, ...] = ()


#: The accelerator generations an engine profile prices GEMM efficiency by (``EngineProfile``).
GENERATIONS = ("ampere", "ada", "hopper", "blackwell", "cdna3", "other")


@frozen
class EngineProfile:
    """What a serving engine adds to the kernels' roofline, and the fractions of peak its kernels reach
    (``hardware_profiles/serving/engines/*.yaml``; ``physics.engine`` turns it into ``RooflineParams``).

    Prefill: ``request_overhead_s`` once per request, ``prefill_layer_overhead_s`` once per decoder layer per chunk of
    ``prefill_chunk_tokens`` and ``prefill_moe_layer_overhead_s`` once more per MoE layer per chunk. Decode:
    ``decode_step_overhead_s`` once per step and ``decode_layer_overhead_s`` once per decoder layer per step, with CUDA
    graphs (the ``*_eager_*`` pair without them). Collectives: alpha of each all-reduce and all-to-all
    (``RooflineParams``). Kernels: ``gemm_efficiency`` maps (generation, dtype) to a prior of the dense GEMMs' fraction
    of peak, missing dtypes falling back to the generation's bf16 figure and missing generations to ``other``, scaled by
    the fitted ``gemm_efficiency_scale`` (at most 1), and the routed experts' grouped GEMMs by ``expert_gemm_scale`` on
    top (``RooflineParams.expert_gemm_efficiency``; both one value for every built-in engine, ``physics.corpus_fit``);
    ``attention_efficiency`` and ``expert_gemm_half_rows`` as ``RooflineParams``; ``kv_handoff_s`` once per request
    of a disaggregated prefill instance (a wait until its KV is handed off; not in the aggregated server's time).
    ``sources`` names a source for every term (key: the term's name); ``priors`` the published or assumed value a
    fitted term started from and is regularised towards (``physics.corpus_fit``); ``fitted_on`` lists the corpus
    measurement ids the fitted terms came from."""

    key: str
    name: str
    request_overhead_s: float
    prefill_layer_overhead_s: float
    prefill_chunk_tokens: float
    decode_step_overhead_s: float
    decode_layer_overhead_s: float
    decode_step_overhead_eager_s: float
    decode_layer_overhead_eager_s: float
    all_reduce_latency_s: float
    all_to_all_latency_s: float
    attention_efficiency: float
    expert_gemm_half_rows: float
    gemm_efficiency: tuple[tuple[str, str, float], ...]
    gemm_efficiency_scale: float = 1.0
    expert_gemm_scale: float = 1.0
    decode_op_overhead_s: float = 0.0
    inter_node_latency_s: float = 0.0
    #: Per MoE layer per prefill chunk, on top of ``prefill_layer_overhead_s``: the routed experts' fixed
    #: costs in a forward pass of many tokens (routing and top-k, the tokens' permutation to their experts and
    #: back, the per-expert work of a grouped GEMM, the activations' quantisation), none of which a dense layer
    #: pays.
    prefill_moe_layer_overhead_s: float = 0.0
    #: What a prefill instance of a PD-disaggregated deployment adds per request to the aggregated server's time
    #: until its KV is handed to the decode side (the bootstrap with the decode instance, the send of the last
    #: layers): a wait, not GPU time, so ``kv`` adds it to T_prefill in Φ_kv and the planner's prefill curves
    #: leave it out (``physics.table3``).
    kv_handoff_s: float = 0.0
    #: Factor on the engine's decode overheads (per step, layer and kernel) by accelerator generation (a
    #: generation not listed: 1), fitted: the platform's launch and runtime cost against NVIDIA's.
    overhead_scale: tuple[tuple[str, float], ...] = ()
    sources: tuple[tuple[str, str], ...] = ()
    priors: tuple[tuple[str, float], ...] = ()
    fitted: tuple[str, ...] = ()
    fitted_on: tuple[str, ...] = ()
    file: str = ""

    def overhead_scale_of(self, generation: str) -> float:
        """The factor on the decode overheads for ``generation`` (``overhead_scale``; 1 where not listed)."""
        return dict(self.overhead_scale).get(generation, 1.0)

    def __getattr__(self, name: str) -> float:
        """``overhead_scale_<generation>`` reads ``overhead_scale_of(generation)``: the fitted term's name (a fit's
        values and the profile's ``fitted`` list name it so)."""
        if name.startswith("overhead_scale_") and name.removeprefix("overhead_scale_") in GENERATIONS:
            return self.overhead_scale_of(name.removeprefix("overhead_scale_"))
        raise AttributeError(name)

    def gemm_efficiency_of(self, generation: str, dtype: str) -> float:
        """The GEMM efficiency of ``dtype`` on ``generation``: its prior entry (else that generation's bf16
        entry, else the ``other`` generation's; the loader requires ``other``/bf16) times
        ``gemm_efficiency_scale``, at most 1."""
        table = {(g, d): e for g, d, e in self.gemm_efficiency}
        for key in ((generation, dtype), (generation, "bf16"), ("other", dtype), ("other", "bf16")):
            if key in table:
                return min(1.0, table[key] * self.gemm_efficiency_scale)
        raise KeyError(f"engine {self.key} has no GEMM efficiency for {generation} {dtype} nor other bf16")


@frozen
class CorpusMeasurement:
    """One published serving measurement (``hardware_profiles/serving/corpus/*.yaml``): a batch-1 prefill of
    ``tokens`` input tokens, or a decode step of ``batch`` sequences at ``tokens`` of context, in seconds."""

    id: str
    source: str
    engine: str
    engine_version: str
    model: str
    hardware: str
    gpus: int
    tensor_parallel: int
    expert_parallel: int
    weights_dtype: str
    kv_dtype: str
    cuda_graphs: bool | None  # None: the source does not say
    phase: Literal["prefill", "decode"]
    batch: int
    tokens: float
    measured_s: float
    metric: str = ""
    derivation: str = ""
    #: False for an engine-only timing (no server: SGLang ``bench_one_batch``), priced without the engine's
    #: per-request cost.
    includes_request_overhead: bool = True
    #: The routed experts' dtype where the checkpoint quantises only them (gpt-oss MXFP4); "" keeps the card's.
    experts_dtype: str = ""
    #: A decode metric that averages over every step of a request (mean ITL, per-request TPOT) also carries the
    #: prefills of the requests that arrive meanwhile: their prompt length and the output length that spaces
    #: them (batch / output requests per step). 0: the metric excludes them (a median ITL).
    interleaved_input_tokens: float = 0.0
    interleaved_output_tokens: float = 0.0
    #: Why the measurement is kept out of the fit (a physical reason, recorded in the corpus); "" when fitted.
    exclude_from_fit: str = ""
    #: A prefill timed on a disaggregated prefill instance until its KV was handed off (the paper's Table 3):
    #: priced with the engine's ``kv_handoff_s`` on top of the aggregated server's time.
    disaggregated: bool = False
