"""The cache structure: windows keep the newest rows in order; serialisation gives back the same cache."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.reference.cache import Cache, LayerCache
from prfaas_plan.reference.checks import caches_agree
from prfaas_plan.reference.kernel import prefill
from prfaas_plan.reference.model import build_model
from prfaas_plan.spec.model import DTYPE_BYTES
from tests.conftest import examples
from tests.strategies_models import one_of_each


@given(window=st.integers(1, 5), chunks=st.lists(st.integers(1, 9), min_size=1, max_size=5))
@settings(max_examples=examples(30), deadline=None)
def test_window_keeps_the_newest_rows_oldest_first(window: int, chunks: list[int]) -> None:
    """After any sequence of appends, a windowed layer holds the last min(n, window) rows, oldest first."""
    layer = LayerCache(kind="swa", rows={"k": np.zeros((0, 2), np.float32)}, states={}, window=window)
    written = np.zeros((0, 2), np.float32)
    for n in chunks:
        rows = np.arange(len(written), len(written) + n, dtype=np.float32)[:, None].repeat(2, axis=1)
        layer.append({"k": rows})
        written = np.concatenate([written, rows])
    assert np.array_equal(layer.rows("k"), written[-window:])
    assert layer.nbytes == min(len(written), window) * 2 * 4


@pytest.mark.parametrize("dtype", DTYPE_BYTES)
def test_serialised_cache_restores_every_array(dtype: str) -> None:
    """from_bytes(to_bytes(cache)) has the same length and the same arrays, byte for byte."""
    model = build_model(one_of_each(dtype), np.random.default_rng(1))
    _, cache = prefill(model, np.arange(7) % 24)
    restored = Cache.from_bytes(cache.to_bytes())
    assert restored.length == cache.length and restored.nbytes == cache.nbytes
    assert caches_agree(model, restored, cache)
    for (name, a), (_, b) in zip(restored.arrays(), cache.arrays(), strict=True):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), name


def test_truncated_or_foreign_bytes_are_rejected() -> None:
    """Bytes that are not a serialised cache, or have extra bytes after it, raise ValueError."""
    model = build_model(one_of_each(), np.random.default_rng(1))
    data = prefill(model, np.arange(3))[1].to_bytes()
    with pytest.raises(ValueError, match="not a serialised"):
        Cache.from_bytes(b"x" + data)
    with pytest.raises(ValueError, match="trailing"):
        Cache.from_bytes(data + b"\0")


def test_copy_is_independent() -> None:
    """Prefilling more into a copy leaves the original unchanged."""
    model = build_model(one_of_each(), np.random.default_rng(1))
    _, cache = prefill(model, np.arange(4))
    before = cache.to_bytes()
    prefill(model, np.arange(3), cache.copy())
    assert cache.to_bytes() == before
