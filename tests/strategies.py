"""Hypothesis strategies that build valid stage models in physical ranges."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from prfaas_plan.lengths import TruncatedLogNormal
from prfaas_plan.physics.curves import PolyCurve
from prfaas_plan.spec.model import Architecture, Attention, Dtypes, Ffn, LayerGroup
from prfaas_plan.throughput import StageModel
from prfaas_plan.units import GBIT_PER_S, MIB


def prefill_curves() -> st.SearchStrategy[PolyCurve]:
    """T(l) = c0 + c1 l + c2 l^2 with a fixed overhead of 0.05-1 s, 5K-200K tokens/s, and a quadratic term
    that adds 0-4x the linear cost at 128K tokens: positive and increasing, like a measured prefill curve."""
    return st.builds(
        lambda c0, rate, quad: PolyCurve(
            coefficients=(c0, 1.0 / rate, quad * (128_000 / rate) / 128_000**2),
            provenance="assumed",
            source="test",
        ),
        st.floats(0.05, 1.0),
        st.floats(5e3, 2e5),
        st.floats(0.0, 4.0),
    )


def kv_curves() -> st.SearchStrategy[PolyCurve]:
    """S(l) = fixed state (0-500 MiB) + 2-300 KiB per token, in bytes."""
    return st.builds(
        lambda fixed, per_token: PolyCurve(
            coefficients=(fixed * MIB, per_token * 1024.0), provenance="assumed", source="test"
        ),
        st.floats(0.0, 500.0),
        st.floats(2.0, 300.0),
    )


def length_distributions() -> st.SearchStrategy[TruncatedLogNormal]:
    """Truncated log-normal uncached input lengths: medians from ~150 to ~60K tokens."""
    return st.builds(
        lambda mu, sigma, low, span: TruncatedLogNormal(mu=mu, sigma=sigma, lower_tokens=low, upper_tokens=low * span),
        st.floats(5.0, 11.0),
        st.floats(0.3, 2.0),
        st.floats(16.0, 512.0),
        st.floats(50.0, 4000.0),
    )


def stage_models() -> st.SearchStrategy[StageModel]:
    """Complete stage models: 1-8 PrfaaS instances, 2-16 local instances, 1-400 Gbit/s links, 0.05-5 req/s of
    decode per instance (BS_max 20 at 25 ms per step, the output length set to match)."""
    return st.builds(
        lambda lengths, fast, slow, kv, decode, bw, n_prfaas, n_local: StageModel(
            lengths=lengths,
            prfaas_prefill=fast,
            local_prefill=slow,
            kv_bytes=kv,
            decode_max_batch=20,
            decode_step_time_s=0.025,
            output_tokens_mean=800.0 / decode,
            link_bandwidth_bytes_per_s=bw * GBIT_PER_S,
            n_prfaas=n_prfaas,
            n_local=n_local,
        ),
        length_distributions(),
        prefill_curves(),
        prefill_curves(),
        kv_curves(),
        st.floats(0.05, 5.0),
        st.floats(1.0, 400.0),
        st.integers(1, 8),
        st.integers(2, 16),
    )


def loaded_stage_models() -> st.SearchStrategy[StageModel]:
    """Stage models with every latency setting drawn: transfer after the prefill or layer-wise, an
    intra-cluster KV bandwidth of 50-800 Gbit/s or none, the first decode step counted or not, and arrival
    SCV 0.25-4 (1 = Poisson)."""
    return st.builds(
        lambda model, transfer, rdma, first_step, scv: replace(
            model,
            transfer=transfer,
            local_kv_transfer_bytes_per_s=None if rdma is None else rdma * GBIT_PER_S,
            ttft_includes_first_decode_step=first_step,
            interarrival_scv=scv,
        ),
        stage_models(),
        st.sampled_from(["after_prefill", "layerwise"]),
        st.one_of(st.none(), st.floats(50.0, 800.0)),
        st.booleans(),
        st.floats(0.25, 4.0),
    )


def attentions() -> st.SearchStrategy[Attention]:
    """One attention block of any kind with small, valid shapes."""
    gqa = st.builds(
        lambda kv, group, dk, dv: Attention(kind="gqa", heads=kv * group, kv_heads=kv, head_dim=dk, v_head_dim=dv),
        st.integers(1, 8),
        st.integers(1, 8),
        st.sampled_from([32, 64, 128]),
        st.sampled_from([32, 64, 128]),
    )
    swa = st.builds(
        lambda kv, group, dk, window: Attention(
            kind="swa", heads=kv * group, kv_heads=kv, head_dim=dk, v_head_dim=dk, window=window
        ),
        st.integers(1, 8),
        st.integers(1, 4),
        st.sampled_from([64, 128]),
        st.integers(16, 4096),
    )
    mla = st.builds(
        lambda heads, q_rank, rank, nope, rope, dv: Attention(
            kind="mla",
            heads=heads,
            q_lora_rank=q_rank,
            kv_lora_rank=rank,
            qk_nope_head_dim=nope,
            qk_rope_head_dim=rope,
            v_head_dim=dv,
        ),
        st.integers(1, 32),
        st.sampled_from([0, 256, 1536]),
        st.sampled_from([128, 512]),
        st.sampled_from([64, 128]),
        st.sampled_from([32, 64]),
        st.sampled_from([64, 128]),
    )
    linear = st.builds(
        lambda kh, group, dk, dv, kernel: Attention(
            kind="linear", heads=kh * group, key_heads=kh, key_head_dim=dk, value_head_dim=dv, conv_kernel=kernel
        ),
        st.integers(1, 16),
        st.integers(1, 4),
        st.sampled_from([64, 128]),
        st.sampled_from([64, 128]),
        st.integers(2, 4),
    )
    return st.one_of(gqa, swa, mla, linear)


def ffns() -> st.SearchStrategy[Ffn]:
    """A dense FFN or a mixture of experts (with or without shared experts)."""
    dense = st.builds(lambda i: Ffn(kind="dense", intermediate=i), st.integers(256, 16384))
    moe = st.builds(
        lambda experts, active, inter, shared: Ffn(
            kind="moe",
            experts=experts,
            active_experts=min(active, experts),
            expert_intermediate=inter,
            shared_experts=shared,
            shared_intermediate=inter if shared else 0,
        ),
        st.integers(2, 256),
        st.integers(1, 8),
        st.integers(128, 2048),
        st.integers(0, 1),
    )
    return st.one_of(dense, moe)


def architectures() -> st.SearchStrategy[Architecture]:
    """Decoder models of 1-3 layer groups of any attention and FFN kind, in bf16 or fp8."""
    groups = st.lists(
        st.builds(
            lambda n, att, ffn: LayerGroup(count=n, attention=att, ffn=ffn), st.integers(1, 40), attentions(), ffns()
        ),
        min_size=1,
        max_size=3,
    )
    return st.builds(
        lambda hidden, vocab, layers, weights: Architecture(
            hidden_size=hidden, vocab_size=vocab, layers=tuple(layers), dtypes=Dtypes(weights=weights)
        ),
        st.sampled_from([512, 1024, 2048, 4096, 7168]),
        st.integers(1000, 200_000),
        groups,
        st.sampled_from(["bf16", "fp8"]),
    )
