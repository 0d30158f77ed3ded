"""How sure a pool's service times are: a multiplicative error band on its prefill and decode-step times."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseBand:
    """One phase's band: the true time lies within [priced / ``factor``, priced x ``factor``] for the stated
    share of the held-out measurements ``basis`` names (``points`` of them)."""

    factor: float
    points: int
    basis: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeBand:
    """The error band of a pool priced by roofline or calibration, per phase; ``coverage`` is the share of
    held-out errors each factor covers; ``source`` names where it came from (an engine profile's
    cross-validation, a calibration's residuals)."""

    prefill: PhaseBand
    decode: PhaseBand
    coverage: float
    source: str
