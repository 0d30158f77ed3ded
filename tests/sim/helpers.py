"""Builders for simulator tests: an exponential length distribution (so that service times and transfer
sizes can be made exponential) and small stage models whose stages reduce to textbook queues."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from prfaas_plan.lengths import FloatArray, LengthDistribution
from prfaas_plan.physics.curves import PolyCurve
from prfaas_plan.sim.cluster import ClusterConfig
from prfaas_plan.throughput import StageModel


@dataclass(frozen=True, slots=True, kw_only=True)
class Exponential(LengthDistribution):
    """L ~ Exponential(mean), for tests only: it makes T(L) = L / rate an exponential service time."""

    mean: float

    @property
    def lower_tokens(self) -> float:
        """0."""
        return 0.0

    @property
    def upper_tokens(self) -> float:
        """inf."""
        return math.inf

    def _partial_moment(self, k: int, a: FloatArray, b: FloatArray) -> FloatArray:
        """E[L^k; a < L <= b] = G(a) - G(b), G(x) = e^{-x/m} Σ_j k!/(k-j)! m^j x^{k-j} (integration by parts)."""

        def g(x: FloatArray) -> FloatArray:
            x = np.maximum(x, 0.0)
            total = np.zeros_like(x)
            for j in range(k + 1):
                with np.errstate(invalid="ignore"):
                    term = math.perm(k, j) * self.mean**j * np.where(np.isinf(x), 0.0, x ** (k - j))
                total += term
            return np.where(np.isinf(x), 0.0, np.exp(-x / self.mean) * total)

        return np.where(a < b, g(a) - g(b), 0.0)

    def _quantile(self, q: FloatArray) -> FloatArray:
        with np.errstate(divide="ignore"):
            return -self.mean * np.log1p(-q)

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        return rng.exponential(self.mean, n)

    def describe(self) -> str:
        return f"exponential(mean={self.mean:g})"


def linear(per_token: float, fixed: float = 0.0) -> PolyCurve:
    """y(l) = fixed + per_token · l."""
    return PolyCurve(coefficients=(fixed, per_token), provenance="assumed", source="test")


#: Lengths with mean 10,000 tokens; at 1e-4 s per token the mean service is 1 s.
MEAN_TOKENS = 10_000.0
SECONDS_PER_TOKEN = 1e-4


def queue_model(
    *,
    n_prfaas: int = 1,
    n_local: int = 2,
    bandwidth_bytes_per_s: float = 1e18,
    kv_per_token: float = 1.0,
    decode_max_batch: int = 100_000,
    decode_step_time_s: float = 1e-6,
    transfer: str = "after_prefill",
    prfaas_per_token: float = SECONDS_PER_TOKEN,
    prfaas_fixed: float = 0.0,
) -> StageModel:
    """Exponential lengths; T_prfaas(l) = T_local(l) = l · 1e-4 s (exponential, mean 1 s); S_kv = l bytes;
    by default an effectively infinite link and decode pool, so that one stage can be studied alone."""
    return StageModel(
        lengths=Exponential(mean=MEAN_TOKENS),
        prfaas_prefill=linear(prfaas_per_token, prfaas_fixed),
        local_prefill=linear(SECONDS_PER_TOKEN),
        kv_bytes=linear(kv_per_token),
        decode_max_batch=decode_max_batch,
        decode_step_time_s=decode_step_time_s,
        output_tokens_mean=1.0,
        link_bandwidth_bytes_per_s=bandwidth_bytes_per_s,
        n_prfaas=n_prfaas,
        n_local=n_local,
        transfer=transfer,
    )


def all_offloaded(model: StageModel, n_pd_decode: int = 1, **extra: object) -> ClusterConfig:
    """Every request goes to PrfaaS (t below every length)."""
    return ClusterConfig(model=model, threshold_tokens=-1.0, n_pd_prefill=0, n_pd_decode=n_pd_decode, **extra)  # type: ignore[arg-type]


def all_local(model: StageModel, n_pd_prefill: int, n_pd_decode: int = 1) -> ClusterConfig:
    """Every request is prefilled locally (t above every length)."""
    return ClusterConfig(model=model, threshold_tokens=math.inf, n_pd_prefill=n_pd_prefill, n_pd_decode=n_pd_decode)
