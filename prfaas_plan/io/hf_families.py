"""The per-family mappers of ``io.hf_import``: each reads one family's config fields into the attention and
FFN of every layer, in order.

Families, by ``model_type``: llama, qwen3_moe, qwen3_next, qwen3_5_moe, kimi_linear, mimo_v2_flash, minimax_m2,
deepseek_v3. Field names are those of the families' released configs and transformers configuration classes
(huggingface/transformers ``src/transformers/models/<family>/``, https://github.com/huggingface/transformers).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace

from prfaas_plan.io.hf_config import ConfigFields
from prfaas_plan.io.yamlsrc import suggest
from prfaas_plan.spec.model import Attention, Ffn

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

# What each family's card leaves out that its config does not spell out as a field.
FAMILY_NOTES = {
    "qwen3_next": "full attention is output-gated in this family (attn_output_gate, true unless the config says "
    "otherwise): q_proj is twice as wide",
    "qwen3_5_moe": "full attention is output-gated in this family (attn_output_gate, true unless the config says "
    "otherwise): q_proj is twice as wide",
    "kimi_linear": "KDA's low-rank forget and output gates are counted as full-rank projections (a slight overcount)",
    "minimax_m2": "intermediate_size is the expert width in this family (no dense FFN layers)",
    "mimo_v2_flash": "sliding_window_size (or sliding_window) is the SWA window; only that many tokens are cached",
}

#: One decoder layer: its attention and its FFN (hashable, so identical layers group together).
Layer = tuple[Attention, Ffn]


def _gqa(c: ConfigFields, hidden: int) -> Attention | None:
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


def _mla(c: ConfigFields) -> Attention | None:
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


def _linear(
    c: ConfigFields, heads_key: str, key_heads_key: str | None, kdim: str, vdim: str, conv: str
) -> Attention | None:
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


def _dense(c: ConfigFields) -> Ffn | None:
    inter = c.integer("intermediate_size")
    return None if inter is None else Ffn(kind="dense", intermediate=inter)


def _moe(c: ConfigFields, experts_keys: tuple[str, ...], active_keys: tuple[str, ...], width_key: str) -> Ffn | None:
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


def _types_from_names(c: ConfigFields, key: str, n: int, names: dict[str, str]) -> list[str] | None:
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


def _flags(c: ConfigFields, key: str, n: int, names: tuple[str, str]) -> list[str] | None:
    """A per-layer 0/1 list (``hybrid_layer_pattern``, ``moe_layer_freq``) as type names."""
    values = c.int_list(key, required=False)
    if values is None:
        return None
    if len(values) != n or any(v not in (0, 1) for v in values):
        c.report(key, f"expected {n} entries of 0 or 1 (one per layer), got {json.dumps(values)[:60]}")
        return None
    return [names[v] for v in values]


def _llama(c: ConfigFields, n: int, hidden: int) -> list[Layer] | None:
    att, ffn = _gqa(c, hidden), _dense(c)
    return None if att is None or ffn is None else [(att, ffn)] * n


def _qwen_ffn(c: ConfigFields, n: int) -> list[Ffn | None]:
    """Qwen MoE placement: layer i is sparse unless listed in mlp_only_layers or off the decoder_sparse_step."""
    step = c.integer("decoder_sparse_step", default=1)
    only = set(c.int_list("mlp_only_layers", required=False) or [])
    if step is None:
        return [None]
    sparse = [i not in only and (i + 1) % step == 0 for i in range(n)]
    moe = _moe(c, ("num_experts",), ("num_experts_per_tok",), "moe_intermediate_size") if any(sparse) else None
    dense = _dense(c) if not all(sparse) else None
    return [moe if s else dense for s in sparse]


def _qwen3_moe(c: ConfigFields, n: int, hidden: int) -> list[Layer] | None:
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


def _qwen3_next(c: ConfigFields, n: int, hidden: int) -> list[Layer] | None:
    ffns = _qwen_ffn(c, n)
    types = _types_from_names(c, "layer_types", n, {"full_attention": "full", "linear_attention": "linear"})
    if types is None and not c.has("layer_types"):
        interval = c.integer("full_attention_interval", why=" (or layer_types)")
        types = None if interval is None else ["full" if (i + 1) % interval == 0 else "linear" for i in range(n)]
    c.used.add("full_attention_interval")  # redundant when layer_types is given
    full = _gqa(c, hidden)
    gated = c.boolean("attn_output_gate", default=True)
    if full is not None and gated:
        full = replace(full, output_gate=True)
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


def _deepseek_ffn(
    c: ConfigFields, n: int, experts_keys: tuple[str, ...], active_keys: tuple[str, ...]
) -> list[Ffn | None]:
    """DeepSeek placement: the first ``first_k_dense_replace`` layers dense, then MoE every ``moe_layer_freq``."""
    first = c.integer("first_k_dense_replace", ge=0)
    freq = c.integer("moe_layer_freq", default=1)
    if first is None or freq is None:
        return [None]
    sparse = [i >= first and i % freq == 0 for i in range(n)]
    moe = _moe(c, experts_keys, active_keys, "moe_intermediate_size") if any(sparse) else None
    dense = _dense(c) if not all(sparse) else None
    return [moe if s else dense for s in sparse]


def _deepseek_v3(c: ConfigFields, n: int, hidden: int) -> list[Layer] | None:
    ffns = _deepseek_ffn(c, n, ("n_routed_experts",), ("num_experts_per_tok",))
    att = _mla(c)
    if att is None or any(f is None for f in ffns):
        return None
    return [(att, f) for f in ffns if f is not None]


def _kimi_linear(c: ConfigFields, n: int, hidden: int) -> list[Layer] | None:
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


def _mimo_v2_flash(c: ConfigFields, n: int, hidden: int) -> list[Layer] | None:
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


def _minimax_m2(c: ConfigFields, n: int, hidden: int) -> list[Layer] | None:
    kinds = c.int_list("attn_type_list", required=False)
    if kinds is not None and any(k != 1 for k in kinds):
        c.report("attn_type_list", "lightning-attention layers (0) are not supported; minimax_m2 cards need all 1")
        return None
    att = _gqa(c, hidden)
    # In this family intermediate_size IS the expert width (transformers configuration_minimax_m2.py).
    ffn = _moe(c, ("num_local_experts", "num_experts"), ("num_experts_per_tok",), "intermediate_size")
    return None if att is None or ffn is None else [(att, ffn)] * n


#: Each family's mapper: (config view, num_hidden_layers, hidden_size) -> the layers in order, or None when a
#: problem was reported on the view.
FAMILY_LAYERS: dict[str, Callable[[ConfigFields, int, int], list[Layer] | None]] = {
    "llama": _llama,
    "qwen3_moe": _qwen3_moe,
    "qwen3_next": _qwen3_next,
    "qwen3_5_moe": _qwen3_next,
    "kimi_linear": _kimi_linear,
    "mimo_v2_flash": _mimo_v2_flash,
    "minimax_m2": _minimax_m2,
    "deepseek_v3": _deepseek_v3,
}
