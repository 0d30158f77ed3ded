"""What a model's architecture is: layers by type, FFN, vocabulary and dtypes (a model card).

Only what the physics needs: shapes and dtypes. Counting (bytes, FLOPs) lives in ``physics/``.
Attention kinds:

- ``gqa``: full causal attention, ``heads`` query heads sharing ``kv_heads`` key/value heads. With
  ``output_gate`` (Qwen3-Next, Qwen3.5: ``attn_output_gate``) the query projection also produces a gate of
  ``heads x v_head_dim`` and the attention output is multiplied by its sigmoid before the output projection.
- ``mla``: multi-head latent attention; the cache holds the compressed latent (``kv_lora_rank``) plus the
  decoupled RoPE key (``qk_rope_head_dim``) per token.
- ``swa``: sliding-window attention (GQA shapes) over the last ``window`` tokens; its cache stops growing
  at the window.
- ``linear``: linear attention with a recurrent matrix state per value head (``key_head_dim`` x
  ``value_head_dim``) and a short causal convolution over q, k and v (gated DeltaNet, KDA, Lightning).
"""

from __future__ import annotations

from prfaas_plan._frozen import frozen

DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "fp4": 0.5, "int4": 0.5}
ATTENTION_KINDS = ("gqa", "mla", "swa", "linear")
FFN_KINDS = ("dense", "moe")


@frozen
class Attention:
    """One attention block's shapes. Fields not used by ``kind`` are zero."""

    kind: str
    heads: int
    # gqa / swa
    kv_heads: int = 0
    head_dim: int = 0
    v_head_dim: int = 0
    window: int = 0
    output_gate: bool = False
    # mla
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    # linear
    key_heads: int = 0
    key_head_dim: int = 0
    value_head_dim: int = 0
    conv_kernel: int = 0

    @property
    def grows_with_length(self) -> bool:
        """Whether this layer's cache grows with every token (full attention and MLA)."""
        return self.kind in ("gqa", "mla")

    @property
    def qk_head_dim(self) -> int:
        """Query/key width per head: head_dim (GQA/SWA) or nope + rope (MLA)."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim if self.kind == "mla" else self.head_dim


@frozen
class Ffn:
    """A feed-forward block: dense (gated, 3 matrices) or mixture of experts with optional shared experts."""

    kind: str
    intermediate: int = 0
    experts: int = 0
    active_experts: int = 0
    expert_intermediate: int = 0
    shared_experts: int = 0
    shared_intermediate: int = 0


@frozen
class LayerGroup:
    """``count`` identical decoder layers."""

    count: int
    attention: Attention
    ffn: Ffn


@frozen
class Dtypes:
    """Storage dtypes (names from ``DTYPE_BYTES``): weights, KV cache, recurrent state, conv state, and two
    weight groups that releases often store apart from the rest: the routed ``experts`` (int4 or fp8 experts
    beside bf16 attention, as in Kimi-K2-Thinking's INT4 release) and the ``embeddings`` (the embedding table
    and LM head, which FP8 releases keep in bf16). ``None`` for either means "as ``weights``"."""

    weights: str = "bf16"
    kv_cache: str = "bf16"
    state: str = "fp32"
    conv_state: str = "bf16"
    experts: str | None = None
    embeddings: str | None = None

    def dtype_of(self, which: str) -> str:
        """The dtype name of a storage class (``experts`` and ``embeddings`` fall back to ``weights``)."""
        return getattr(self, which) or self.weights

    def bytes_of(self, which: str) -> float:
        """Bytes per element of a storage class."""
        return DTYPE_BYTES[self.dtype_of(which)]


@frozen
class Architecture:
    """A decoder-only model: embeddings, layer groups, final norm, LM head, and optional multi-token-prediction
    (MTP) modules.

    An MTP module (DeepSeek-V3's ``num_nextn_predict_layers``, Qwen3-Next's and Qwen3.5's
    ``mtp_num_hidden_layers``) is one decoder layer of the given shape plus a projection of the concatenated
    [embedding; hidden state] (2·hidden -> hidden) and three RMSNorms (one on each input, one before the
    shared LM head); it shares the main model's embedding table and LM head. ``mtp_layers`` lists the modules
    as layer groups. They are weights a deployment holds (and a speculative decoder runs as its draft); the
    forward pass of ``physics.ops`` does not run them.
    """

    hidden_size: int
    vocab_size: int
    layers: tuple[LayerGroup, ...]
    dtypes: Dtypes
    tie_embeddings: bool = False
    mtp_layers: tuple[LayerGroup, ...] = ()

    @property
    def n_layers(self) -> int:
        """Total decoder layers (MTP modules not included)."""
        return sum(group.count for group in self.layers)

    @property
    def n_mtp_modules(self) -> int:
        """Multi-token-prediction modules."""
        return sum(group.count for group in self.mtp_layers)
