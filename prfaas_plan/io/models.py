"""Model cards (``workloads/models/*.yaml``): stage two of parsing, into ``ModelCard`` with its architecture.

Schema::

    model:        {name, source, parameters_b?, active_parameters_b?, inferred?}
    architecture:                      # optional; required by roofline pools
      hidden_size, vocab_size, num_layers, tie_embeddings?
      dtypes: {weights, kv_cache, state, conv_state,      # each optional; defaults bf16/bf16/fp32/bf16
               experts, embeddings}                   # routed experts / embedding + LM head; default: weights
      layers:                          # groups of identical layers; counts must add up to num_layers
        - count: N
          attention: {kind: gqa|mla|swa|linear, ...shape fields of that kind}   # gqa/swa: output_gate?
          ffn: {kind: dense, intermediate} | {kind: moe, experts, active_experts, expert_intermediate,
                                              shared_experts?, shared_intermediate?}
      mtp_layers:                      # optional: multi-token-prediction modules, as groups of the same form
"""

from __future__ import annotations

from pathlib import Path

from prfaas_plan.io.yamlsrc import Checker, Section, load_yaml
from prfaas_plan.spec.model import (
    ATTENTION_KINDS,
    DTYPE_BYTES,
    FFN_KINDS,
    Architecture,
    Attention,
    Dtypes,
    Ffn,
    LayerGroup,
)
from prfaas_plan.spec.scenario import ModelCard

#: The largest shape field (hidden size, vocabulary, heads, head width, experts, window, layer count): released
#: models stay under 2^20 in every one, and products of a few such fields must stay exact in float64.
MAX_SHAPE = 2**24
#: Layers of a model: the deepest released models have under 200; every layer is a loop iteration downstream.
MAX_LAYERS = 4096
#: Parameters in billions: a thousand times the largest released model.
MAX_PARAMETERS_B = 1e6

# Required and optional shape fields of each attention kind.
ATTENTION_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "gqa": (("heads", "kv_heads", "head_dim"), ("v_head_dim", "output_gate")),
    "swa": (("heads", "kv_heads", "head_dim", "window"), ("v_head_dim", "output_gate")),
    "mla": (("heads", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"), ("q_lora_rank",)),
    "linear": (("heads", "key_heads", "key_head_dim", "value_head_dim", "conv_kernel"), ()),
}
#: Shape fields that are flags (true/false), not integers.
BOOLEAN_FIELDS = frozenset({"output_gate"})
FFN_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "dense": (("intermediate",), ()),
    "moe": (("experts", "active_experts", "expert_intermediate"), ("shared_experts", "shared_intermediate")),
}


def _kind_section(
    parent: Section, key: str, kinds: tuple[str, ...], fields: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]
) -> tuple[str | None, dict[str, int], Section]:
    """A ``{kind: ..., fields...}`` mapping whose allowed keys depend on its kind; integer fields >= 0."""
    raw = parent.raw(key)
    if not parent.has(key):
        return None, {}, Section(parent.checker, (*parent.path, key), None, dead=True)
    kind_value = raw.get("kind") if isinstance(raw, dict) else None
    if str(kind_value) in fields:
        required, optional = fields[str(kind_value)]
        sec = parent.sub(key, required=("kind", *required), optional=optional)
    else:
        # Unknown kind: report the kind once, not every shape field as an unknown key.
        every = tuple(sorted({f for req, opt in fields.values() for f in (*req, *opt)}))
        sec = parent.sub(key, required=("kind",), optional=every)
        sec.string("kind", choices=kinds)
        return None, {}, sec
    kind = sec.string("kind", choices=kinds)
    values: dict[str, int] = {}
    if kind is None:
        return None, values, sec
    for name in (*required, *optional):
        if name in BOOLEAN_FIELDS:
            flag = sec.boolean(name, default=False)
            if flag is not None:
                values[name] = int(flag)
            continue
        value = sec.number(name, ge=1 if name in required else 0, le=MAX_SHAPE, integer=True)
        if value is not None:
            values[name] = int(value)
    return kind, values, sec


def _attention(parent: Section) -> Attention | None:
    kind, v, sec = _kind_section(parent, "attention", ATTENTION_KINDS, ATTENTION_FIELDS)
    if kind is None or any(name not in v for name in ATTENTION_FIELDS[kind][0]):
        return None
    if kind in ("gqa", "swa") and v["heads"] % v["kv_heads"] != 0:
        sec.checker.report(
            (*sec.path, "kv_heads"), f"heads ({v['heads']}) must be divisible by kv_heads ({v['kv_heads']})"
        )
        return None
    if kind == "linear" and v["heads"] % v["key_heads"] != 0:
        sec.checker.report(
            (*sec.path, "key_heads"),
            f"heads ({v['heads']}, the value heads) must be divisible by key_heads ({v['key_heads']})",
        )
        return None
    if kind in ("gqa", "swa"):
        return Attention(
            kind=kind,
            heads=v["heads"],
            kv_heads=v["kv_heads"],
            head_dim=v["head_dim"],
            v_head_dim=v.get("v_head_dim", v["head_dim"]),
            window=v.get("window", 0),
            output_gate=bool(v.get("output_gate", 0)),
        )
    if kind == "mla":
        return Attention(
            kind=kind,
            heads=v["heads"],
            q_lora_rank=v.get("q_lora_rank", 0),
            kv_lora_rank=v["kv_lora_rank"],
            qk_nope_head_dim=v["qk_nope_head_dim"],
            qk_rope_head_dim=v["qk_rope_head_dim"],
            v_head_dim=v["v_head_dim"],
        )
    return Attention(
        kind=kind,
        heads=v["heads"],
        key_heads=v["key_heads"],
        key_head_dim=v["key_head_dim"],
        value_head_dim=v["value_head_dim"],
        conv_kernel=v["conv_kernel"],
    )


def _ffn(parent: Section) -> Ffn | None:
    kind, v, sec = _kind_section(parent, "ffn", FFN_KINDS, FFN_FIELDS)
    if kind is None or any(name not in v for name in FFN_FIELDS[kind][0]):
        return None
    if kind == "dense":
        return Ffn(kind=kind, intermediate=v["intermediate"])
    if v["active_experts"] > v["experts"]:
        sec.checker.report((*sec.path, "active_experts"), f"must be <= experts ({v['experts']})")
        return None
    if v.get("shared_experts", 0) and not v.get("shared_intermediate", 0):
        sec.checker.report(sec.path, "shared_experts needs shared_intermediate")
        return None
    return Ffn(
        kind=kind,
        experts=v["experts"],
        active_experts=v["active_experts"],
        expert_intermediate=v["expert_intermediate"],
        shared_experts=v.get("shared_experts", 0),
        shared_intermediate=v.get("shared_intermediate", 0),
    )


def _architecture(root: Section) -> Architecture | None:
    arch = root.sub(
        "architecture",
        required=("hidden_size", "vocab_size", "num_layers", "layers"),
        optional=("tie_embeddings", "dtypes", "mtp_layers"),
    )
    hidden = arch.number("hidden_size", ge=1, le=MAX_SHAPE, integer=True)
    vocab = arch.number("vocab_size", ge=1, le=MAX_SHAPE, integer=True)
    num_layers = arch.number("num_layers", ge=1, le=MAX_LAYERS, integer=True)
    tie = arch.boolean("tie_embeddings", default=False)
    dtype_keys = ("weights", "kv_cache", "state", "conv_state", "experts", "embeddings")
    dtypes_sec = arch.sub("dtypes", optional=dtype_keys)
    dtype_names = tuple(DTYPE_BYTES)
    dtypes = Dtypes(
        **{key: value for key in dtype_keys if (value := dtypes_sec.string(key, choices=dtype_names)) is not None}
    )
    groups, complete = _layer_groups(arch, "layers")
    mtp, mtp_complete = _layer_groups(arch, "mtp_layers") if arch.has("mtp_layers") else ([], True)
    complete = complete and mtp_complete
    if complete and groups and num_layers is not None:
        total = sum(g.count for g in groups)
        if total != num_layers:
            counts = " + ".join(str(g.count) for g in groups)
            arch.checker.report(
                (*arch.path, "layers"), f"layer counts add up to {counts} = {total}, but num_layers is {num_layers:g}"
            )
            return None
    if not complete or not groups or hidden is None or vocab is None or tie is None:
        return None
    return Architecture(
        hidden_size=int(hidden),
        vocab_size=int(vocab),
        layers=tuple(groups),
        dtypes=dtypes,
        tie_embeddings=tie,
        mtp_layers=tuple(mtp),
    )


def _layer_groups(arch: Section, key: str) -> tuple[list[LayerGroup], bool]:
    """The ``{count, attention, ffn}`` groups listed under ``key``, and whether every one was valid."""
    groups: list[LayerGroup] = []
    complete = True
    for path, item in arch.items(key):
        group = Section(arch.checker, path, item, required=("count", "attention", "ffn"))
        count = group.number("count", ge=1, le=MAX_LAYERS, integer=True)
        attention = _attention(group)
        ffn = _ffn(group)
        if count is None or attention is None or ffn is None:
            complete = False
            continue
        groups.append(LayerGroup(count=int(count), attention=attention, ffn=ffn))
    return groups, complete


def load_model_card(path: Path, display: str | None = None) -> ModelCard:
    """Read one ``workloads/models/*.yaml`` model card; every problem is reported with file, line and field."""
    doc = load_yaml(path, display)
    checker = Checker(doc)
    root = checker.root(required=("model",), optional=("architecture",))
    sec = root.sub("model", required=("name", "source"), optional=("parameters_b", "active_parameters_b", "inferred"))
    name = sec.string("name")
    params = sec.number("parameters_b", gt=0, le=MAX_PARAMETERS_B)
    active = sec.number("active_parameters_b", gt=0, le=MAX_PARAMETERS_B)
    source = sec.string("source")
    inferred = sec.boolean("inferred", default=False)
    architecture = _architecture(root) if root.has("architecture") else None
    checker.raise_if_any()
    return ModelCard(
        key=path.stem,
        name=str(name),
        parameters_b=params,
        active_parameters_b=active,
        source=str(source),
        inferred=bool(inferred),
        architecture=architecture,
    )
