"""The attention blocks of the reference kernel: GQA and sliding window, MLA, and gated-DeltaNet linear attention.

Every block takes the rows of all sequences in the pass (``x``, tokens x hidden) and the segments saying which
rows belong to which sequence and its cache; it reads the cache, attends, writes the new tokens into the
cache, and returns the block's output rows. Numerics (all in the model's compute float type):

- Queries attend only to the positions they may see (causal, within the window): one query at a time
  against the keys before it, so the products are exactly the contract's causal pairs and no masked work
  is done.
- Whatever outlives the pass is rounded to its storage dtype when it is produced, and the kernel itself
  computes with the rounded values: keys and values (and MLA latents) as soon as they are projected, the
  convolution's inputs, and the recurrent state after every token. Any token boundary is then a valid place
  to cut a pass in two, which is what makes the cache sufficient to the last bit, not just to storage precision.
- A gated output (``output_gate``) multiplies the attention output by the sigmoid of the gate columns of the
  qkv projection before the output projection.
- Rotary embeddings (NeoX halves, base 10^4) over the largest even number of dims of each rotated head;
  cached keys are stored rotated.
- Linear attention (gated DeltaNet): q, k L2-normalised (q also scaled by dk^-1/2) after a causal
  depthwise convolution and SiLU; decay g = sigmoid(-a) and beta = sigmoid(b) per value head; per token
  S <- g·S; S <- S + k·(beta·(v - S^T k))^T; o = S^T q; the output is gated by SiLU(z).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from prfaas_plan._frozen import frozen
from prfaas_plan.reference.cache import Cache
from prfaas_plan.reference.counter import Counter, Tally
from prfaas_plan.reference.model import LayerWeights, ReferenceModel, linear_channels
from prfaas_plan.reference.storage import FloatArray

ROPE_BASE = 1.0e4  # the usual rotary base (RoFormer); any base is as good for the checks


@frozen
class Segment:
    """Rows ``start:stop`` of the pass are new tokens of the sequence whose cache is ``cache``."""

    start: int
    stop: int
    cache: Cache


def sigmoid(x: FloatArray) -> FloatArray:
    """1 / (1 + e^-x) without overflow."""
    result: FloatArray = 0.5 * (1.0 + np.tanh(0.5 * x))
    return result


def softmax(scores: FloatArray, scale: float, tally: Tally) -> FloatArray:
    """Softmax over the last axis of scale·scores; 5 FLOPs per score (scale, max, exp, sum, divide)."""
    s = scores * scale
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    tally.elementwise(5 * scores.size, calls=6)
    result: FloatArray = e / e.sum(axis=-1, keepdims=True)
    return result


def rope(x: FloatArray, positions: FloatArray, tally: Tally) -> FloatArray:
    """Rotary embedding of ``x`` (tokens, heads, dim) at ``positions``; 3 extra FLOPs per rotated element."""
    half = x.shape[-1] // 2
    if half == 0:
        return x
    inv_freq = ROPE_BASE ** (-np.arange(half) / half)
    angles = positions[:, None] * inv_freq[None, :]
    cos, sin = np.cos(angles)[:, None, :].astype(x.dtype), np.sin(angles)[:, None, :].astype(x.dtype)
    x1, x2 = x[..., :half], x[..., half : 2 * half]
    tally.elementwise(3 * x.shape[0] * x.shape[1] * 2 * half, modelled=False, calls=14)
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin, x[..., 2 * half :]], axis=-1)


def _project(tally: Tally, x: FloatArray, layer: LayerWeights, name: str) -> FloatArray:
    """x @ W for the layer's matrix ``name``: weight read once, input read and output written."""
    weight = layer.mats[name]
    y = tally.matmul(x, weight.value)
    tally.weight(weight.stored)
    tally.activations(x.size + y.size)
    return y


def _positions(segments: list[Segment], dtype: type[np.floating[Any]]) -> FloatArray:
    return np.concatenate([s.cache.length + np.arange(s.stop - s.start, dtype=dtype) for s in segments])


def gqa(
    model: ReferenceModel, layer: LayerWeights, index: int, x: FloatArray, segments: list[Segment], counter: Counter
) -> FloatArray:
    """Full (``gqa``) or sliding-window (``swa``) attention with grouped key/value heads."""
    att, g, kind = layer.attention, layer.group, layer.attention.kind
    heads, kvh, dk, dv = att.heads, att.kv_heads, att.head_dim, att.v_head_dim
    window, group_size, tokens = att.window if kind == "swa" else 0, heads // kvh, len(x)
    codec, compute = model.kv_codec, model.compute
    qkv_tally = counter.at(g, f"{kind}.qkv")
    y = _project(qkv_tally, x, layer, "qkv")
    pos = _positions(segments, compute)
    q = rope(y[:, : heads * dk].reshape(tokens, heads, dk), pos, qkv_tally)
    k = rope(y[:, heads * dk : (heads + kvh) * dk].reshape(tokens, kvh, dk), pos, qkv_tally)
    k_stored, k = codec.round_trip(k, compute)
    v_end = (heads + kvh) * dk + kvh * dv
    v_stored, v = codec.round_trip(y[:, (heads + kvh) * dk : v_end].reshape(tokens, kvh, dv), compute)
    qkv_tally.cache(k_stored, v_stored)  # new tokens' KV written
    core = counter.at(g, f"{kind}.core")
    out = np.empty((tokens, heads, dv), dtype=compute)
    scale = 1.0 / math.sqrt(dk)
    for seg in segments:
        lc = seg.cache.layers[index]
        k_cached, v_cached = lc.rows("k"), lc.rows("v")
        core.cache(k_cached, v_cached)  # the visible cached KV, read once
        c0 = len(k_cached)
        keys = np.concatenate([codec.decode(k_cached, compute), k[seg.start : seg.stop]]).transpose(1, 2, 0)
        values = np.concatenate([codec.decode(v_cached, compute), v[seg.start : seg.stop]]).transpose(1, 0, 2)
        queries = q[seg.start : seg.stop].reshape(-1, kvh, group_size, dk)
        for i in range(seg.stop - seg.start):
            end = c0 + i + 1
            lo = max(0, end - window) if window else 0
            p = softmax(core.matmul(queries[i], keys[:, :, lo:end]), scale, core)
            out[seg.start + i] = core.matmul(p, values[:, lo:end]).reshape(heads, dv)
        lc.append({"k": k_stored[seg.start : seg.stop], "v": v_stored[seg.start : seg.stop]})
    core.activations(tokens * heads * (dk + dv))  # queries in, outputs out
    out_tally = counter.at(g, f"{kind}.out")
    flat = out.reshape(tokens, heads * dv)
    if att.output_gate:
        # Gated output: o * sigmoid(gate), fused into the output projection (about 4 FLOPs per element).
        flat = flat * sigmoid(y[:, v_end:])
        out_tally.elementwise(4 * flat.size, modelled=False, calls=2)
    return _project(out_tally, flat, layer, "o")


def mla(
    model: ReferenceModel,
    layer: LayerWeights,
    index: int,
    x: FloatArray,
    segments: list[Segment],
    counter: Counter,
    *,
    absorbed: bool,
) -> FloatArray:
    """Multi-head latent attention: decompressed (prefill) or absorbed (decode), per ``physics.ops``."""
    att, g, tokens = layer.attention, layer.group, len(x)
    heads, nope, rope_dim, dv, rank = (
        att.heads,
        att.qk_nope_head_dim,
        att.qk_rope_head_dim,
        att.v_head_dim,
        att.kv_lora_rank,
    )
    codec, compute = model.kv_codec, model.compute
    pos = _positions(segments, compute)
    if att.q_lora_rank:
        q = _project(counter.at(g, "mla.q_b"), _project(counter.at(g, "mla.q_a"), x, layer, "q_a"), layer, "q_b")
        q_tally = counter.at(g, "mla.q_b")
    else:
        q_tally = counter.at(g, "mla.q")
        q = _project(q_tally, x, layer, "q")
    q = q.reshape(tokens, heads, nope + rope_dim)
    q_nope, q_rope = q[..., :nope], rope(q[..., nope:], pos, q_tally)
    q = np.concatenate([q_nope, q_rope], axis=-1)
    kv_a = counter.at(g, "mla.kv_a")
    latent_rope = _project(kv_a, x, layer, "kv_a")
    latent_stored, latent = codec.round_trip(latent_rope[:, :rank], compute)
    rope_stored, k_rope = codec.round_trip(rope(latent_rope[:, None, rank:], pos, kv_a)[:, 0], compute)
    kv_a.cache(latent_stored, rope_stored)  # new latents written
    w_kv_b = layer.mats["kv_b"]
    w_split = w_kv_b.value.reshape(rank, heads, nope + dv)
    scale = 1.0 / math.sqrt(nope + rope_dim)
    out = np.empty((tokens, heads, dv), dtype=compute)
    o_latent = np.empty((heads, tokens, rank), dtype=compute)
    core = counter.at(g, "mla.core")
    if absorbed:
        absorb_q = counter.at(g, "mla.absorb_q")
        q_latent = absorb_q.matmul(q_nope.transpose(1, 0, 2), w_split[:, :, :nope].transpose(1, 2, 0))
        absorb_q.activations(q_nope.size + q_latent.size)
        core.weight(w_kv_b.stored)  # both halves of W_kv_b, once
    else:
        kv_b = counter.at(g, "mla.kv_b")
        kv_b.weight(w_kv_b.stored)
    for seg in segments:
        lc = seg.cache.layers[index]
        cached_latent, cached_rope = lc.rows("latent"), lc.rows("rope")
        c0 = len(cached_latent)
        ctx_latent = np.concatenate([codec.decode(cached_latent, compute), latent[seg.start : seg.stop]])
        ctx_rope = np.concatenate([codec.decode(cached_rope, compute), k_rope[seg.start : seg.stop]])
        if absorbed:
            core.cache(cached_latent, cached_rope)
            keys = np.concatenate([ctx_latent, ctx_rope], axis=1).T  # (rank + rope, context)
            for i in range(seg.stop - seg.start):
                row, end = seg.start + i, c0 + i + 1
                query = np.concatenate([q_latent[:, row], q_rope[row]], axis=1)  # (heads, rank + rope)
                p = softmax(core.matmul(query, keys[:, :end]), scale, core)
                o_latent[:, row] = core.matmul(p, ctx_latent[:end])
        else:
            kv_b.cache(cached_latent, cached_rope)  # cached latents read for decompression
            kv = kv_b.matmul(ctx_latent, w_kv_b.value)
            kv_b.activations(ctx_latent.size + kv.size)
            kv = kv.reshape(-1, heads, nope + dv)
            n = len(kv)
            keys = np.concatenate([kv[..., :nope], np.broadcast_to(ctx_rope[:, None, :], (n, heads, rope_dim))], axis=2)
            keys_t, values = keys.transpose(1, 2, 0), kv[..., nope:].transpose(1, 0, 2)
            for i in range(seg.stop - seg.start):
                row, end = seg.start + i, c0 + i + 1
                p = softmax(core.matmul(q[row][:, None, :], keys_t[:, :, :end]), scale, core)
                out[row] = core.matmul(p, values[:, :end])[:, 0]
        lc.append({"latent": latent_stored[seg.start : seg.stop], "rope": rope_stored[seg.start : seg.stop]})
    if absorbed:
        core.activations(tokens * heads * (2 * rank + rope_dim))
        absorb_v = counter.at(g, "mla.absorb_v")
        o = absorb_v.matmul(o_latent, w_split[:, :, nope:].transpose(1, 0, 2))
        absorb_v.activations(o_latent.size + o.size)
        out = o.transpose(1, 0, 2)
    else:
        core.activations(tokens * heads * (nope + rope_dim + dv))
    return _project(counter.at(g, "mla.out"), np.ascontiguousarray(out).reshape(tokens, heads * dv), layer, "o")


def linear(
    model: ReferenceModel, layer: LayerWeights, index: int, x: FloatArray, segments: list[Segment], counter: Counter
) -> FloatArray:
    """Gated-DeltaNet linear attention with a short causal convolution (module docstring)."""
    att, g, tokens, compute = layer.attention, layer.group, len(x), model.compute
    heads, kh, dk, dv, taps = att.heads, att.key_heads, att.key_head_dim, att.value_head_dim, att.conv_kernel
    channels = linear_channels(att)
    y = _project(counter.at(g, "linear.proj"), x, layer, "proj")
    # Convolution over q, k, v; its inputs are held in the conv-state dtype, as the state will hold them.
    conv_tally, conv_w = counter.at(g, "linear.conv"), layer.mats["conv"]
    conv_tally.weight(conv_w.stored)
    _, inputs = model.conv_codec.round_trip(y[:, :channels], compute)
    conv = np.empty((tokens, channels), dtype=compute)
    for seg in segments:
        lc, n = seg.cache.layers[index], seg.stop - seg.start
        conv_tally.cache(lc.states["conv"])
        history = np.concatenate([model.conv_codec.decode(lc.states["conv"], compute), inputs[seg.start : seg.stop]])
        acc = np.zeros((n, channels), dtype=compute)
        for j in range(taps):
            acc += conv_w.value[j] * history[j : j + n]
        conv_tally.elementwise(2 * n * channels * taps, calls=2 * taps + 2)
        conv[seg.start : seg.stop] = acc
        lc.states["conv"] = model.conv_codec.encode(history[len(history) - (taps - 1) :])
        conv_tally.cache(lc.states["conv"])
    conv_tally.activations(2 * tokens * channels)
    conv = conv * sigmoid(conv)
    conv_tally.elementwise(4 * conv.size, modelled=False, calls=5)
    rec = counter.at(g, "linear.recurrence")
    q = conv[:, : kh * dk].reshape(tokens, kh, dk)
    k = conv[:, kh * dk : 2 * kh * dk].reshape(tokens, kh, dk)
    v = conv[:, 2 * kh * dk :].reshape(tokens, heads, dv)
    q = q / np.sqrt(np.sum(q * q, axis=-1, keepdims=True) + 1e-6) / math.sqrt(dk)
    k = k / np.sqrt(np.sum(k * k, axis=-1, keepdims=True) + 1e-6)
    q, k = np.repeat(q, heads // kh, axis=1), np.repeat(k, heads // kh, axis=1)  # key head of each value head
    gates = y[:, channels + heads * dv :]
    decay, beta = sigmoid(-gates[:, :heads]), sigmoid(gates[:, heads:])
    rec.elementwise(4 * 2 * tokens * kh * dk + 6 * tokens * heads, modelled=False, calls=22)  # norms, gates
    o = np.empty((tokens, heads, dv), dtype=compute)
    codec = model.state_codec
    for seg in segments:
        lc = seg.cache.layers[index]
        rec.cache(lc.states["state"])
        state_stored, state = lc.states["state"], codec.decode(lc.states["state"], compute)
        scratch = np.empty_like(state)
        for row in range(seg.start, seg.stop):
            state *= decay[row][:, None, None]
            rec.elementwise(heads * dk * dv)
            predicted = rec.matmul(k[row][:, None, :], state)[:, 0]  # S^T k
            update = beta[row][:, None] * (v[row] - predicted)
            rec.elementwise(2 * heads * dv, modelled=False, calls=2)
            rec.rank1_update(state, k[row], update, scratch)
            state_stored, state = codec.round_trip(state, compute)
            o[row] = rec.matmul(q[row][:, None, :], state)[:, 0]  # S^T q
        lc.states["state"] = state_stored
        rec.cache(state_stored)
    rec.activations(tokens * (2 * kh * dk + 2 * heads * dv))  # q, k, v in; o out
    out_tally = counter.at(g, "linear.out")
    z = y[:, channels : channels + heads * dv]
    gated = o.reshape(tokens, heads * dv) * (z * sigmoid(z))
    out_tally.elementwise(4 * gated.size, modelled=False, calls=6)
    return _project(out_tally, gated, layer, "o")
