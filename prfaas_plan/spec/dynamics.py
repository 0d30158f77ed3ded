"""What the system does over time, beyond the static plan: prefix caches, a link whose bandwidth changes,
lost instances, and the dual-timescale scheduler (PrfaaS paper §3.2, §3.3, §3.4.3).

All values are SI (bytes, bytes/s, seconds); ``io.dynamics`` converts the YAML's human scales once.
The paper leaves every parameter here unspecified (digest §5.2, items 7-9 and 14); each default below says
why it was chosen.
"""

from __future__ import annotations

import math
from typing import Literal

from prfaas_plan._frozen import frozen

#: How the router judges prefix caches (paper §3.4.3): ``scarce`` each cluster alone (route on
#: L − l_pd), ``abundant`` the longest prefix anywhere (route on L − max(l_pd, l_prfaas), with a
#: cross-cluster cache transfer when the other cluster holds it), ``switch`` abundant while the link's
#: utilisation is below ``PrefixCaches.abundant_below_utilization``, scarce otherwise.
CacheRule = Literal["scarce", "abundant", "switch"]
#: The pools an instance can be lost from.
Pool = Literal["prfaas", "local_prefill", "decode"]

CACHE_RULES: tuple[CacheRule, ...] = ("scarce", "abundant", "switch")
POOLS: tuple[Pool, ...] = ("prfaas", "local_prefill", "decode")


@frozen
class ClusterCache:
    """One cluster's prefix cache pool: host DRAM and SSD over its nodes (paper §3.2), and the bandwidth at
    which a hit is loaded back into the accelerators (bytes/s)."""

    capacity_bytes: float
    load_bandwidth_bytes_per_s: float

    @staticmethod
    def of_nodes(
        *, nodes: int, dram_bytes_per_node: float, ssd_bytes_per_node: float, load_bandwidth_bytes_per_s: float
    ) -> ClusterCache:
        """Capacity (DRAM + SSD per node) × nodes, bytes."""
        return ClusterCache(
            capacity_bytes=nodes * (dram_bytes_per_node + ssd_bytes_per_node),
            load_bandwidth_bytes_per_s=load_bandwidth_bytes_per_s,
        )


@frozen
class PrefixCaches:
    """The hybrid prefix cache pools of both clusters and the router's rule for them.

    ``linear_state_bytes``: size of one request-level linear-attention/SWA state checkpoint (bytes; it does
    not grow with length). None: the model has full attention only, and any cached block prefix is reusable.
    ``abundant_below_utilization``: with ``rule="switch"``, the link counts as abundant while its utilisation
    (egress / bandwidth) is below this. 0.5 by default: the paper's link runs at about 13 % in its case study,
    and an M/G/1-like link's queueing delay doubles its transfer time at 50 %.
    """

    prfaas: ClusterCache
    local: ClusterCache
    rule: CacheRule = "switch"
    abundant_below_utilization: float = 0.5
    linear_state_bytes: float | None = None
    block_tokens: int = 512


@frozen
class BandwidthSteps:
    """Piecewise-constant bandwidth: ((start_s, bandwidth_bytes_per_s), ...), the first at 0 s."""

    steps: tuple[tuple[float, float], ...]


@frozen
class PeriodicBandwidth:
    """A periodic profile: ``steps`` ((phase_s, bandwidth_bytes_per_s), ...) within one period, the first at
    phase 0, repeated every ``period_s`` seconds."""

    period_s: float
    steps: tuple[tuple[float, float], ...]


@frozen
class RandomBandwidth:
    """Bandwidth as a stationary random process: exp of an Ornstein-Uhlenbeck process on log-bandwidth,
    sampled (and held) every ``step_s`` seconds, with the given mean and standard deviation (bytes/s) and an
    autocorrelation exp(−τ / correlation_s)."""

    mean_bytes_per_s: float
    std_bytes_per_s: float
    correlation_s: float
    step_s: float = 1.0


BandwidthProfile = BandwidthSteps | PeriodicBandwidth | RandomBandwidth


@frozen
class Outage:
    """The link carries nothing from ``start_s`` for ``duration_s`` seconds (transfers pause, then resume)."""

    start_s: float
    duration_s: float

    @property
    def end_s(self) -> float:
        """start + duration (s)."""
        return self.start_s + self.duration_s


@frozen
class InstanceLoss:
    """``count`` instances of ``pool`` fail at ``at_s``; they come back at ``restore_s`` (None: never)."""

    pool: Pool
    at_s: float
    count: int = 1
    restore_s: float | None = None


@frozen
class ThresholdControl:
    """The short-term scheduler (paper §3.4.3): every ``interval_s`` it measures the link's utilisation over
    the last interval and the prefill queues; when utilisation exceeds ``trigger_utilization``, a queue exceeds
    ``trigger_queue_per_instance`` requests per instance of its pool, or ``every_interval`` is set, it
    re-optimises t over the incremental lengths of the last ``window_requests`` arrivals (Eq. 6 with the
    measured bandwidth and the instances alive), smooths the optimum with an EWMA of weight ``smoothing``
    (in log t), and applies it only when it moves t by more than ``hysteresis`` (relative).

    Defaults: 10 s is a few prefill times of the longest requests; 2,000 requests put the window's sampling
    error on a quantile near the median at about 1 % of the distribution; 0.8 utilisation leaves the link
    a margin before queueing delay dominates; smoothing 0.5 halves a one-window excursion; 5 % hysteresis is
    about the flat top of Λ_max(t) in the paper's case study.
    """

    interval_s: float = 10.0
    window_requests: int = 2000
    trigger_utilization: float = 0.8
    trigger_queue_per_instance: float = 2.0
    every_interval: bool = True
    smoothing: float = 0.5
    hysteresis: float = 0.05


@frozen
class RoleControl:
    """The long-term scheduler (paper §3.4.3): every ``period_s`` it chooses the local prefill/decode split
    that maximises Eq. 6 over the last window of incremental lengths and, when that split's Λ_max beats the
    current one by more than ``min_gain`` (relative), converts one local instance towards it (one conversion
    at a time). A converted instance first drains (finishes its work, takes no new work),
    then is unavailable for ``switch_s`` seconds (reloading weights, re-warming), then serves its new role.

    Defaults: a 300 s period is long beside the short-term interval and short beside a diurnal swing; 30 s
    of switch time is a model-weight reload from host memory for a few hundred GB at tens of GB/s; a 2 % gain
    keeps sampling noise in the window (about 1 % on Λ_max for 2,000 requests) from flipping roles.
    """

    period_s: float = 300.0
    switch_s: float = 30.0
    min_gain: float = 0.02


@frozen
class Dynamics:
    """Everything a run adds to the static plan; every part optional."""

    caches: PrefixCaches | None = None
    bandwidth: BandwidthProfile | None = None
    outages: tuple[Outage, ...] = ()
    losses: tuple[InstanceLoss, ...] = ()
    threshold: ThresholdControl | None = None
    roles: RoleControl | None = None

    @property
    def link_changes(self) -> bool:
        """Whether the link's bandwidth changes during a run."""
        return self.bandwidth is not None or bool(self.outages)


def finite_positive(value: float) -> bool:
    """True for a finite number > 0."""
    return math.isfinite(value) and value > 0
