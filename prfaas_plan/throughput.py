"""The paper's steady-state stage model (PrfaaS paper §3.4.1, Eqs. 1-8), vectorised over thresholds.

Requests arrive at rate Λ; those whose uncached input length L exceeds the threshold t (a fraction
p = P(L > t)) are prefilled on the PrfaaS pool and their KV cache crosses the link; the rest are prefilled
on N_p local instances; N_d local instances decode everything. Each producer is represented by one length,
l_long = E[L | L > t] and l_short = E[L | L <= t] (the paper's "for tractability" simplification).

    Θ_prfaas = min(N_prfaas / T_prfaas(l_long), B_out / S_kv(l_long))        (Eq. 3)
    Θ_pd-p   = N_p / T_local(l_short)                                         (Eq. 4)
    Θ_pd-d   = N_d · BS_max / (T_decode · L_out)                              (Eq. 5)
    Λ_max    = min(Θ_prfaas / p, Θ_pd-p / (1 - p), Θ_pd-d)                    (Eq. 6)

A term whose routing fraction is zero does not constrain Λ (p = 0: no PrfaaS traffic; p = 1: no local
prefill traffic). Egress at Λ is Λ · p · S_kv(l_long) (the transfer term of Eq. 3; about 13 Gbit/s in §4.3.1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import field, replace
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InfeasibleError
from prfaas_plan.lengths import LengthDistribution
from prfaas_plan.physics.pools import pool_costs
from prfaas_plan.physics.tcp import deliverable_bytes_per_s, transfer_latency_s
from prfaas_plan.spec.hardware import RooflineParams
from prfaas_plan.spec.scenario import Arrival, Pool, Scenario, TcpPath, TransferMode

if TYPE_CHECKING:  # annotations only (a tabulated curve's class loads where one is built)
    from prfaas_plan.physics.curves import Curve

STAGES = ("prfaas_compute", "prfaas_link", "pd_prefill", "pd_decode")

Array = NDArray[np.float64]


@frozen
class StageModel:
    """Everything Eqs. 1-8 need (and the latency models after them), with the profile curves fitted once.

    Curves map an uncached length (tokens) to seconds or bytes; use them only through ``curve(l)`` and
    ``curve.expect(lengths, lo, hi, power)`` so that fitted and roofline-derived curves are interchangeable.
    """

    lengths: LengthDistribution
    prfaas_prefill: Curve
    local_prefill: Curve
    kv_bytes: Curve
    decode_max_batch: int
    decode_step_time_s: float
    output_tokens_mean: float
    #: The rate the link *delivers* to the transfers, bytes/s (``physics.tcp.deliverable_bytes_per_s`` of the
    #: nominal rate over ``link_tcp``): what Eq. 3's link term, the queueing laws and the simulator serve at.
    link_bandwidth_bytes_per_s: float
    n_prfaas: int
    n_local: int
    #: "after_prefill" or "layerwise" (see spec.scenario.Link).
    transfer: TransferMode = "after_prefill"
    #: Per-instance intra-cluster KV bandwidth of the local pool, bytes/s; None = not modelled.
    local_kv_transfer_bytes_per_s: float | None = None
    #: How the link is built (``spec.scenario.TcpPath``; the default is the nominal link) and the rate bought,
    #: bytes/s (what is priced; None = ``link_bandwidth_bytes_per_s``). ``with_link_rate`` keeps the three
    #: consistent when a search changes the link's size.
    link_tcp: TcpPath = field(default_factory=TcpPath)
    link_nominal_bytes_per_s: float | None = None
    #: The fixed time each cross-datacentre transfer pays after its bytes, s (``physics.tcp.transfer_latency_s``:
    #: its round trips); latency only, it holds no link capacity.
    link_latency_s: float = 0.0
    #: Arrival process: squared coefficient of variation of inter-arrival times (1 = Poisson), what the
    #: stationary closed form uses; ``arrival`` is the whole process (what the simulator and the windowed
    #: closed form use).
    interarrival_scv: float = 1.0
    arrival: Arrival = field(default_factory=Arrival)
    ttft_includes_first_decode_step: bool = False
    #: Each route's KV handoff per request (``PoolCosts.kv_handoff_s`` of its prefill pool), s: the wait of a
    #: disaggregated prefill until its KV is handed to the decode side; latency only (added to TTFT, holding
    #: no prefill instance).
    local_handoff_s: float = 0.0
    prfaas_handoff_s: float = 0.0
    #: The decode step against the batch, knots (batch, s) interpolated linearly and held flat outside them
    #: (``decode_step_s``): what TPOT follows under load (``latency.tpot``, the simulator). Empty: flat at
    #: ``decode_step_time_s``, today's fixed-step decode.
    decode_step_batches: tuple[float, ...] = ()
    decode_step_times_s: tuple[float, ...] = ()
    #: P90 TPOT SLO under load, s, held by goodput and sizing beside the TTFT SLO (None: not stated).
    tpot_p90_slo_s: float | None = None
    #: Where each input came from (quantity -> provenance line), for reports.
    sources: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)

    @property
    def decode_req_per_s_per_instance(self) -> float:
        """Θ_pd-d of one decode instance (Eq. 5 with N_d = 1): BS_max / (T_decode · L_out), req/s."""
        return decode_rate_req_per_s(self.decode_max_batch, self.decode_step_time_s, self.output_tokens_mean)

    def decode_step_s(self, batch: ArrayLike) -> Array:
        """Decode step time at ``batch`` sequences, s: the knots interpolated linearly, flat outside them
        (``decode_step_time_s`` everywhere when there are none)."""
        b = np.asarray(batch, dtype=np.float64)
        if not self.decode_step_batches:
            return np.full(b.shape, self.decode_step_time_s)
        return np.asarray(np.interp(b, self.decode_step_batches, self.decode_step_times_s), dtype=np.float64)

    @property
    def decode_step_flat(self) -> bool:
        """Whether the step time is the same at every batch (today's fixed-step decode)."""
        return len(set(self.decode_step_times_s)) <= 1


def link_bought_bytes_per_s(model: StageModel) -> float:
    """The nominal rate of the model's link, bytes/s: what is bought and priced (the deliverable rate when the
    model was built without one)."""
    nominal = model.link_nominal_bytes_per_s
    return model.link_bandwidth_bytes_per_s if nominal is None else nominal


def with_link_rate(model: StageModel, nominal_bytes_per_s: float) -> StageModel:
    """The model on a link bought at ``nominal_bytes_per_s`` and built as the model's (``link_tcp``): served at
    its deliverable rate min(B, the connections' ceiling), priced at B. Every search over link sizes goes
    through here, so a size is never served at the rate it was bought when its connections deliver less."""
    return replace(
        model,
        link_bandwidth_bytes_per_s=deliverable_bytes_per_s(nominal_bytes_per_s, model.link_tcp),
        link_nominal_bytes_per_s=float(nominal_bytes_per_s),
    )


def decode_rate_req_per_s(max_batch: int, step_time_s: float, output_tokens_mean: float) -> float:
    """Θ_pd-d of one decode instance (Eq. 5 with N_d = 1): BS_max / (T_decode · L_out), req/s."""
    return max_batch / (step_time_s * output_tokens_mean)


def decode_floor(model: StageModel, rate_req_per_s: float) -> int:
    """Fewest local decode instances that keep up with ``rate_req_per_s``: N_d with N_d · Θ_pd-d(1) > Λ
    (Eq. 5; the decode stage's stability condition)."""
    return math.floor(rate_req_per_s / model.decode_req_per_s_per_instance) + 1


def stage_model(scenario: Scenario) -> StageModel:
    """Derive each pool's costs (measured fit, calibrated roofline or roofline) and collect Eqs. 3-5's constants.

    Raises InfeasibleError when the local decode capacity cannot meet the TPOT SLO, or no request fits.
    """
    tpot_s = 1.0 / scenario.slo.decode_tokens_per_s
    lengths = scenario.traffic.input_length
    context = lengths.mean_tokens + scenario.traffic.output_length.mean_tokens / 2
    _check_prfaas_memory(scenario)
    prfaas = pool_costs(scenario.prfaas, scenario.model, context_tokens=context, tpot_s=tpot_s)
    local = pool_costs(scenario.local, scenario.model, context_tokens=context, tpot_s=tpot_s)
    # The loader guarantees measured pools carry these; derived pools always produce them.
    assert prfaas.kv_bytes is not None
    if local.decode_max_batch is None or local.decode_step_time_s is None or local.decode_max_batch < 1:
        why = local.decode_source
        arch = scenario.model.architecture
        if arch is not None and scenario.local.method != "measured":
            from prfaas_plan.physics.fit import memory_fit

            fit = memory_fit(arch, scenario.local.accelerator, scenario.local.gpus_per_instance, context)
            if not fit.fits:
                why = f"{scenario.local.gpus_per_instance} x {scenario.local.hardware_key}: {fit.describe()}"
        raise InfeasibleError(f"pd_decode: {why}")
    if local.decode_step_time_s > tpot_s * (1 + 1e-9):
        raise InfeasibleError(
            f"TPOT SLO: the decode step time {local.decode_step_time_s * 1e3:.1f} ms at batch "
            f"{local.decode_max_batch} exceeds 1/{scenario.slo.decode_tokens_per_s:g} tok/s = {tpot_s * 1e3:.1f} ms"
        )
    batches, steps = decode_step_knots(scenario, local.roofline, local.decode_max_batch, context)
    return StageModel(
        lengths=lengths,
        prfaas_prefill=prfaas.prefill,
        local_prefill=local.prefill,
        kv_bytes=prfaas.kv_bytes,
        decode_max_batch=local.decode_max_batch,
        decode_step_time_s=local.decode_step_time_s,
        output_tokens_mean=scenario.traffic.output_length.mean_tokens,
        link_bandwidth_bytes_per_s=deliverable_bytes_per_s(scenario.link.bandwidth_bytes_per_s, scenario.link.tcp),
        link_tcp=scenario.link.tcp,
        link_nominal_bytes_per_s=scenario.link.bandwidth_bytes_per_s,
        link_latency_s=transfer_latency_s(scenario.link.tcp),
        n_prfaas=scenario.prfaas.instances,
        n_local=scenario.local.instances,
        transfer=scenario.link.transfer,
        local_kv_transfer_bytes_per_s=scenario.local.kv_transfer_bytes_per_s,
        interarrival_scv=scenario.traffic.arrival.interarrival_scv,
        arrival=scenario.traffic.arrival,
        ttft_includes_first_decode_step=scenario.slo.ttft_includes_first_decode_step,
        local_handoff_s=local.kv_handoff_s,
        prfaas_handoff_s=prfaas.kv_handoff_s,
        decode_step_batches=batches,
        decode_step_times_s=steps,
        tpot_p90_slo_s=scenario.slo.tpot_p90_s,
        sources={
            f"prefill ({scenario.prfaas.hardware_key}, PrfaaS)": prfaas.prefill_source
            + _extrapolated(scenario, scenario.prfaas),
            f"prefill ({scenario.local.hardware_key}, local)": local.prefill_source
            + _extrapolated(scenario, scenario.local),
            "kv_cache": prfaas.kv_source,
            f"decode ({scenario.local.hardware_key})": local.decode_source,
        },
    )


def _extrapolated(scenario: Scenario, pool: Pool) -> str:
    """For a pool priced from measured prefill points: where a noted share of the traffic's prompts is longer than
    its longest point, a clause saying the fitted curve is extrapolated there ("" otherwise; below
    ``spec.uncertainty.OUTSIDE_SHARE_NOTED``, as for a band's range, nothing is said)."""
    if pool.method != "measured" or pool.profile is None:
        return ""
    from prfaas_plan.spec.uncertainty import OUTSIDE_SHARE_NOTED

    longest = max(pool.profile.prefill.lengths_tokens)
    share = float(scenario.traffic.input_length.sf(longest))
    if share < OUTSIDE_SHARE_NOTED:
        return ""
    return (
        f"; extrapolated past its longest point ({longest:,.0f} tokens) for {share:.0%} of the traffic's prompts: "
        "no measurement checks those times"
    )


def _check_prfaas_memory(scenario: Scenario) -> None:
    """InfeasibleError when the PrfaaS pool's instance cannot hold the model's weights plus one request's
    KV/state at the longest input it may be sent (the decode pool's check, ``physics.fit.memory_fit``, at the
    length a prefill-only instance must hold). Measured pools were run, so they hold it."""
    pool, arch = scenario.prfaas, scenario.model.architecture
    if arch is None or pool.method == "measured":
        return
    from prfaas_plan.physics.fit import memory_fit

    fit = memory_fit(arch, pool.accelerator, pool.gpus_per_instance, scenario.traffic.input_length.upper_tokens)
    if not fit.fits:
        raise InfeasibleError(f"prfaas: {pool.gpus_per_instance} x {pool.hardware_key}: {fit.describe()}")


def decode_step_knots(
    scenario: Scenario, params: RooflineParams | None, max_batch: int, context_tokens: float
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The local pool's decode step at batches 1..``max_batch`` (batch, s): the physics decode step at
    ``context_tokens`` for a roofline or calibrated pool, on its instance shape where it has one (times its
    ``decode_time_scale``), the same step its decode capacity was found with; the profile's one
    (BS_max, T_decode) point for a measured pool, which makes the curve flat (one point says nothing of how
    the step varies with the batch)."""
    pool, arch = scenario.local, scenario.model.architecture
    if params is None or arch is None:
        decode = pool.profile.decode if pool.profile is not None else None
        if decode is None:
            return (), ()
        return (float(decode.max_batch),), (decode.step_time_s * pool.decode_time_scale,)
    from prfaas_plan.physics.decode import decode_step_seconds
    from prfaas_plan.physics.roofline import Instance

    batches = np.arange(1, max_batch + 1, dtype=np.float64)
    if pool.shape is not None:  # the shape's step (attention over DP replicas, experts over EP), as its capacity
        from prfaas_plan.physics.shapes import shaped_decode_step

        shaped = shaped_decode_step(arch, pool.accelerator, pool.shape, params, batches, context_tokens).total_s
        steps = np.asarray(shaped, dtype=np.float64) * pool.decode_time_scale
    else:
        instance = Instance(accelerator=pool.accelerator, gpus=pool.gpus_per_instance)
        steps = decode_step_seconds(arch, instance, params, batches, context_tokens) * pool.decode_time_scale
    return tuple(batches.tolist()), tuple(float(v) for v in steps)


@frozen
class Routing:
    """The routing split at thresholds t (arrays of one shape): p, l_long, l_short."""

    threshold_tokens: Array
    offload_fraction: Array
    long_tokens: Array
    short_tokens: Array


def routing(lengths: LengthDistribution, threshold_tokens: ArrayLike) -> Routing:
    """p = P(L > t), l_long = E[L | L > t], l_short = E[L | L <= t] (NaN where the condition is empty)."""
    t = np.asarray(threshold_tokens, dtype=np.float64)
    return Routing(
        threshold_tokens=t,
        offload_fraction=np.asarray(lengths.sf(t), dtype=np.float64),
        long_tokens=np.asarray(lengths.mean_above(t), dtype=np.float64),
        short_tokens=np.asarray(lengths.mean_below(t), dtype=np.float64),
    )


@frozen
class StageThroughputs:
    """Θ of every stage (Eqs. 3-5) in req/s of the stage's own traffic; NaN where a stage gets no traffic."""

    prfaas_compute: Array
    prfaas_link: Array
    pd_prefill: Array
    pd_decode: Array

    @property
    def prfaas(self) -> Array:
        """Θ_prfaas = min(compute, link) (Eq. 3)."""
        return np.fmin(self.prfaas_compute, self.prfaas_link)


def stage_throughputs(model: StageModel, route: Routing, n_pd_prefill: ArrayLike) -> StageThroughputs:
    """Eqs. 3-5 at every threshold of ``route`` (axis -1) for every N_p in ``n_pd_prefill`` (broadcast)."""
    n_p = np.asarray(n_pd_prefill, dtype=np.float64)
    has_long = route.offload_fraction > 0
    has_short = route.offload_fraction < 1
    l_long = np.where(has_long, route.long_tokens, model.lengths.mean_tokens)
    l_short = np.where(has_short, route.short_tokens, model.lengths.mean_tokens)
    compute = np.where(has_long, model.n_prfaas / model.prfaas_prefill(l_long), np.nan)
    link = np.where(has_long, model.link_bandwidth_bytes_per_s / model.kv_bytes(l_long), np.nan)
    prefill = np.where(has_short, n_p / model.local_prefill(l_short), np.nan)
    decode = (model.n_local - n_p) * model.decode_req_per_s_per_instance
    shape = np.broadcast_shapes(compute.shape, prefill.shape, np.shape(decode))
    return StageThroughputs(
        prfaas_compute=np.broadcast_to(compute, shape),
        prfaas_link=np.broadcast_to(link, shape),
        pd_prefill=np.broadcast_to(prefill, shape),
        pd_decode=np.broadcast_to(decode, shape).astype(np.float64),
    )


def stage_bounds(theta: StageThroughputs, route: Routing) -> dict[str, Array]:
    """Each stage's limit on the *total* arrival rate Λ (Eq. 6 terms); +inf where the stage gets no traffic."""
    p = route.offload_fraction
    with np.errstate(divide="ignore", invalid="ignore"):
        long_share = np.where(p > 0, p, np.inf)
        short_share = np.where(p < 1, 1 - p, np.inf)
        return {
            "prfaas_compute": np.where(p > 0, theta.prfaas_compute / long_share, np.inf),
            "prfaas_link": np.where(p > 0, theta.prfaas_link / long_share, np.inf),
            "pd_prefill": np.where(p < 1, theta.pd_prefill / short_share, np.inf),
            "pd_decode": np.asarray(theta.pd_decode, dtype=np.float64),
        }


def max_throughput(bounds: dict[str, Array]) -> Array:
    """Λ_max = the smallest stage bound (Eq. 6)."""
    return np.asarray(np.minimum.reduce(np.broadcast_arrays(*(bounds[s] for s in STAGES))), dtype=np.float64)


def egress_bytes_per_s(model: StageModel, route: Routing, rate_req_per_s: ArrayLike) -> Array:
    """Cross-DC egress at arrival rate Λ: Λ · p · S_kv(l_long), bytes/s (paper §4.3.1); 0 when p = 0."""
    p = route.offload_fraction
    l_long = np.where(p > 0, route.long_tokens, model.lengths.mean_tokens)
    return np.where(p > 0, np.asarray(rate_req_per_s) * p * model.kv_bytes(l_long), 0.0)
