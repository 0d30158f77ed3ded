"""A model card's weights at reference size: random, seeded, stored in the card's weight dtypes.

Layouts (rows x columns; inputs multiply from the left, ``x @ W``) follow ``physics.memory.parameter_count``
tensor by tensor, so the stored sizes add up to it exactly. Routed experts are stored in ``dtypes.experts``,
the embedding table and LM head in ``dtypes.embeddings``, everything else in ``dtypes.weights``. Tensors whose
natural layout would put an odd dimension last (LM head, router, convolution) are stored transposed, so fp4
and int4 can pack pairs along the last axis. Initialisation: N(0, 1/fan_in) matrices, N(0, 1) embeddings,
norm gains 1 + N(0, 0.1²).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InputError, Problem
from prfaas_plan.physics.memory import mtp_parameter_count, parameter_count
from prfaas_plan.reference.storage import PACKED, Codec, FloatArray, state_codec, weight_codec
from prfaas_plan.spec.model import Architecture, Attention, Ffn, LayerGroup

#: Largest card the reference kernel builds. 3e8 parameters are 1.2 GB of float32 values (2.4 GB in float64)
#: beside their storage copy: comfortably inside these machines' memory, and minutes of numpy per pass.
MAX_REFERENCE_PARAMETERS = 3.0e8

Shape = tuple[int, ...]


def attention_shapes(att: Attention, h: int) -> dict[str, Shape]:
    """Weight tensors of one attention block."""
    if att.kind in ("gqa", "swa"):
        gate = att.heads * att.v_head_dim if att.output_gate else 0
        width = att.heads * att.head_dim + att.kv_heads * (att.head_dim + att.v_head_dim) + gate
        return {"qkv": (h, width), "o": (att.heads * att.v_head_dim, h)}
    if att.kind == "mla":
        qk = att.qk_nope_head_dim + att.qk_rope_head_dim
        q: dict[str, Shape] = (
            {"q_a": (h, att.q_lora_rank), "q_b": (att.q_lora_rank, att.heads * qk)}
            if att.q_lora_rank
            else {"q": (h, att.heads * qk)}
        )
        return {
            **q,
            "kv_a": (h, att.kv_lora_rank + att.qk_rope_head_dim),
            "kv_b": (att.kv_lora_rank, att.heads * (att.qk_nope_head_dim + att.v_head_dim)),
            "o": (att.heads * att.v_head_dim, h),
        }
    channels = linear_channels(att)
    width = 2 * att.key_heads * att.key_head_dim + 2 * att.heads * att.value_head_dim + 2 * att.heads
    return {"proj": (h, width), "conv": (att.conv_kernel, channels), "o": (att.heads * att.value_head_dim, h)}


def ffn_shapes(ffn: Ffn, h: int) -> dict[str, Shape]:
    """Weight tensors of one FFN block; ``expert_*`` are per routed expert."""
    if ffn.kind == "dense":
        return {"gate_up": (h, 2 * ffn.intermediate), "down": (ffn.intermediate, h)}
    shapes: dict[str, Shape] = {
        "router": (ffn.experts, h),
        "expert_gate_up": (h, 2 * ffn.expert_intermediate),
        "expert_down": (ffn.expert_intermediate, h),
    }
    if ffn.shared_experts:
        width = ffn.shared_experts * ffn.shared_intermediate
        shapes |= {"shared_gate_up": (h, 2 * width), "shared_down": (width, h)}
    return shapes


def linear_channels(att: Attention) -> int:
    """Channels of a linear-attention layer's short convolution: q, k and v."""
    return 2 * att.key_heads * att.key_head_dim + att.heads * att.value_head_dim


def _packed_problems(arch: Architecture) -> list[Problem]:
    """fp4 and int4 pack two values per byte along a stored array's last axis, which must therefore be even."""
    problems: list[Problem] = []
    h = arch.hidden_size
    dt = arch.dtypes

    def need_even(field: str, width: int, storage: str) -> None:
        if width % 2:
            problems.append(
                Problem(
                    field=field,
                    message=f"{storage} is {dt.dtype_of(storage)}, which packs value pairs: needs an even width, "
                    f"got {width}",
                )
            )

    if dt.dtype_of("embeddings") in PACKED:
        need_even("architecture.hidden_size", h, "embeddings")
    groups = [(f"architecture.layers[{i}]", g) for i, g in enumerate(arch.layers)]
    groups += [(f"architecture.mtp_layers[{i}]", g) for i, g in enumerate(arch.mtp_layers)]
    for where, group in groups:
        att = group.attention
        if dt.weights in PACKED:
            need_even("architecture.hidden_size", h, "weights")
        for name, shape in (attention_shapes(att, h) | ffn_shapes(group.ffn, h)).items():
            storage = "experts" if name.startswith("expert_") else "weights"
            if dt.dtype_of(storage) in PACKED:
                need_even(f"{where} {name} weight", shape[-1], storage)
        if dt.kv_cache in PACKED and att.kind in ("gqa", "swa"):
            need_even(f"{where}.attention.head_dim", att.head_dim, "kv_cache")
            need_even(f"{where}.attention.v_head_dim", att.v_head_dim, "kv_cache")
        if dt.kv_cache in PACKED and att.kind == "mla":
            need_even(f"{where}.attention.kv_lora_rank", att.kv_lora_rank, "kv_cache")
            need_even(f"{where}.attention.qk_rope_head_dim", att.qk_rope_head_dim, "kv_cache")
        if dt.state in PACKED and att.kind == "linear":
            need_even(f"{where}.attention.value_head_dim", att.value_head_dim, "state")
        if dt.conv_state in PACKED and att.kind == "linear":
            need_even(f"{where} conv channels", linear_channels(att), "conv_state")
    unique = {str(p): p for p in problems}
    return list(unique.values())


def check_reference_size(arch: Architecture, limit: float = MAX_REFERENCE_PARAMETERS) -> None:
    """Refuse (InputError) a card too large for the reference kernel, or one whose packed (fp4, int4) widths
    are odd."""
    params = parameter_count(arch) + mtp_parameter_count(arch)
    problems = []
    if params > limit:
        problems.append(
            Problem(
                field="architecture",
                message=(
                    f"{params / 1e6:,.0f}M parameters is above the reference kernel's limit of {limit / 1e6:,.0f}M; "
                    "shrink the card first (prfaas_plan.reference.shrink_architecture, or --shrink)"
                ),
            )
        )
    problems += _packed_problems(arch)
    if problems:
        raise InputError(problems)


@frozen
class Weight:
    """One weight tensor: its storage array (what is read, ``nbytes``) and its decoded values."""

    stored: NDArray[Any]
    value: FloatArray
    codec: Codec


@frozen
class LayerWeights:
    """One decoder layer: its group, shapes, two norm gains, matrices by name, and routed experts."""

    group: int
    attention: Attention
    ffn: Ffn
    norm_attention: Weight
    norm_ffn: Weight
    mats: Mapping[str, Weight]
    experts: tuple[tuple[Weight, Weight], ...] = ()  # (gate_up, down) per routed expert


@frozen
class MtpWeights:
    """One multi-token-prediction module: its decoder layer, the (2h x h) projection of [embedding; hidden],
    and the norms on the embedding, on the hidden state and before the shared LM head."""

    layer: LayerWeights
    projection: Weight
    norm_embedding: Weight
    norm_hidden: Weight
    norm_head: Weight

    @property
    def tensors(self) -> list[Weight]:
        """Every stored tensor of the module."""
        layer = self.layer
        return [
            self.projection,
            self.norm_embedding,
            self.norm_hidden,
            self.norm_head,
            layer.norm_attention,
            layer.norm_ffn,
            *layer.mats.values(),
            *(w for pair in layer.experts for w in pair),
        ]


@frozen
class ReferenceModel:
    """A card with random weights, ready to run: ``compute`` is the float type of all arithmetic."""

    arch: Architecture
    embed: Weight
    lm_head: Weight  # (vocab, hidden): the embedding itself when tied
    final_norm: Weight
    layers: tuple[LayerWeights, ...]
    compute: type[np.floating[Any]]
    kv_codec: Codec  # KV, latent and window rows
    state_codec: Codec  # linear-attention recurrent states
    conv_codec: Codec  # linear-attention convolution states
    mtp: tuple[MtpWeights, ...] = ()  # stored, not run: the forward pass is the main model's

    @property
    def stored_mtp_parameters(self) -> int:
        """Elements of every stored MTP-module weight."""
        return sum(t.value.size for module in self.mtp for t in module.tensors)

    @property
    def stored_parameters(self) -> int:
        """Elements of every stored weight (fp4 and int4 count two per byte)."""
        tensors = [self.embed, self.final_norm, *([] if self.arch.tie_embeddings else [self.lm_head])]
        for layer in self.layers:
            tensors += [layer.norm_attention, layer.norm_ffn, *layer.mats.values()]
            tensors += [w for pair in layer.experts for w in pair]
        return sum(t.value.size for t in tensors)


def build_model(
    arch: Architecture, rng: np.random.Generator, *, compute: type[np.floating[Any]] = np.float64
) -> ReferenceModel:
    """Random weights for ``arch`` from ``rng``; refuses cards above ``MAX_REFERENCE_PARAMETERS``."""
    check_reference_size(arch)
    h = arch.hidden_size

    def make(shape: Shape, std: float, mean: float = 0.0, storage: str = "weights") -> Weight:
        values = mean + std * rng.standard_normal(shape)
        codec = weight_codec(arch.dtypes.dtype_of(storage), values)
        stored = codec.encode(values)
        return Weight(stored=stored, value=codec.decode(stored, compute), codec=codec)

    def matrix(shape: Shape, name: str, storage: str = "weights") -> Weight:
        # Transposed layouts (router, conv) take their fan-in from the last axis.
        fan_in = shape[1] if name in ("router", "conv") else shape[0]
        return make(shape, 1.0 / np.sqrt(fan_in), storage=storage)

    def gain() -> Weight:
        return make((h,), 0.1, mean=1.0)

    embed = make((arch.vocab_size, h), 1.0, storage="embeddings")
    lm_head = embed if arch.tie_embeddings else make((arch.vocab_size, h), 1.0 / np.sqrt(h), storage="embeddings")

    def layer(g: int, group: LayerGroup) -> LayerWeights:
        shapes = attention_shapes(group.attention, h) | ffn_shapes(group.ffn, h)
        mats = {name: matrix(shape, name) for name, shape in shapes.items() if not name.startswith("expert_")}
        experts = tuple(
            (
                matrix(shapes["expert_gate_up"], "gate_up", "experts"),
                matrix(shapes["expert_down"], "down", "experts"),
            )
            for _ in range(group.ffn.experts if group.ffn.kind == "moe" else 0)
        )
        return LayerWeights(
            group=g,
            attention=group.attention,
            ffn=group.ffn,
            norm_attention=gain(),
            norm_ffn=gain(),
            mats=mats,
            experts=experts,
        )

    layers = [layer(g, group) for g, group in enumerate(arch.layers) for _ in range(group.count)]
    mtp = tuple(
        MtpWeights(
            layer=layer(g, group),
            projection=matrix((2 * h, h), "projection"),
            norm_embedding=gain(),
            norm_hidden=gain(),
            norm_head=gain(),
        )
        for g, group in enumerate(arch.mtp_layers)
        for _ in range(group.count)
    )
    return ReferenceModel(
        arch=arch,
        embed=embed,
        lm_head=lm_head,
        final_norm=gain(),
        layers=tuple(layers),
        compute=compute,
        kv_codec=state_codec(arch.dtypes.kv_cache),
        state_codec=state_codec(arch.dtypes.state),
        conv_codec=state_codec(arch.dtypes.conv_state),
        mtp=mtp,
    )
