"""Hypothesis strategies that build valid stage models in physical ranges."""

from __future__ import annotations

from hypothesis import strategies as st

from prfaas_plan.lengths import TruncatedLogNormal
from prfaas_plan.physics.curves import PolyCurve
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
