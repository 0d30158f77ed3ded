"""Decode whose step follows the batch: each decode instance emits one token per request per step, and a step
of b requests takes ``StageModel.decode_step_s(b)``.

``Cluster`` holds every request's slot for L_out · T_decode, a fixed step; here each of the N_d instances runs
its own batch. A request ready for decode joins the instance with the fewest requests (with a KV-memory
limit: among those with a free slot and room for its cache, the fewest requests, then the most room; the
FCFS queue is kept, so the head can block smaller requests behind it, as in ``Cluster``). An instance's
requests advance together: while it carries b requests each gains 1 / step(b) tokens per second (tokens
are treated as a fluid: a request joining mid-step starts its first token at once, a stated simplification
of iteration-level batching that is immaterial over a stay of hundreds of steps). Each instance keeps a
token clock (tokens per request since it started) and a heap of the clock values at which its requests
finish; a change of batch advances the clock and reschedules the instance's next finish, superseding the
one announced before (a generation number, as the link does).

A request's mean TPOT is (finish - decode start) / L_out, what ``sim.summary`` reports. With a flat step
curve every stay is L_out · T_decode and ``sim.run`` uses ``Cluster`` itself (identical results).
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections.abc import Callable

import numpy as np

from prfaas_plan.sim.cluster import DECODE_DONE, DONE, S_DECODE, Cluster, ClusterConfig
from prfaas_plan.sim.link import FINISH_RTOL
from prfaas_plan.sim.workload import Workload


class BatchDecodeCluster(Cluster):
    """``Cluster`` with the decode step a function of each instance's batch (module docstring)."""

    def __init__(self, config: ClusterConfig, workload: Workload, progress: Callable[[int], None] | None) -> None:
        super().__init__(config, workload, progress)
        n_d = config.n_pd_decode
        self.step_of = config.model.decode_step_s
        self.tokens = array("d", np.asarray(workload.output_tokens, dtype=np.float64).tobytes())
        self.hold = array("d", [math.nan]) * self.n  # filled in as each request finishes
        self.instance_of = array("i", [-1]) * self.n
        self.batch = [0] * n_d
        self.clock = [0.0] * n_d  # tokens per request emitted since the run began
        self.clock_s = [0.0] * n_d  # when the clock was last advanced
        self.step_s = [0.0] * n_d  # the step at the current batch
        self.finishing: list[list[tuple[float, int]]] = [[] for _ in range(n_d)]
        self.generation = [0] * n_d
        self.max_batch = config.model.decode_max_batch

    def _advance(self, now: float, k: int) -> None:
        if self.batch[k]:
            self.clock[k] += (now - self.clock_s[k]) / self.step_s[k]
        self.clock_s[k] = now

    def _reschedule(self, now: float, k: int) -> None:
        self.generation[k] += 1
        b = self.batch[k]
        self.step_s[k] = float(self.step_of(float(b))) if b else 0.0
        heap = self.finishing[k]
        if heap:
            left = max(heap[0][0] - self.clock[k], 0.0)
            n_d = len(self.batch)
            self.schedule(now + left * self.step_s[k], DECODE_DONE, self.generation[k] * n_d + k)

    def try_admit(self, now: float, i: int) -> bool:
        best, best_key = -1, (self.max_batch, 0.0)
        for k, b in enumerate(self.batch):
            if b >= self.max_batch:
                continue
            key = (b, 0.0)
            if self.capacity is not None:
                if self.instance_room[k] < self.kv[i]:
                    continue
                key = (b, -self.instance_room[k])
            if best < 0 or key < best_key:
                best, best_key = k, key
        if best < 0:
            return False
        if self.capacity is not None:
            self.instance_room[best] -= self.kv[i]
        self._advance(now, best)
        self.instance_of[i] = best
        self.decode_start[i] = now
        heapq.heappush(self.finishing[best], (self.clock[best] + self.tokens[i], i))
        self.batch[best] += 1
        self._reschedule(now, best)
        return True

    def on_decode_done(self, now: float, payload: int) -> None:
        n_d = len(self.batch)
        generation, k = divmod(payload, n_d)
        if generation != self.generation[k]:
            return  # superseded by a later change of this instance's batch
        self._advance(now, k)
        heap, limit = self.finishing[k], self.clock[k] * (1.0 + FINISH_RTOL) + 1e-9
        while heap and heap[0][0] <= limit:
            _, i = heapq.heappop(heap)
            self.completed += 1
            self.move(now, S_DECODE, DONE)
            self.hold[i] = now - self.decode_start[i]
            self.batch[k] -= 1
            if self.capacity is not None:
                self.instance_room[k] += self.kv[i]
        self._reschedule(now, k)
        self.admit_queue(now)
