"""The cluster in a changing world: lost and restored instances, and the dual-timescale scheduler (PrfaaS
paper §3.4.3), as the ``cluster.Dynamics`` strategy ``DynamicWorld``: the cluster calls its hooks at its
extension points (routing, the start and end of each prefill and decode, link deliveries, bandwidth steps)
and fires its own events (losses, restores, the schedulers, conversions, the reverse link). The static fast
path is untouched. Decode slots are pooled (no per-instance KV admission here).

**Losing instances: the policy for in-flight work** (the paper says nothing; digest §5.2 item 14).

- A *prefill instance* lost (PrfaaS or local): if any instance of the pool is busy, the lost one is the busy
  one whose prefill started first (the most work lost); its prefill is aborted and the request goes to the
  *front* of its pool's queue to start again from scratch (its KV was never complete). Otherwise an idle
  instance is lost. When a pool has no instance left, its queue and every later request routed to it are
  *rerouted* to the other prefill pool (PrfaaS → local prefill, local → PrfaaS, whose KV then crosses the
  link); when neither pool has an instance, requests wait for a restore.
- A *decode instance* lost takes its BS_max slots, and with them the requests decoding on it (the most
  recently admitted ones, up to BS_max: the lost instance is taken as full). Their KV is gone: each is
  *resumed elsewhere after a re-prefill* of its input plus the tokens it has generated so far, at the front
  of the local prefill queue (PrfaaS when the local pool is empty), then decodes its remaining tokens. Its
  TTFT is unchanged (the first token was already out).
- A restore adds the instances back and starts queued work at once.
- Nothing is ever dropped: ``arrived = completed + in flight`` at every horizon (``dropped`` stays 0).

**Short-term scheduler** (``ThresholdControl``): every ``interval_s`` it measures the link utilisation over
the interval (delivered bytes / (bandwidth now × interval)) and the prefill queues per instance; when a
trigger fires (or ``every_interval``) it re-optimises t over the router's lengths of the last
``window_requests`` arrivals (``scheduler.best_threshold``: Eq. 6 with the instances alive and the bandwidth
now), smooths the optimum by an EWMA in log t, and applies the smoothed value when it differs from the
threshold in force by more than ``hysteresis``. The router compares each arrival's incremental length with
the threshold in force at its arrival.

**Long-term scheduler** (``RoleControl``): every ``period_s`` it re-optimises (t, N_p) over the same window
(``scheduler.best_split``) and, if the best split's Λ_max beats the current one by more than ``min_gain``,
converts one local instance towards it: a prefill instance stops taking work, finishes its prefill, is away
``switch_s``, then adds BS_max decode slots; a decode instance stops admitting, gives up its slots as its
requests finish, is away ``switch_s``, then serves prefill. One conversion is in progress at a time.
PrfaaS instances stay prefill-only.

**Cross-cluster cache transfers** (the abundant rule, ``Workload.cache_transfer_bytes``): a request whose
cached prefix lives in the other cluster waits, counted in its route's prefill queue, while the prefix
crosses the link, then joins the queue. Towards the local cluster the prefix shares the PrfaaS egress link
with the KV transfers; towards PrfaaS it takes the line's other direction, a second processor-sharing link
with the same bandwidth profile and nothing else on it. A request routed elsewhere than the replay decided
(by the scheduler, or because its pool is empty) moves no cache and prefills the same incremental length.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from prfaas_plan.errors import InputError, Problem
from prfaas_plan.sim.cluster import (
    DONE,
    FIRST_EXTRA_KIND,
    HELD,
    Q_LOCAL,
    Q_PRFAAS,
    S_DECODE,
    S_LOCAL,
    S_PRFAAS,
    Cluster,
    Handler,
)
from prfaas_plan.sim.link import SharedLink
from prfaas_plan.sim.records import SimResult
from prfaas_plan.sim.scheduler import best_split, best_threshold

# The world's own event kinds, in the order ``DynamicWorld.attach`` lists their handlers.
LOSS, RESTORE, CONTROL, ROLES, CONVERTED, REVERSE_DONE = range(FIRST_EXTRA_KIND, FIRST_EXTRA_KIND + 6)
#: The scheduler needs at least this many recent arrivals before it trusts a window: with fewer, the window's
#: quantiles move in steps of more than 2 % of probability, coarser than the hysteresis can absorb.
MIN_WINDOW_REQUESTS = 50
QUEUED = (Q_LOCAL, Q_PRFAAS)
SERVED = (S_LOCAL, S_PRFAAS)


class DynamicWorld:
    """Instance losses, restores, the dual-timescale scheduler and caches that move (module docstring): the
    ``cluster.Dynamics`` strategy of one run. ``attach`` binds it to its cluster; a world serves one cluster."""

    cluster: Cluster

    def attach(self, cluster: Cluster) -> tuple[Handler, ...]:
        if getattr(self, "cluster", None) is not None:
            raise ValueError("a DynamicWorld serves one cluster: make a new one for each run")
        config, workload = cluster.config, cluster.workload
        problems = []
        if config.decode_kv_capacity_bytes is not None:
            problems.append(
                Problem(field="decode KV capacity", message="not modelled with faults or a scheduler: slots only")
            )
        if config.losses and cluster.layerwise:
            problems.append(
                Problem(field="link.transfer", message="instance losses need after_prefill transfers, not layerwise")
            )
        for loss in config.losses:
            if loss.count < 1 or not math.isfinite(loss.at_s) or loss.at_s < 0:
                problems.append(Problem(field="losses", message=f"bad loss {loss}: count >= 1 and a time >= 0"))
            if loss.restore_s is not None and not loss.restore_s > loss.at_s:
                problems.append(Problem(field="losses", message=f"restore at {loss.restore_s} s is not after the loss"))
        if problems:
            raise InputError(problems)
        self.cluster = cluster
        model = config.model
        n = self.n = cluster.n
        lengths = np.asarray(workload.input_tokens, dtype=np.float64)
        extra = workload.extra_prefill_s if workload.extra_prefill_s is not None else np.zeros(n)
        self.lengths = array("d", lengths.tobytes())
        # Each request's prefill time on either pool (the cluster's ``service`` holds the one of its route now).
        self.svc = (
            array("d", (np.asarray(model.local_prefill(lengths), dtype=np.float64) + extra).tobytes()),
            array("d", (np.asarray(model.prfaas_prefill(lengths), dtype=np.float64) + extra).tobytes()),
        )
        self.alive = [config.n_pd_prefill, model.n_prfaas]
        self.serving: tuple[dict[int, None], dict[int, None]] = ({}, {})
        self.epoch = array("q", [0]) * n
        self.decoding: dict[int, float] = {}
        self.decode_alive = config.n_pd_decode
        self.batch = model.decode_max_batch
        self.finish = array("d", [math.nan]) * n
        self.lost = [0] * len(config.losses)
        self.restarted = 0
        self.resumed = 0
        self.rerouted = 0
        # The first pass of each resumed request (route, prefill start and end, KV ready, decode admission): its
        # record keeps them, since its first token came from that pass; the re-prefill only delays its finish.
        self.first_pass: dict[int, tuple[int, float, float, float, float]] = {}
        # Scheduler state.
        self.scheduled = config.threshold_control is not None or config.role_control is not None
        self.threshold = config.threshold_tokens
        self.smoothed = config.threshold_tokens
        self.arrived_so_far = 0
        self.last_delivered = 0.0
        self.threshold_changes: list[tuple[float, float]] = []
        self.role_changes: list[tuple[float, int, int]] = [(0.0, config.n_pd_prefill, config.n_pd_decode)]
        self.converting = False
        self.prefill_absorb = 0
        self.decode_absorb = 0
        # Cross-cluster cache transfers: sizes, direction, and the requests waiting for theirs.
        moves = workload.cache_transfer_bytes
        to_prfaas = workload.cache_transfer_to_prfaas
        self.move_bytes = array("d", (moves if moves is not None else np.zeros(n)).tobytes())
        self.move_to_prfaas = bytes(np.asarray(to_prfaas if to_prfaas is not None else np.zeros(n), dtype=np.uint8))
        self.waiting_prefix = bytearray(n)
        self.reverse = SharedLink(cluster.link.bandwidth_bytes_per_s, config.egress_bin_s)
        self.reverse_generation = 0
        self.moved_bytes = 0.0
        # The first of the world's events, before the cluster schedules its first arrival.
        engine = cluster.engine
        for k, loss in enumerate(config.losses):
            engine.schedule(loss.at_s, LOSS, k)
            if loss.restore_s is not None:
                engine.schedule(loss.restore_s, RESTORE, k)
        if config.threshold_control is not None and n:
            engine.schedule(cluster.arrival[0] + config.threshold_control.interval_s, CONTROL, 0)
        if config.role_control is not None and n:
            engine.schedule(cluster.arrival[0] + config.role_control.period_s, ROLES, 0)
        return (
            self.on_loss,
            self.on_restore,
            self.on_control,
            self.on_roles,
            self.on_converted,
            self.on_reverse_done,
        )

    # -- routing and prefill ----------------------------------------------------------------------------

    def _pool_for(self, route: int) -> int:
        """The route's pool, or the other one when the route's has no instance left and the other has."""
        if self.alive[route] == 0 and self.alive[1 - route] > 0:
            return 1 - route
        return route

    def _enqueue(self, now: float, i: int, route: int, source: int, front: bool = False) -> None:
        """Request i (leaving ``source``) goes to pool ``route``, with that pool's prefill time."""
        c = self.cluster
        c.offload[i] = route
        c.service[i] = self.svc[route][i]
        c.enqueue(now, i, route, source, front)

    def route(self, now_s: float, i: int, planned: int) -> int:
        c = self.cluster
        self.arrived_so_far = i + 1
        route = (1 if self.lengths[i] > self.threshold else 0) if self.scheduled else planned
        target = self._pool_for(route)
        if target != route:
            self.rerouted += 1
        size = self.move_bytes[i]
        if size > 0.0 and self.move_to_prfaas[i] == target:
            # The prefix crosses the link first; the request waits for it in its pool's queue state.
            c.offload[i] = target
            self.waiting_prefix[i] = 1
            c.move(now_s, DONE, QUEUED[target])
            self.moved_bytes += size
            if target:
                self.reverse.start(now_s, size, i)
                self._reschedule_reverse(now_s)
            else:
                c.start_transfer(now_s, i, size)
            return HELD
        c.offload[i] = target
        c.service[i] = self.svc[target][i]
        return target

    def _prefix_arrived(self, now: float, i: int) -> None:
        """Request i's cached prefix has crossed the link: it joins its pool's queue (or starts)."""
        self.waiting_prefix[i] = 0
        route = self.cluster.offload[i]
        target = self._pool_for(route)
        if target != route:
            self.rerouted += 1
            self.cluster.move(now, QUEUED[route], DONE)
            self._enqueue(now, i, target, DONE)
        else:
            self._enqueue(now, i, route, QUEUED[route])

    def delivered(self, now_s: float, i: int) -> bool:
        if self.waiting_prefix[i]:
            self._prefix_arrived(now_s, i)
            return True
        return False

    def _reschedule_reverse(self, now: float) -> None:
        self.reverse_generation += 1
        finish = self.reverse.next_finish_s(now)
        if finish < math.inf:
            self.cluster.schedule(finish, REVERSE_DONE, self.reverse_generation)

    def on_reverse_done(self, now: float, generation: int) -> None:
        if generation != self.reverse_generation:
            return
        for i in self.reverse.finish_due(now):
            self._prefix_arrived(now, i)
        self._reschedule_reverse(now)

    def bandwidth_changed(self, now_s: float, step: int) -> None:
        self.reverse.set_bandwidth(now_s, self.cluster.config.bandwidth_profile[step][1])
        self._reschedule_reverse(now_s)

    def prefill_started(self, i: int, route: int) -> int:
        self.serving[route][i] = None
        return i + self.n * self.epoch[i]

    def prefill_ended(self, token: int) -> int:
        n = self.n
        i = token % n
        if token // n != self.epoch[i]:
            return -1  # its instance was lost: the prefill was restarted or rerouted
        del self.serving[self.cluster.offload[i]][i]
        return i

    def server_freed(self, now_s: float, route: int) -> bool:
        """A local server freed while a conversion waits for one leaves for decode."""
        if route == 0 and self.prefill_absorb:
            self.prefill_absorb -= 1
            self.alive[0] -= 1
            self.cluster.schedule(now_s + self._switch_s(), CONVERTED, 0)
            return True
        return False

    def _next_prefill(self, now: float, route: int) -> None:
        """A server of ``route`` has become free: absorb it into a conversion, start the next, or idle."""
        if not self.server_freed(now, route):
            self.cluster.next_prefill(now, route)

    # -- decode -----------------------------------------------------------------------------------------

    def decode_started(self, now_s: float, i: int) -> int:
        self.decoding[i] = now_s
        return i + self.n * self.epoch[i]

    def decode_ended(self, now_s: float, token: int) -> int:
        n = self.n
        i = token % n
        if token // n != self.epoch[i]:
            return -1  # its decode instance was lost: the request is being resumed
        del self.decoding[i]
        self.finish[i] = now_s
        return i

    def slot_freed(self, now_s: float) -> bool:
        """A slot freed while a decode instance converts is given up; the last one starts the switch."""
        if self.decode_absorb:
            self.decode_absorb -= 1
            if not self.decode_absorb:
                self.cluster.schedule(now_s + self._switch_s(), CONVERTED, 1)
            return True
        return False

    def _resume(self, now: float, i: int) -> None:
        """Request i lost its decode instance: re-prefill input + generated tokens, then decode the rest."""
        c = self.cluster
        admitted = self.decoding.pop(i)
        self.epoch[i] += 1
        self.resumed += 1
        if i not in self.first_pass:
            self.first_pass[i] = (c.offload[i], c.prefill_start[i], c.prefill_end[i], c.kv_ready[i], c.decode_start[i])
        model = c.config.model
        step = model.decode_step_time_s
        done_s = now - admitted
        c.hold[i] = max(c.hold[i] - done_s, 0.0)
        length = self.lengths[i] + math.floor(done_s / step)
        self.svc[0][i] = float(model.local_prefill(length))
        self.svc[1][i] = float(model.prfaas_prefill(length))
        c.kv[i] = float(model.kv_bytes(length))
        self._enqueue(now, i, self._pool_for(0), S_DECODE, front=True)

    # -- faults -----------------------------------------------------------------------------------------

    def on_loss(self, now: float, k: int) -> None:
        c = self.cluster
        loss = c.config.losses[k]
        if loss.pool == "decode":
            count = min(loss.count, self.decode_alive)
            for _ in range(count):
                self.decode_alive -= 1
                victims = list(self.decoding)[-min(self.batch, len(self.decoding)) :] if self.decoding else []
                for i in victims:
                    self._resume(now, i)
                c.decode_free += len(victims) - self.batch
                while c.decode_free < 0 and self.decoding:
                    self._resume(now, next(reversed(self.decoding)))
                    c.decode_free += 1
                c.decode_free = max(c.decode_free, 0)
        else:
            route = 1 if loss.pool == "prfaas" else 0
            count = min(loss.count, self.alive[route])
            for _ in range(count):
                self.alive[route] -= 1
                serving = self.serving[route]
                if serving:
                    i = next(iter(serving))
                    del serving[i]
                    self.epoch[i] += 1
                    self.restarted += 1
                    c.queues[route].appendleft(i)
                    c.move(now, SERVED[route], QUEUED[route])
                elif c.free[route]:
                    c.free[route] -= 1
            if route == 0:
                self.prefill_absorb = min(self.prefill_absorb, self.alive[0])
            # An aborted prefill restarts at once on an idle instance of its pool, if one is left.
            queue = c.queues[route]
            while c.free[route] and queue:
                c.free[route] -= 1
                i = queue.popleft()
                c.move(now, QUEUED[route], SERVED[route])
                c.start_prefill(now, i, route)
            if self.alive[route] == 0 and self.alive[1 - route] > 0:
                queue = c.queues[route]
                while queue:
                    i = queue.popleft()
                    self.rerouted += 1
                    c.move(now, QUEUED[route], DONE)
                    self._enqueue(now, i, 1 - route, DONE)
        self.lost[k] = count

    def on_restore(self, now: float, k: int) -> None:
        c = self.cluster
        loss, count = c.config.losses[k], self.lost[k]
        if loss.pool == "decode":
            self.decode_alive += count
            c.decode_free += count * self.batch
            c.admit_queue(now)
            return
        route = 1 if loss.pool == "prfaas" else 0
        self.alive[route] += count
        for _ in range(count):
            self._next_prefill(now, route)

    # -- scheduler --------------------------------------------------------------------------------------

    def _switch_s(self) -> float:
        roles = self.cluster.config.role_control
        return roles.switch_s if roles is not None else 0.0

    def _window(self, size: int) -> npt.NDArray[np.float64]:
        end = self.arrived_so_far
        return np.frombuffer(self.lengths, dtype=np.float64)[max(0, end - size) : end]

    def on_control(self, now: float, _: int) -> None:
        c = self.cluster
        control = c.config.threshold_control
        assert control is not None
        if self.arrived_so_far < self.n:
            c.schedule(now + control.interval_s, CONTROL, 0)
        link = c.link
        link.advance_to(now)
        bandwidth = link.bandwidth_bytes_per_s
        delivered = link.delivered_bytes - self.last_delivered
        self.last_delivered = link.delivered_bytes
        utilization = delivered / (bandwidth * control.interval_s) if bandwidth > 0 else math.inf
        queued = max(len(c.queues[route]) / max(self.alive[route], 1) for route in (0, 1))
        triggered = (
            control.every_interval
            or utilization > control.trigger_utilization
            or queued > control.trigger_queue_per_instance
        )
        window = self._window(control.window_requests)
        if not triggered or window.size < MIN_WINDOW_REQUESTS:
            return
        choice = best_threshold(
            c.config.model,
            window,
            n_prfaas=self.alive[1],
            n_pd_prefill=self.alive[0],
            n_pd_decode=max(self.decode_alive, 1),
            bandwidth_bytes_per_s=bandwidth,
        )
        self._steer(now, choice.threshold_tokens, window, control.smoothing, control.hysteresis)

    def _steer(
        self, now: float, target: float, window: npt.NDArray[np.float64], smoothing: float, hysteresis: float
    ) -> None:
        """EWMA of log t towards ``target`` (clamped to the window's range), applied past the hysteresis."""
        low, high = max(float(np.min(window)), 1.0), max(float(np.max(window)), 1.0)
        clamp = min(max(target, low), high)
        previous = min(max(self.smoothed, low), high)
        self.smoothed = math.exp((1 - smoothing) * math.log(previous) + smoothing * math.log(clamp))
        current = self.threshold
        if not math.isfinite(current) or abs(self.smoothed - current) > hysteresis * max(current, 1.0):
            self.threshold = self.smoothed
            self.threshold_changes.append((now, self.smoothed))

    def on_roles(self, now: float, _: int) -> None:
        c = self.cluster
        config = c.config
        roles = config.role_control
        assert roles is not None
        if self.arrived_so_far < self.n:
            c.schedule(now + roles.period_s, ROLES, 0)
        window = self._window(
            config.threshold_control.window_requests if config.threshold_control is not None else 2000
        )
        if self.converting or window.size < MIN_WINDOW_REQUESTS:
            return
        n_p, n_d = self.alive[0], self.decode_alive
        bandwidth = c.link.bandwidth_bytes_per_s
        model = config.model
        best = best_split(model, window, n_prfaas=self.alive[1], n_local=n_p + n_d, bandwidth_bytes_per_s=bandwidth)
        now_choice = best_threshold(
            model,
            window,
            n_prfaas=self.alive[1],
            n_pd_prefill=n_p,
            n_pd_decode=max(n_d, 1),
            bandwidth_bytes_per_s=bandwidth,
        )
        if best.throughput_req_per_s <= now_choice.throughput_req_per_s * (1 + roles.min_gain):
            return
        self.converting = True
        if best.n_pd_prefill > n_p and n_d > 1:
            # decode -> prefill: the instance stops admitting and gives up its slots as they free.
            self.decode_alive -= 1
            taken = min(c.decode_free, self.batch)
            c.decode_free -= taken
            self.decode_absorb = self.batch - taken
            if not self.decode_absorb:
                c.schedule(now + roles.switch_s, CONVERTED, 1)
        elif best.n_pd_prefill < n_p:
            # prefill -> decode: an idle instance leaves now, a busy one when its prefill ends.
            if c.free[0]:
                c.free[0] -= 1
                self.alive[0] -= 1
                c.schedule(now + roles.switch_s, CONVERTED, 0)
            else:
                self.prefill_absorb += 1
        else:
            self.converting = False

    def on_converted(self, now: float, to_prefill: int) -> None:
        c = self.cluster
        self.converting = False
        if to_prefill:
            self.alive[0] += 1
            self._next_prefill(now, 0)
        else:
            self.decode_alive += 1
            c.decode_free += self.batch
            c.admit_queue(now)
        self.role_changes.append((now, self.alive[0], self.decode_alive))

    # -- the result -------------------------------------------------------------------------------------

    def close(self) -> npt.NDArray[np.float64] | None:
        """Each resumed request's first pass put back: its re-prefill after the loss would otherwise put
        ``prefill_end_s`` after ``first_token_s`` and make ``decode_wait_s`` negative. The finish times are
        those of the last decode (a resumed request's admission + hold is not)."""
        c = self.cluster
        for i, (route, prefill_start, prefill_end, kv_ready, decode_start) in self.first_pass.items():
            c.offload[i] = route
            c.prefill_start[i] = prefill_start
            c.prefill_end[i] = prefill_end
            c.kv_ready[i] = kv_ready
            c.decode_start[i] = decode_start
        return np.frombuffer(self.finish, dtype=np.float64).copy()

    def annotate(self, result: SimResult) -> SimResult:
        return replace(
            result,
            restarted_prefills=self.restarted,
            resumed_decodes=self.resumed,
            rerouted=self.rerouted,
            threshold_changes=tuple(self.threshold_changes),
            role_changes=tuple(self.role_changes),
            cache_moved_bytes=self.moved_bytes,
        )
