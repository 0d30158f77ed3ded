"""Storage dtypes emulated in numpy, so that a stored array's ``nbytes`` is exactly what the card's dtype says.

numpy has no bf16, fp8 or fp4, so each storage dtype is a numpy array of the right item size holding codes,
and the kernel computes on the decoded values (float32 or float64):

==========  =======================  ============================================================
card dtype  numpy storage            coding
==========  =======================  ============================================================
fp32        float32 (4 bytes)        IEEE single
fp16        float16 (2 bytes)        IEEE half (values clipped to ±65504 first)
bf16        uint16 (2 bytes)         upper half of the float32 bit pattern, round to nearest even
fp8         uint8 (1 byte)           OCP E4M3 ("e4m3fn": max 448, no infinities), saturating
int8        int8 (1 byte)            symmetric fixed point, value = code · scale, codes ±127
fp4         uint8, 2 per byte        OCP E2M1 (0, 0.5, 1, 1.5, 2, 3, 4, 6) packed along the last axis
int4        uint8, 2 per byte        symmetric fixed point, codes ±7 (two's-complement nibbles), packed
==========  =======================  ============================================================

fp8 and fp4 round to the nearest representable value (ties to the smaller magnitude), which is within half
a unit in the last place of the usual ties-to-even rule. The integer and 8/4-bit float formats carry a
``scale``: for weights one
per tensor (amax / largest code, part of the model), for cache and state one static scale per storage class
(as serving engines keep static per-layer KV scales in the checkpoint; the scale is not per request, so it is
not part of the cache). fp4 and int4 need an even last axis; the kernel checks the card before it builds
anything.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from prfaas_plan._frozen import frozen

FloatArray = NDArray[np.floating[Any]]

# Static scales of the cache and state classes. int8: 2^-5 gives a range of ±3.97, four standard deviations
# of the unit-RMS keys, values and states the random-weight kernel produces; int4: 2^-1, a range of ±3.5 in
# steps of 0.5; the float formats need none.
STATIC_SCALE = {"int8": 2.0**-5, "int4": 2.0**-1}
PACKED = ("fp4", "int4")  # two values per byte


def _e4m3_magnitudes() -> NDArray[np.float64]:
    codes = np.arange(127)  # 0x7f is NaN in e4m3fn; 0x7e = 448 is the largest finite value
    exponent, mantissa = codes >> 3, codes & 7
    return np.where(exponent == 0, mantissa / 8.0 * 2.0**-6, (1.0 + mantissa / 8.0) * 2.0 ** (exponent - 7))


_E4M3 = _e4m3_magnitudes()
_E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
# Decoding tables indexed by code: the sign is the top bit of the code (bit 7 for fp8, bit 3 for fp4).
_E4M3_TABLE = np.concatenate([_E4M3, [np.nan], -_E4M3, [np.nan]])
_E2M1_TABLE = np.concatenate([_E2M1, -_E2M1])
_INT4_TABLE = np.array([0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1], dtype=np.float64)
LARGEST = {"fp8": float(_E4M3[-1]), "fp4": float(_E2M1[-1]), "int8": 127.0, "int4": 7.0}
_F32_MAX = float(np.finfo(np.float32).max)
# Float formats: (mantissa bits, smallest positive subnormal).
_FLOAT_FORMATS = {
    "fp32": (23, 2.0**-149),
    "fp16": (10, 2.0**-24),
    "bf16": (7, 2.0**-133),
    "fp8": (3, 2.0**-9),
    "fp4": (1, 0.5),
}


def _nearest(magnitudes: NDArray[np.float64], table: NDArray[np.float64]) -> NDArray[np.intp]:
    """Index of the nearest table entry (table ascending from 0); saturates at the largest entry."""
    midpoints = (table[1:] + table[:-1]) / 2
    return np.searchsorted(midpoints, magnitudes, side="left")


@frozen
class Codec:
    """How one tensor is stored: a card dtype name (``DTYPE_BYTES``) and, for int8/fp8/fp4, a scale."""

    dtype: str
    scale: float = 1.0

    def encode(self, values: FloatArray) -> NDArray[Any]:
        """Values -> storage array (``nbytes`` = elements x the dtype's bytes)."""
        x = np.asarray(values, dtype=np.float64)
        if self.dtype == "fp32":
            return np.clip(x, -_F32_MAX, _F32_MAX).astype(np.float32)
        if self.dtype == "fp16":
            return np.clip(x, -65504.0, 65504.0).astype(np.float16)
        if self.dtype == "bf16":
            bits = np.clip(x, -_F32_MAX, _F32_MAX).astype(np.float32).view(np.uint32)
            rounded = bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))
            return (rounded >> np.uint32(16)).astype(np.uint16)
        scaled = x / self.scale
        if self.dtype == "int8":
            return np.clip(np.rint(scaled), -127, 127).astype(np.int8)
        if self.dtype in PACKED and x.shape[-1] % 2:
            raise ValueError(f"{self.dtype} packs pairs along the last axis, which must be even; got {x.shape[-1]}")
        if self.dtype == "int4":
            nibbles = np.clip(np.rint(scaled), -7, 7).astype(np.intp) & 15
            return (nibbles[..., 0::2] | (nibbles[..., 1::2] << 4)).astype(np.uint8)
        if self.dtype == "fp8":
            magnitude = _nearest(np.abs(scaled), _E4M3)
            return (magnitude | (((scaled < 0) & (magnitude > 0)) << 7)).astype(np.uint8)  # no negative zero
        if self.dtype == "fp4":
            magnitude = _nearest(np.abs(scaled), _E2M1)
            codes = magnitude | (((scaled < 0) & (magnitude > 0)) << 3)
            return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
        raise ValueError(f"unknown storage dtype {self.dtype!r}")

    def decode(self, stored: NDArray[Any], compute: type[np.floating[Any]] = np.float64) -> FloatArray:
        """Storage array -> values in the ``compute`` float type."""
        if self.dtype in ("fp32", "fp16"):
            return stored.astype(compute)
        if self.dtype == "bf16":
            return (stored.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(compute)
        if self.dtype == "int8":
            return (stored.astype(compute) * self.scale).astype(compute)
        if self.dtype == "fp8":
            values: FloatArray = (_E4M3_TABLE[stored] * self.scale).astype(compute)
            return values
        if self.dtype in PACKED:
            table = _E2M1_TABLE if self.dtype == "fp4" else _INT4_TABLE
            out = np.empty((*stored.shape[:-1], 2 * stored.shape[-1]), dtype=compute)
            out[..., 0::2] = table[stored & 15] * self.scale
            out[..., 1::2] = table[stored >> 4] * self.scale
            return out
        raise ValueError(f"unknown storage dtype {self.dtype!r}")

    def spacing(self, values: FloatArray) -> FloatArray:
        """Distance between neighbouring stored values near ``values`` (one unit in the last place)."""
        magnitude = np.abs(np.asarray(values, dtype=np.float64))
        if self.dtype in ("int8", "int4"):
            return np.full_like(magnitude, self.scale)
        mantissa, smallest = _FLOAT_FORMATS[self.dtype]
        result: FloatArray = np.maximum(magnitude * 2.0**-mantissa, smallest * self.scale)
        return result

    def round_trip(
        self, values: FloatArray, compute: type[np.floating[Any]] = np.float64
    ) -> tuple[NDArray[Any], FloatArray]:
        """The stored array and the values it holds (what a reader of the storage sees)."""
        if self.dtype == "fp32" and compute is np.float32 and values.dtype == np.float32:
            return values, values  # float32 stored as float32: nothing to round (the timing runs' fast path)
        stored = self.encode(values)
        return stored, self.decode(stored, compute)


def weight_codec(dtype: str, values: FloatArray) -> Codec:
    """A per-tensor codec for a weight: scale = amax / largest code for int8/fp8/fp4, none otherwise."""
    if dtype not in LARGEST:
        return Codec(dtype=dtype)
    amax = float(np.max(np.abs(values))) if values.size else 0.0
    return Codec(dtype=dtype, scale=amax / LARGEST[dtype] if amax > 0 else 1.0)


def state_codec(dtype: str) -> Codec:
    """The static codec of a cache or state storage class (module docstring)."""
    return Codec(dtype=dtype, scale=STATIC_SCALE.get(dtype, 1.0))
