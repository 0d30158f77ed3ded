"""Storage dtypes: sizes, round trips and the precision each emulation keeps."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from prfaas_plan.reference.storage import LARGEST, Codec, state_codec, weight_codec
from prfaas_plan.spec.model import DTYPE_BYTES
from tests.conftest import examples

# Largest relative error of one rounding, inside each format's normal range (half a unit in the last place).
HALF_ULP = {"fp32": 2.0**-24, "fp16": 2.0**-11, "bf16": 2.0**-8, "fp8": 2.0**-4}

values = hnp.arrays(
    np.float64,
    hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6).map(lambda s: (*s[:-1], 2 * s[-1])),
    elements=st.floats(-6.0, 6.0, allow_nan=False),
)


@pytest.mark.parametrize("dtype", DTYPE_BYTES)
@given(x=values)
@settings(max_examples=examples(20), deadline=None)
def test_nbytes_is_elements_times_dtype_bytes(dtype: str, x: np.ndarray) -> None:
    """A stored array's nbytes is its element count times DTYPE_BYTES, for every dtype (fp4: two per byte)."""
    assert state_codec(dtype).encode(x).nbytes == x.size * DTYPE_BYTES[dtype]


@pytest.mark.parametrize("dtype", DTYPE_BYTES)
@given(x=values)
@settings(max_examples=examples(20), deadline=None)
def test_round_trip_is_idempotent(dtype: str, x: np.ndarray) -> None:
    """Storing what a stored array holds stores the same codes: rounding once is final (cache sufficiency rests
    on this: a value read back from the cache and stored again is unchanged)."""
    codec = weight_codec(dtype, x)
    stored, held = codec.round_trip(x)
    assert np.array_equal(codec.encode(held), stored)
    assert held.shape == x.shape


@pytest.mark.parametrize("dtype", HALF_ULP)
@given(x=values)
@settings(max_examples=examples(20), deadline=None)
def test_rounding_error_is_within_half_an_ulp(dtype: str, x: np.ndarray) -> None:
    """Inside a float format's normal range, the stored value is within half a unit in the last place."""
    held = Codec(dtype=dtype).decode(Codec(dtype=dtype).encode(x))
    normal = np.abs(x) >= {"fp32": 1e-30, "fp16": 2.0**-14, "bf16": 1e-30, "fp8": 2.0**-6}[dtype]
    assert np.all(np.abs(held - x)[normal] <= HALF_ULP[dtype] * np.abs(x)[normal] * (1 + 1e-12))


def test_fp8_and_fp4_grids_and_saturation() -> None:
    """fp8 (E4M3) and fp4 (E2M1) hold their grid values exactly and saturate at 448 and 6."""
    grid8 = np.array([0.0, 2.0**-9, 0.5, 1.0, 1.125, 240.0, 448.0, -448.0, -3.5])
    assert np.array_equal(Codec(dtype="fp8").decode(Codec(dtype="fp8").encode(grid8)), grid8)
    assert Codec(dtype="fp8").decode(Codec(dtype="fp8").encode(np.array([1e6, -1e6]))).tolist() == [448.0, -448.0]
    grid4 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -6.0, -0.5])
    assert np.array_equal(Codec(dtype="fp4").decode(Codec(dtype="fp4").encode(grid4)), grid4)
    assert Codec(dtype="fp4").decode(Codec(dtype="fp4").encode(np.array([100.0, 2.6]))).tolist() == [6.0, 3.0]


def test_bf16_rounds_to_nearest_even() -> None:
    """bf16 keeps 8 significant bits: 1 + 2^-8 is a tie and rounds to even (1.0); 1 + 3·2^-8 rounds up."""
    codec = Codec(dtype="bf16")
    held = codec.decode(codec.encode(np.array([1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, -2.5])))
    assert held.tolist() == [1.0, 1.0 + 2**-6, -2.5]


def test_int8_uses_its_scale_and_fp4_needs_even_widths() -> None:
    """int8 stores round(x / scale) clipped to ±127; fp4 refuses an odd last axis."""
    codec = state_codec("int8")
    assert codec.decode(codec.encode(np.array([0.1, -100.0]))).tolist() == pytest.approx(
        [3 * codec.scale, -127 * codec.scale]
    )
    with pytest.raises(ValueError, match="even"):
        Codec(dtype="fp4").encode(np.zeros(3))


@pytest.mark.parametrize("dtype", DTYPE_BYTES)
@given(x=values)
@settings(max_examples=examples(20), deadline=None)
def test_spacing_bounds_the_rounding_error(dtype: str, x: np.ndarray) -> None:
    """A stored value is within one spacing (unit in the last place) of what was stored, inside the range."""
    codec = state_codec(dtype)
    x = np.clip(x, -LARGEST.get(dtype, np.inf) * codec.scale, LARGEST.get(dtype, np.inf) * codec.scale)
    held = codec.decode(codec.encode(x))
    assert np.all(np.abs(held - x) <= codec.spacing(held) * (1 + 1e-12))
