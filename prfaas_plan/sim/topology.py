"""A discrete-event simulator of a topology: every region's arrivals, a global router, each PrfaaS site's
prefill queue, each link's processor-sharing transfers (``sim.link.SharedLink``), each PD cluster's local
prefill queue and decode slots, and faults (a site or a link lost at a time) under which no request is
dropped.

Per request (region j, uncached length L, output length O): L <= t_j is prefilled locally (FCFS over N_p,j
instances, T_j(L)); L > t_j goes to site k drawn from the region's shares (FCFS over N_k instances, T_k(L)),
then its KV (S_k(L) bytes) crosses link j-k once the prefill ends (the paper's after-prefill transfer). TTFT
ends when the KV is at the PD cluster (the paper's Table 6 convention); the request then holds one of the
region's N_d,j · BS_max decode slots for O · step time (FIFO when all are busy) and is done.

Faults: ``site`` k lost at ``at_s``: its queued and in-service requests, and every later long request that
drew it, go to the region's other sites by their renormalised shares, or (``keep_local``, or no site left)
to local prefill; ``link`` j-k lost: transfers in flight on it are prefilled again locally, and later long
requests of region j avoid site k. Every request that arrives is completed: ``TopologyRun.arrived`` equals
``completed``.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from prfaas_plan.sim.engine import Engine
from prfaas_plan.sim.link import SharedLink
from prfaas_plan.throughput import StageModel

_ARRIVE, _LOCAL_DONE, _SITE_DONE, _LINK, _DECODE_DONE, _FAULT = range(6)
#: Egress tally bins of the links (the simulator reads no tallies; one bin per minute keeps them small).
_BIN_S = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class RegionSim:
    """One region's plan: its stage model (lengths, local curves, decode), threshold, split, rate, and the
    share of its long requests for each site (site index -> share; pairs give the curves and the link)."""

    model: StageModel
    threshold_tokens: float
    n_pd_prefill: int
    n_pd_decode: int
    rate_req_per_s: float
    shares: dict[int, float]


@dataclass(frozen=True, slots=True, kw_only=True)
class PairSim:
    """Region j to site k: the site's prefill and KV curves (a stage model priced for the pair) and the link."""

    region: int
    site: int
    model: StageModel
    bandwidth_bytes_per_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class FaultSim:
    """A loss at ``at_s``: ``kind`` 'site' (``site``) or 'link' (``region``, ``site``)."""

    kind: str
    at_s: float
    site: int = -1
    region: int = -1
    keep_local: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyRun:
    """Per region: TTFT of every completed request (s, in arrival order), its arrivals and completions; and
    how many requests were moved by faults."""

    ttft_s: tuple[NDArray[np.float64], ...]
    arrived: tuple[int, ...]
    completed: tuple[int, ...]
    moved_by_faults: int
    duration_s: float


def simulate_topology(
    regions: list[RegionSim],
    sites: list[int],
    pairs: list[PairSim],
    *,
    requests_per_region: int,
    seed: int,
    faults: tuple[FaultSim, ...] = (),
) -> TopologyRun:
    """Run every region's Poisson arrivals (``requests_per_region`` each) through the topology to the end."""
    rng = np.random.default_rng(seed)
    n_regions = len(regions)
    pair_of = {(p.region, p.site): q for q, p in enumerate(pairs)}
    # Requests: region, length, output, arrival, route; one flat set of arrays.
    region_of = np.repeat(np.arange(n_regions), requests_per_region)
    length = np.empty(region_of.size)
    output = np.empty(region_of.size)
    arrival = np.empty(region_of.size)
    for j, r in enumerate(regions):
        block = slice(j * requests_per_region, (j + 1) * requests_per_region)
        length[block] = r.model.lengths.sample(rng, requests_per_region)
        output[block] = np.full(requests_per_region, r.model.output_tokens_mean)
        arrival[block] = np.cumsum(rng.exponential(1.0 / r.rate_req_per_s, requests_per_region))
    draws = rng.random(region_of.size)
    ready = np.full(region_of.size, math.nan)
    site_of = np.full(region_of.size, -1)
    engine = Engine()
    lost_sites: set[int] = set()
    lost_links: set[tuple[int, int]] = set()
    keep_local_sites: set[int] = set()
    site_free = list(sites)
    site_queue: list[deque[int]] = [deque() for _ in sites]
    site_busy: list[set[int]] = [set() for _ in sites]
    local_free = [r.n_pd_prefill for r in regions]
    local_queue: list[deque[int]] = [deque() for _ in regions]
    decode_free = [r.n_pd_decode * r.model.decode_max_batch for r in regions]
    decode_queue: list[deque[int]] = [deque() for _ in regions]
    links = [SharedLink(p.bandwidth_bytes_per_s, _BIN_S) for p in pairs]
    link_due = [math.inf] * len(pairs)
    on_link_now: list[set[int]] = [set() for _ in pairs]  # requests whose KV is crossing each link
    moved = 0
    completed = [0] * n_regions
    site_due = np.full(region_of.size, math.nan)  # when each request's current site prefill ends

    def choose_site(i: int, exclude_draw: bool = False) -> int:
        j = int(region_of[i])
        shares = {
            k: s
            for k, s in regions[j].shares.items()
            if s > 0 and k not in lost_sites and (j, k) not in lost_links and k not in keep_local_sites
        }
        total = sum(shares.values())
        if total <= 0:
            return -1
        u = draws[i] if not exclude_draw else rng.random()
        acc = 0.0
        for k, s in shares.items():
            acc += s / total
            if u < acc:
                return k
        return next(reversed(shares))

    def start_local(now: float, i: int) -> None:
        j = int(region_of[i])
        if regions[j].n_pd_prefill == 0:  # no local prefill instance: a site must take it
            k = choose_site(i, True)
            if k < 0:
                raise ValueError(f"region {j} has no local prefill instance and no site left")
            start_site(now, i, k)
            return
        if local_free[j] > 0:
            local_free[j] -= 1
            engine.schedule(now + float(regions[j].model.local_prefill(length[i])), _LOCAL_DONE, i)
        else:
            local_queue[j].append(i)

    def start_site(now: float, i: int, k: int) -> None:
        site_of[i] = k
        if site_free[k] > 0:
            site_free[k] -= 1
            site_busy[k].add(i)
            q = pair_of[(int(region_of[i]), k)]
            site_due[i] = now + float(pairs[q].model.prfaas_prefill(length[i]))
            engine.schedule(float(site_due[i]), _SITE_DONE, i)
        else:
            site_queue[k].append(i)

    def route(now: float, i: int, *, redraw: bool = False) -> None:
        j = int(region_of[i])
        k = choose_site(i, redraw) if length[i] > regions[j].threshold_tokens else -1
        if k < 0:
            site_of[i] = -1
            start_local(now, i)
        else:
            start_site(now, i, k)

    def relink(now: float, q: int) -> None:
        nxt = links[q].next_finish_s(now)
        link_due[q] = nxt
        if math.isfinite(nxt):
            engine.schedule(nxt, _LINK, q)

    def kv_ready(now: float, i: int) -> None:
        j = int(region_of[i])
        ready[i] = now
        if decode_free[j] > 0:
            decode_free[j] -= 1
            engine.schedule(now + output[i] * regions[j].model.decode_step_time_s, _DECODE_DONE, i)
        else:
            decode_queue[j].append(i)

    def on_arrive(now: float, i: int) -> None:
        route(now, i)

    def on_local_done(now: float, i: int) -> None:
        j = int(region_of[i])
        local_free[j] += 1
        if local_queue[j]:
            start_local(now, local_queue[j].popleft())
        kv_ready(now, i)

    def on_site_done(now: float, i: int) -> None:
        if now != site_due[i]:
            return  # a prefill cut short by a site lost (the request was moved)
        k = int(site_of[i])
        site_busy[k].discard(i)
        site_free[k] += 1
        if site_queue[k]:
            start_site(now, site_queue[k].popleft(), k)
        q = pair_of[(int(region_of[i]), k)]
        links[q].start(now, float(pairs[q].model.kv_bytes(length[i])), i)
        on_link_now[q].add(i)
        relink(now, q)

    def on_link(now: float, q: int) -> None:
        if now != link_due[q]:
            return  # superseded by a later start or finish on this link
        for i in links[q].finish_due(now):
            on_link_now[q].discard(i)
            kv_ready(now, i)
        relink(now, q)

    def on_decode_done(now: float, i: int) -> None:
        j = int(region_of[i])
        completed[j] += 1
        decode_free[j] += 1
        if decode_queue[j]:
            nxt = decode_queue[j].popleft()
            decode_free[j] -= 1
            engine.schedule(now + output[nxt] * regions[j].model.decode_step_time_s, _DECODE_DONE, nxt)

    def on_fault(now: float, f: int) -> None:
        nonlocal moved
        fault = faults[f]
        if fault.kind == "site":
            k = fault.site
            lost_sites.add(k)
            if fault.keep_local:
                keep_local_sites.add(k)
            victims = sorted(site_busy[k]) + list(site_queue[k])
            site_due[sorted(site_busy[k])] = math.nan
            site_busy[k].clear()
            site_queue[k].clear()
            site_free[k] = 0
            for i in victims:
                moved += 1
                if fault.keep_local:
                    site_of[i] = -1
                    start_local(now, i)
                else:
                    route(now, i, redraw=True)
        else:
            lost_links.add((fault.region, fault.site))
            q = pair_of.get((fault.region, fault.site))
            if q is not None:
                in_flight = sorted(on_link_now[q])  # the link is gone: every transfer on it is lost
                on_link_now[q].clear()
                links[q] = SharedLink(pairs[q].bandwidth_bytes_per_s, _BIN_S)
                link_due[q] = math.inf
                for i in in_flight:
                    moved += 1
                    site_of[i] = -1
                    start_local(now, i)

    for i in np.argsort(arrival, kind="stable"):
        engine.schedule(float(arrival[i]), _ARRIVE, int(i))
    for f, fault in enumerate(faults):
        engine.schedule(fault.at_s, _FAULT, f)
    engine.run([on_arrive, on_local_done, on_site_done, on_link, on_decode_done, on_fault])
    ttft = tuple((ready - arrival)[j * requests_per_region : (j + 1) * requests_per_region] for j in range(n_regions))
    return TopologyRun(
        ttft_s=ttft,
        arrived=tuple([requests_per_region] * n_regions),
        completed=tuple(completed),
        moved_by_faults=moved,
        duration_s=engine.now_s,
    )
