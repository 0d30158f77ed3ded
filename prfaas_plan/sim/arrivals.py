"""Arrival processes for the simulator. Each states its mean rate and inter-arrival SCV in closed form
(what the queueing formulas take) and samples arrival times with an explicit ``np.random.Generator``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np
import numpy.typing as npt

from prfaas_plan._frozen import frozen
from prfaas_plan.spec.scenario import Arrival
from prfaas_plan.throughput import StageModel

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


@frozen
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


@frozen
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


@frozen
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


@frozen
class Diurnal(ArrivalProcess):
    """A Poisson process with a sinusoidal rate λ(t) = λ (1 + a sin(2π t / P)), 0 <= a < 1.

    A gap drawn at random falls at time t with probability ∝ λ(t) and is exponential of mean 1/λ(t), so
    E[g] = 1/λ and E[g²] = 2 / (λ² √(1 - a²)): the gap SCV is 2/√(1 - a²) - 1 (1 when a = 0). Counts over a
    window much shorter than P are Poisson at the local rate; over a whole period they are Poisson at λ.
    """

    rate_req_per_s: float
    amplitude: float
    period_s: float

    def __post_init__(self) -> None:
        _check_rate(self.rate_req_per_s)
        if not 0.0 <= self.amplitude < 1.0:
            raise ValueError(f"amplitude must be in [0, 1), got {self.amplitude!r}")
        if not (math.isfinite(self.period_s) and self.period_s > 0.0):
            raise ValueError(f"period_s must be > 0, got {self.period_s!r}")

    @property
    def mean_rate_req_per_s(self) -> float:
        """λ (req/s): the sine averages out over a period."""
        return self.rate_req_per_s

    @property
    def interarrival_scv(self) -> float:
        """2/√(1 - a²) - 1."""
        return 2.0 / math.sqrt(1.0 - self.amplitude**2) - 1.0

    def rate_at(self, time_s: FloatArray) -> FloatArray:
        """λ(t) (req/s)."""
        return np.asarray(
            self.rate_req_per_s * (1.0 + self.amplitude * np.sin(2.0 * math.pi * time_s / self.period_s)),
            dtype=np.float64,
        )

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        """Thinning (Lewis & Shedler 1979): a Poisson stream at λ(1 + a) keeps each point with probability
        λ(t) / (λ(1 + a)), in chunks until n points are kept."""
        peak = self.rate_req_per_s * (1.0 + self.amplitude)
        chunks: list[FloatArray] = []
        total, clock_s = 0, 0.0
        while total < n:
            draws = max(64, int(1.2 * (n - total) * (1.0 + self.amplitude)) + 16)
            times = clock_s + np.cumsum(rng.exponential(1.0 / peak, draws))
            keep = rng.random(draws) * peak < self.rate_at(times)
            chunks.append(times[keep])
            total += int(np.count_nonzero(keep))
            clock_s = float(times[-1])
        return np.concatenate(chunks)[:n]


@frozen
class Batched(ArrivalProcess):
    """Batches of requests at the epochs of another process: each epoch of ``epochs`` (whose rate is λ/b)
    brings 1 + Geometric requests of mean b = ``batch_size_mean`` (variance b(b - 1)), all at once.

    A request's gap to the previous one is 0 inside a batch (probability 1 - 1/b) and an epoch gap
    otherwise, so E[g] = 1/λ and the gap SCV is b (1 + c_e²) - 1, c_e² the epochs' gap SCV.
    """

    epochs: ArrivalProcess
    batch_size_mean: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.batch_size_mean) and self.batch_size_mean >= 1.0):
            raise ValueError(f"batch_size_mean must be >= 1, got {self.batch_size_mean!r}")

    @property
    def mean_rate_req_per_s(self) -> float:
        """b · the epochs' rate (req/s)."""
        return self.batch_size_mean * self.epochs.mean_rate_req_per_s

    @property
    def interarrival_scv(self) -> float:
        """b (1 + c_e²) - 1."""
        return self.batch_size_mean * (1.0 + self.epochs.interarrival_scv) - 1.0

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        """Epochs first, then each epoch's batch size; the first n requests."""
        if self.batch_size_mean == 1.0:
            return self.epochs.sample(rng, n)
        epochs = max(16, int(1.2 * n / self.batch_size_mean) + 16)
        times = self.epochs.sample(rng, epochs)
        sizes = rng.geometric(1.0 / self.batch_size_mean, epochs)
        while int(sizes.sum()) < n:  # rare: the sizes fell short; draw more epochs after the last
            more = self.epochs.sample(rng, epochs) + float(times[-1])
            times = np.concatenate([times, more])
            sizes = np.concatenate([sizes, rng.geometric(1.0 / self.batch_size_mean, epochs)])
        return np.repeat(times, sizes)[:n]


def process_for(arrival: Arrival, rate_req_per_s: float) -> ArrivalProcess:
    """The sampler of a scenario's arrival process (``spec.scenario.Arrival``) at mean rate λ (req/s)."""
    epoch_rate = rate_req_per_s / arrival.batch_size_mean
    base: ArrivalProcess
    if arrival.process == "poisson":
        base = Poisson(rate_req_per_s=epoch_rate)
    elif arrival.process == "renewal":
        base = Renewal(rate_req_per_s=epoch_rate, scv=arrival.interarrival_scv)
    elif arrival.process == "onoff":
        base = OnOff(rate_req_per_s=epoch_rate, on_fraction=arrival.on_fraction, mean_cycle_s=arrival.mean_cycle_s)
    else:
        base = Diurnal(rate_req_per_s=epoch_rate, amplitude=arrival.amplitude, period_s=arrival.period_s)
    if arrival.batch_size_mean == 1.0:
        return base
    return Batched(epochs=base, batch_size_mean=arrival.batch_size_mean)


def arrival_process(model: StageModel, rate_req_per_s: float) -> ArrivalProcess:
    """The scenario's arrival process at rate λ (``model.arrival``); a Poisson scenario whose stage model was
    given another inter-arrival SCV (a trace's, by ``trace_model``) gets gamma-renewal gaps of that SCV."""
    if model.arrival.process == "poisson" and model.arrival.batch_size_mean == 1.0 and model.interarrival_scv != 1.0:
        return Renewal(rate_req_per_s=rate_req_per_s, scv=model.interarrival_scv)
    return process_for(model.arrival, rate_req_per_s)
