"""Measured cache sizes against physics.memory, exactly, for every layer type and storage dtype.

Law: after any prefill and decode steps, the cache's payload ``nbytes`` equals
``physics.memory.cache_bytes(arch, length)``; per layer type, full-attention and MLA layers hold
``kv_bytes_per_token x length``, sliding-window layers ``window_bytes(length)``, and linear-attention layers
``linear_state_bytes`` whatever the length.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.physics.memory import cache_bytes, kv_bytes_per_token, linear_state_bytes, window_bytes
from prfaas_plan.reference.cache import Cache
from prfaas_plan.reference.kernel import decode, prefill
from prfaas_plan.reference.model import build_model
from prfaas_plan.spec.model import ATTENTION_KINDS, DTYPE_BYTES
from tests.conftest import examples
from tests.strategies_models import architectures


def _by_kind(cache: Cache, kinds: tuple[str, ...]) -> int:
    return sum(layer.nbytes for layer in cache.layers if layer.kind in kinds)


@pytest.mark.parametrize("dtype", DTYPE_BYTES)
@pytest.mark.parametrize("kind", ATTENTION_KINDS)
@given(data=st.data())
@settings(max_examples=examples(6), deadline=None)
def test_cache_nbytes_equal_physics_memory(kind: str, dtype: str, data: st.DataObject) -> None:
    """nbytes == cache_bytes(length), and each layer type's share equals its physics.memory term."""
    arch = data.draw(architectures(attention_kinds=(kind,), dtypes=(dtype,)))
    model = build_model(arch, np.random.default_rng(data.draw(st.integers(0, 99))))
    lengths = data.draw(st.lists(st.integers(1, 7), min_size=1, max_size=3))
    cache = None
    for n in lengths:
        _, cache = prefill(model, np.arange(n) % arch.vocab_size, cache)
        assert cache.nbytes == cache_bytes(arch, cache.length)
    assert cache is not None
    for _ in range(data.draw(st.integers(0, 3))):
        decode(model, [cache], [1])
        assert cache.nbytes == cache_bytes(arch, cache.length)
    length = cache.length
    assert _by_kind(cache, ("gqa", "mla")) == kv_bytes_per_token(arch) * length
    assert _by_kind(cache, ("swa",)) == window_bytes(arch, length)
    assert _by_kind(cache, ("linear",)) == linear_state_bytes(arch)
    assert Cache.from_bytes(cache.to_bytes()).nbytes == cache.nbytes
