"""Decode whose step follows the batch: each decode instance emits one token per request per step, and a step
of b requests takes ``StageModel.decode_step_s(b)``.

``Cluster``'s own decode holds every request's slot for L_out · T_decode, a fixed step; ``BatchDecode``, the
``cluster.Decoder`` strategy a cluster is given to replace it, runs each of the N_d instances' own batch. A
request ready for decode joins the instance with the fewest requests (with a KV-memory limit: among those
with a free slot and room for its cache, the fewest requests, then the most room; the FCFS queue is kept, so
the head can block smaller requests behind it, as in ``Cluster``). An instance's requests advance together:
while it carries b requests each gains 1 / step(b) tokens per second (tokens are treated as a fluid: a
request joining mid-step starts its first token at once, a stated simplification of iteration-level
batching that is immaterial over a stay of hundreds of steps). Each instance keeps a token clock (tokens per
request since it started) and a heap of the clock values at which its requests finish; a change of batch
advances the clock and reschedules the instance's next finish, superseding the one announced before (a
generation number, as the link does).

A request's mean TPOT is (finish - decode start) / L_out, what ``sim.summary`` reports. With a flat step
curve every stay is L_out · T_decode and ``sim.run`` keeps the cluster's own decode (identical results).
"""

from __future__ import annotations

import heapq
import math
from array import array

import numpy as np

from prfaas_plan.sim.cluster import DECODE_DONE, DONE, S_DECODE, Cluster, Handler
from prfaas_plan.sim.link import FINISH_RTOL


class BatchDecode:
    """The decode step a function of each instance's batch (module docstring): the ``cluster.Decoder`` of one
    cluster (``attach`` binds it; a decoder serves one cluster)."""

    cluster: Cluster

    def attach(self, cluster: Cluster) -> Handler:
        if getattr(self, "cluster", None) is not None:
            raise ValueError("a BatchDecode serves one cluster: make a new one for each run")
        self.cluster = cluster
        config = cluster.config
        n_d = config.n_pd_decode
        self.step_of = config.model.decode_step_s
        self.tokens = array("d", np.asarray(cluster.workload.output_tokens, dtype=np.float64).tobytes())
        cluster.hold = array("d", [math.nan]) * cluster.n  # filled in as each request finishes
        cluster.instance_of = array("i", [-1]) * cluster.n
        self.batch = [0] * n_d
        self.clock = [0.0] * n_d  # tokens per request emitted since the run began
        self.clock_s = [0.0] * n_d  # when the clock was last advanced
        self.step_s = [0.0] * n_d  # the step at the current batch
        self.finishing: list[list[tuple[float, int]]] = [[] for _ in range(n_d)]
        self.generation = [0] * n_d
        self.max_batch = config.model.decode_max_batch
        return self.on_decode_done

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
            self.cluster.schedule(now + left * self.step_s[k], DECODE_DONE, self.generation[k] * n_d + k)

    def admit(self, now_s: float, i: int) -> bool:
        c = self.cluster
        best, best_key = -1, (self.max_batch, 0.0)
        for k, b in enumerate(self.batch):
            if b >= self.max_batch:
                continue
            key = (b, 0.0)
            if c.capacity is not None:
                if c.instance_room[k] < c.kv[i]:
                    continue
                key = (b, -c.instance_room[k])
            if best < 0 or key < best_key:
                best, best_key = k, key
        if best < 0:
            return False
        if c.capacity is not None:
            c.instance_room[best] -= c.kv[i]
        self._advance(now_s, best)
        c.instance_of[i] = best
        c.decode_start[i] = now_s
        heapq.heappush(self.finishing[best], (self.clock[best] + self.tokens[i], i))
        self.batch[best] += 1
        self._reschedule(now_s, best)
        return True

    def on_decode_done(self, now: float, payload: int) -> None:
        c = self.cluster
        n_d = len(self.batch)
        generation, k = divmod(payload, n_d)
        if generation != self.generation[k]:
            return  # superseded by a later change of this instance's batch
        self._advance(now, k)
        heap, limit = self.finishing[k], self.clock[k] * (1.0 + FINISH_RTOL) + 1e-9
        while heap and heap[0][0] <= limit:
            _, i = heapq.heappop(heap)
            c.completed += 1
            c.move(now, S_DECODE, DONE)
            c.hold[i] = now - c.decode_start[i]
            self.batch[k] -= 1
            if c.capacity is not None:
                c.instance_room[k] += c.kv[i]
        self._reschedule(now, k)
        c.admit_queue(now)
