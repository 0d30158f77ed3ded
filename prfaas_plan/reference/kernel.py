"""The reference forward pass: prefill of l tokens after c cached ones, and decode steps, for any model card.

One pass: embedding rows -> per decoder layer [RMSNorm -> attention (``reference.attention``) -> residual
add -> RMSNorm -> FFN -> residual add] -> final RMSNorm and LM head on the last token of each sequence.
FFNs are gated (SiLU(x W_g) ⊙ x W_u) W_d; MoE layers route each token to the ``active_experts`` experts
with the largest router softmax (ties to the lower index), weight them by their renormalised
probabilities, and add the shared experts (one gated FFN ``shared_experts x shared_intermediate`` wide).

Prefill decompresses MLA latents; decode steps use the absorbed form (``physics.ops``). Caches are updated
in place and returned (``reference.cache``). Every product and byte is tallied in a ``Counter``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from prfaas_plan.reference import attention
from prfaas_plan.reference.cache import Cache, LayerCache
from prfaas_plan.reference.counter import Counter, Tally
from prfaas_plan.reference.model import LayerWeights, ReferenceModel, Weight, linear_channels
from prfaas_plan.reference.storage import FloatArray

NORM_EPS = 1e-6


def empty_cache(model: ReferenceModel) -> Cache:
    """The cache of a sequence with no tokens: no rows, zero linear-attention states."""
    layers = []
    kv, state, conv = model.kv_codec, model.state_codec, model.conv_codec
    for layer in model.layers:
        att = layer.attention
        if att.kind in ("gqa", "swa"):
            rows = {
                "k": kv.encode(np.zeros((0, att.kv_heads, att.head_dim))),
                "v": kv.encode(np.zeros((0, att.kv_heads, att.v_head_dim))),
            }
            layers.append(
                LayerCache(kind=att.kind, rows=rows, states={}, window=att.window if att.kind == "swa" else 0)
            )
        elif att.kind == "mla":
            rows = {
                "latent": kv.encode(np.zeros((0, att.kv_lora_rank))),
                "rope": kv.encode(np.zeros((0, att.qk_rope_head_dim))),
            }
            layers.append(LayerCache(kind="mla", rows=rows, states={}))
        else:
            states = {
                "state": state.encode(np.zeros((att.heads, att.key_head_dim, att.value_head_dim))),
                "conv": conv.encode(np.zeros((att.conv_kernel - 1, linear_channels(att)))),
            }
            layers.append(LayerCache(kind="linear", rows={}, states=states))
    return Cache(layers)


def rmsnorm(x: FloatArray, gain: Weight, tally: Tally, *, moves_activations: bool = True) -> FloatArray:
    """x / rms(x) · gain: 4 FLOPs per element, the gain read once, x read and the result written."""
    out: FloatArray = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + NORM_EPS) * gain.value
    tally.elementwise(4 * x.size, calls=6)
    tally.weight(gain.stored)
    if moves_activations:
        tally.activations(2 * x.size)
    return out


def silu_gate(gate: FloatArray, up: FloatArray, tally: Tally) -> FloatArray:
    """SiLU(gate) ⊙ up: 4 FLOPs per element (exp, add, multiply, divide)."""
    act: FloatArray = gate * up * attention.sigmoid(gate)
    tally.elementwise(4 * act.size, calls=6)
    return act


def _gated_ffn(x: FloatArray, gate_up: Weight, down: Weight, tally: Tally) -> FloatArray:
    """(SiLU(x W_g) ⊙ x W_u) W_d: two products (reads its input, writes its output each), 4 FLOPs per
    intermediate element for SiLU·gate (exp, add, multiply, divide)."""
    gu = tally.matmul(x, gate_up.value)
    width = gu.shape[1] // 2
    act = silu_gate(gu[:, :width], gu[:, width:], tally)
    y = tally.matmul(act, down.value)
    tally.weight(gate_up.stored, down.stored)
    tally.activations(x.size + gu.size + act.size + y.size)
    return y


def moe_block(x: FloatArray, layer: LayerWeights, counter: Counter) -> FloatArray:
    """One MoE layer's FFN on rows ``x``: router softmax, top-k routing (recorded in the ``moe.experts`` tally),
    the touched experts, and the shared experts."""
    ffn, g = layer.ffn, layer.group
    router_tally, router = counter.at(g, "moe.router"), layer.mats["router"]
    logits = router_tally.matmul(x, router.value.T)
    router_tally.weight(router.stored)
    router_tally.activations(x.size + logits.size)
    exp = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs = exp / exp.sum(axis=1, keepdims=True)
    router_tally.elementwise(3 * logits.size, calls=5)  # exp of the shifted logit, sum, divide
    top = np.argsort(-probs, axis=1, kind="stable")[:, : ffn.active_experts]
    weights = np.take_along_axis(probs, top, axis=1)
    weights = weights / weights.sum(axis=1, keepdims=True)
    router_tally.elementwise(2 * weights.size, modelled=False, calls=4)
    experts = counter.at(g, "moe.experts")
    out = np.zeros_like(x)
    touched = np.unique(top)
    experts.experts_touched += len(touched)
    experts.route(top, ffn.experts)
    for expert in touched:
        rows, slot = np.nonzero(top == expert)  # a token routes to an expert at most once
        gate_up, down = layer.experts[expert]
        out[rows] += weights[rows, slot][:, None] * _gated_ffn(x[rows], gate_up, down, experts)
        experts.elementwise(2 * len(rows) * x.shape[1], modelled=False, calls=5)
    if ffn.shared_experts:
        shared = counter.at(g, "moe.shared")
        out += _gated_ffn(x, layer.mats["shared_gate_up"], layer.mats["shared_down"], shared)
        shared.elementwise(x.size, modelled=False)
    return out


def forward(
    model: ReferenceModel,
    caches: Sequence[Cache],
    tokens: Sequence[NDArray[np.integer[Any]]],
    counter: Counter,
    *,
    absorbed: bool,
) -> FloatArray:
    """One pass over the new ``tokens`` of each sequence (after its ``cache``); logits of each sequence's last
    token, (sequences, vocab). Caches are updated in place; ``absorbed`` selects MLA's decode form."""
    arch = model.arch
    if len(caches) != len(tokens) or not tokens or any(len(t) == 0 for t in tokens):
        raise ValueError("give one non-empty token array per cache")
    ids = np.concatenate([np.asarray(t, dtype=np.intp) for t in tokens])
    if ids.min() < 0 or ids.max() >= arch.vocab_size:
        raise ValueError(f"token ids must lie in [0, {arch.vocab_size})")
    segments, start = [], 0
    for cache, t in zip(caches, tokens, strict=True):
        segments.append(attention.Segment(start=start, stop=start + len(t), cache=cache))
        start += len(t)
    embed = counter.at(None, "embed")
    x = model.embed.value[ids]
    embed.weight_bytes(len(ids) * model.embed.stored[0].nbytes)  # one row gathered per token
    embed.activations(x.size)
    for index, layer in enumerate(model.layers):
        norm = counter.at(layer.group, "norm")
        h = rmsnorm(x, layer.norm_attention, norm)
        kind = layer.attention.kind
        if kind in ("gqa", "swa"):
            a = attention.gqa(model, layer, index, h, segments, counter)
        elif kind == "mla":
            a = attention.mla(model, layer, index, h, segments, counter, absorbed=absorbed)
        else:
            a = attention.linear(model, layer, index, h, segments, counter)
        x = x + a
        h = rmsnorm(x, layer.norm_ffn, norm)
        if layer.ffn.kind == "dense":
            f = _gated_ffn(h, layer.mats["gate_up"], layer.mats["down"], counter.at(layer.group, "ffn.dense"))
        else:
            f = moe_block(h, layer, counter)
        x = x + f
        norm.elementwise(2 * x.size, modelled=False, calls=2)  # the two residual adds
    head = counter.at(None, "lm_head")
    last = rmsnorm(x[[s.stop - 1 for s in segments]], model.final_norm, head, moves_activations=False)
    logits = head.matmul(model.lm_head.value, last.T).T  # W x: a matrix-vector product when one sequence
    head.weight(model.lm_head.stored)
    head.activations(last.size + logits.size)
    for cache, t in zip(caches, tokens, strict=True):
        cache.length += len(t)
    return logits


def prefill(
    model: ReferenceModel,
    tokens: NDArray[np.integer[Any]],
    cache: Cache | None = None,
    *,
    counter: Counter | None = None,
) -> tuple[FloatArray, Cache]:
    """Prefill ``tokens`` after those already in ``cache`` (none by default): the last token's logits
    (vocab,) and the cache, updated in place (a new one when none was given)."""
    cache = empty_cache(model) if cache is None else cache
    logits = forward(model, [cache], [tokens], counter if counter is not None else Counter(), absorbed=False)
    return logits[0], cache


def decode(
    model: ReferenceModel,
    caches: Sequence[Cache],
    tokens: Sequence[int],
    *,
    counter: Counter | None = None,
) -> FloatArray:
    """One decode step: token ``tokens[i]`` after ``caches[i]`` for each sequence; logits (batch, vocab).
    The caches are updated in place."""
    if len({id(c) for c in caches}) != len(caches):
        raise ValueError("each sequence of a decode batch needs its own cache")
    singles = [np.array([t], dtype=np.intp) for t in tokens]
    return forward(model, caches, singles, counter if counter is not None else Counter(), absorbed=True)
