"""FLOPs and bytes of a forward pass, operation by operation, from a model card (the counting contract).

These counts are what the roofline prices and what the reference kernel (``prfaas_plan/reference``) must
reproduce exactly. Conventions:

- A matrix product (m x k) @ (k x n) costs 2·m·k·n FLOPs ("matmul"). Element-wise work (norms, activations,
  gates, the recurrent state's decay, the short convolution, softmax) is counted separately ("elementwise")
  and not priced as tensor-core work.
- Bytes: a matmul reads its weight once (k·n·weight bytes) and reads its input and writes its output in the
  activation dtype (bf16). Cache traffic (KV written for new tokens, cached KV read, recurrent and conv
  state read and written) is counted in the operation that touches it.
- A gated attention output (``output_gate``) widens the qkv projection by heads·v_head_dim; its sigmoid and
  product are element-wise work the contract does not model (as the linear layers' gates).
- Prefill of ``l`` new tokens after ``c`` cached ones, causal: new token i (1..l) attends to c + i positions
  (at most ``window`` for sliding-window layers). The LM head runs on the last token only.
- MLA: prefill decompresses the latents of all c + l tokens (W_kv_b) and attends head by head; a decode
  step uses the absorbed form (queries projected into the latent space, attention over the c + 1 latents).
- Linear attention (gated-DeltaNet form): projections q, k (key_heads·key_head_dim each), v and an output
  gate z (heads·value_head_dim each), decay and beta gates (heads each), a depthwise causal convolution of
  ``conv_kernel`` taps over the q, k, v channels, and per token and value head the delta-rule recurrence
  S <- g·S + k·(beta·(v - S^T k))^T, o = S^T q: three products of 2·dk·dv FLOPs (S^T k, the rank-1
  update, S^T q) plus dk·dv element-wise for the decay.
- ``rows``: the row count (m) of an operation's GEMMs, for shape-dependent efficiency: the tokens of a
  projection, the mean tokens per touched expert of the routed experts (infinite for attention cores and
  element-wise work, which the shape curve does not apply to).
- ``context``: an attention core's mean keys per query, causal pairs / query tokens (infinite for every
  other operation, and for the linear recurrence, whose work per token does not depend on the context).
- ``routing``: the routed experts' tokens, expert count and top-k, for the load-imbalance model
  (``physics.moe_load``); None for every other operation.
- Weight dtypes by group: routed experts are stored in ``dtypes.experts``, the embedding table and LM head
  in ``dtypes.embeddings``, everything else (attention, router, shared experts, dense FFNs, norms) in
  ``dtypes.weights``.
- MoE: a router matmul, ``active_experts`` routed experts per token and the shared experts, each a gated
  FFN (3 matrices). Weight bytes count each *touched* expert once; the expected number of distinct experts
  touched by n tokens is E·(1 - (1 - k/E)^n) unless the caller knows it.

All functions are vectorised over the token counts (numpy broadcasting) so a search can price every length
of a grid at once.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.spec.model import Architecture, Attention, Ffn

Array = NDArray[np.float64]
ACTIVATION_BYTES = 2.0  # activations flow in bf16 (vLLM/SGLang default for bf16 and fp8 checkpoints)


@frozen
class Routing:
    """What a routed-experts operation routes: ``tokens`` tokens (per layer) to ``active`` of ``experts``."""

    tokens: Array
    experts: int
    active: int


@frozen
class Op:
    """One priced operation of a forward pass (summed over the layers of a group)."""

    name: str
    matmul_flops: Array
    elementwise_flops: Array
    weight_bytes: Array
    activation_bytes: Array
    cache_bytes: Array
    rows: Array | float = math.inf  # rows (m) of each of its GEMMs: tokens, or tokens per touched expert
    context: Array | float = math.inf  # attention cores: mean keys attended per query (pairs / queries)
    routing: Routing | None = None  # routed experts: what the load-imbalance model needs
    #: KV heads its cache reads shard over under tensor parallelism (GQA/SWA: kv_heads; MLA: 1, the latent is
    #: one head): on more GPUs than that every GPU reads its heads' whole cache (``roofline.memory_bytes``).
    cache_heads: float = math.inf

    @property
    def bytes(self) -> Array:
        """All bytes moved to or from memory by the operation."""
        return self.weight_bytes + self.activation_bytes + self.cache_bytes


def _a(x: ArrayLike) -> Array:
    return np.asarray(x, dtype=np.float64)


def _matmul(
    name: str,
    tokens: Array,
    k: float,
    n: float,
    w_bytes: float,
    count: int,
    extra_ew: Array | float = 0.0,
    cache: Array | float = 0.0,
) -> Op:
    """``count`` layers of a (tokens x k) @ (k x n) product with its weight read once per layer."""
    return Op(
        name=name,
        matmul_flops=count * 2.0 * tokens * k * n,
        elementwise_flops=count * _a(extra_ew) + 0 * tokens,
        weight_bytes=count * k * n * w_bytes + 0 * tokens,
        activation_bytes=count * tokens * (k + n) * ACTIVATION_BYTES,
        cache_bytes=count * _a(cache) + 0 * tokens,
        rows=tokens,
    )


def causal_pairs(cached: ArrayLike, new: ArrayLike, window: int = 0) -> Array:
    """Sum over new tokens i = 1..l of the positions token i attends to: min(c + i, window) or c + i.

    Without a window: l·c + l(l+1)/2. With one: the same sum with every term capped at ``window``.
    """
    c, n = _a(cached), _a(new)
    full = n * c + n * (n + 1) / 2
    if window <= 0:
        return full
    # Terms c+1 .. c+n; those above the window contribute `window` each.
    below_cap = np.clip(window - c, 0, n)  # how many terms are still below the cap
    return below_cap * c + below_cap * (below_cap + 1) / 2 + (n - below_cap) * window


def _per_query(pairs: Array, tokens: Array) -> Array:
    """Mean keys per query, pairs / tokens (infinite where there are no queries)."""
    return np.asarray(np.where(tokens > 0, pairs / np.maximum(tokens, 1e-300), math.inf), dtype=np.float64)


def expected_experts_touched(experts: int, active: int, tokens: ArrayLike) -> Array:
    """E·(1 - (1 - k/E)^n): expected distinct experts hit by n tokens routing uniformly to k of E each."""
    n = _a(tokens)
    return experts * (1.0 - (1.0 - active / experts) ** n)


def _attention_ops(
    att: Attention, h: int, count: int, arch: Architecture, tokens: Array, cached: Array, *, decode: bool, batch: Array
) -> list[Op]:
    """Operations of ``count`` attention layers for ``tokens`` new tokens (``batch`` sequences, each with
    ``cached`` tokens in cache; prefill has batch 1 and tokens = l, a decode step tokens = batch)."""
    wb = arch.dtypes.bytes_of("weights")
    kvb = arch.dtypes.bytes_of("kv_cache")
    per_seq_new = tokens / batch
    ops: list[Op] = []
    if att.kind in ("gqa", "swa"):
        dk, dv, heads, kvh = att.head_dim, att.v_head_dim, att.heads, att.kv_heads
        window = att.window if att.kind == "swa" else 0
        pairs = batch * causal_pairs(cached, per_seq_new, window)
        visible_cached = np.minimum(cached, window) if window else cached
        kv_read = batch * visible_cached * kvh * (dk + dv) * kvb
        kv_write = tokens * kvh * (dk + dv) * kvb
        gate = heads * dv if att.output_gate else 0  # the output gate rides in the query projection
        ops.append(
            _matmul(f"{att.kind}.qkv", tokens, h, heads * dk + kvh * (dk + dv) + gate, wb, count, cache=kv_write)
        )
        ops.append(
            Op(
                name=f"{att.kind}.core",
                matmul_flops=count * 2.0 * heads * (dk + dv) * pairs,
                elementwise_flops=count * 5.0 * heads * pairs,  # scale, mask, max, exp, sum per score
                weight_bytes=0 * tokens,
                activation_bytes=count * tokens * (heads * (dk + dv)) * ACTIVATION_BYTES,
                cache_bytes=count * kv_read,
                context=_per_query(pairs, tokens),
                cache_heads=float(kvh),
            )
        )
        ops.append(_matmul(f"{att.kind}.out", tokens, heads * dv, h, wb, count))
    elif att.kind == "mla":
        heads, nope, rope, dv, rank = (
            att.heads,
            att.qk_nope_head_dim,
            att.qk_rope_head_dim,
            att.v_head_dim,
            att.kv_lora_rank,
        )
        latent = (rank + rope) * kvb
        if att.q_lora_rank:
            ops.append(_matmul("mla.q_a", tokens, h, att.q_lora_rank, wb, count))
            ops.append(_matmul("mla.q_b", tokens, att.q_lora_rank, heads * (nope + rope), wb, count))
        else:
            ops.append(_matmul("mla.q", tokens, h, heads * (nope + rope), wb, count))
        ops.append(_matmul("mla.kv_a", tokens, h, rank + rope, wb, count, cache=tokens * latent))
        pairs = batch * causal_pairs(cached, per_seq_new)
        context = batch * (cached + per_seq_new)
        if not decode:
            # Decompress every latent in context, then attend per head.
            ops.append(
                _matmul("mla.kv_b", context, rank, heads * (nope + dv), wb, count, cache=batch * cached * latent)
            )
            ops.append(
                Op(
                    name="mla.core",
                    matmul_flops=count * 2.0 * heads * (nope + rope + dv) * pairs,
                    elementwise_flops=count * 5.0 * heads * pairs,
                    weight_bytes=0 * tokens,
                    activation_bytes=count * tokens * heads * (nope + rope + dv) * ACTIVATION_BYTES,
                    cache_bytes=0 * tokens,
                    context=_per_query(pairs, tokens),
                )
            )
        else:
            # Absorbed: q_nope -> latent via W_kv_b's key half, attend over latents, values back through its
            # value half. Both halves of W_kv_b are read once.
            ops.append(_matmul("mla.absorb_q", tokens, nope, rank, 0.0, count * heads))
            ops.append(
                Op(
                    name="mla.core",
                    matmul_flops=count * 2.0 * heads * (rank + rope + rank) * pairs,
                    elementwise_flops=count * 5.0 * heads * pairs,
                    weight_bytes=count * rank * heads * (nope + dv) * wb + 0 * tokens,
                    activation_bytes=count * tokens * heads * (rank + rope + rank) * ACTIVATION_BYTES,
                    cache_bytes=count * batch * cached * latent,
                    context=_per_query(pairs, tokens),
                    cache_heads=1.0,
                )
            )
            ops.append(_matmul("mla.absorb_v", tokens, rank, dv, 0.0, count * heads))
        ops.append(_matmul("mla.out", tokens, heads * dv, h, wb, count))
    elif att.kind == "linear":
        heads, kh, dk, dv = att.heads, att.key_heads, att.key_head_dim, att.value_head_dim
        channels = 2 * kh * dk + heads * dv
        state = heads * dk * dv * arch.dtypes.bytes_of("state")
        conv_state = channels * (att.conv_kernel - 1) * arch.dtypes.bytes_of("conv_state")
        proj_out = 2 * kh * dk + 2 * heads * dv + 2 * heads  # q, k, v, z, decay, beta
        ops.append(_matmul("linear.proj", tokens, h, proj_out, wb, count))
        ops.append(
            Op(
                name="linear.conv",
                matmul_flops=0 * tokens,
                elementwise_flops=count * 2.0 * tokens * channels * att.conv_kernel,
                weight_bytes=count * channels * att.conv_kernel * wb + 0 * tokens,
                activation_bytes=count * 2.0 * tokens * channels * ACTIVATION_BYTES,
                cache_bytes=count * 2.0 * batch * conv_state + 0 * tokens,
            )
        )
        ops.append(
            Op(
                name="linear.recurrence",
                matmul_flops=count * 6.0 * tokens * heads * dk * dv,
                elementwise_flops=count * tokens * heads * dk * dv,
                weight_bytes=0 * tokens,
                activation_bytes=count * tokens * (2 * kh * dk + 2 * heads * dv) * ACTIVATION_BYTES,
                cache_bytes=count * 2.0 * batch * state + 0 * tokens,
            )
        )
        ops.append(_matmul("linear.out", tokens, heads * dv, h, wb, count))
    return ops


def _gated_ffn(name: str, tokens: Array, h: int, intermediate: int, w_bytes: float, count: int) -> Op:
    """A gated FFN: (h -> 2I) gate and up, element-wise SiLU·mul, then (I -> h) down. Priced as one op whose
    activations are both products' inputs and outputs: h + 2I, then I + h per token."""
    op = _matmul(name, tokens, h, 3 * intermediate, w_bytes, count, extra_ew=4.0 * tokens * intermediate)
    return replace(op, activation_bytes=op.activation_bytes + count * tokens * h * ACTIVATION_BYTES)


def _ffn_ops(
    ffn: Ffn, h: int, count: int, arch: Architecture, tokens: Array, experts_touched: Array | None
) -> list[Op]:
    wb = arch.dtypes.bytes_of("weights")
    if ffn.kind == "dense":
        return [_gated_ffn("ffn.dense", tokens, h, ffn.intermediate, wb, count)]
    touched = (
        experts_touched
        if experts_touched is not None
        else expected_experts_touched(ffn.experts, ffn.active_experts, tokens)
    )
    routed = tokens * ffn.active_experts
    ops = [
        _matmul("moe.router", tokens, h, ffn.experts, wb, count, extra_ew=3.0 * tokens * ffn.experts),
        Op(
            name="moe.experts",
            matmul_flops=count * 2.0 * routed * h * 3 * ffn.expert_intermediate,
            elementwise_flops=count * 4.0 * routed * ffn.expert_intermediate,
            weight_bytes=count * touched * h * 3 * ffn.expert_intermediate * arch.dtypes.bytes_of("experts"),
            activation_bytes=count * routed * (h + 3 * ffn.expert_intermediate + h) * ACTIVATION_BYTES,
            cache_bytes=0 * tokens,
            rows=np.where(touched > 0, routed / np.maximum(touched, 1e-300), math.inf),
            routing=Routing(
                tokens=np.asarray(tokens, dtype=np.float64), experts=ffn.experts, active=ffn.active_experts
            ),
        ),
    ]
    if ffn.shared_experts:
        width = ffn.shared_experts * ffn.shared_intermediate
        ops.append(_gated_ffn("moe.shared", tokens, h, width, wb, count))
    return ops


def forward_ops(
    arch: Architecture,
    *,
    cached: ArrayLike,
    new: ArrayLike,
    batch: ArrayLike = 1,
    decode: bool = False,
    experts_touched: ArrayLike | None = None,
) -> list[Op]:
    """All operations of one forward pass.

    Prefill: ``batch`` = 1 sequence with ``cached`` tokens in cache and ``new`` tokens to process; the LM
    head runs on the last token. Decode step: ``batch`` sequences, each with ``cached`` tokens in cache and
    one new token (``new`` = 1); the LM head runs on every sequence. Vectorised over ``cached``/``new``.
    """
    b = _a(batch)
    c = _a(cached)
    tokens = b * _a(new)
    h = arch.hidden_size
    touched = None if experts_touched is None else _a(experts_touched)
    ops: list[Op] = [
        Op(
            name="embed",
            matmul_flops=0 * tokens,
            elementwise_flops=0 * tokens,
            weight_bytes=tokens * h * arch.dtypes.bytes_of("embeddings"),  # one row gathered per token
            activation_bytes=tokens * h * ACTIVATION_BYTES,
            cache_bytes=0 * tokens,
        )
    ]
    for group in arch.layers:
        norms = Op(
            name="norm",
            matmul_flops=0 * tokens,
            elementwise_flops=group.count * 2 * 4.0 * tokens * h,  # two RMSNorms per layer, ~4 FLOPs/element
            weight_bytes=group.count * 2.0 * h * arch.dtypes.bytes_of("weights") + 0 * tokens,
            activation_bytes=group.count * 2 * 2.0 * tokens * h * ACTIVATION_BYTES,
            cache_bytes=0 * tokens,
        )
        ops.append(norms)
        ops += _attention_ops(group.attention, h, group.count, arch, tokens, c, decode=decode, batch=b)
        ops += _ffn_ops(group.ffn, h, group.count, arch, tokens, touched)
    head_tokens = b  # last token of each sequence
    head = _matmul(
        "lm_head",
        head_tokens,
        h,
        arch.vocab_size,
        arch.dtypes.bytes_of("embeddings"),
        1,
        extra_ew=4.0 * head_tokens * h,
    )
    # The final RMSNorm's gain is read with the head (parameter_count counts it).
    ops.append(replace(head, weight_bytes=head.weight_bytes + h * arch.dtypes.bytes_of("weights")))
    return ops


#: Operations that run as two GEMMs (a gated FFN: the fused gate-up projection, then the down projection).
_TWO_GEMMS = frozenset({"ffn.dense", "moe.shared", "moe.experts"})


def matmul_kernels(arch: Architecture) -> float:
    """Matrix-multiply kernels one decode step launches over all layers: per layer each projection and attention
    core one, a gated FFN (dense, shared or routed experts) two (fused gate-up, then down), plus the LM head.
    What an engine's per-kernel cost (``RooflineParams.decode_op_overhead_s``) multiplies: a dense GQA layer has
    5, an MLA layer with routed and shared experts 12."""
    one = np.asarray([1.0])
    count = 0.0
    for group in arch.layers:
        ops = _attention_ops(group.attention, arch.hidden_size, 1, arch, one, one, decode=True, batch=one)
        ops += _ffn_ops(group.ffn, arch.hidden_size, 1, arch, one, None)
        per_layer = sum(2 if op.name in _TWO_GEMMS else 1 for op in ops if float(np.max(op.matmul_flops)) > 0)
        count += group.count * per_layer
    return count + 1.0


def total(ops: list[Op], field: str) -> Array:
    """Sum one field (``matmul_flops``, ``elementwise_flops``, ``bytes``, ...) over operations."""
    return np.asarray(np.sum(np.broadcast_arrays(*(getattr(op, field) for op in ops)), axis=0), dtype=np.float64)
