"""Unit constants and tiny converters. SI inside the package: seconds, bytes, bytes/s, FLOP/s.

Decimal and binary prefixes are different names, and bits are never bytes.
"""

KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
KIB = 2**10
MIB = 2**20
GIB = 2**30

#: bytes per second in one Gbit/s (decimal gigabit, the networking convention).
GBIT_PER_S = 1e9 / 8
#: FLOP/s in one TFLOP/s.
TFLOP_PER_S = 1e12


def bytes_per_s_to_gbit_per_s(rate_bytes_per_s: float) -> float:
    """Convert a rate in bytes/s to decimal Gbit/s."""
    return rate_bytes_per_s / GBIT_PER_S


def gbit_per_s_to_bytes_per_s(rate_gbit_per_s: float) -> float:
    """Convert a rate in decimal Gbit/s to bytes/s."""
    return rate_gbit_per_s * GBIT_PER_S
