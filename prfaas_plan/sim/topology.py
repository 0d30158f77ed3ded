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
from collections.abc import Callable, Mapping

import numpy as np
from numpy.typing import NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.sim.engine import Engine
from prfaas_plan.sim.link import SharedLink
from prfaas_plan.throughput import StageModel

_ARRIVE, _LOCAL_DONE, _SITE_DONE, _LINK, _DECODE_DONE, _FAULT = range(6)
#: Egress tally bins of the links (the simulator reads no tallies; one bin per minute keeps them small).
_BIN_S = 60.0


@frozen
class RegionSim:
    """One region's plan: its stage model (lengths, local curves, decode), threshold, split, rate, and the
    share of its long requests for each site (site index -> share; pairs give the curves and the link)."""

    model: StageModel
    threshold_tokens: float
    n_pd_prefill: int
    n_pd_decode: int
    rate_req_per_s: float
    shares: dict[int, float]


@frozen
class PairSim:
    """Region j to site k: the site's prefill and KV curves (a stage model priced for the pair) and the link."""

    region: int
    site: int
    model: StageModel
    bandwidth_bytes_per_s: float


@frozen
class FaultSim:
    """A loss at ``at_s``: ``kind`` 'site' (``site``) or 'link' (``region``, ``site``)."""

    kind: str
    at_s: float
    site: int = -1
    region: int = -1
    keep_local: bool = False


@frozen
class TopologyRun:
    """Per region: TTFT of every completed request (s, in arrival order), its arrivals and completions; and
    how many requests were moved by faults."""

    ttft_s: tuple[NDArray[np.float64], ...]
    arrived: tuple[int, ...]
    completed: tuple[int, ...]
    moved_by_faults: int
    duration_s: float


def _draw_requests(
    regions: list[RegionSim], n: int, rng: np.random.Generator
) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Every region's ``n`` requests as one flat set of arrays: region, uncached length, output tokens (the
    region's mean) and Poisson arrival time."""
    region_of = np.repeat(np.arange(len(regions)), n)
    length = np.empty(region_of.size)
    output = np.empty(region_of.size)
    arrival = np.empty(region_of.size)
    for j, r in enumerate(regions):
        block = slice(j * n, (j + 1) * n)
        length[block] = r.model.lengths.sample(rng, n)
        output[block] = np.full(n, r.model.output_tokens_mean)
        arrival[block] = np.cumsum(rng.exponential(1.0 / r.rate_req_per_s, n))
    return region_of, length, output, arrival


def _pick_site(shares: Mapping[int, float], gone: set[int], draw: Callable[[], float]) -> int:
    """The site a uniform draw picks among a region's positive shares, renormalised over the sites not in
    ``gone`` (lost, kept local, or cut off from the region); -1 when none is left (and then nothing is drawn)."""
    alive = {k: s for k, s in shares.items() if s > 0 and k not in gone}
    total = sum(alive.values())
    if total <= 0:
        return -1
    u = draw()
    acc = 0.0
    for k, s in alive.items():
        acc += s / total
        if u < acc:
            return k
    return next(reversed(alive))


def _empty_site(
    k: int, busy: list[set[int]], queue: list[deque[int]], due: NDArray[np.float64], free: list[int]
) -> list[int]:
    """Site ``k`` lost: the requests it was serving and those queued at it (in that order), with the site left
    with no server, no queue and no prefill due."""
    served = sorted(busy[k])
    victims = served + list(queue[k])
    due[served] = math.nan
    busy[k].clear()
    queue[k].clear()
    free[k] = 0
    return victims


def _queues(n: int) -> list[deque[int]]:
    return [deque() for _ in range(n)]


def _sets(n: int) -> list[set[int]]:
    return [set() for _ in range(n)]


def _handoff(
    regions: list[RegionSim], pairs: list[PairSim], pair_of: Mapping[tuple[int, int], int], j: int, k: int
) -> float:
    """The KV handoff of a request of region j prefilled at site k (-1: its region's local pool): that pool's
    ``StageModel.local_handoff_s`` or ``prfaas_handoff_s``, a wait before the first token that holds nothing."""
    return regions[j].model.local_handoff_s if k < 0 else pairs[pair_of[(j, k)]].model.prfaas_handoff_s


def _result(ttft: NDArray[np.float64], n: int, completed: list[int], moved: int, end_s: float) -> TopologyRun:
    """The run's figures: each region's TTFTs (its ``n`` requests, in the order drawn), arrivals, completions."""
    per_region = tuple(ttft[j * n : (j + 1) * n] for j in range(len(completed)))
    return TopologyRun(
        ttft_s=per_region,
        arrived=tuple([n] * len(completed)),
        completed=tuple(completed),
        moved_by_faults=moved,
        duration_s=end_s,
    )


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
    region_of, length, output, arrival = _draw_requests(regions, requests_per_region, rng)
    draws = rng.random(region_of.size)
    ready = np.full(region_of.size, math.nan)
    site_of = np.full(region_of.size, -1)
    engine = Engine()
    lost_sites, keep_local_sites, lost_links = set[int](), set[int](), set[tuple[int, int]]()
    # Free servers and queues of every site, local prefill pool and decode pool; every link and its transfers.
    site_free, site_queue, site_busy = list(sites), _queues(len(sites)), _sets(len(sites))
    local_free, local_queue = [r.n_pd_prefill for r in regions], _queues(len(regions))
    decode_free, decode_queue = [r.n_pd_decode * r.model.decode_max_batch for r in regions], _queues(len(regions))
    links = [SharedLink(p.bandwidth_bytes_per_s, _BIN_S) for p in pairs]
    link_due, on_link_now = [math.inf] * len(pairs), _sets(len(pairs))  # requests whose KV crosses each link
    moved, completed = 0, [0] * n_regions
    site_due = np.full(region_of.size, math.nan)  # when each request's current site prefill ends

    def choose_site(i: int, exclude_draw: bool = False) -> int:
        j = int(region_of[i])
        gone = lost_sites | keep_local_sites | {k for (r, k) in lost_links if r == j}
        return _pick_site(regions[j].shares, gone, (lambda: float(draws[i])) if not exclude_draw else rng.random)

    def start_local(now: float, i: int) -> None:
        j = int(region_of[i])
        if regions[j].n_pd_prefill == 0:  # no local prefill instance: a site must take it
            k = choose_site(i, True)
            if k < 0:
                raise ValueError(f"region {j} has no local prefill instance and no site left")
            start_site(now, i, k)
            return
        if local_free[j] == 0:
            local_queue[j].append(i)
            return
        local_free[j] -= 1
        engine.schedule(now + float(regions[j].model.local_prefill(length[i])), _LOCAL_DONE, i)

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
        link_due[q] = nxt = links[q].next_finish_s(now)
        if math.isfinite(nxt):
            engine.schedule(nxt, _LINK, q)

    def start_decode(now: float, j: int, i: int) -> None:
        decode_free[j] -= 1
        engine.schedule(now + output[i] * regions[j].model.decode_step_time_s, _DECODE_DONE, i)

    def kv_ready(now: float, i: int) -> None:
        j = int(region_of[i])
        ready[i] = now + _handoff(regions, pairs, pair_of, j, int(site_of[i]))
        if decode_free[j] > 0:
            start_decode(now, j, i)
        else:
            decode_queue[j].append(i)

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
            start_decode(now, j, decode_queue[j].popleft())

    def on_fault(now: float, f: int) -> None:
        nonlocal moved
        fault = faults[f]
        victims: list[int] = []
        local = True  # where the moved requests go: local prefill, or re-routed among the sites left
        if fault.kind == "site":
            lost_sites.add(fault.site)
            if fault.keep_local:
                keep_local_sites.add(fault.site)
            victims, local = _empty_site(fault.site, site_busy, site_queue, site_due, site_free), fault.keep_local
        else:
            lost_links.add((fault.region, fault.site))
            q = pair_of.get((fault.region, fault.site))
            if q is not None:  # the link is gone: every transfer on it is lost
                links[q], link_due[q] = SharedLink(pairs[q].bandwidth_bytes_per_s, _BIN_S), math.inf
                victims = sorted(on_link_now[q])
                on_link_now[q].clear()
        moved += len(victims)
        for i in victims:
            if local:
                site_of[i] = -1
                start_local(now, i)
            else:
                route(now, i, redraw=True)

    for i in np.argsort(arrival, kind="stable"):
        engine.schedule(float(arrival[i]), _ARRIVE, int(i))
    for f, fault in enumerate(faults):
        engine.schedule(fault.at_s, _FAULT, f)
    engine.run([route, on_local_done, on_site_done, on_link, on_decode_done, on_fault])
    return _result(ready - arrival, requests_per_region, completed, moved, engine.now_s)
