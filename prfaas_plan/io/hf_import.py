"""A Hugging Face ``config.json`` as a model card: the architecture the config declares, mapped onto the card
schema (``io/models.py``), with every field the schema cannot express listed with its reason.

Families, by ``model_type``: llama, qwen3_moe, qwen3_next, qwen3_5_moe, kimi_linear, mimo_v2_flash, minimax_m2,
deepseek_v3. Field names are those of the families' released configs and transformers configuration classes
(huggingface/transformers ``src/transformers/models/<family>/``, https://github.com/huggingface/transformers).
A multimodal config (Qwen3.5) is read from its ``text_config``.

Judgement calls, the same for every family, written into the card as comments:

- ``kv_cache: bf16``: a config does not say how an engine stores KV; the paper's Table 3 implies BF16.
- ``state: fp32``, ``conv_state: bf16``: SGLang's defaults for linear-attention state (SGLANG_MAMBA_SSM_DTYPE,
  SGLANG_MAMBA_CONV_DTYPE; https://github.com/sgl-project/sglang).
- ``weights``: ``fp8`` when ``quantization_config.quant_method`` is fp8 (block-scaled checkpoints keep a few
  modules in BF16, which a one-dtype card cannot say), otherwise ``torch_dtype`` (or ``dtype``).
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from prfaas_plan.errors import InputError, Problem
from prfaas_plan.io.models import MAX_LAYERS, MAX_SHAPE
from prfaas_plan.io.yamlsrc import MAX_DEPTH, read_text_bounded, suggest
from prfaas_plan.spec.model import Architecture, Attention, Dtypes, Ffn, LayerGroup
from prfaas_plan.spec.scenario import ModelCard

FAMILIES = (
    "llama",
    "qwen3_moe",
    "qwen3_next",
    "qwen3_5_moe",
    "kimi_linear",
    "mimo_v2_flash",
    "minimax_m2",
    "deepseek_v3",
)

# Fields with no bearing on a card (ids, training knobs, bookkeeping): neither mapped nor reported.
_IGNORED = frozenset(
    {
        "architectures", "auto_map", "model_type", "transformers_version", "_name_or_path", "name_or_path",
        "bos_token_id", "eos_token_id", "pad_token_id", "image_token_id", "video_token_id",
        "vision_start_token_id", "vision_end_token_id", "initializer_range", "use_cache", "rms_norm_eps",
        "layernorm_epsilon", "layer_norm_eps", "attention_dropout", "hidden_dropout", "output_router_logits",
        "router_aux_loss_coef", "router_jitter_noise", "aux_loss_alpha", "seq_aux", "pretraining_tp",
        "tokenizer_class", "output_attentions", "output_hidden_states", "return_dict", "is_decoder",
    }
)  # fmt: skip

_ROPE = "position encoding: no effect on the bytes or FLOPs a card describes"
_MTP = "multi-token-prediction (MTP) layers: a card has no place for them; their parameters are not counted"
_ROUTER = "router behaviour: no effect on the bytes or FLOPs a card describes"
# Why a field that the importer recognises is not mapped (fields it does not recognise get a generic reason).
_REASONS: dict[str, str] = {
    "rope_theta": _ROPE,
    "rope_scaling": _ROPE,
    "rope_parameters": _ROPE,
    "rope_type": _ROPE,
    "partial_rotary_factor": _ROPE,
    "rotary_dim": _ROPE,
    "swa_rope_theta": _ROPE,
    "max_position_embeddings": "the context limit is not part of a card",
    "num_nextn_predict_layers": _MTP,
    "mtp_num_hidden_layers": _MTP,
    "num_mtp_modules": _MTP,
    "use_mtp": _MTP,
    "mtp_transformer_layers": _MTP,
    "add_swa_attention_sink_bias": "attention sinks: one learnable bias per head, not counted",
    "add_full_attention_sink_bias": "attention sinks: one learnable bias per head, not counted",
    "attention_value_scale": "a scale on the values: no effect on bytes",
    "attn_output_gate": "output-gated attention: q_proj is twice as wide; the gate weights are not counted",
    "use_qk_norm": "QK normalisation weights are not counted",
    "qk_norm_type": "QK normalisation weights are not counted",
    "scoring_func": _ROUTER,
    "topk_method": _ROUTER,
    "n_group": _ROUTER,
    "topk_group": _ROUTER,
    "num_expert_group": _ROUTER,
    "norm_topk_prob": _ROUTER,
    "moe_renormalize": _ROUTER,
    "routed_scaling_factor": _ROUTER,
    "use_routing_bias": _ROUTER,
    "moe_router_activation_func": _ROUTER,
    "moe_router_dtype": _ROUTER,
    "ep_size": "a parallelism hint, not architecture",
    "hidden_act": "a card assumes a gated (SwiGLU-style) FFN with three matrices",
    "attention_bias": "biases are not counted",
    "mlp_bias": "biases are not counted",
    "vision_config": "vision encoder: not part of the text-decoder card; its parameters are not counted",
    "mla_use_nope": "MLA without RoPE: the cache still holds kv_lora_rank + qk_rope_head_dim values per token",
    "attention_chunk_size": "chunked-attention hint: not in the schema",
    "attention_projection_layout": "weight layout: no effect on bytes",
    "intermediate_size": "no layer of this model has a dense FFN",
    "num_key_value_heads": "MLA layers have no separate KV heads: the cache is the latent",
    "head_dim": "not used by this family's attention shapes",
    "sliding_window": "not applied: this config's layers are all full attention",
    "max_window_layers": "not applied: use_sliding_window is false",
    "quantization_config": "quantization method not mapped: the weights dtype comes from torch_dtype",
}
_UNKNOWN = "not recognised by the importer"

# What each family's card leaves out that its config does not spell out as a field.
_FAMILY_NOTES = {
    "qwen3_next": "full attention is output-gated in this family: q_proj is twice as wide, the gate is not counted",
    "qwen3_5_moe": "full attention is output-gated in this family: q_proj is twice as wide, the gate is not counted",
    "kimi_linear": "KDA's low-rank forget and output gates are counted as full-rank projections (a slight overcount)",
    "minimax_m2": "intermediate_size is the expert width in this family (no dense FFN layers)",
    "mimo_v2_flash": "sliding_window_size (or sliding_window) is the SWA window; only that many tokens are cached",
}

_TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
_KEY_LINE = re.compile(r'"((?:[^"\\]|\\.)*)"\s*:')
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_JSON_BRACKET = re.compile(r"[\[\]{}]")


@dataclass(frozen=True, slots=True, kw_only=True)
class Unmapped:
    """A config field the card cannot express: its dotted name, its value (compact JSON) and why."""

    field: str
    value: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportedCard:
    """A card built from a config.json: the card, the 0-based layers of each group, the judgement calls made and
    the fields not mapped."""

    card: ModelCard
    family: str
    config_file: str
    group_notes: tuple[str, ...]
    notes: tuple[str, ...]
    unmapped: tuple[Unmapped, ...]


class _Fields:
    """A checked view of one JSON object: reads mark keys as used; problems carry file, line and field."""

    def __init__(self, data: Mapping[str, Any], path: str, ctx: _Context) -> None:
        self.data = data
        self.path = path
        self.ctx = ctx
        self.used: set[str] = set()

    def name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def report(self, key: str, message: str) -> None:
        self.ctx.report(self.name(key), key, message)

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def raw(self, key: str) -> Any:
        self.used.add(key)
        return self.data.get(key)

    def integer(self, key: str, *, default: int | None = None, ge: int = 1, why: str = "") -> int | None:
        """A whole number >= ``ge``; absent or null -> ``default``, or a problem when there is none."""
        value = self.raw(key)
        if value is None:
            if default is None:
                self.report(key, f"missing, needed for a {self.ctx.family} card{why}")
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < ge:
            self.report(key, f"expected an integer >= {ge}, got {_compact(value)}")
            return None
        limit = MAX_LAYERS if key in _LAYER_COUNTS else MAX_SHAPE
        if value > limit:
            self.report(key, f"must be <= {limit}, got {_compact(value)}")
            return None
        return value

    def boolean(self, key: str, *, default: bool) -> bool | None:
        value = self.raw(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.report(key, f"expected true or false, got {json.dumps(value)}")
            return None
        return value

    def int_list(self, key: str, *, required: bool = True) -> list[int] | None:
        value = self.raw(key)
        if value is None:
            if required:
                self.report(key, f"missing, needed for a {self.ctx.family} card")
            return None
        if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            self.report(key, f"expected a list of integers, got {_compact(value)}")
            return None
        if len(value) > MAX_LAYERS or any(abs(v) > MAX_SHAPE for v in value):
            self.report(key, f"expected at most {MAX_LAYERS} integers of at most {MAX_SHAPE}, got {_compact(value)}")
            return None
        return list(value)

    def str_list(self, key: str) -> list[str] | None:
        value = self.raw(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.report(key, f"expected a list of strings, got {_compact(value)}")
            return None
        return list(value)

    def sub(self, key: str) -> _Fields | None:
        value = self.raw(key)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            self.report(key, f"expected a JSON object, got {_compact(value)}")
            return None
        child = _Fields(value, self.name(key), self.ctx)
        self.ctx.children.append(child)
        return child


#: The field that counts layers (each one a loop iteration and a list entry): bounded by MAX_LAYERS.
_LAYER_COUNTS = frozenset({"num_hidden_layers"})


def _compact(value: Any) -> str:
    """A JSON value as shown in a message: at most 60 characters, huge integers by their size."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        return f"an integer of {len(str(abs(value)))} digits"
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _Context:
    """One import: the file's name and text (for line numbers), its family and the problems found."""

    def __init__(self, file: str, text: str, family: str) -> None:
        self.file = file
        self.family = family
        self.problems: list[Problem] = []
        self.children: list[_Fields] = []
        self.lines: dict[str, int] = {}
        newlines = [i for i, char in enumerate(text) if char == "\n"]
        for match in _KEY_LINE.finditer(text):
            self.lines.setdefault(match.group(1), bisect.bisect(newlines, match.start()) + 1)

    def report(self, field: str, key: str, message: str) -> None:
        """A problem at ``field``; its line is where ``key`` first appears in the file (None when absent)."""
        self.problems.append(Problem(file=self.file, line=self.lines.get(key), field=field, message=message))


Layer = tuple[Attention, Ffn]


def _gqa(c: _Fields, hidden: int) -> Attention | None:
    """Full-attention GQA shapes; head_dim defaults to hidden_size / num_attention_heads, v_head_dim to head_dim."""
    heads = c.integer("num_attention_heads")
    if heads is None:
        return None
    kv_heads = c.integer("num_key_value_heads", default=heads)
    default_dim = hidden // heads if not c.has("head_dim") and hidden % heads == 0 else None
    head_dim = c.integer("head_dim", default=default_dim, why=" (hidden_size is not a multiple of the heads)")
    v_head_dim = c.integer("v_head_dim", default=head_dim) if c.has("v_head_dim") else head_dim
    if kv_heads is None or head_dim is None or v_head_dim is None:
        return None
    if heads % kv_heads:
        c.report("num_key_value_heads", f"num_attention_heads ({heads}) must be divisible by {kv_heads}")
        return None
    return Attention(kind="gqa", heads=heads, kv_heads=kv_heads, head_dim=head_dim, v_head_dim=v_head_dim)


def _mla(c: _Fields) -> Attention | None:
    heads = c.integer("num_attention_heads")
    q_lora = c.integer("q_lora_rank", default=0, ge=0)
    kv_lora = c.integer("kv_lora_rank")
    rope = c.integer("qk_rope_head_dim")
    nope = c.integer("qk_nope_head_dim")
    v_dim = c.integer("v_head_dim")
    if heads is None or q_lora is None or kv_lora is None or rope is None or nope is None or v_dim is None:
        return None
    return Attention(
        kind="mla",
        heads=heads,
        q_lora_rank=q_lora,
        kv_lora_rank=kv_lora,
        qk_nope_head_dim=nope,
        qk_rope_head_dim=rope,
        v_head_dim=v_dim,
    )


def _linear(c: _Fields, heads_key: str, key_heads_key: str | None, kdim: str, vdim: str, conv: str) -> Attention | None:
    """Linear-attention shapes; ``key_heads_key`` None means one key head per value head (KDA)."""
    heads = c.integer(heads_key)
    key_heads = c.integer(key_heads_key) if key_heads_key else heads
    key_dim = c.integer(kdim)
    value_dim = c.integer(vdim) if vdim != kdim else key_dim
    kernel = c.integer(conv, ge=2)
    if heads is None or key_heads is None or key_dim is None or value_dim is None or kernel is None:
        return None
    if key_heads_key and heads % key_heads:
        c.report(key_heads_key, f"{heads_key} ({heads}) must be divisible by {key_heads}")
        return None
    return Attention(
        kind="linear",
        heads=heads,
        key_heads=key_heads,
        key_head_dim=key_dim,
        value_head_dim=value_dim,
        conv_kernel=kernel,
    )


def _dense(c: _Fields) -> Ffn | None:
    inter = c.integer("intermediate_size")
    return None if inter is None else Ffn(kind="dense", intermediate=inter)


def _moe(c: _Fields, experts_keys: tuple[str, ...], active_keys: tuple[str, ...], width_key: str) -> Ffn | None:
    """Routed experts (the first of ``experts_keys`` present), top-k, expert width; shared experts if any."""
    experts_key = next((k for k in experts_keys if c.has(k)), experts_keys[0])
    active_key = next((k for k in active_keys if c.has(k)), active_keys[0])
    experts, active, width = c.integer(experts_key), c.integer(active_key), c.integer(width_key)
    if experts is None or active is None or width is None:
        return None
    if active > experts:
        c.report(active_key, f"must be <= {experts_key} ({experts}), got {active}")
        return None
    shared, shared_width = 0, 0
    if c.has("shared_expert_intermediate_size"):  # Qwen: one shared expert of its own width
        shared_width = c.integer("shared_expert_intermediate_size", ge=0) or 0
        shared = 1 if shared_width else 0
    elif c.has("shared_intermediate_size"):  # MiniMax: 0 means none
        shared_width = c.integer("shared_intermediate_size", ge=0) or 0
        shared = 1 if shared_width else 0
    else:  # DeepSeek / Kimi / MiMo: n shared experts of the routed width
        shared_key = next((k for k in ("n_shared_experts", "num_shared_experts") if c.has(k)), "n_shared_experts")
        shared = c.integer(shared_key, default=0, ge=0) or 0
        shared_width = width if shared else 0
    return Ffn(
        kind="moe",
        experts=experts,
        active_experts=active,
        expert_intermediate=width,
        shared_experts=shared,
        shared_intermediate=shared_width,
    )


def _types_from_names(c: _Fields, key: str, n: int, names: dict[str, str]) -> list[str] | None:
    """A per-layer list of type names (``layer_types``), checked for length and vocabulary."""
    values = c.str_list(key)
    if values is None:
        return None
    unknown = sorted({v for v in values if v not in names})
    if unknown:
        c.report(key, f"unknown layer type '{unknown[0]}'{suggest(unknown[0], names)}; known: {', '.join(names)}")
        return None
    if len(values) != n:
        c.report(key, f"has {len(values)} entries, but num_hidden_layers is {n}")
        return None
    return [names[v] for v in values]


def _flags(c: _Fields, key: str, n: int, names: tuple[str, str]) -> list[str] | None:
    """A per-layer 0/1 list (``hybrid_layer_pattern``, ``moe_layer_freq``) as type names."""
    values = c.int_list(key, required=False)
    if values is None:
        return None
    if len(values) != n or any(v not in (0, 1) for v in values):
        c.report(key, f"expected {n} entries of 0 or 1 (one per layer), got {json.dumps(values)[:60]}")
        return None
    return [names[v] for v in values]


def _llama(c: _Fields, n: int, hidden: int) -> list[Layer] | None:
    att, ffn = _gqa(c, hidden), _dense(c)
    return None if att is None or ffn is None else [(att, ffn)] * n


def _qwen_ffn(c: _Fields, n: int) -> list[Ffn | None]:
    """Qwen MoE placement: layer i is sparse unless listed in mlp_only_layers or off the decoder_sparse_step."""
    step = c.integer("decoder_sparse_step", default=1)
    only = set(c.int_list("mlp_only_layers", required=False) or [])
    if step is None:
        return [None]
    sparse = [i not in only and (i + 1) % step == 0 for i in range(n)]
    moe = _moe(c, ("num_experts",), ("num_experts_per_tok",), "moe_intermediate_size") if any(sparse) else None
    dense = _dense(c) if not all(sparse) else None
    return [moe if s else dense for s in sparse]


def _qwen3_moe(c: _Fields, n: int, hidden: int) -> list[Layer] | None:
    ffns = _qwen_ffn(c, n)
    full = _gqa(c, hidden)
    swa_from, swa = n, full
    if c.boolean("use_sliding_window", default=False):  # Qwen: layers from max_window_layers on slide
        swa_from = c.integer("max_window_layers", default=0, ge=0) or 0
        window = c.integer("sliding_window")
        swa = replace(full, kind="swa", window=window) if full is not None and window is not None else None
    if full is None or swa is None or any(f is None for f in ffns):
        return None
    return [(swa if i >= swa_from else full, f) for i, f in enumerate(ffns) if f is not None]


def _qwen3_next(c: _Fields, n: int, hidden: int) -> list[Layer] | None:
    ffns = _qwen_ffn(c, n)
    types = _types_from_names(c, "layer_types", n, {"full_attention": "full", "linear_attention": "linear"})
    if types is None and not c.has("layer_types"):
        interval = c.integer("full_attention_interval", why=" (or layer_types)")
        types = None if interval is None else ["full" if (i + 1) % interval == 0 else "linear" for i in range(n)]
    c.used.add("full_attention_interval")  # redundant when layer_types is given
    full = _gqa(c, hidden)
    linear = _linear(
        c,
        "linear_num_value_heads",
        "linear_num_key_heads",
        "linear_key_head_dim",
        "linear_value_head_dim",
        "linear_conv_kernel_dim",
    )
    if types is None or full is None or linear is None or any(f is None for f in ffns):
        return None
    return [(full if t == "full" else linear, f) for t, f in zip(types, ffns, strict=True) if f is not None]


def _deepseek_ffn(c: _Fields, n: int, experts_keys: tuple[str, ...], active_keys: tuple[str, ...]) -> list[Ffn | None]:
    """DeepSeek placement: the first ``first_k_dense_replace`` layers dense, then MoE every ``moe_layer_freq``."""
    first = c.integer("first_k_dense_replace", ge=0)
    freq = c.integer("moe_layer_freq", default=1)
    if first is None or freq is None:
        return [None]
    sparse = [i >= first and i % freq == 0 for i in range(n)]
    moe = _moe(c, experts_keys, active_keys, "moe_intermediate_size") if any(sparse) else None
    dense = _dense(c) if not all(sparse) else None
    return [moe if s else dense for s in sparse]


def _deepseek_v3(c: _Fields, n: int, hidden: int) -> list[Layer] | None:
    ffns = _deepseek_ffn(c, n, ("n_routed_experts",), ("num_experts_per_tok",))
    att = _mla(c)
    if att is None or any(f is None for f in ffns):
        return None
    return [(att, f) for f in ffns if f is not None]


def _kimi_linear(c: _Fields, n: int, hidden: int) -> list[Layer] | None:
    ffns = _deepseek_ffn(
        c, n, ("num_experts", "n_routed_experts", "num_local_experts"), ("num_experts_per_token", "num_experts_per_tok")
    )
    mla = _mla(c)
    lac = c.sub("linear_attn_config")
    if lac is None:
        c.report("linear_attn_config", "missing, needed for a kimi_linear card (KDA shapes and layer lists)")
        return None
    kda = _linear(lac, "num_heads", None, "head_dim", "head_dim", "short_conv_kernel_size")
    kda_layers, full_layers = lac.int_list("kda_layers"), lac.int_list("full_attn_layers")
    if kda_layers is None or full_layers is None:
        return None
    listed = sorted(kda_layers + full_layers)
    if listed != list(range(1, n + 1)):
        lac.report("kda_layers", f"kda_layers and full_attn_layers (1-based) must list each of 1..{n} exactly once")
        return None
    if mla is None or kda is None or any(f is None for f in ffns):
        return None
    full = set(full_layers)
    return [(mla if i + 1 in full else kda, f) for i, f in enumerate(ffns) if f is not None]


def _mimo_v2_flash(c: _Fields, n: int, hidden: int) -> list[Layer] | None:
    types = _flags(c, "hybrid_layer_pattern", n, ("full", "swa"))
    if types is None and not c.has("hybrid_layer_pattern"):
        names = {"full_attention": "full", "sliding_attention": "swa"}
        types = _types_from_names(c, "layer_types", n, names)
        if types is None and not c.has("layer_types"):
            c.report("hybrid_layer_pattern", "missing, needed for a mimo_v2_flash card (or layer_types)")
    mlp = _flags(c, "moe_layer_freq", n, ("dense", "sparse"))
    if mlp is None and not c.has("moe_layer_freq"):
        mlp = _types_from_names(c, "mlp_layer_types", n, {"dense": "dense", "sparse": "sparse"})
        if mlp is None and not c.has("mlp_layer_types"):
            mlp = ["sparse"] * n
    window_key = "sliding_window_size" if c.has("sliding_window_size") else "sliding_window"
    c.used.update({"sliding_window", "sliding_window_size"})
    window = c.integer(window_key) if types is not None and "swa" in types else 0
    full = _gqa(c, hidden)
    swa = None
    if full is not None:
        swa = Attention(
            kind="swa",
            heads=c.integer("swa_num_attention_heads", default=full.heads) or full.heads,
            kv_heads=c.integer("swa_num_key_value_heads", default=full.kv_heads) or full.kv_heads,
            head_dim=c.integer("swa_head_dim", default=full.head_dim) or full.head_dim,
            v_head_dim=c.integer("swa_v_head_dim", default=full.v_head_dim) or full.v_head_dim,
            window=window or 0,
        )
        if swa.heads % swa.kv_heads:
            c.report("swa_num_key_value_heads", f"swa_num_attention_heads ({swa.heads}) must be divisible by it")
            return None
    if types is None or mlp is None or full is None or swa is None or window is None:
        return None
    moe = _moe(c, ("n_routed_experts",), ("num_experts_per_tok",), "moe_intermediate_size") if "sparse" in mlp else None
    dense = _dense(c) if "dense" in mlp else None
    attention = {"full": full, "swa": swa}
    ffns = [moe if m == "sparse" else dense for m in mlp]
    return [(attention[t], f) for t, f in zip(types, ffns, strict=True) if f is not None] if None not in ffns else None


def _minimax_m2(c: _Fields, n: int, hidden: int) -> list[Layer] | None:
    kinds = c.int_list("attn_type_list", required=False)
    if kinds is not None and any(k != 1 for k in kinds):
        c.report("attn_type_list", "lightning-attention layers (0) are not supported; minimax_m2 cards need all 1")
        return None
    att = _gqa(c, hidden)
    # In this family intermediate_size IS the expert width (transformers configuration_minimax_m2.py).
    ffn = _moe(c, ("num_local_experts", "num_experts"), ("num_experts_per_tok",), "intermediate_size")
    return None if att is None or ffn is None else [(att, ffn)] * n


_BUILDERS: dict[str, Callable[[_Fields, int, int], list[Layer] | None]] = {
    "llama": _llama,
    "qwen3_moe": _qwen3_moe,
    "qwen3_next": _qwen3_next,
    "qwen3_5_moe": _qwen3_next,
    "kimi_linear": _kimi_linear,
    "mimo_v2_flash": _mimo_v2_flash,
    "minimax_m2": _minimax_m2,
    "deepseek_v3": _deepseek_v3,
}


def _weights_dtype(sources: list[_Fields]) -> tuple[str, str]:
    """The weights dtype and the reason, from quantization_config (fp8) or torch_dtype / dtype."""
    for c in sources:
        q = c.data.get("quantization_config")
        if isinstance(q, Mapping) and q.get("quant_method") == "fp8":
            for view in sources:  # torch_dtype is then the dtype of activations and unquantised modules
                view.used.update({"quantization_config", "torch_dtype", "dtype"})
            return "fp8", "weights fp8: quantization_config.quant_method is fp8 (its BF16 modules count as FP8)"
    for c in sources:
        c.used.update({"torch_dtype", "dtype"})
    for c in sources:
        for key in ("torch_dtype", "dtype"):
            value = c.data.get(key)
            if value is None:
                continue
            if isinstance(value, str) and value in _TORCH_DTYPES:
                return _TORCH_DTYPES[value], f"weights {_TORCH_DTYPES[value]}: {c.name(key)} is {value}"
            c.report(key, f"unsupported dtype {_compact(value)}; known: {', '.join(_TORCH_DTYPES)}")
            return "bf16", ""
    return "bf16", "weights bf16: the config names no dtype (assumed)"


def _ranges(indices: list[int]) -> str:
    runs: list[str] = []
    start = prev = indices[0]
    for i in [*indices[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        runs.append(str(start) if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    shown = runs if len(runs) <= 8 else [*runs[:3], "...", *runs[-2:]]
    return ", ".join(shown)


def _group(layers: list[Layer]) -> tuple[tuple[LayerGroup, ...], tuple[str, ...]]:
    """Identical layers gathered into groups in order of first appearance, with the 0-based layers of each."""
    where: dict[Layer, list[int]] = {}
    for i, layer in enumerate(layers):
        where.setdefault(layer, []).append(i)
    groups = tuple(LayerGroup(count=len(idx), attention=a, ffn=f) for (a, f), idx in where.items())
    notes = tuple(f"{'layers' if len(idx) > 1 else 'layer'} {_ranges(idx)} (0-based)" for idx in where.values())
    return groups, notes


def _unmapped(views: list[_Fields]) -> list[Unmapped]:
    """Every non-null field no reader used and not on the ignore list (nested objects read field by field)."""
    out = []
    for fields in views:
        for key, value in fields.data.items():
            if key in fields.used or key in _IGNORED or value is None:
                continue
            text = json.dumps(value, separators=(",", ":"))
            text = text if len(text) <= 60 else text[:57] + "..."
            out.append(Unmapped(field=fields.name(key), value=text, reason=_REASONS.get(key, _UNKNOWN)))
    return out


def _too_deep(text: str) -> int | None:
    """The line where brackets first nest deeper than MAX_DEPTH (strings skipped), or None."""
    depth = 0
    blanked = _JSON_STRING.sub(lambda m: " " * (m.end() - m.start()), text)
    for match in _JSON_BRACKET.finditer(blanked):
        depth += 1 if match.group() in "[{" else -1
        if depth > MAX_DEPTH:
            return text.count("\n", 0, match.start()) + 1
    return None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _read_json(path: Path, display: str) -> tuple[str, Any]:
    """Stage one: the file's text and its JSON value, within the size and depth limits of ``io.yamlsrc``;
    NaN and Infinity (which Python's decoder accepts) are refused."""
    text = read_text_bounded(path, display, "a config.json file")
    line = _too_deep(text)
    if line is not None:
        raise InputError(Problem(file=display, line=line, message=f"malformed JSON: nested deeper than {MAX_DEPTH}"))
    try:
        return text, json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise InputError(
            Problem(file=display, line=exc.lineno, message=f"malformed JSON: {exc.msg} (column {exc.colno})")
        ) from None
    except (ValueError, RecursionError) as exc:  # NaN/Infinity, an integer over 4,300 digits
        raise InputError(Problem(file=display, message=f"malformed JSON: {exc}")) from None


def import_hf_config(path: Path, *, name: str | None = None, display: str | None = None) -> ImportedCard:
    """Read a Hugging Face ``config.json`` of a supported family into a model card.

    Raises InputError (file, line, field) for malformed JSON, an unsupported ``model_type``, missing or
    inconsistent fields; every problem found is reported, not only the first.
    """
    file = display if display is not None else str(path)
    text, data = _read_json(path, file)
    if not isinstance(data, Mapping):
        raise InputError(Problem(file=file, line=1, message="expected a JSON object of config fields"))
    family = data.get("model_type")
    ctx = _Context(file, text, str(family))
    if not isinstance(family, str) or family not in FAMILIES:
        shown = "missing" if family is None else f"unsupported family '{family}'{suggest(str(family), FAMILIES)}"
        ctx.report("model_type", "model_type", f"{shown}; supported: {', '.join(FAMILIES)}")
        raise InputError(ctx.problems)
    root = _Fields(data, "", ctx)
    c = root.sub("text_config") if family == "qwen3_5_moe" and root.has("text_config") else root
    if c is None:
        raise InputError(ctx.problems)
    hidden = c.integer("hidden_size")
    n = c.integer("num_hidden_layers")
    vocab = c.integer("vocab_size")
    tie = (c if c.has("tie_word_embeddings") else root).boolean("tie_word_embeddings", default=False)
    root.used.add("tie_word_embeddings")
    layers = _BUILDERS[family](c, n, hidden) if n is not None and hidden is not None else None
    weights, weights_note = _weights_dtype([c, root] if c is not root else [root])
    if ctx.problems or layers is None or hidden is None or vocab is None or tie is None:
        raise InputError(ctx.problems or [Problem(file=file, message="no layers could be read")])
    groups, group_notes = _group(layers)
    arch = Architecture(
        hidden_size=hidden, vocab_size=vocab, layers=groups, dtypes=Dtypes(weights=weights), tie_embeddings=tie
    )
    origin = data.get("_name_or_path")
    stem = path.stem if path.stem != "config" else path.resolve().parent.name
    label = name or (Path(origin).name if isinstance(origin, str) and origin else None) or stem
    notes = [
        note
        for note in (
            weights_note,
            "kv_cache bf16: a config does not say how an engine stores KV; the paper's Table 3 implies BF16",
            "state fp32, conv_state bf16: SGLang's defaults for linear-attention state (SGLANG_MAMBA_SSM_DTYPE, "
            "SGLANG_MAMBA_CONV_DTYPE)"
            if any(g.attention.kind == "linear" for g in groups)
            else "",
            _FAMILY_NOTES.get(family, ""),
        )
        if note
    ]
    card = ModelCard(
        key=label,
        name=label,
        source=f"{path.name} (model_type {family}{f', {origin}' if isinstance(origin, str) and origin else ''}), "
        "imported by prfaas-plan model import",
        architecture=arch,
    )
    return ImportedCard(
        card=card,
        family=family,
        config_file=file,
        group_notes=group_notes,
        notes=tuple(notes),
        unmapped=tuple(_unmapped([root, *ctx.children])),
    )


def card_yaml(imported: ImportedCard) -> str:
    """The imported card as YAML text with its layer placement, judgement calls and unmapped fields as comments."""
    from prfaas_plan.io.card_writer import render_card

    header = (
        f"{imported.card.name}: imported from {imported.config_file} "
        f"(model_type {imported.family}) by `prfaas-plan model import`. Check the figures against the release and "
        "add parameters_b / active_parameters_b from the model's own publication.",
    )
    return render_card(
        imported.card,
        header=header,
        group_notes=imported.group_notes,
        notes=imported.notes,
        unmapped=[(u.field, u.value, u.reason) for u in imported.unmapped],
    )
