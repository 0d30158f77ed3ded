"""The cache is sufficient: what a prefill leaves is all that later tokens need.

Laws (float64 compute; logits equal to relative 1e-9, stored caches equal to one storage ulp, see caches_agree):
- prefill(l) then decode steps over the next tokens gives the logits and the cache of one prefill of them all;
  the same from the cache serialised to bytes and restored (as after crossing the link);
- prefill(c) then prefill(l) after those c gives the logits and cache of prefill(c + l);
- a decode step of a batch gives each sequence the logits it gets alone.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.reference.cache import Cache
from prfaas_plan.reference.checks import caches_agree, logits_agree
from prfaas_plan.reference.kernel import decode, prefill
from prfaas_plan.reference.model import build_model
from prfaas_plan.spec.model import ATTENTION_KINDS, Architecture
from tests.conftest import examples
from tests.strategies_models import architectures

SETTINGS = settings(max_examples=examples(15), deadline=None)


@pytest.mark.parametrize("kind", ATTENTION_KINDS)
@given(data=st.data())
@SETTINGS
def test_decode_from_the_cache_equals_a_longer_prefill(kind: str, data: st.DataObject) -> None:
    """prefill(l) + decode of the next tokens == prefill of all, in memory and through serialised bytes."""
    arch = data.draw(architectures(attention_kinds=(kind,)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    model = build_model(arch, rng)
    tokens = rng.integers(0, arch.vocab_size, size=data.draw(st.integers(2, 9)))
    cut = data.draw(st.integers(1, len(tokens) - 1))
    want, whole = prefill(model, tokens)
    _, head = prefill(model, tokens[:cut])
    for cache in (head.copy(), Cache.from_bytes(head.to_bytes())):
        for token in tokens[cut:]:
            got = decode(model, [cache], [int(token)])[0]
        assert logits_agree(got, want)
        assert caches_agree(model, cache, whole)


@pytest.mark.parametrize("kind", ATTENTION_KINDS)
@given(data=st.data())
@SETTINGS
def test_a_split_prefill_leaves_the_same_cache(kind: str, data: st.DataObject) -> None:
    """prefill(c) then prefill(l) after c == prefill(c + l): the same logits and the same stored cache."""
    arch = data.draw(architectures(attention_kinds=(kind,)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    model = build_model(arch, rng)
    tokens = rng.integers(0, arch.vocab_size, size=data.draw(st.integers(2, 10)))
    cut = data.draw(st.integers(1, len(tokens) - 1))
    want, whole = prefill(model, tokens)
    _, cache = prefill(model, tokens[:cut])
    got, cache = prefill(model, tokens[cut:], Cache.from_bytes(cache.to_bytes()))
    assert logits_agree(got, want)
    assert caches_agree(model, cache, whole)


@given(arch=architectures(), seed=st.integers(0, 2**16), batch=st.integers(2, 3))
@SETTINGS
def test_a_decode_batch_equals_each_sequence_alone(arch: Architecture, seed: int, batch: int) -> None:
    """Each sequence of a batched decode step gets the logits and cache it gets when decoded alone."""
    rng = np.random.default_rng(seed)
    model = build_model(arch, rng)
    caches = [prefill(model, rng.integers(0, model.arch.vocab_size, size=int(n)))[1] for n in rng.integers(1, 6, batch)]
    tokens = [int(t) for t in rng.integers(0, model.arch.vocab_size, size=batch)]
    alone = [c.copy() for c in caches]
    together = decode(model, caches, tokens)
    for i, cache in enumerate(alone):
        assert logits_agree(together[i], decode(model, [cache], [tokens[i]])[0])
        assert caches_agree(model, cache, caches[i])
