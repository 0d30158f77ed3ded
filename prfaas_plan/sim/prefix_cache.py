"""Hybrid prefix caches (PrfaaS paper §3.2) and the router's two cache rules (§3.4.3), replayed on a trace.

**What is cached.** Each cluster (PrfaaS, local PD) has one cache pool of ``capacity_bytes`` (host DRAM and
SSD over its nodes). It holds two kinds of entries in one shared pool, as vLLM's hybrid KV cache manager
does (one block pool for every KV group):

- *full-attention KV blocks*, one per 512-token block of a request (Mooncake ``hash_ids``), each of
  ``block_tokens · kv_bytes_per_token`` bytes; a block is reusable by any request whose leading blocks are
  the same (block-level, partial prefix match: the usable prefix is the leading run of cached blocks);
- *linear-attention/SWA state checkpoints* (only for a hybrid model, ``linear_state_bytes`` not None), each
  of ``linear_state_bytes`` bytes whatever the length. A recurrent state is valid only at the exact length
  it was taken at (request-level reuse). Model: when a request is prefilled, its cluster stores one
  checkpoint at the end of its last *full* block (prefix-cache blocks must be fully populated, §3.2), keyed
  by that block's hash id (Mooncake's ids are prefix-dependent: equal id, equal prefix). A later request can
  reuse j blocks only if its first j blocks are cached *and* a checkpoint at exactly j blocks is cached: the
  hit is the longest such j, never past the leading run of cached blocks.

A pure full-attention hit is min(run · 512, input) tokens (a request's last, partial block can hit only
an identical tail, as in ``io.traces.read_trace(prefix_cache=True)``); a hybrid hit is j · 512 tokens.

**Eviction: LRU by bytes.** Every request *references* its entries in the cluster that prefills it, hits
and misses alike (a miss is computed by the prefill, then stored): its blocks from last to first, each
checkpoint it stores or uses just before the block it ends at. The leading blocks, shared by the most
requests, are thus the most recently used, and a chain is evicted from its tail first (vLLM frees a
request's blocks in reverse order for the same reason). An entry is inserted after evicting least recently
used entries until it fits; an entry larger than the whole pool empties it. The pool is then always the
longest run of most recently referenced entries that fits, so when the reference sequence does not depend
on the capacity, a larger pool holds a superset of a smaller one at every moment (LRU is a stack algorithm,
Mattson et al. 1970, for variable sizes under this eviction rule) and its block hits are never fewer.
That holds for one cache whose requests do not depend on hits (full attention, everything routed to one
cluster). It does *not* hold in general when the routing depends on the hits (which cluster a request
refreshes then changes with the capacity), nor for hybrid models (a used checkpoint is refreshed, and
which one is used depends on what is cached).

**Cost of a hit.** Loading the reused prefix's bytes (KV of the cached tokens plus one state checkpoint for
a hybrid model) at the prefilling cluster's ``load_bandwidth_bytes_per_s``: ``load_s`` per request.

**Rules (§3.4.3).** With l_pd and l_prfaas the hits in each cluster and t the threshold:

- *scarce* (each cluster's cache judged alone): the router compares L − l_pd with t; a local request reuses
  l_pd, an offloaded one l_prfaas (what PrfaaS holds; no cache crosses the link);
- *abundant* (longest prefix anywhere): l = max(l_pd, l_prfaas); route on L − l; when the cluster holding
  the longer prefix is not the one that prefills, its l tokens of KV (and state) cross the link first, in
  ``transfer_bytes``, and are stored in the target cluster with the rest of the request;
- *switch*: abundant for a request when the link utilisation at its arrival is below
  ``abundant_below_utilization``, scarce otherwise (the paper does not say how it decides; this is one rule).
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import numpy.typing as npt

from prfaas_plan._frozen import frozen
from prfaas_plan.spec.dynamics import CACHE_RULES, ClusterCache, PrefixCaches
from prfaas_plan.spec.trace import Trace

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


class LruCache:
    """Entries (integer keys) of known sizes in a pool of ``capacity_bytes``, evicted least recently used
    first; ``touch`` is the only way in (see the module docstring for the eviction rule)."""

    __slots__ = ("_entries", "capacity_bytes", "evicted", "used_bytes")

    def __init__(self, capacity_bytes: float) -> None:
        if not capacity_bytes >= 0.0:
            raise ValueError(f"cache capacity must be >= 0 bytes, got {capacity_bytes!r}")
        self.capacity_bytes = capacity_bytes
        self.used_bytes = 0.0
        self.evicted = 0
        self._entries: OrderedDict[int, float] = OrderedDict()

    def __contains__(self, key: int) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def touch(self, key: int, size_bytes: float) -> None:
        """Reference ``key``: make it the most recently used, inserting it (evicting as needed) if absent."""
        entries = self._entries
        if key in entries:
            entries.move_to_end(key)
            return
        if size_bytes > self.capacity_bytes:
            self.evicted += len(entries)
            entries.clear()
            self.used_bytes = 0.0
            return
        while self.used_bytes + size_bytes > self.capacity_bytes:
            _, size = entries.popitem(last=False)
            self.used_bytes -= size
            self.evicted += 1
        entries[key] = size_bytes
        self.used_bytes += size_bytes


def _checkpoint_key(block: int) -> int:
    """The key of the state checkpoint taken at the end of ``block`` (blocks have keys >= 0)."""
    return -1 - block


class ClusterPrefixCache:
    """One cluster's hybrid prefix cache: KV blocks and (hybrid models) state checkpoints in one LRU pool."""

    __slots__ = ("_lru", "block_bytes", "state_bytes")

    def __init__(self, capacity_bytes: float, block_bytes: float, state_bytes: float | None) -> None:
        if not (math.isfinite(block_bytes) and block_bytes > 0.0):
            raise ValueError(f"bytes per block must be > 0, got {block_bytes!r}")
        if state_bytes is not None and not (math.isfinite(state_bytes) and state_bytes > 0.0):
            raise ValueError(f"bytes per state checkpoint must be > 0, got {state_bytes!r}")
        self._lru = LruCache(capacity_bytes)
        self.block_bytes = block_bytes
        self.state_bytes = state_bytes

    @property
    def lru(self) -> LruCache:
        """The underlying pool (for its tallies)."""
        return self._lru

    def match(self, blocks: list[int], full_blocks: int) -> int:
        """Blocks of this request reusable from this cache (read only): the leading run of cached blocks,
        and for a hybrid model the longest j <= that run, j <= ``full_blocks``, with a checkpoint at j."""
        lru = self._lru
        run = 0
        for block in blocks:
            if block not in lru:
                break
            run += 1
        if self.state_bytes is None:
            return run
        for j in range(min(run, full_blocks), 0, -1):
            if _checkpoint_key(blocks[j - 1]) in lru:
                return j
        return 0

    def store(self, blocks: list[int], full_blocks: int, used_blocks: int) -> None:
        """Reference a prefilled request's entries: blocks from last to first, and (hybrid) the checkpoint it
        used and the one it leaves at its last full block, each just before the block it ends at."""
        touch, block_bytes, state_bytes = self._lru.touch, self.block_bytes, self.state_bytes
        for b in range(len(blocks) - 1, -1, -1):
            if state_bytes is not None and (b + 1 == full_blocks or b + 1 == used_blocks):
                touch(_checkpoint_key(blocks[b]), state_bytes)
            touch(blocks[b], block_bytes)


@frozen
class HitRates:
    """Cache figures of the requests one cluster prefilled: token hit rate = cached / input tokens,
    request hit rate = share of requests with any cached token (NaN with no requests)."""

    requests: int
    input_tokens: int
    cached_tokens: int
    requests_with_hit: int

    @property
    def token_hit_rate(self) -> float:
        """Cached / input tokens."""
        return self.cached_tokens / self.input_tokens if self.input_tokens else math.nan

    @property
    def request_hit_rate(self) -> float:
        """Requests with a hit / requests."""
        return self.requests_with_hit / self.requests if self.requests else math.nan


@frozen(eq=False)
class CacheReplay:
    """Per-request outcome of a replay (arrays in arrival order).

    ``cached_tokens``: prefix reused by the cluster that prefills the request; ``offloaded``: prefilled on
    PrfaaS; ``routing_tokens``: the incremental length the router compared with t (L − l_pd when scarce,
    L − max(l_pd, l_prfaas) when abundant); ``abundant``: the rule in force for the request;
    ``transfer_bytes``: cache moved across the link before the prefill (abundant rule), with
    ``transfer_to_prfaas`` its direction; ``load_s``: time to load the reused prefix at the target cluster.
    """

    input_tokens: IntArray
    cached_tokens: IntArray
    offloaded: BoolArray
    routing_tokens: IntArray
    abundant: BoolArray
    transfer_bytes: FloatArray
    transfer_to_prfaas: BoolArray
    load_s: FloatArray
    evictions: dict[str, int]

    @property
    def incremental_tokens(self) -> IntArray:
        """Tokens to prefill: input − cached (never negative, never above the input)."""
        return self.input_tokens - self.cached_tokens

    def hit_rates(self) -> dict[str, HitRates]:
        """Figures per cluster ("prfaas", "local") and over all requests ("all")."""
        out = {}
        for name, mask in (
            ("prfaas", self.offloaded),
            ("local", ~self.offloaded),
            ("all", np.ones_like(self.offloaded)),
        ):
            cached = self.cached_tokens[mask]
            out[name] = HitRates(
                requests=int(np.count_nonzero(mask)),
                input_tokens=int(np.sum(self.input_tokens[mask])),
                cached_tokens=int(np.sum(cached)),
                requests_with_hit=int(np.count_nonzero(cached > 0)),
            )
        return out

    @property
    def transfer_bytes_total(self) -> dict[str, float]:
        """Cross-cluster cache transfer bytes by direction: "to_prfaas" and "to_local"."""
        to_prfaas = float(np.sum(self.transfer_bytes[self.transfer_to_prfaas]))
        return {"to_prfaas": to_prfaas, "to_local": float(np.sum(self.transfer_bytes)) - to_prfaas}


def _check(caches: PrefixCaches, kv_bytes_per_token: float) -> None:
    if caches.rule not in CACHE_RULES:
        raise ValueError(f"unknown cache rule {caches.rule!r}: expected one of {', '.join(CACHE_RULES)}")
    if not (math.isfinite(kv_bytes_per_token) and kv_bytes_per_token > 0.0):
        raise ValueError(f"KV bytes per token must be > 0, got {kv_bytes_per_token!r}")
    if caches.block_tokens < 1:
        raise ValueError(f"block size must be >= 1 token, got {caches.block_tokens}")
    for cache in (caches.prfaas, caches.local):
        if not cache.load_bandwidth_bytes_per_s > 0.0:
            raise ValueError(f"cache load bandwidth must be > 0, got {cache.load_bandwidth_bytes_per_s!r}")


def _cluster(cache: ClusterCache, caches: PrefixCaches, kv_bytes_per_token: float) -> ClusterPrefixCache:
    return ClusterPrefixCache(cache.capacity_bytes, caches.block_tokens * kv_bytes_per_token, caches.linear_state_bytes)


def replay_caches(
    trace: Trace,
    caches: PrefixCaches,
    *,
    kv_bytes_per_token: float,
    threshold_tokens: float,
    link_utilization: npt.ArrayLike = 0.0,
    n: int | None = None,
) -> CacheReplay:
    """Replay the first ``n`` requests of ``trace`` (all when None) through both clusters' prefix caches in
    arrival order, routing each on its incremental length under ``caches.rule`` (module docstring).

    ``kv_bytes_per_token``: full-attention KV bytes per token (the slope of the KV-size curve);
    ``link_utilization``: the link utilisation the router sees at each arrival (a number, or one per
    request), used only by the ``switch`` rule. Raises ValueError when the trace carries no block hashes or
    a parameter is out of range.
    """
    if trace.block_ids is None or trace.block_offsets is None:
        raise ValueError(f"{trace.source}: the trace carries no block hashes (Mooncake hash_ids)")
    _check(caches, kv_bytes_per_token)
    count = trace.n_requests if n is None else min(n, trace.n_requests)
    utilization = np.broadcast_to(np.asarray(link_utilization, dtype=np.float64), (trace.n_requests,))[:count]
    local = _cluster(caches.local, caches, kv_bytes_per_token)
    prfaas = _cluster(caches.prfaas, caches, kv_bytes_per_token)
    block_tokens, state = caches.block_tokens, caches.linear_state_bytes
    state_bytes = 0.0 if state is None else state
    hybrid = state is not None
    ids: list[int] = trace.block_ids.tolist()
    offsets: list[int] = trace.block_offsets[: count + 1].tolist()
    inputs: list[int] = trace.input_tokens[:count].tolist()
    abundant_flags = (
        np.full(count, caches.rule == "abundant")
        if caches.rule != "switch"
        else utilization < caches.abundant_below_utilization
    )
    abundant_list: list[bool] = abundant_flags.tolist()
    cached = np.zeros(count, dtype=np.int64)
    routing = np.zeros(count, dtype=np.int64)
    offloaded = np.zeros(count, dtype=bool)
    transfer = np.zeros(count, dtype=np.float64)
    to_prfaas = np.zeros(count, dtype=bool)
    load = np.zeros(count, dtype=np.float64)
    bandwidth = (caches.local.load_bandwidth_bytes_per_s, caches.prfaas.load_bandwidth_bytes_per_s)

    def tokens(j: int, length: int) -> int:
        return j * block_tokens if hybrid else min(j * block_tokens, length)

    for i in range(count):
        length = inputs[i]
        blocks = ids[offsets[i] : offsets[i + 1]]
        full = min(length // block_tokens, len(blocks))
        j_pd = local.match(blocks, full)
        j_pf = prfaas.match(blocks, full)
        c_pd, c_pf = tokens(j_pd, length), tokens(j_pf, length)
        if abundant_list[i]:
            best = max(c_pd, c_pf)
            incremental = length - best
            off = incremental > threshold_tokens
            reuse, j_used = best, (j_pf if c_pf >= c_pd else j_pd)
            holder_prfaas = c_pf > c_pd
            if best > 0 and c_pd != c_pf and holder_prfaas != off:
                transfer[i] = best * kv_bytes_per_token + state_bytes
                to_prfaas[i] = off
        else:
            incremental = length - c_pd
            off = incremental > threshold_tokens
            reuse, j_used = (c_pf, j_pf) if off else (c_pd, j_pd)
        (prfaas if off else local).store(blocks, full, j_used)
        cached[i] = reuse
        routing[i] = incremental
        offloaded[i] = off
        if reuse > 0:
            load[i] = (reuse * kv_bytes_per_token + state_bytes) / bandwidth[off]
    for array in (cached, routing, offloaded, transfer, to_prfaas, load, abundant_flags):
        array.setflags(write=False)
    inputs_array = np.array(inputs, dtype=np.int64)
    inputs_array.setflags(write=False)
    return CacheReplay(
        input_tokens=inputs_array,
        cached_tokens=cached,
        offloaded=offloaded,
        routing_tokens=routing,
        abundant=np.array(abundant_flags, dtype=bool),
        transfer_bytes=transfer,
        transfer_to_prfaas=to_prfaas,
        load_s=load,
        evictions={"prfaas": prfaas.lru.evicted, "local": local.lru.evicted},
    )
