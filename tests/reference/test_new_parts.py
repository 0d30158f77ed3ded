"""Architecture parts added for issue 13, checked exactly by the reference kernel: per-group weight dtypes
(routed experts and embeddings stored apart from the rest), the gated attention output, and multi-token-
prediction modules (weights held, not run)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.physics.memory import weight_bytes
from prfaas_plan.reference.checks import compare_counts
from prfaas_plan.reference.counter import Counter
from prfaas_plan.reference.kernel import decode, prefill
from prfaas_plan.reference.model import build_model
from prfaas_plan.spec.model import DTYPE_BYTES, Architecture
from tests.conftest import examples
from tests.strategies_models import one_of_each

DTYPES = tuple(DTYPE_BYTES)


def _stored_weight_bytes(arch: Architecture) -> int:
    model = build_model(arch, np.random.default_rng(0))
    tensors = [model.embed, model.final_norm, *([] if arch.tie_embeddings else [model.lm_head])]
    for layer in model.layers:
        tensors += [layer.norm_attention, layer.norm_ffn, *layer.mats.values()]
        tensors += [w for pair in layer.experts for w in pair]
    tensors += [t for module in model.mtp for t in module.tensors]
    return sum(t.stored.nbytes for t in tensors)


def _mixed(weights: str, experts: str, embeddings: str) -> Architecture:
    base = one_of_each("bf16")
    return replace(base, dtypes=replace(base.dtypes, weights=weights, experts=experts, embeddings=embeddings))


@settings(max_examples=examples(12), deadline=None)
@given(st.sampled_from(DTYPES), st.sampled_from(DTYPES), st.sampled_from(DTYPES))
def test_per_group_weight_bytes_equal_the_stored_bytes(weights: str, experts: str, embeddings: str) -> None:
    """physics.memory.weight_bytes equals the nbytes of every tensor the kernel stores, whatever each group's
    dtype (experts, embeddings and the rest each in their own)."""
    arch = _mixed(weights, experts, embeddings)
    assert _stored_weight_bytes(arch) == weight_bytes(arch)


@pytest.mark.parametrize(("weights", "experts", "embeddings"), [("bf16", "int4", "bf16"), ("fp8", "fp8", "bf16")])
def test_per_group_dtypes_counts_equal_physics_ops(weights: str, experts: str, embeddings: str) -> None:
    """Prefill after a cached prefix and a decode step of the mixed-dtype card: every counted field of every
    operation equals physics.ops (int4 experts beside bf16 attention; fp8 weights with bf16 embeddings)."""
    arch = _mixed(weights, experts, embeddings)
    rng = np.random.default_rng(5)
    model = build_model(arch, rng)
    head = prefill(model, rng.integers(0, arch.vocab_size, size=5))[1]
    counter = Counter()
    prefill(model, rng.integers(0, arch.vocab_size, size=3), head.copy(), counter=counter)
    assert not [str(m) for m in compare_counts(arch, counter.ops(), cached=5, new=3)]
    counter = Counter()
    decode(model, [head.copy(), head.copy()], [1, 2], counter=counter)
    assert not [str(m) for m in compare_counts(arch, counter.ops(), cached=5, new=1, batch=2, decode=True)]


def _gated() -> Architecture:
    base = one_of_each("bf16")
    layers = tuple(
        replace(g, attention=replace(g.attention, output_gate=True)) if g.attention.kind in ("gqa", "swa") else g
        for g in base.layers
    )
    return replace(base, layers=layers)


@pytest.mark.parametrize("dtype", ["bf16", "fp8", "fp4"])
def test_gated_attention_counts_equal_physics_ops(dtype: str) -> None:
    """Gated GQA and SWA outputs (the gate in the qkv projection, sigmoid·product before the output projection):
    every counted field equals physics.ops in prefill after a prefix and in decode; stored weights equal
    physics.memory.parameter_count and weight_bytes."""
    from prfaas_plan.physics.memory import parameter_count

    gated = _gated()
    arch = replace(gated, dtypes=replace(gated.dtypes, weights=dtype, kv_cache=dtype))
    model = build_model(arch, np.random.default_rng(7))
    assert model.stored_parameters == parameter_count(arch)
    assert _stored_weight_bytes(arch) == weight_bytes(arch)
    rng = np.random.default_rng(8)
    head = prefill(model, rng.integers(0, arch.vocab_size, size=4))[1]
    counter = Counter()
    prefill(model, rng.integers(0, arch.vocab_size, size=3), head.copy(), counter=counter)
    assert not [str(m) for m in compare_counts(arch, counter.ops(), cached=4, new=3)]
    counter = Counter()
    decode(model, [head.copy(), head.copy(), head.copy()], [1, 2, 3], counter=counter)
    assert not [str(m) for m in compare_counts(arch, counter.ops(), cached=4, new=1, batch=3, decode=True)]


def test_gated_card_passes_every_count_check() -> None:
    """run_count_checks on the gated card: FLOPs, bytes and cache sizes exact, and decode after a gated prefill
    gives the logits of one longer prefill (the cache stays sufficient)."""
    from prfaas_plan.reference.checks import run_count_checks

    checks = run_count_checks(_gated(), np.random.default_rng(11))
    assert checks.flops_exact and checks.bytes_exact and checks.kv_bytes_exact and checks.cache_sufficient, (
        checks.problems
    )


def _with_mtp(dtype: str = "bf16") -> Architecture:
    base = one_of_each(dtype)
    moe = next(g for g in base.layers if g.ffn.kind == "moe")
    mla = next(g for g in base.layers if g.attention.kind == "mla")
    return replace(base, mtp_layers=(replace(moe, count=2), replace(mla, count=1)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_mtp_modules_are_stored_and_counted_exactly(dtype: str) -> None:
    """The kernel stores exactly mtp_parameter_count elements of MTP weights, and weight_bytes equals the
    nbytes of everything it stores, MTP modules included; the forward pass is the main model's alone."""
    from prfaas_plan.physics.memory import mtp_parameter_count, parameter_count
    from prfaas_plan.physics.ops import forward_ops

    arch = _with_mtp(dtype)
    model = build_model(arch, np.random.default_rng(3))
    assert model.stored_mtp_parameters == mtp_parameter_count(arch) > 0
    assert model.stored_parameters == parameter_count(arch)
    assert _stored_weight_bytes(arch) == weight_bytes(arch)
    plain = replace(arch, mtp_layers=())
    assert weight_bytes(arch) > weight_bytes(plain)
    a, b = forward_ops(arch, cached=3, new=5), forward_ops(plain, cached=3, new=5)
    assert [(op.name, float(op.bytes), float(op.matmul_flops)) for op in a] == [
        (op.name, float(op.bytes), float(op.matmul_flops)) for op in b
    ]


@pytest.mark.parametrize("key", ["deepseek-v3", "qwen3.5-397b-a17b"])
def test_shrunk_cards_keep_their_mtp_modules_at_reference_size(key: str) -> None:
    """Shrinking a card with MTP modules shrinks them too: same count, capped widths, stored exactly."""
    from prfaas_plan.io.names import load_named_model
    from prfaas_plan.physics.memory import mtp_parameter_count
    from prfaas_plan.reference.shrink import shrink_architecture

    full = load_named_model(key).architecture
    assert full is not None and full.n_mtp_modules >= 1
    small = shrink_architecture(full)
    assert small.n_mtp_modules == full.n_mtp_modules
    assert mtp_parameter_count(small) < 1e6
    assert build_model(small, np.random.default_rng(0)).stored_mtp_parameters == mtp_parameter_count(small)
