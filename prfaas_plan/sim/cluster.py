"""The PrfaaS-PD cluster as discrete events: router, two prefill pools, the shared link, decode slots.

A request arriving with uncached length L goes to the PrfaaS pool if L > t and to the local prefill pool
otherwise (the plan's threshold). Each pool is c identical FCFS servers; service takes the pool's prefill
curve at the request's own length, T(L) (the throughput model represents a route by T(E[L]) instead).

- Offloaded requests send S_kv(L) bytes over the shared link (``link.SharedLink``). ``after_prefill``: the
  transfer starts when the prefill ends and the instance is free at once (KV is shipped asynchronously).
  ``layerwise``: the transfer joins the link when the prefill starts and the KV is ready at the later of the
  prefill end and the transfer end. Pipelined transfers take an equal share of the link from the start,
  although a prefill cannot produce KV faster than S_kv/T; on an uncongested link (the paper's runs at
  about 13 %) this is immaterial, on a congested one it favours early-stage transfers slightly. A link
  with a round trip (``StageModel.link_latency_s``) makes the KV ready that long after the transfer (or,
  layer-wise, the later of prefill and transfer) ends; the wait holds no link capacity.
- Local requests hand their KV cache over the intra-cluster network in S_kv(L)/b when the scenario gives a
  per-instance bandwidth b (a pure delay: each instance's NIC carries one transfer at a time and is idle
  most of the time), instantly otherwise.
- Decode: N_d instances of BS_max slots, one FCFS queue. A request holds a slot for L_out·T_decode. With a
  KV-memory limit per instance, a request is admitted only to an instance with a free slot *and* room for
  its S_kv(L) bytes (the one with most room); the queue is strictly FCFS, so the head can block smaller
  requests behind it. Without the limit the N_d·BS_max slots act as one pool.

TTFT ends at decode admission (plus one decode step when the scenario counts it), so it includes the wait
for a decode slot. Nothing pushes back upstream: a full decode pool makes requests wait with their KV.
"""

from __future__ import annotations

import heapq
import itertools
import math
from array import array
from collections import deque
from collections.abc import Callable
from typing import Protocol

import numpy as np
import numpy.typing as npt

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InputError, Problem
from prfaas_plan.sim.engine import Engine
from prfaas_plan.sim.link import FINISH_RTOL, MAX_BINS, SharedLink
from prfaas_plan.sim.records import STATES, Records, SimResult
from prfaas_plan.sim.workload import Workload
from prfaas_plan.spec.dynamics import InstanceLoss, RoleControl, ThresholdControl
from prfaas_plan.throughput import StageModel
from prfaas_plan.units import GIB

# Event kinds (handler indices); a ``Dynamics`` strategy's own come after these (FIRST_EXTRA_KIND on).
ARRIVAL, PREFILL_DONE, LINK_DONE, KV_READY, DECODE_DONE, BANDWIDTH = range(6)
# Request states, indices into STATES.
Q_PRFAAS, Q_LOCAL, S_PRFAAS, S_LOCAL, TRANSFER, Q_DECODE, S_DECODE = range(len(STATES))
DONE = -1
#: The progress callback is told the number of arrivals every this many arrivals.
PROGRESS_EVERY = 8192


@frozen
class ClusterConfig:
    """A plan to simulate: the stage model, the threshold and split, and what the model leaves out.

    ``decode_kv_capacity_bytes``: KV memory per decode instance for admission (None: slots only).
    ``bandwidth_profile``: ((start_s, bandwidth_bytes_per_s), ...) steps, the first at 0 s, replacing the
    model's constant link bandwidth (the last step holds for ever). ``egress_bin_s``: width of the bins in
    which delivered bytes are tallied (the peak egress is the busiest bin).

    ``losses``, ``threshold_control`` and ``role_control`` call for a changing world (``sim.run`` gives the
    cluster ``sim.dynamic.DynamicWorld``: lost instances, the dual-timescale scheduler; a workload whose
    requests move cached prefixes across the link does too); without them the run takes the static fast path.
    """

    model: StageModel
    threshold_tokens: float
    n_pd_prefill: int
    n_pd_decode: int
    decode_kv_capacity_bytes: float | None = None
    bandwidth_profile: tuple[tuple[float, float], ...] = ()
    egress_bin_s: float = 1.0
    losses: tuple[InstanceLoss, ...] = ()
    threshold_control: ThresholdControl | None = None
    role_control: RoleControl | None = None

    @property
    def dynamic(self) -> bool:
        """Whether the run needs a changing world (faults or a scheduler)."""
        return bool(self.losses) or self.threshold_control is not None or self.role_control is not None

    @property
    def decode_slots(self) -> int:
        """N_d · BS_max."""
        return self.n_pd_decode * self.model.decode_max_batch

    def problems(self) -> list[Problem]:
        """Why this configuration cannot be simulated (empty when it can)."""
        problems = []
        if self.n_pd_decode < 1:
            problems.append(Problem(field="n_pd_decode", message=f"must be >= 1, got {self.n_pd_decode}"))
        if self.n_pd_prefill < 0:
            problems.append(Problem(field="n_pd_prefill", message=f"must be >= 0, got {self.n_pd_prefill}"))
        if self.model.decode_max_batch < 1:
            problems.append(Problem(field="decode_max_batch", message="must be >= 1"))
        if not (math.isfinite(self.egress_bin_s) and self.egress_bin_s > 0):
            problems.append(Problem(field="egress_bin_s", message=f"must be > 0, got {self.egress_bin_s}"))
        profile = self.bandwidth_profile
        if profile:
            times = [step[0] for step in profile]
            if times[0] != 0.0 or any(b <= a for a, b in itertools.pairwise(times)):
                problems.append(Problem(field="bandwidth_profile", message="step times must start at 0 and increase"))
            if any(not (math.isfinite(bw) and bw >= 0.0) for _, bw in profile):
                problems.append(Problem(field="bandwidth_profile", message="bandwidths must be finite and >= 0"))
        elif not self.model.link_bandwidth_bytes_per_s > 0:
            problems.append(Problem(field="link bandwidth", message="must be > 0"))
        return problems


#: An event handler: (now, payload) -> None.
Handler = Callable[[float, int], None]
#: The first event kind a ``Dynamics`` strategy's own handlers take (kinds 6, 7, ... in the order it lists them).
FIRST_EXTRA_KIND = 6
#: What ``Dynamics.route`` answers for an arrival it holds back: the cluster neither starts nor queues it.
HELD = -1


class Dynamics(Protocol):
    """What changes while the cluster runs (lost instances, a scheduler, caches that move), as the hooks the
    cluster calls at its extension points. ``StaticDynamics`` is the plan as given, and costs nothing: a static
    run takes the fused loop, which calls no hook. ``sim.dynamic.DynamicWorld`` is the changing world.

    A *token* is the payload of a request's PREFILL_DONE or DECODE_DONE event. The strategy chooses it when the
    stage starts and decodes it when the event fires, answering -1 for an event it has overtaken (the
    instance was lost meanwhile): the cluster then ignores the event.
    """

    def attach(self, cluster: Cluster) -> tuple[Handler, ...]:
        """Check that the strategy can run this cluster (InputError if not), set up its state, schedule the
        first of its own events; return its handlers, for kinds FIRST_EXTRA_KIND on."""
        ...

    def route(self, now_s: float, i: int, planned: int) -> int:
        """The prefill pool arrival i goes to (``planned``: the plan's route), or HELD."""
        ...

    def delivered(self, now_s: float, i: int) -> bool:
        """A transfer for request i has left the link: True when it was the strategy's own, not a KV cache."""
        ...

    def bandwidth_changed(self, now_s: float, step: int) -> None:
        """The link has taken step ``step`` of the bandwidth profile."""
        ...

    def prefill_started(self, i: int, route: int) -> int:
        """Request i's prefill starts on pool ``route``: the token of its PREFILL_DONE."""
        ...

    def prefill_ended(self, token: int) -> int:
        """A PREFILL_DONE fires: its request, or -1 to ignore it."""
        ...

    def server_freed(self, now_s: float, route: int) -> bool:
        """A prefill server of pool ``route`` has finished: True when the strategy takes it (the cluster then
        neither starts the next request on it nor counts it free)."""
        ...

    def decode_started(self, now_s: float, i: int) -> int:
        """Request i is admitted to decode: the token of its DECODE_DONE."""
        ...

    def decode_ended(self, now_s: float, token: int) -> int:
        """A DECODE_DONE fires: its request, or -1 to ignore it."""
        ...

    def slot_freed(self, now_s: float) -> bool:
        """A pooled decode slot has been released: True when the strategy takes it."""
        ...

    def close(self) -> npt.NDArray[np.float64] | None:
        """The run is over, its records not yet built: put back what the run overwrote; return each request's
        finish time (NaN where it has not finished), or None when it is admission + hold."""
        ...

    def annotate(self, result: SimResult) -> SimResult:
        """The run's result with the strategy's own tallies added."""
        ...


class Decoder(Protocol):
    """A decode stage in place of the cluster's own (a fixed step: pooled slots, or per-instance slots and KV
    memory): it admits requests and fires its own DECODE_DONE events (``sim.batch_decode.BatchDecode``: the
    step follows each instance's batch). The cluster keeps the FCFS decode queue."""

    def attach(self, cluster: Cluster) -> Handler:
        """Set up its state; return the handler of the DECODE_DONE events it schedules."""
        ...

    def admit(self, now_s: float, i: int) -> bool:
        """Admit request i to decode now if it fits (False: it waits at the head of the queue)."""
        ...


class StaticDynamics:
    """Nothing changes: the plan's routes, every instance for the whole run (each hook is the identity)."""

    __slots__ = ()

    def attach(self, cluster: Cluster) -> tuple[Handler, ...]:
        return ()

    def route(self, now_s: float, i: int, planned: int) -> int:
        return planned

    def delivered(self, now_s: float, i: int) -> bool:
        return False

    def bandwidth_changed(self, now_s: float, step: int) -> None:
        return None

    def prefill_started(self, i: int, route: int) -> int:
        return i

    def prefill_ended(self, token: int) -> int:
        return token

    def server_freed(self, now_s: float, route: int) -> bool:
        return False

    def decode_started(self, now_s: float, i: int) -> int:
        return i

    def decode_ended(self, now_s: float, token: int) -> int:
        return token

    def slot_freed(self, now_s: float) -> bool:
        return False

    def close(self) -> npt.NDArray[np.float64] | None:
        return None

    def annotate(self, result: SimResult) -> SimResult:
        return result


#: The static world (stateless: one instance serves every cluster).
STATIC = StaticDynamics()


class Cluster:
    """Mutable state of one run. Handlers are methods; per-request data live in flat arrays. What changes
    during the run is the ``dynamics`` strategy's (``Dynamics``; default: nothing)."""

    def __init__(
        self,
        config: ClusterConfig,
        workload: Workload,
        progress: Callable[[int], None] | None,
        dynamics: Dynamics = STATIC,
        decoder: Decoder | None = None,
    ) -> None:
        if decoder is not None and not isinstance(dynamics, StaticDynamics):
            raise ValueError("a changing world runs the cluster's own decode: no decoder with it")
        model = config.model
        problems = config.problems()
        lengths = workload.input_tokens
        offload = workload.offloaded if workload.offloaded is not None else lengths > config.threshold_tokens
        n_offloaded = int(np.count_nonzero(offload))
        if n_offloaded and model.n_prfaas < 1:
            problems.append(Problem(field="n_prfaas", message=f"{n_offloaded} requests are offloaded to no instances"))
        if n_offloaded < lengths.size and config.n_pd_prefill < 1:
            problems.append(
                Problem(field="n_pd_prefill", message=f"{lengths.size - n_offloaded} local requests have no instances")
            )
        service = np.where(offload, model.prfaas_prefill(lengths), model.local_prefill(lengths))
        if workload.extra_prefill_s is not None:
            service = service + workload.extra_prefill_s
        kv = np.asarray(model.kv_bytes(lengths), dtype=np.float64)
        if lengths.size and not (np.all(np.isfinite(service)) and float(np.min(service)) >= 0.0):
            where = float(lengths[np.argmin(np.where(np.isfinite(service), service, -np.inf))])
            problems.append(Problem(field="prefill curve", message=f"not a positive time at {where:,.0f} tokens"))
        if lengths.size and not (np.all(np.isfinite(kv)) and float(np.min(kv)) >= 0.0):
            problems.append(Problem(field="kv_bytes curve", message="not a non-negative size at every length"))
        capacity = config.decode_kv_capacity_bytes
        if capacity is not None and lengths.size and float(np.max(kv)) > capacity:
            problems.append(
                Problem(
                    field="decode KV capacity",
                    message=f"a request's KV cache ({float(np.max(kv)) / GIB:.2f} GiB) exceeds one decode "
                    f"instance's {capacity / GIB:.2f} GiB: it could never be admitted",
                )
            )
        if problems:
            raise InputError(problems)

        self.config = config
        self.workload = workload
        self.n = int(lengths.size)
        self.progress = progress
        self.engine = Engine()
        self.schedule = self.engine.scheduler()
        # Per-request inputs as flat arrays: indexing array('d') gives Python floats, numpy gives slow scalars.
        self.arrival = array("d", workload.arrival_s.tobytes())
        self.offload = bytearray(offload.astype(np.uint8).tobytes())
        self.service = array("d", service.astype(np.float64).tobytes())
        self.kv = array("d", kv.tobytes())
        self.hold = array("d", (workload.output_tokens * model.decode_step_time_s).astype(np.float64).tobytes())
        nan_row = array("d", [math.nan]) * self.n
        self.prefill_start = array("d", nan_row)
        self.prefill_end = array("d", nan_row)
        self.kv_ready = array("d", nan_row)
        self.decode_start = array("d", nan_row)
        self.layerwise = model.transfer == "layerwise"
        # The round trips each cross-datacentre transfer pays after its bytes (0: ready when the bytes are).
        self.link_latency_s = model.link_latency_s
        # Layer-wise requests are ready when both the prefill and the transfer are done: parts still to come.
        self.parts_left = bytearray(b"\x02") * self.n if self.layerwise else bytearray()
        rdma = model.local_kv_transfer_bytes_per_s
        self.rdma_bytes_per_s = rdma if rdma is not None and rdma > 0 else None
        # Prefill pools, indexed by route (0 local, 1 PrfaaS): free servers and FCFS queues.
        self.free = [config.n_pd_prefill, model.n_prfaas]
        self.queues: tuple[deque[int], deque[int]] = (deque(), deque())
        profile = config.bandwidth_profile
        bandwidth = profile[0][1] if profile else model.link_bandwidth_bytes_per_s
        self.link = SharedLink(bandwidth, config.egress_bin_s)
        self.link_generation = 0
        # Decode: one FCFS queue; pooled slots, or per-instance slots and KV memory with a capacity.
        self.decode_queue: deque[int] = deque()
        self.decode_free = config.decode_slots
        self.capacity = capacity
        self.instance_slots = [model.decode_max_batch] * config.n_pd_decode
        self.instance_room = [capacity or 0.0] * config.n_pd_decode
        self.instance_of = array("i", [-1]) * (self.n if capacity is not None else 0)
        # Occupancy of each state: count now, and sum(exit times) - sum(entry times) so far.
        self.count = [0] * len(STATES)
        self.exit_minus_entry = [0.0] * len(STATES)
        self.completed = 0
        self.decoder = decoder
        self.decode_done = decoder.attach(self) if decoder is not None else self.on_decode_done
        self.dynamics = dynamics
        self.extra_handlers = dynamics.attach(self)

    # -- bookkeeping --------------------------------------------------------------------------------------

    def move(self, now: float, source: int, target: int) -> None:
        """A request leaves state ``source`` (or arrives, -1) and enters ``target`` (or leaves, -1)."""
        if source >= 0:
            self.count[source] -= 1
            self.exit_minus_entry[source] += now
        if target >= 0:
            self.count[target] += 1
            self.exit_minus_entry[target] -= now

    # -- prefill ------------------------------------------------------------------------------------------

    def on_arrival(self, now: float, i: int) -> None:
        if i + 1 < self.n:
            self.schedule(self.arrival[i + 1], ARRIVAL, i + 1)
        if self.progress is not None and (i + 1) % PROGRESS_EVERY == 0:
            self.progress(i + 1)
        route = self.dynamics.route(now, i, self.offload[i])
        if route != HELD:
            self.enqueue(now, i, route, DONE)

    def enqueue(self, now: float, i: int, route: int, source: int, front: bool = False) -> None:
        """Request i (leaving state ``source``) starts its prefill on pool ``route`` if a server is free and
        nobody waits, or joins the pool's queue (at the front with ``front``)."""
        queue = self.queues[route]
        if self.free[route] and not queue:
            self.free[route] -= 1
            self.move(now, source, S_PRFAAS if route else S_LOCAL)
            self.start_prefill(now, i, route)
        else:
            if front:
                queue.appendleft(i)
            else:
                queue.append(i)
            self.move(now, source, Q_PRFAAS if route else Q_LOCAL)

    def start_prefill(self, now: float, i: int, route: int) -> None:
        """Request i's prefill starts now on a server of pool ``route`` (already taken off ``free``)."""
        self.prefill_start[i] = now
        self.schedule(now + self.service[i], PREFILL_DONE, self.dynamics.prefill_started(i, route))
        if route and self.layerwise:
            self.start_transfer(now, i, self.kv[i])

    def next_prefill(self, now: float, route: int) -> None:
        """A server of pool ``route`` is free: it starts the head of the queue, or idles."""
        queue = self.queues[route]
        if queue:
            j = queue.popleft()
            self.move(now, Q_PRFAAS if route else Q_LOCAL, S_PRFAAS if route else S_LOCAL)
            self.start_prefill(now, j, route)
        else:
            self.free[route] += 1

    def on_prefill_done(self, now: float, token: int) -> None:
        dynamics = self.dynamics
        i = dynamics.prefill_ended(token)
        if i < 0:
            return
        self.prefill_end[i] = now
        route = self.offload[i]
        if not dynamics.server_freed(now, route):
            self.next_prefill(now, route)
        source = S_PRFAAS if route else S_LOCAL
        if route:
            if self.layerwise:
                self.parts_left[i] -= 1
                if self.parts_left[i]:
                    self.move(now, source, TRANSFER)
                else:
                    self._link_ready(now, i, source)
            else:
                self.move(now, source, TRANSFER)
                self.start_transfer(now, i, self.kv[i])
        elif self.rdma_bytes_per_s is not None:
            self.move(now, source, TRANSFER)
            self.schedule(now + self.kv[i] / self.rdma_bytes_per_s, KV_READY, i)
        else:
            self._ready(now, i, source)

    # -- the link -----------------------------------------------------------------------------------------

    def _link_ready(self, now: float, i: int, source: int) -> None:
        """The last of request i's KV bytes has left over the link: ready now, or after the round trips."""
        if self.link_latency_s > 0.0:
            if source != TRANSFER:
                self.move(now, source, TRANSFER)
            self.schedule(now + self.link_latency_s, KV_READY, i)
        else:
            self._ready(now, i, source)

    def start_transfer(self, now: float, i: int, size_bytes: float) -> None:
        """``size_bytes`` for request i join the link now."""
        self.link.start(now, size_bytes, i)
        self._reschedule_link(now)

    def _reschedule_link(self, now: float) -> None:
        # Every change of the link invalidates the finish event scheduled before it: bump the generation.
        self.link_generation += 1
        finish = self.link.next_finish_s(now)
        if finish < math.inf:
            self.schedule(finish, LINK_DONE, self.link_generation)

    def on_link_done(self, now: float, generation: int) -> None:
        if generation != self.link_generation:
            return  # superseded by a later start, finish or bandwidth change
        dynamics = self.dynamics
        for i in self.link.finish_due(now):
            if dynamics.delivered(now, i):
                continue  # the strategy's own bytes (a cached prefix), not a KV cache
            if self.layerwise:
                self.parts_left[i] -= 1
                if self.parts_left[i]:
                    continue  # transferred before its prefill ended (still in prefill)
            self._link_ready(now, i, TRANSFER)
        self._reschedule_link(now)

    def on_kv_ready(self, now: float, i: int) -> None:
        self._ready(now, i, TRANSFER)

    def on_bandwidth(self, now: float, step: int) -> None:
        self.link.set_bandwidth(now, self.config.bandwidth_profile[step][1])
        self._reschedule_link(now)
        self.dynamics.bandwidth_changed(now, step)

    # -- decode -------------------------------------------------------------------------------------------

    def _ready(self, now: float, i: int, source: int) -> None:
        """The KV cache of request i is at the decode cluster: admit it or queue it."""
        self.kv_ready[i] = now
        if not self.decode_queue and self.try_admit(now, i):
            self.move(now, source, S_DECODE)
        else:
            self.decode_queue.append(i)
            self.move(now, source, Q_DECODE)

    def try_admit(self, now: float, i: int) -> bool:
        """Admit request i to decode now if it fits (the decoder's choice when there is one)."""
        if self.decoder is not None:
            return self.decoder.admit(now, i)
        if self.capacity is None:
            if self.decode_free <= 0:
                return False
            self.decode_free -= 1
        else:
            need, best, room = self.kv[i], -1, -1.0
            for k, slots in enumerate(self.instance_slots):
                if slots and self.instance_room[k] >= need and self.instance_room[k] > room:
                    best, room = k, self.instance_room[k]
            if best < 0:
                return False
            self.instance_slots[best] -= 1
            self.instance_room[best] -= need
            self.instance_of[i] = best
        self.decode_start[i] = now
        self.schedule(now + self.hold[i], DECODE_DONE, self.dynamics.decode_started(now, i))
        return True

    def on_decode_done(self, now: float, token: int) -> None:
        dynamics = self.dynamics
        i = dynamics.decode_ended(now, token)
        if i < 0:
            return
        self.completed += 1
        self.move(now, S_DECODE, DONE)
        if self.capacity is None:
            if not dynamics.slot_freed(now):
                self.decode_free += 1
        else:
            k = self.instance_of[i]
            self.instance_slots[k] += 1
            self.instance_room[k] += self.kv[i]
        self.admit_queue(now)

    def admit_queue(self, now: float) -> None:
        """Admit the head of the decode queue while it fits."""
        queue = self.decode_queue
        while queue and self.try_admit(now, queue[0]):
            queue.popleft()
            self.move(now, Q_DECODE, S_DECODE)

    # -- the run ------------------------------------------------------------------------------------------

    def run(self, horizon_s: float) -> SimResult:
        """Simulate until every request has finished or until ``horizon_s``.

        The static cluster without a horizon, a decode KV limit or a link round trip takes the fused loop
        (``_run_fused``); every other run, in a changing world (``dynamics``) or with a ``decoder``, fires the
        handlers above through the engine (``run_handlers``). Both give identical records
        (tests/sim/test_fused_loop.py).
        """
        if (
            isinstance(self.dynamics, StaticDynamics)
            and self.decoder is None
            and self.capacity is None
            and horizon_s == math.inf
            and self.link_latency_s == 0.0
        ):
            return self._run_fused()
        return self.run_handlers(horizon_s)

    def run_handlers(self, horizon_s: float) -> SimResult:
        """The reference path: every event through the engine and the handler methods."""
        engine, config = self.engine, self.config
        if self.n:
            engine.schedule(self.arrival[0], ARRIVAL, 0)
        for step, (start_s, _) in enumerate(config.bandwidth_profile[1:], start=1):
            engine.schedule(start_s, BANDWIDTH, step)
        engine.run(self.handlers(), horizon_s)
        end_s = engine.now_s
        self.link.advance_to(end_s)
        return self.dynamics.annotate(self._result(end_s))

    def _run_fused(self) -> SimResult:
        """Run to the end with ``_fused_loop``, then derive what the handlers tally as they go (the decode
        slot releases, the occupancy integrals) from the records.

        The fused loop handles the same events in the same (time, sequence) order as the engine, with
        shortcuts that leave every record unchanged. Arrivals are read from the sorted arrival array and the
        link's one live finish is held apart from the heap; each still takes the sequence number the engine
        would have given it, so ties between the three resolve as before. A superseded link finish is not
        pushed at all, only counted. The link's virtual clock and egress bins run in locals with the same
        floating-point operations as ``SharedLink`` and are written back at the end. The pooled decode slots
        are a FCFS multi-server queue fed in KV-ready order: a request is admitted at the later of its
        KV-ready time and the earliest slot release (a heap of release times) instead of through a
        DECODE_DONE event; a release and a KV-ready at one instant admit at that instant in either order, so
        the admissions are those of the handlers. The occupancy integrals are summed per request instead of
        in event order, so they agree with the handlers' to rounding.
        """
        events, end_s = _fused_loop(self)
        if self.n:  # every request's DECODE_DONE, the last of them possibly after every other event
            finished = np.frombuffer(self.decode_start, dtype=np.float64) + np.frombuffer(self.hold, dtype=np.float64)
            events, end_s = events + self.n, max(end_s, float(np.max(finished)))
        self.engine.events_fired = events
        self.engine.now_s = end_s
        self.link.advance_to(end_s)
        self.completed = self.n
        arrival = np.frombuffer(self.arrival, dtype=np.float64)
        offloaded = np.frombuffer(bytes(self.offload), dtype=np.uint8).astype(bool)
        start = np.frombuffer(self.prefill_start, dtype=np.float64)
        end = np.frombuffer(self.prefill_end, dtype=np.float64)
        ready = np.frombuffer(self.kv_ready, dtype=np.float64)
        admitted = np.frombuffer(self.decode_start, dtype=np.float64)
        hold = np.frombuffer(self.hold, dtype=np.float64)
        queued, served = start - arrival, end - start
        # Every request has left every state: each state's integral is the sum of the stays in it.
        stays = {
            Q_PRFAAS: queued[offloaded],
            Q_LOCAL: queued[~offloaded],
            S_PRFAAS: served[offloaded],
            S_LOCAL: served[~offloaded],
            TRANSFER: ready - end,
            Q_DECODE: admitted - ready,
            S_DECODE: (admitted + hold) - admitted,
        }
        self.exit_minus_entry = [float(np.sum(stays[state])) for state in range(len(STATES))]
        return self._result(end_s)

    def handlers(self) -> tuple[Handler, ...]:
        """Event handlers by kind: the cluster's six, then the strategy's."""
        return (
            self.on_arrival,
            self.on_prefill_done,
            self.on_link_done,
            self.on_kv_ready,
            self.decode_done,
            self.on_bandwidth,
            *self.extra_handlers,
        )

    def _result(self, end_s: float) -> SimResult:
        config, model = self.config, self.config.model
        finished = self.dynamics.close()
        arrival = np.frombuffer(self.arrival, dtype=np.float64)
        offloaded = np.frombuffer(bytes(self.offload), dtype=np.uint8).astype(bool)
        prefill_start = np.frombuffer(self.prefill_start, dtype=np.float64)
        prefill_end = np.frombuffer(self.prefill_end, dtype=np.float64)
        kv_ready = np.frombuffer(self.kv_ready, dtype=np.float64)
        decode_start = np.frombuffer(self.decode_start, dtype=np.float64)
        hold = np.frombuffer(self.hold, dtype=np.float64)
        if self.layerwise:
            transfer_start = np.where(offloaded, prefill_start, np.nan)
        else:
            transfer_start = np.where(offloaded, prefill_end, np.nan)
        if self.rdma_bytes_per_s is not None:
            transfer_start = np.where(offloaded, transfer_start, prefill_end)
        step = model.decode_step_time_s if model.ttft_includes_first_decode_step else 0.0
        # Each route's KV handoff: a wait before the first token that holds no prefill instance (StageModel).
        handoff = np.where(offloaded, model.prfaas_handoff_s, model.local_handoff_s)
        with np.errstate(invalid="ignore"):
            first_token = decode_start + step + handoff
            finish = decode_start + hold if finished is None else finished
            first_token = np.where(first_token <= end_s, first_token, np.nan)
            finish = np.where(finish <= end_s, finish, np.nan)
        # Arrivals are sorted: the requests that arrived by end_s are a prefix.
        arrived = int(np.searchsorted(arrival, end_s, side="right"))
        records = Records.build(
            arrival_s=arrival[:arrived],
            input_tokens=self.workload.input_tokens[:arrived],
            output_tokens=self.workload.output_tokens[:arrived],
            offloaded=offloaded[:arrived],
            prefill_start_s=prefill_start[:arrived],
            prefill_end_s=prefill_end[:arrived],
            transfer_start_s=transfer_start[:arrived],
            kv_ready_s=kv_ready[:arrived],
            decode_start_s=decode_start[:arrived],
            first_token_s=first_token[:arrived],
            finish_s=finish[:arrived],
        )
        bins = np.asarray(self.link.bin_bytes, dtype=np.float64)
        return SimResult(
            records=records,
            end_s=end_s,
            events=self.engine.events_fired,
            arrived=arrived,
            completed=self.completed,
            in_system=dict(zip(STATES, self.count, strict=True)),
            state_time_s={
                name: acc + count * end_s
                for name, acc, count in zip(STATES, self.exit_minus_entry, self.count, strict=True)
            },
            egress_bin_s=self.link.bin_s,
            egress_bin_bytes=bins,
            link_delivered_bytes=self.link.delivered_bytes,
            link_bandwidth_bytes_per_s=model.link_bandwidth_bytes_per_s,
            bandwidth_profile=config.bandwidth_profile,
            n_prfaas=model.n_prfaas,
            n_pd_prefill=config.n_pd_prefill,
            n_pd_decode=config.n_pd_decode,
            decode_slots=config.decode_slots,
        )


def _fused_loop(c: Cluster) -> tuple[int, float]:
    """The handlers of ``Cluster`` fused into one loop over local variables (``Cluster._run_fused`` says
    what it changes and why the records are those of the handlers). Returns the events the engine would
    have fired other than DECODE_DONE, and the time of the last of them."""
    n, inf, never = c.n, math.inf, 1 << 62
    arrival, offload, service, kv, hold = c.arrival, c.offload, c.service, c.kv, c.hold
    prefill_start, prefill_end, kv_ready, decode_start = c.prefill_start, c.prefill_end, c.kv_ready, c.decode_start
    layerwise, parts_left, rdma, progress = c.layerwise, c.parts_left, c.rdma_bytes_per_s, c.progress
    free, queues, link, profile = c.free, c.queues, c.link, c.config.bandwidth_profile
    tally, lfin, gen, bins, width = link.tally, link.finishing, c.link_generation, link.bins, link.bin_s
    bw, virtual, last_s = link.bandwidth_bytes_per_s, link.virtual_bytes, link.last_s
    slots = [-inf] * c.config.decode_slots  # when each decode slot is next free (a min-heap)
    push, pop, replace = heapq.heappush, heapq.heappop, heapq.heapreplace
    # Sequence numbers as the engine's: arrival 0 first, then step k of the bandwidth profile as k (a heap).
    heap = [(start_s, step, BANDWIDTH, step) for step, (start_s, _) in enumerate(profile[1:], start=1)]
    at, aseq, seq = (arrival[0] if n else inf), (0 if n else never), max(len(profile), 1)
    lt, lseq, stale, stale_last, delivered, busy = inf, never, 0, 0.0, link.delivered_bytes, link.busy_s
    ai, fired, now, rtol, n_bins, last_bin = 0, 0, 0.0, 1.0 + FINISH_RTOL, len(bins), -1
    ready: list[int] | tuple[int, ...]
    while True:
        first = False
        if heap:
            ht = (top := heap[0])[0]
            first = (ht < at or (ht == at and top[1] < aseq)) and (ht < lt or (ht == lt and top[1] < lseq))
        if first:
            now, _, kind, i = pop(heap)
            start = -1  # a request whose transfer joins the link now (-2: the link's finish, < -2: a step)
            if kind == PREFILL_DONE:
                prefill_end[i] = now
                route = offload[i]
                queue = queues[route]
                if queue:
                    j = queue.popleft()
                    prefill_start[j] = now
                    push(heap, (now + service[j], seq, PREFILL_DONE, j))
                    seq += 1
                    if route and layerwise:
                        start = j
                else:
                    free[route] += 1
                if not route:
                    if rdma is None:  # KV at the decode cluster: FCFS onto the earliest free slot
                        kv_ready[i] = now
                        slot = slots[0]
                        begin = now if slot <= now else slot
                        decode_start[i] = begin
                        replace(slots, begin + hold[i])
                    else:
                        push(heap, (now + kv[i] / rdma, seq, KV_READY, i))
                        seq += 1
                    continue
                ready = ()
                if not layerwise:
                    start = i
                else:
                    parts_left[i] -= 1
                    if not parts_left[i]:
                        ready = (i,)
            elif kind == KV_READY:
                ready, fired = (i,), fired + 1
            else:  # BANDWIDTH: a step of the profile
                ready, start, fired = (), -2 - i, fired + 1
        elif lt < at or (lt == at and lseq < aseq):
            now, lt, lseq, fired = lt, inf, never, fired + 1
            ready, start = (), -2  # the transfers due now, then the next finish
        elif ai < n:
            now, i = at, ai
            ai += 1
            if ai < n:
                at, aseq = arrival[ai], seq
                seq += 1
            else:
                at, aseq = inf, never
            if progress is not None and ai % PROGRESS_EVERY == 0:
                progress(ai)
            route = offload[i]
            if not free[route]:
                queues[route].append(i)
                continue
            free[route] -= 1
            prefill_start[i] = now
            push(heap, (now + service[i], seq, PREFILL_DONE, i))
            seq += 1
            if not (route and layerwise):
                continue
            ready, start = (), i
        else:
            break
        if start != -1:  # the link changes: run its clock (and egress tally) up to now, then change it
            elapsed = now - last_s
            if lfin and elapsed > 0.0 and bw > 0.0:
                virtual += elapsed * bw / len(lfin)
                delivered += elapsed * bw
                busy += elapsed
                b0, b1 = int(last_s // width), int(now // width)  # the egress bins, as SharedLink.tally
                if b1 == b0 and b1 < n_bins:
                    bins[b0] += elapsed * bw
                elif b1 == b0 + 1 and b1 < n_bins and b1 * width < now:
                    bins[b0] += (b1 * width - last_s) * bw
                    bins[b1] += (now - b1 * width) * bw
                else:  # more bins, coarser bins or an interval ending on a bin edge
                    tally(last_s, now, bw)
                    bins, width = link.bins, link.bin_s
                    b0, b1 = int(last_s // width), int(now // width)
                    b1 -= b1 > b0 and b1 * width >= now
                    # Room for the bins to come; the ones never reached are cut off at the end.
                    bins.extend(array("d", bytes(8 * min(4096, MAX_BINS - len(bins)))))
                    n_bins = len(bins)
                last_bin = b1
            last_s = now
            if start >= 0:
                push(lfin, (virtual + kv[start], start))
            elif start == -2:
                if lfin:
                    done = [pop(lfin)[1]]
                    limit = virtual * rtol
                    while lfin and lfin[0][0] <= limit:
                        done.append(pop(lfin)[1])
                    if layerwise:
                        for k in done:
                            parts_left[k] -= 1
                        done = [k for k in done if not parts_left[k]]
                    ready = done
            else:
                bw = profile[-2 - start][1]
        for j in ready:  # KV at the decode cluster: FCFS onto the earliest free slot
            kv_ready[j] = now
            slot = slots[0]
            begin = now if slot <= now else slot
            decode_start[j] = begin
            replace(slots, begin + hold[j])
        if start != -1:  # the link's next finish supersedes the one announced before
            gen += 1
            if lt < inf:
                stale += 1
                stale_last = lt if lt > stale_last else stale_last
                lt, lseq = inf, never
            if lfin and bw > 0.0:
                remaining = lfin[0][0] - virtual
                finish = now + (remaining if remaining > 0.0 else 0.0) * len(lfin) / bw
                if finish < inf:
                    lt, lseq = finish, seq
                    seq += 1
    if last_bin >= 0:
        del bins[last_bin + 1 :]  # the last bin written, as SharedLink would have grown them
    c.link_generation, link.bandwidth_bytes_per_s, link.virtual_bytes, link.last_s = gen, bw, virtual, last_s
    link.delivered_bytes, link.busy_s = delivered, busy
    # Each request's arrival and prefill end, the events counted, and every superseded link finish (the
    # engine would have fired each and discarded it).
    return 2 * n + fired + stale, max(now, stale_last) if stale else now
