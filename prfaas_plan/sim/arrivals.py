"""Arrival processes for the simulator. Each states its mean rate and inter-arrival SCV in closed form
(what the queueing formulas take) and samples arrival times with an explicit ``np.random.Generator``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


class ArrivalProcess(ABC):
    """A stationary point process of request arrivals."""

    __slots__ = ()

    @property
    @abstractmethod
    def mean_rate_req_per_s(self) -> float:
        """Long-run arrival rate (req/s)."""

    @property
    @abstractmethod
    def interarrival_scv(self) -> float:
        """Squared coefficient of variation of the time between arrivals (1 for Poisson)."""

    @abstractmethod
    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        """The first ``n`` arrival times (s), non-decreasing, drawn with ``rng``."""


def _check_rate(rate: float) -> None:
    if not (math.isfinite(rate) and rate > 0.0):
        raise ValueError(f"arrival rate must be a finite number > 0 req/s, got {rate!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Poisson(ArrivalProcess):
    """Poisson arrivals: independent exponential gaps of mean 1/rate."""

    rate_req_per_s: float

    def __post_init__(self) -> None:
        _check_rate(self.rate_req_per_s)

    @property
    def mean_rate_req_per_s(self) -> float:
        """λ (req/s)."""
        return self.rate_req_per_s

    @property
    def interarrival_scv(self) -> float:
        """Exactly 1."""
        return 1.0

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        """Cumulative sums of n exponential gaps (the first arrival is one gap after 0)."""
        return np.cumsum(rng.exponential(1.0 / self.rate_req_per_s, n))


@dataclass(frozen=True, slots=True, kw_only=True)
class Renewal(ArrivalProcess):
    """A renewal process with gamma-distributed gaps of mean 1/rate and SCV ``interarrival_scv``.

    SCV 1 is Poisson, below 1 smoother (0: evenly spaced), above 1 burstier (a gamma of shape 1/SCV).
    """

    rate_req_per_s: float
    scv: float

    def __post_init__(self) -> None:
        _check_rate(self.rate_req_per_s)
        if not (math.isfinite(self.scv) and self.scv >= 0.0):
            raise ValueError(f"inter-arrival SCV must be a finite number >= 0, got {self.scv!r}")

    @property
    def mean_rate_req_per_s(self) -> float:
        """λ (req/s)."""
        return self.rate_req_per_s

    @property
    def interarrival_scv(self) -> float:
        """The gamma gaps' SCV, 1/shape."""
        return self.scv

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        """Cumulative sums of n gamma gaps (shape 1/SCV, scale SCV/λ); evenly spaced gaps when SCV = 0."""
        mean_gap_s = 1.0 / self.rate_req_per_s
        if self.scv == 0.0:
            return mean_gap_s * np.arange(1, n + 1, dtype=np.float64)
        return np.cumsum(rng.gamma(1.0 / self.scv, self.scv * mean_gap_s, n))


@dataclass(frozen=True, slots=True, kw_only=True)
class OnOff(ArrivalProcess):
    """Bursty traffic: an interrupted Poisson process. Exponential ON periods (mean ``on_fraction`` ·
    ``mean_cycle_s``) with Poisson arrivals at rate λ/on_fraction alternate with silent exponential OFF
    periods (mean (1 − on_fraction) · ``mean_cycle_s``), so the long-run rate is λ.

    Gaps between arrivals are hyperexponential with SCV 1 + 2·λ_on·α/(α + β)², α = 1/mean ON, β = 1/mean
    OFF (Kuczura, "The interrupted Poisson process as an overflow process", BSTJ 52(3), 1973).
    """

    rate_req_per_s: float
    on_fraction: float
    mean_cycle_s: float

    def __post_init__(self) -> None:
        _check_rate(self.rate_req_per_s)
        if not 0.0 < self.on_fraction <= 1.0:
            raise ValueError(f"on_fraction must be in (0, 1], got {self.on_fraction!r}")
        if not (math.isfinite(self.mean_cycle_s) and self.mean_cycle_s > 0.0):
            raise ValueError(f"mean_cycle_s must be > 0, got {self.mean_cycle_s!r}")

    @property
    def on_rate_req_per_s(self) -> float:
        """λ_on = λ / on_fraction, the rate during ON periods (req/s)."""
        return self.rate_req_per_s / self.on_fraction

    @property
    def mean_rate_req_per_s(self) -> float:
        """λ = on_fraction · λ_on (req/s)."""
        return self.rate_req_per_s

    @property
    def interarrival_scv(self) -> float:
        """1 + 2 λ_on α / (α + β)² (1 when the process is always ON)."""
        if self.on_fraction >= 1.0:
            return 1.0
        alpha = 1.0 / (self.on_fraction * self.mean_cycle_s)
        beta = 1.0 / ((1.0 - self.on_fraction) * self.mean_cycle_s)
        return 1.0 + 2.0 * self.on_rate_req_per_s * alpha / (alpha + beta) ** 2

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        """Alternate ON/OFF periods (starting in ON with probability on_fraction, the stationary law) and
        scatter a Poisson number of uniform arrivals over each ON period, until n arrivals exist."""
        if self.on_fraction >= 1.0:
            return Poisson(rate_req_per_s=self.rate_req_per_s).sample(rng, n)
        mean_on_s = self.on_fraction * self.mean_cycle_s
        mean_off_s = self.mean_cycle_s - mean_on_s
        chunks: list[FloatArray] = []
        total, clock_s = 0, 0.0
        first_off_s = 0.0 if rng.random() < self.on_fraction else rng.exponential(mean_off_s)
        while total < n:
            cycles = max(16, int(1.2 * (n - total) / (self.on_rate_req_per_s * mean_on_s)) + 1)
            off_s = rng.exponential(mean_off_s, cycles)
            off_s[0] = first_off_s
            on_s = rng.exponential(mean_on_s, cycles)
            # Each cycle is an OFF period followed by an ON period (memoryless: the next batch can restart).
            on_end_s = clock_s + np.cumsum(off_s + on_s)
            on_start_s = on_end_s - on_s
            counts = rng.poisson(self.on_rate_req_per_s * on_s)
            offsets = rng.random(int(counts.sum())) * np.repeat(on_s, counts)
            chunks.append(np.sort(np.repeat(on_start_s, counts) + offsets))
            total += int(counts.sum())
            clock_s = float(on_end_s[-1])
            first_off_s = rng.exponential(mean_off_s)
        return np.concatenate(chunks)[:n]
