"""What a workload, a deployment and a scenario are."""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Literal

from prfaas_plan._frozen import frozen
from prfaas_plan.lengths import LengthDistribution
from prfaas_plan.spec.cost import CostInputs, Target
from prfaas_plan.spec.hardware import Accelerator, InstanceProfile, RooflineParams
from prfaas_plan.spec.model import Architecture
from prfaas_plan.spec.shape import InstanceShape

if TYPE_CHECKING:  # annotations only: a scenario without dynamics, engines, error bands or SLO never loads their types
    from prfaas_plan.spec.dynamics import Dynamics
    from prfaas_plan.spec.engine import EngineProfile
    from prfaas_plan.spec.plan import TtftSlo
    from prfaas_plan.spec.uncertainty import TimeBand


@frozen
class ModelCard:
    """A model card: its name and sources, and its architecture when known (needed by roofline pools).

    ``inferred`` marks dimensions that were not published but backed out of other evidence.
    """

    key: str
    name: str
    parameters_b: float | None = None
    active_parameters_b: float | None = None
    source: str = ""
    inferred: bool = False
    architecture: Architecture | None = None


ArrivalKind = Literal["poisson", "renewal", "onoff", "diurnal"]
#: How much of a KV transfer a request sees (``Link.transfer``).
TransferMode = Literal["after_prefill", "layerwise"]


@frozen
class Arrival:
    """How requests arrive, at whatever mean rate the plan is offered (the rate itself is not part of it).

    - ``poisson``: independent exponential gaps (inter-arrival SCV 1);
    - ``renewal``: independent gamma gaps with SCV ``interarrival_scv``;
    - ``onoff``: an interrupted Poisson process: exponential ON periods of mean ``on_fraction`` ·
      ``mean_cycle_s`` at rate λ/on_fraction alternate with silent exponential OFF periods (gap SCV
      1 + 2 λ_on α/(α+β)², α, β the ON and OFF exit rates; Kuczura 1973);
    - ``diurnal``: a Poisson process whose rate swings sinusoidally, λ(t) = λ (1 + ``amplitude`` ·
      sin(2π t / ``period_s``)), amplitude in [0, 1) (a day compressed to ``period_s``).

    ``batch_size_mean`` >= 1: each arrival epoch brings a batch of 1 + Geometric requests of that mean
    (variance b(b - 1)), so epochs come at rate λ/b; 1 means single arrivals. A batch of b requests reaches
    the prefill pools together, as batch-logged traces do.
    """

    process: ArrivalKind = "poisson"
    interarrival_scv: float = 1.0
    on_fraction: float = 1.0
    mean_cycle_s: float = 60.0
    amplitude: float = 0.0
    period_s: float = 86_400.0
    batch_size_mean: float = 1.0

    @property
    def is_stationary_renewal(self) -> bool:
        """True for a renewal process with single arrivals (what the stationary closed form assumes)."""
        return self.process in ("poisson", "renewal") and self.batch_size_mean == 1.0


@frozen
class Traffic:
    """Request lengths (the input is the *uncached* part of the prompt) and the arrival process."""

    input_length: LengthDistribution
    output_length: LengthDistribution
    arrival: Arrival


@frozen
class Slo:
    """Service-level objectives. ``decode_tokens_per_s`` is the per-request decode rate (1 / TPOT) that caps
    the decode batch (the largest batch whose step meets it).

    ``ttft_includes_first_decode_step``: whether TTFT ends after the first decode step (True) or when the KV
    cache is ready at the decode instance (False, what the paper's Table 6 figures imply).
    """

    decode_tokens_per_s: float
    ttft_p90_s: float | None = None
    ttft_includes_first_decode_step: bool = False
    #: P90 of the time per output token under load, s (YAML ``tpot_p90_ms``): held beside the TTFT SLO by
    #: goodput and sizing (``latency.tpot``); None = not stated. ``decode_tokens_per_s`` stays the batch cap.
    tpot_p90_s: float | None = None

    @property
    def ttft_slo(self) -> TtftSlo | None:
        """The P90 TTFT target (``ttft_p90_s``), None when not stated."""
        if self.ttft_p90_s is None:
            return None
        from prfaas_plan.spec.plan import TtftSlo

        return TtftSlo(limit_s=self.ttft_p90_s, quantile=0.9)


POOL_METHODS = ("measured", "calibrated", "roofline")


@frozen
class Pool:
    """A cluster of identical instances of one accelerator, and how the model's costs on it are obtained.

    ``method``: ``measured`` (the profile's points), ``roofline`` (from the model card's architecture and the
    datasheet with ``roofline`` parameters) or ``calibrated`` (roofline with efficiencies fitted to the
    measured prefill points of ``calibration`` on ``calibration_accelerator``, which may be another pool's
    hardware). ``profile`` holds measured points when the hardware file has them for this model.
    """

    hardware_key: str
    accelerator: Accelerator
    gpus_per_instance: int
    instances: int
    profile: InstanceProfile | None
    method: str = "measured"
    roofline: RooflineParams = field(default_factory=RooflineParams)
    calibration: InstanceProfile | None = None
    calibration_accelerator: Accelerator | None = None
    #: Per-instance bandwidth of the intra-cluster KV transfer (RDMA), bytes/s; None = not modelled (the
    #: paper's Eq. 4 assumes it never binds and its TTFT figures omit it).
    kv_transfer_bytes_per_s: float | None = None
    #: How sure the pricing is (roofline and calibrated pools): the error its engine profile showed in
    #: cross-validation or its calibration's residuals; None for measured pools (their error is the fit's).
    time_band: TimeBand | None = None
    #: Multipliers on the priced prefill and decode-step times (1 = as priced; ``optimize.uncertainty`` sets
    #: the edges of ``time_band``).
    prefill_time_scale: float = 1.0
    decode_time_scale: float = 1.0
    #: How an instance's ``gpus_per_instance`` GPUs split the model (``physics.shapes``); None: tensor
    #: parallelism over all of them, experts as ``roofline.expert_parallel`` says (what every pool was before).
    shape: InstanceShape | None = None
    #: ``shape: auto``: the planner chooses the shape among those the accelerator and the model allow
    #: (``optimize.shapes``); ``gpus_per_instance`` and ``shape`` are then the fixed shape it is compared with.
    choose_shape: bool = False
    #: The pool's ``engine:`` profile (None: the serving defaults); ``roofline`` holds its terms on this pool's
    #: accelerator generation, and a pool moved to another accelerator (``matrix``) is re-priced from it.
    engine: EngineProfile | None = None
    #: The ``roofline`` fields the pool's own ``roofline:`` section set (the hardware matrix keeps them on every
    #: cell, where it replaces the template hardware's measured kernel shapes by each cell's).
    roofline_set: tuple[str, ...] = ()

    @property
    def gpus(self) -> int:
        """GPUs in the pool."""
        return self.gpus_per_instance * self.instances

    @property
    def chooses_shape(self) -> bool:
        """Whether the planner chooses this pool's shape: ``shape: auto`` on a pool it can re-price (not measured)."""
        return self.choose_shape and self.method != "measured"

    @property
    def instance_shape(self) -> InstanceShape:
        """The pool's shape: ``shape``, else TP over ``gpus_per_instance`` (with EP when the roofline says so)."""
        if self.shape is not None:
            return self.shape
        g = self.gpus_per_instance
        return InstanceShape(gpus=g, tensor_parallel=g, expert_parallel=g if self.roofline.expert_parallel else 1)


TRANSFER_MODES = ("after_prefill", "layerwise")


@frozen
class TcpPath:
    """How the link is built: the TCP connections that carry the KV caches over it (``physics.tcp``).

    Every field is optional; the defaults (no round trip, no loss, no window or per-connection cap) give the
    nominal rate, as a link with no shape did before. ``connections``: parallel connections the transfer
    engine keeps open (pooled, so no transfer pays a handshake or slow start); ``window_bytes``: the largest
    window one connection reaches (the socket buffers); ``connection_cap_bytes_per_s``: a per-connection
    rate limit (a cloud's per-flow cap); ``loss_rate``: the probability that a packet is lost (Padhye's p).
    """

    rtt_s: float = 0.0
    connections: int = 1
    window_bytes: float | None = None
    connection_cap_bytes_per_s: float | None = None
    loss_rate: float = 0.0

    @property
    def nominal(self) -> bool:
        """True when nothing bounds a connection, so the link delivers its nominal rate with no round trip."""
        return (
            self.rtt_s == 0.0
            and self.loss_rate == 0.0
            and self.window_bytes is None
            and self.connection_cap_bytes_per_s is None
        )


@frozen
class Link:
    """The cross-datacenter link from the PrfaaS cluster to the local PD cluster.

    ``transfer``: how much of a KV transfer a request sees. ``after_prefill``: the whole transfer starts when
    the prefill ends (what the paper's TTFT figures imply). ``layerwise``: layer-wise pipelining overlaps the
    transfer with the prefill, so only the part that outlasts the prefill is visible.
    ``bandwidth_bytes_per_s`` is the nominal rate bought; ``tcp`` how it is built, which decides the rate
    the transfers get (``physics.tcp.deliverable_bytes_per_s``) and the round trip each pays.
    """

    bandwidth_bytes_per_s: float
    transfer: TransferMode = "after_prefill"
    tcp: TcpPath = field(default_factory=TcpPath)


@frozen
class Scenario:
    """A whole planning question: model, traffic, SLO, the PrfaaS pool, the local PD pool and the link.

    ``local.instances`` is the total to split into N_p prefill and N_d decode instances.
    """

    name: str
    description: str
    file: str
    model: ModelCard
    traffic: Traffic
    slo: Slo
    prfaas: Pool
    local: Pool
    link: Link
    #: Prices (GPU-hour overrides, link, electricity); empty: the hardware profiles' prices, a free link.
    cost: CostInputs = field(default_factory=CostInputs)
    #: What ``size`` must carry (the scenario's ``target`` section); None: given on the command line.
    target: Target | None = None
    #: Prefix caches, scheduler, link profile and faults for the simulator (the ``dynamics`` section).
    dynamics: Dynamics | None = None
