"""Bytes a model holds: weights, the KV cache that grows with length, fixed per-request state, and what
crosses the link for a request.

Formulas (per layer kind; the dimensions are the Hugging Face config fields of the model cards):

- GQA layer, per token: kv_heads · (head_dim + v_head_dim) · kv bytes.
- MLA layer, per token: (kv_lora_rank + qk_rope_head_dim) · kv bytes (the compressed latent and the
  decoupled RoPE key are what vLLM and SGLang cache).
- Sliding-window layer: min(length, window) tokens of GQA-shaped KV: fixed once length >= window.
- Weights: the main model's parameters plus those of the multi-token-prediction modules, each group in its
  storage dtype (routed experts, embeddings and LM head, the rest).
- Linear-attention layer: heads · key_head_dim · value_head_dim recurrent state (state dtype) plus
  (conv_kernel - 1) past inputs of the q, k, v channels, 2·key_heads·key_head_dim + heads·value_head_dim,
  in the conv-state dtype.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from prfaas_plan.spec.model import Architecture, Attention, Ffn


def _gqa_token_bytes(att: Attention, kv_bytes: float) -> float:
    return att.kv_heads * (att.head_dim + att.v_head_dim) * kv_bytes


def kv_bytes_per_token(arch: Architecture) -> float:
    """Bytes of KV cache added per token by the layers whose cache grows with length (GQA and MLA)."""
    kvb = arch.dtypes.bytes_of("kv_cache")
    total = 0.0
    for group in arch.layers:
        att = group.attention
        if att.kind == "gqa":
            total += group.count * _gqa_token_bytes(att, kvb)
        elif att.kind == "mla":
            total += group.count * (att.kv_lora_rank + att.qk_rope_head_dim) * kvb
    return total


def linear_state_bytes(arch: Architecture) -> float:
    """Recurrent plus convolution state of all linear-attention layers, per request (length-independent)."""
    total = 0.0
    for group in arch.layers:
        att = group.attention
        if att.kind == "linear":
            channels = 2 * att.key_heads * att.key_head_dim + att.heads * att.value_head_dim
            state = att.heads * att.key_head_dim * att.value_head_dim * arch.dtypes.bytes_of("state")
            conv = channels * (att.conv_kernel - 1) * arch.dtypes.bytes_of("conv_state")
            total += group.count * (state + conv)
    return total


def window_bytes(arch: Architecture, length_tokens: ArrayLike) -> NDArray[np.float64]:
    """Sliding-window KV held for a sequence of ``length_tokens``: min(length, window) tokens per SWA layer."""
    length = np.asarray(length_tokens, dtype=np.float64)
    kvb = arch.dtypes.bytes_of("kv_cache")
    total = np.zeros_like(length)
    for group in arch.layers:
        att = group.attention
        if att.kind == "swa":
            total = total + group.count * np.minimum(length, att.window) * _gqa_token_bytes(att, kvb)
    return total


def cache_bytes(arch: Architecture, length_tokens: ArrayLike) -> NDArray[np.float64]:
    """Everything a request of ``length_tokens`` leaves in the cache: growing KV + SWA windows + linear state."""
    length = np.asarray(length_tokens, dtype=np.float64)
    return kv_bytes_per_token(arch) * length + window_bytes(arch, length) + linear_state_bytes(arch)


def transfer_bytes(arch: Architecture, cached_tokens: ArrayLike, new_tokens: ArrayLike) -> NDArray[np.float64]:
    """Bytes that cross the link for a request with c cached and l new tokens: the incremental KV of the
    growing layers (l tokens), the SWA windows as they stand after c + l tokens, and the linear states.

    The decode side is assumed to hold (or fetch from its own prefix cache) the KV of the c cached tokens.
    """
    cached = np.asarray(cached_tokens, dtype=np.float64)
    new = np.asarray(new_tokens, dtype=np.float64)
    return kv_bytes_per_token(arch) * new + window_bytes(arch, cached + new) + linear_state_bytes(arch)


def _attention_params(att: Attention, h: int) -> float:
    if att.kind in ("gqa", "swa"):
        gate = att.heads * att.v_head_dim if att.output_gate else 0
        return h * (att.heads * att.head_dim + att.kv_heads * (att.head_dim + att.v_head_dim) + gate) + (
            att.heads * att.v_head_dim * h
        )
    if att.kind == "mla":
        qk = att.qk_nope_head_dim + att.qk_rope_head_dim
        q = h * att.q_lora_rank + att.q_lora_rank * att.heads * qk if att.q_lora_rank else h * att.heads * qk
        kv = h * (att.kv_lora_rank + att.qk_rope_head_dim) + att.kv_lora_rank * att.heads * (
            att.qk_nope_head_dim + att.v_head_dim
        )
        return q + kv + att.heads * att.v_head_dim * h
    channels = 2 * att.key_heads * att.key_head_dim + att.heads * att.value_head_dim
    proj = h * (2 * att.key_heads * att.key_head_dim + 2 * att.heads * att.value_head_dim + 2 * att.heads)
    return proj + channels * att.conv_kernel + att.heads * att.value_head_dim * h


def _ffn_params(ffn: Ffn, h: int, *, active: bool) -> float:
    if ffn.kind == "dense":
        return 3.0 * h * ffn.intermediate
    experts = ffn.active_experts if active else ffn.experts
    return (
        h * ffn.experts
        + experts * 3.0 * h * ffn.expert_intermediate
        + (ffn.shared_experts * 3.0 * h * ffn.shared_intermediate)
    )


def mtp_parameter_count(arch: Architecture) -> float:
    """Parameters of the multi-token-prediction modules: per module one decoder layer, the 2h -> h projection
    and three norms (``spec.model.Architecture``; the embedding and LM head are shared, not counted again)."""
    h = arch.hidden_size
    return float(
        sum(
            group.count
            * (
                _attention_params(group.attention, h)
                + _ffn_params(group.ffn, h, active=False)
                + 2 * h
                + 2 * h * h
                + 3 * h
            )
            for group in arch.mtp_layers
        )
    )


def parameter_count(arch: Architecture, *, active: bool = False) -> float:
    """Parameters of the main model (all, or those active for one token) including embeddings, norms and the
    LM head; the MTP modules are counted apart (``mtp_parameter_count``)."""
    h = arch.hidden_size
    total = float(arch.vocab_size * h * (1 if arch.tie_embeddings else 2) + h)
    for group in arch.layers:
        total += group.count * (
            _attention_params(group.attention, h) + _ffn_params(group.ffn, h, active=active) + 2 * h
        )
    return float(total)


def expert_parameter_count(arch: Architecture) -> float:
    """Parameters of the routed experts (all of them, the MTP modules' included), stored in ``dtypes.experts``."""
    return float(
        sum(
            group.count * group.ffn.experts * 3.0 * arch.hidden_size * group.ffn.expert_intermediate
            for group in (*arch.layers, *arch.mtp_layers)
            if group.ffn.kind == "moe"
        )
    )


def embedding_parameter_count(arch: Architecture) -> float:
    """Parameters of the embedding table and the LM head (one table when tied), stored in ``dtypes.embeddings``."""
    return float(arch.vocab_size * arch.hidden_size * (1 if arch.tie_embeddings else 2))


def weight_bytes(arch: Architecture) -> float:
    """Bytes of all weights, the MTP modules' included: routed experts in the experts dtype, embeddings and LM
    head in the embeddings dtype, the rest in the weights dtype."""
    experts, embeddings = expert_parameter_count(arch), embedding_parameter_count(arch)
    rest = parameter_count(arch) + mtp_parameter_count(arch) - experts - embeddings
    dt = arch.dtypes
    return experts * dt.bytes_of("experts") + embeddings * dt.bytes_of("embeddings") + rest * dt.bytes_of("weights")
