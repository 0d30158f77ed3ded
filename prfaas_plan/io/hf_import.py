"""A Hugging Face ``config.json`` as a model card: the architecture the config declares, mapped onto the card
schema (``io/models.py``), with every field the schema cannot express listed with its reason.

The file is read by ``io.hf_config``, each family's layers by ``io.hf_families``; a multimodal config
(Qwen3.5) is read from its ``text_config``.

Judgement calls, the same for every family, written into the card as comments:

- ``kv_cache: bf16``: a config does not say how an engine stores KV; the paper's Table 3 implies BF16.
- ``state: fp32``, ``conv_state: bf16``: SGLang's defaults for linear-attention state (SGLANG_MAMBA_SSM_DTYPE,
  SGLANG_MAMBA_CONV_DTYPE; https://github.com/sgl-project/sglang).
- ``weights``: ``fp8`` when ``quantization_config.quant_method`` is fp8, with ``embeddings: bf16`` (block-scaled
  FP8 checkpoints keep the embedding and LM head in BF16; their routers and norms too, which a card cannot
  say), otherwise ``torch_dtype`` (or ``dtype``).
- Multi-token prediction: ``num_nextn_predict_layers`` (deepseek_v3) and ``mtp_num_hidden_layers`` (qwen3_next,
  qwen3_5_moe) become ``mtp_layers`` shaped as the family's last MoE layer (DeepSeek) or a gated full-attention
  layer with the model's MoE (Qwen). Other families' MTP fields give no shapes and stay unmapped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InputError, Problem
from prfaas_plan.io.hf_config import ConfigContext, ConfigFields, compact_value, read_config_json
from prfaas_plan.io.hf_families import FAMILIES, FAMILY_LAYERS, FAMILY_NOTES, Layer
from prfaas_plan.io.yamlsrc import suggest
from prfaas_plan.spec.model import Architecture, Dtypes, LayerGroup
from prfaas_plan.spec.scenario import ModelCard

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
_MTP = "multi-token-prediction (MTP) modules whose shapes this config does not give; their parameters are not counted"
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

_TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


@frozen
class Unmapped:
    """A config field the card cannot express: its dotted name, its value (compact JSON) and why."""

    field: str
    value: str
    reason: str


@frozen
class ImportedCard:
    """A card built from a config.json: the card, the 0-based layers of each group, the judgement calls made and
    the fields not mapped."""

    card: ModelCard
    family: str
    config_file: str
    group_notes: tuple[str, ...]
    notes: tuple[str, ...]
    unmapped: tuple[Unmapped, ...]


def _weights_dtype(sources: list[ConfigFields]) -> tuple[str, str]:
    """The weights dtype and the reason, from quantization_config (fp8) or torch_dtype / dtype."""
    for c in sources:
        q = c.data.get("quantization_config")
        if isinstance(q, Mapping) and q.get("quant_method") == "fp8":
            for view in sources:  # torch_dtype is then the dtype of activations and unquantised modules
                view.used.update({"quantization_config", "torch_dtype", "dtype"})
            return "fp8", (
                "weights fp8, embeddings bf16: quantization_config.quant_method is fp8 (its other BF16 modules, "
                "router and norms, count as FP8)"
            )
    for c in sources:
        c.used.update({"torch_dtype", "dtype"})
    for c in sources:
        for key in ("torch_dtype", "dtype"):
            value = c.data.get(key)
            if value is None:
                continue
            if isinstance(value, str) and value in _TORCH_DTYPES:
                return _TORCH_DTYPES[value], f"weights {_TORCH_DTYPES[value]}: {c.name(key)} is {value}"
            c.report(key, f"unsupported dtype {compact_value(value)}; known: {', '.join(_TORCH_DTYPES)}")
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


def _unmapped(views: list[ConfigFields]) -> list[Unmapped]:
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


_MTP_FIELDS = {
    "deepseek_v3": "num_nextn_predict_layers",
    "qwen3_next": "mtp_num_hidden_layers",
    "qwen3_5_moe": "mtp_num_hidden_layers",
}


def _mtp_layers(family: str, c: ConfigFields, layers: list[Layer]) -> tuple[LayerGroup, ...]:
    """The family's MTP modules (module docstring), or none when the config declares none or gives no shape."""
    key = _MTP_FIELDS.get(family)
    if key is None or not c.has(key):
        return ()
    count = c.integer(key, ge=0)
    if not count:
        return ()
    if family == "deepseek_v3":
        attention, ffn = layers[-1]
    else:
        attention, ffn = next((a, f) for a, f in layers if a.kind == "gqa")
    return (LayerGroup(count=count, attention=attention, ffn=ffn),)


def import_hf_config(path: Path, *, name: str | None = None, display: str | None = None) -> ImportedCard:
    """Read a Hugging Face ``config.json`` of a supported family into a model card.

    Raises InputError (file, line, field) for malformed JSON, an unsupported ``model_type``, missing or
    inconsistent fields; every problem found is reported, not only the first.
    """
    file = display if display is not None else str(path)
    text, data = read_config_json(path, file)
    if not isinstance(data, Mapping):
        raise InputError(Problem(file=file, line=1, message="expected a JSON object of config fields"))
    family = data.get("model_type")
    ctx = ConfigContext(file, text, str(family))
    if not isinstance(family, str) or family not in FAMILIES:
        shown = "missing" if family is None else f"unsupported family '{family}'{suggest(str(family), FAMILIES)}"
        ctx.report("model_type", "model_type", f"{shown}; supported: {', '.join(FAMILIES)}")
        raise InputError(ctx.problems)
    root = ConfigFields(data, "", ctx)
    c = root.sub("text_config") if family == "qwen3_5_moe" and root.has("text_config") else root
    if c is None:
        raise InputError(ctx.problems)
    hidden = c.integer("hidden_size")
    n = c.integer("num_hidden_layers")
    vocab = c.integer("vocab_size")
    tie = (c if c.has("tie_word_embeddings") else root).boolean("tie_word_embeddings", default=False)
    root.used.add("tie_word_embeddings")
    layers = FAMILY_LAYERS[family](c, n, hidden) if n is not None and hidden is not None else None
    weights, weights_note = _weights_dtype([c, root] if c is not root else [root])
    if ctx.problems or layers is None or hidden is None or vocab is None or tie is None:
        raise InputError(ctx.problems or [Problem(file=file, message="no layers could be read")])
    groups, group_notes = _group(layers)
    arch = Architecture(
        hidden_size=hidden,
        vocab_size=vocab,
        layers=groups,
        dtypes=Dtypes(weights=weights, embeddings="bf16" if weights == "fp8" else None),
        tie_embeddings=tie,
        mtp_layers=_mtp_layers(family, c, layers),
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
            FAMILY_NOTES.get(family, ""),
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
