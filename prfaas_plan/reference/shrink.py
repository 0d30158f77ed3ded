"""Shrink a real model card to reference size, keeping what the checks care about: the mix of layer types
(group counts in the same ratio), each block's kind and structure (GQA grouping, MLA with or without a
query LoRA, linear attention's value-to-key head ratio, dense or MoE FFN with or without shared experts)
and the storage dtypes. Every width is capped by ``ShrinkTarget`` and kept even (fp4 and int4 pack pairs; rotary
embeddings rotate pairs).
"""

from __future__ import annotations

import math
from dataclasses import replace

from prfaas_plan._frozen import frozen
from prfaas_plan.spec.model import Architecture, Attention, Ffn, LayerGroup


@frozen
class ShrinkTarget:
    """Caps on a shrunk card's sizes."""

    hidden_size: int = 64
    vocab_size: int = 256
    max_layers: int = 4
    max_heads: int = 4
    head_dim: int = 16
    latent_rank: int = 32
    rope_dim: int = 8
    window: int = 8
    ffn_multiple: int = 3  # dense intermediate <= ffn_multiple x hidden
    max_experts: int = 8
    expert_intermediate: int = 32


def _even(value: int, cap: int) -> int:
    """``value`` capped at ``cap``, rounded down to an even number, at least 2."""
    v = min(value, cap)
    return max(2, v - v % 2)


def _heads(heads: int, shared: int, cap: int) -> tuple[int, int]:
    """Shrink ``heads`` that share ``shared`` key/value heads, keeping heads per shared head where it fits."""
    per_shared = max(1, heads // shared)
    kept_per = min(per_shared, cap)
    kept_shared = max(1, min(shared, cap // kept_per))
    return kept_per * kept_shared, kept_shared


def _counts(counts: list[int], cap: int) -> list[int]:
    """Group counts in the same ratio (divided by their gcd), scaled down to at most ``cap`` in all, >= 1 each."""
    divisor = math.gcd(*counts)
    reduced = [c // divisor for c in counts]
    total = sum(reduced)
    if total <= cap:
        return reduced
    return [max(1, round(c * cap / total)) for c in reduced]


def _attention(att: Attention, t: ShrinkTarget) -> Attention:
    if att.kind in ("gqa", "swa"):
        heads, kv_heads = _heads(att.heads, att.kv_heads, t.max_heads)
        return replace(
            att,
            heads=heads,
            kv_heads=kv_heads,
            head_dim=_even(att.head_dim, t.head_dim),
            v_head_dim=_even(att.v_head_dim, t.head_dim),
            window=min(att.window, t.window) if att.kind == "swa" else 0,
        )
    if att.kind == "mla":
        return replace(
            att,
            heads=min(att.heads, t.max_heads),
            q_lora_rank=_even(att.q_lora_rank, t.latent_rank) if att.q_lora_rank else 0,
            kv_lora_rank=_even(att.kv_lora_rank, t.latent_rank),
            qk_nope_head_dim=_even(att.qk_nope_head_dim, t.head_dim),
            qk_rope_head_dim=_even(att.qk_rope_head_dim, t.rope_dim),
            v_head_dim=_even(att.v_head_dim, t.head_dim),
        )
    heads, key_heads = _heads(att.heads, att.key_heads, t.max_heads)
    return replace(
        att,
        heads=heads,
        key_heads=key_heads,
        key_head_dim=_even(att.key_head_dim, t.head_dim),
        value_head_dim=_even(att.value_head_dim, t.head_dim),
        conv_kernel=min(att.conv_kernel, 4),
    )


def _ffn(ffn: Ffn, hidden: int, t: ShrinkTarget) -> Ffn:
    if ffn.kind == "dense":
        return replace(ffn, intermediate=_even(ffn.intermediate, t.ffn_multiple * hidden))
    experts = min(ffn.experts, t.max_experts)
    return replace(
        ffn,
        experts=experts,
        active_experts=max(1, min(ffn.active_experts, experts // 4)),
        expert_intermediate=_even(ffn.expert_intermediate, t.expert_intermediate),
        shared_experts=min(ffn.shared_experts, 1),
        shared_intermediate=_even(ffn.shared_intermediate, t.expert_intermediate) if ffn.shared_experts else 0,
    )


def shrink_architecture(arch: Architecture, target: ShrinkTarget | None = None) -> Architecture:
    """``arch`` at reference size (module docstring): widths inside the caps are kept (rounded down to even),
    group counts are divided by their greatest common divisor and scaled to ``max_layers``."""
    t = target or ShrinkTarget()
    hidden = _even(arch.hidden_size, t.hidden_size)
    counts = _counts([g.count for g in arch.layers], t.max_layers)
    groups = tuple(
        LayerGroup(count=count, attention=_attention(g.attention, t), ffn=_ffn(g.ffn, hidden, t))
        for g, count in zip(arch.layers, counts, strict=True)
    )
    # MTP modules keep their count (one or a few) and take the same caps as the decoder layers.
    mtp = tuple(
        LayerGroup(count=g.count, attention=_attention(g.attention, t), ffn=_ffn(g.ffn, hidden, t))
        for g in arch.mtp_layers
    )
    return replace(
        arch, hidden_size=hidden, vocab_size=min(arch.vocab_size, t.vocab_size), layers=groups, mtp_layers=mtp
    )
