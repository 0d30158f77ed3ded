"""Hypothesis strategies for small model cards of every layer type and storage dtype (reference-kernel tests).

Widths are 1-8 and cards have 1-2 groups of 1-2 layers, so a pass takes milliseconds. When any storage class
is fp4 or int4 every width is even (they pack value pairs; ``check_reference_size`` refuses odd widths).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

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

DTYPES = tuple(DTYPE_BYTES)

Draw = Callable[[st.SearchStrategy[Any]], Any]


def _width(draw: Draw, low: int, high: int, even: bool) -> int:
    value: int = draw(st.integers(low, high))
    return value + value % 2 if even else value


def attention(draw: Draw, kind: str, even: bool) -> Attention:
    """One attention block of ``kind`` with small widths."""
    if kind in ("gqa", "swa"):
        kv_heads, per_kv = draw(st.integers(1, 2)), draw(st.integers(1, 3))
        return Attention(
            kind=kind,
            heads=kv_heads * per_kv,
            kv_heads=kv_heads,
            head_dim=_width(draw, 1, 8, even),
            v_head_dim=_width(draw, 1, 8, even),
            window=draw(st.integers(1, 6)) if kind == "swa" else 0,
        )
    if kind == "mla":
        return Attention(
            kind="mla",
            heads=draw(st.integers(1, 3)),
            q_lora_rank=draw(st.sampled_from([0, 0, 4, 6])),
            kv_lora_rank=_width(draw, 1, 8, even),
            qk_nope_head_dim=_width(draw, 1, 6, even),
            qk_rope_head_dim=_width(draw, 1, 4, even),
            v_head_dim=_width(draw, 1, 6, even),
        )
    key_heads, per_key = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    return Attention(
        kind="linear",
        heads=key_heads * per_key,
        key_heads=key_heads,
        key_head_dim=_width(draw, 1, 6, even),
        value_head_dim=_width(draw, 1, 6, even),
        conv_kernel=draw(st.integers(1, 4)),
    )


def ffn(draw: Draw, kind: str, even: bool) -> Ffn:
    """One FFN block of ``kind``: dense, or MoE with 1-6 experts and 0-2 shared experts."""
    if kind == "dense":
        return Ffn(kind="dense", intermediate=_width(draw, 1, 12, even))
    experts = draw(st.integers(1, 6))
    shared = draw(st.integers(0, 2))
    return Ffn(
        kind="moe",
        experts=experts,
        active_experts=draw(st.integers(1, experts)),
        expert_intermediate=_width(draw, 1, 8, even),
        shared_experts=shared,
        shared_intermediate=_width(draw, 1, 8, even) if shared else 0,
    )


@st.composite
def architectures(
    draw: Draw,
    attention_kinds: tuple[str, ...] = ATTENTION_KINDS,
    ffn_kinds: tuple[str, ...] = FFN_KINDS,
    dtypes: tuple[str, ...] = DTYPES,
) -> Architecture:
    """A card of 1-2 groups (1-2 layers each) with attention and FFN kinds from those given, and each of the
    four storage classes in a dtype drawn from ``dtypes``."""
    storage = Dtypes(**{name: draw(st.sampled_from(dtypes)) for name in ("weights", "kv_cache", "state", "conv_state")})
    even = bool({"fp4", "int4"} & {storage.weights, storage.kv_cache, storage.state, storage.conv_state})
    groups = tuple(
        LayerGroup(
            count=draw(st.integers(1, 2)),
            attention=attention(draw, draw(st.sampled_from(attention_kinds)), even),
            ffn=ffn(draw, draw(st.sampled_from(ffn_kinds)), even),
        )
        for _ in range(draw(st.integers(1, 2)))
    )
    return Architecture(
        hidden_size=_width(draw, 4, 12, even),
        vocab_size=draw(st.integers(4, 40)),
        layers=groups,
        dtypes=storage,
        tie_embeddings=draw(st.booleans()),
    )


def one_of_each(dtype: str = "bf16") -> Architecture:
    """A fixed card with one group of every attention kind, both FFN kinds, all storage in ``dtype``."""
    return Architecture(
        hidden_size=8,
        vocab_size=24,
        dtypes=Dtypes(weights=dtype, kv_cache=dtype, state=dtype, conv_state=dtype),
        layers=(
            LayerGroup(
                count=2,
                attention=Attention(kind="gqa", heads=4, kv_heads=2, head_dim=4, v_head_dim=6),
                ffn=Ffn(kind="dense", intermediate=12),
            ),
            LayerGroup(
                count=1,
                attention=Attention(kind="swa", heads=2, kv_heads=1, head_dim=4, v_head_dim=4, window=3),
                ffn=Ffn(
                    kind="moe",
                    experts=4,
                    active_experts=2,
                    expert_intermediate=4,
                    shared_experts=1,
                    shared_intermediate=6,
                ),
            ),
            LayerGroup(
                count=1,
                attention=Attention(
                    kind="mla",
                    heads=2,
                    q_lora_rank=6,
                    kv_lora_rank=4,
                    qk_nope_head_dim=4,
                    qk_rope_head_dim=2,
                    v_head_dim=4,
                ),
                ffn=Ffn(kind="dense", intermediate=10),
            ),
            LayerGroup(
                count=2,
                attention=Attention(
                    kind="linear", heads=4, key_heads=2, key_head_dim=4, value_head_dim=4, conv_kernel=4
                ),
                ffn=Ffn(kind="moe", experts=5, active_experts=2, expert_intermediate=6),
            ),
        ),
    )
