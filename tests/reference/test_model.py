"""Reference weights, the size guard, and shrinking real cards to reference size."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

from prfaas_plan.errors import InputError
from prfaas_plan.io.models import load_model_card
from prfaas_plan.physics.memory import parameter_count
from prfaas_plan.reference.kernel import prefill
from prfaas_plan.reference.model import MAX_REFERENCE_PARAMETERS, build_model, check_reference_size
from prfaas_plan.reference.shrink import shrink_architecture
from prfaas_plan.spec.model import Architecture, Attention, Dtypes
from tests.conftest import REPO, examples
from tests.strategies_models import architectures, one_of_each

CARDS = sorted((REPO / "workloads" / "models").glob("*.yaml"))


@given(arch=architectures())
@settings(max_examples=examples(25), deadline=None)
def test_stored_weights_add_up_to_parameter_count(arch: Architecture) -> None:
    """The kernel's stored tensors hold exactly physics.memory.parameter_count elements."""
    assert build_model(arch, np.random.default_rng(0)).stored_parameters == parameter_count(arch)


def test_weights_come_from_the_generator_only() -> None:
    """Two models built from generators with the same seed are identical; another seed differs."""
    a, b, c = (build_model(one_of_each(), np.random.default_rng(s)) for s in (7, 7, 8))
    assert np.array_equal(a.layers[4].mats["proj"].stored, b.layers[4].mats["proj"].stored)
    assert not np.array_equal(a.layers[4].mats["proj"].stored, c.layers[4].mats["proj"].stored)


def test_a_card_above_the_limit_is_refused_naming_the_limit() -> None:
    """A card over MAX_REFERENCE_PARAMETERS raises InputError that names the limit, before any allocation."""
    big = replace(one_of_each(), vocab_size=int(MAX_REFERENCE_PARAMETERS // 8))
    with pytest.raises(InputError, match=r"above the reference kernel's limit of 300M"):
        build_model(big, np.random.default_rng(0))


def test_fp4_with_an_odd_width_is_refused_naming_the_field() -> None:
    """fp4 storage with an odd head width is refused with the field that is odd."""
    arch = one_of_each()
    odd = replace(arch.layers[0], attention=Attention(kind="gqa", heads=2, kv_heads=1, head_dim=3, v_head_dim=4))
    card = replace(arch, layers=(odd, *arch.layers[1:]), dtypes=Dtypes(kv_cache="fp4"))
    with pytest.raises(InputError, match=r"layers\[0\]\.attention\.head_dim.*even width, got 3"):
        check_reference_size(card)


@pytest.mark.parametrize("path", CARDS, ids=lambda p: Path(p).stem)
def test_shrunk_real_cards_keep_their_mix_and_run(path: Path) -> None:
    """Every built-in card with an architecture shrinks under the limit keeping its layer kinds, group order,
    dtypes and (for group counts that fit) their ratio, and then runs a prefill."""
    arch = load_model_card(path).architecture
    if arch is None:
        pytest.skip("card without an architecture")
    small = shrink_architecture(arch)
    check_reference_size(small)
    assert [(g.attention.kind, g.ffn.kind) for g in small.layers] == [
        (g.attention.kind, g.ffn.kind) for g in arch.layers
    ]
    assert small.dtypes == arch.dtypes
    assert parameter_count(small) < 2e6
    if sum(g.count for g in small.layers) < 4:
        ratios = {g.count / s.count for g, s in zip(arch.layers, small.layers, strict=True)}
        assert len(ratios) == 1
    logits, cache = prefill(build_model(small, np.random.default_rng(0)), np.arange(5) % small.vocab_size)
    assert np.all(np.isfinite(logits)) and cache.length == 5


def test_qwen3_next_shrinks_to_three_linear_layers_per_full_attention_layer() -> None:
    """The 12 GQA : 36 gated-DeltaNet layers of Qwen3-Next become 1 : 3."""
    arch = load_model_card(REPO / "workloads" / "models" / "qwen3-next-80b-a3b.yaml").architecture
    assert arch is not None
    assert [g.count for g in shrink_architecture(arch).layers] == [1, 3]
