"""Hybrid prefix caches replayed on traces (sim.prefix_cache): the laws that hold, on random prefix trees."""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.io.traces import read_trace
from prfaas_plan.sim.prefix_cache import ClusterPrefixCache, LruCache, replay_caches
from prfaas_plan.spec.dynamics import ClusterCache, PrefixCaches
from prfaas_plan.spec.trace import Trace
from tests.conftest import TRACES, examples

BLOCK = 512
KV_PER_TOKEN = 1000.0
BLOCK_BYTES = BLOCK * KV_PER_TOKEN


@st.composite
def prefix_traces(draw: Callable[[st.SearchStrategy[Any]], Any], max_requests: int = 40) -> list[tuple[int, list[int]]]:
    """(input tokens, block ids) per request. Each request extends a prefix of an earlier one (or nothing)
    with fresh blocks, so that an id names its whole prefix, as Mooncake's hash ids do."""
    n = draw(st.integers(1, max_requests))
    requests: list[tuple[int, list[int]]] = []
    next_id = 0
    for _ in range(n):
        blocks: list[int] = []
        if requests and draw(st.booleans()):
            parent = requests[draw(st.integers(0, len(requests) - 1))][1]
            blocks = parent[: draw(st.integers(0, len(parent)))]
        fresh = draw(st.integers(0 if blocks else 1, 4))
        blocks = blocks + list(range(next_id, next_id + fresh))
        next_id += fresh
        tail = draw(st.integers(0, BLOCK - 1))
        length = max(len(blocks) * BLOCK - tail, 1)
        requests.append((length, blocks))
    return requests


def _trace(requests: list[tuple[int, list[int]]]) -> Trace:
    ids = [b for _, blocks in requests for b in blocks]
    offsets = np.cumsum([0] + [len(blocks) for _, blocks in requests])
    n = len(requests)
    return Trace(
        source="test",
        arrival_s=np.arange(n, dtype=np.float64),
        input_tokens=np.array([length for length, _ in requests], dtype=np.int64),
        output_tokens=np.ones(n, dtype=np.int64),
        block_ids=np.array(ids, dtype=np.int64),
        block_offsets=offsets.astype(np.int64),
    )


def _caches(local_bytes: float, prfaas_bytes: float, rule: str = "scarce", state: float | None = None) -> PrefixCaches:
    return PrefixCaches(
        local=ClusterCache(capacity_bytes=local_bytes, load_bandwidth_bytes_per_s=1e10),
        prfaas=ClusterCache(capacity_bytes=prfaas_bytes, load_bandwidth_bytes_per_s=1e10),
        rule=rule,  # type: ignore[arg-type]
        linear_state_bytes=state,
    )


def _infinite_oracle(requests: list[tuple[int, list[int]]]) -> list[int]:
    """The infinite-cache figures of io.traces.read_trace(prefix_cache=True), through a real JSONL file."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.jsonl"
        path.write_text(
            "".join(
                json.dumps({"timestamp": i, "input_length": length, "output_length": 1, "hash_ids": blocks}) + "\n"
                for i, (length, blocks) in enumerate(requests)
            )
        )
        cached = read_trace(path, prefix_cache=True).cached_tokens
    assert cached is not None
    return [int(c) for c in cached]


@settings(max_examples=examples(60), deadline=None)
@given(prefix_traces(), st.integers(0, 30), st.integers(0, 30))
def test_larger_lru_never_lowers_hits_for_one_full_attention_cache(
    requests: list[tuple[int, list[int]]], small_blocks: int, extra_blocks: int
) -> None:
    """One full-attention cache whose requests do not depend on hits (t = ∞, everything local): LRU is a
    stack algorithm, so a larger pool holds a superset at every moment and every request's hit is at
    least as long. (Not claimed when routing depends on hits, nor for hybrid state checkpoints.)"""
    trace = _trace(requests)
    small = replay_caches(
        trace, _caches(small_blocks * BLOCK_BYTES, 0.0), kv_bytes_per_token=KV_PER_TOKEN, threshold_tokens=math.inf
    )
    large = replay_caches(
        trace,
        _caches((small_blocks + extra_blocks) * BLOCK_BYTES, 0.0),
        kv_bytes_per_token=KV_PER_TOKEN,
        threshold_tokens=math.inf,
    )
    assert np.all(large.cached_tokens >= small.cached_tokens)
    assert large.hit_rates()["local"].token_hit_rate >= small.hit_rates()["local"].token_hit_rate


@settings(max_examples=examples(60), deadline=None)
@given(
    prefix_traces(),
    st.integers(0, 20),
    st.integers(0, 20),
    st.sampled_from(["scarce", "abundant", "switch"]),
    st.sampled_from([None, 3 * BLOCK_BYTES]),
    st.sampled_from([0.0, 700.0, 2000.0, math.inf]),
)
def test_incremental_length_within_input(
    requests: list[tuple[int, list[int]]],
    local_blocks: int,
    prfaas_blocks: int,
    rule: str,
    state: float | None,
    threshold: float,
) -> None:
    """0 <= cached <= input for every rule and model; the router's length is input − a cached prefix;
    a hybrid model's hit ends on a full block; offloaded exactly when the router's length exceeds t."""
    trace = _trace(requests)
    replay = replay_caches(
        trace,
        _caches(local_blocks * BLOCK_BYTES, prfaas_blocks * BLOCK_BYTES, rule, state),
        kv_bytes_per_token=KV_PER_TOKEN,
        threshold_tokens=threshold,
        link_utilization=np.linspace(0.0, 1.0, trace.n_requests),
    )
    assert np.all(replay.cached_tokens >= 0)
    assert np.all(replay.incremental_tokens <= replay.input_tokens)
    assert np.all(replay.incremental_tokens >= 0)
    assert np.all((replay.routing_tokens >= 0) & (replay.routing_tokens <= replay.input_tokens))
    assert np.array_equal(replay.offloaded, replay.routing_tokens > threshold)
    if state is not None:
        assert np.all(replay.cached_tokens % BLOCK == 0)
    assert np.all(replay.load_s[replay.cached_tokens == 0] == 0.0)
    assert np.all(replay.transfer_bytes[~replay.abundant] == 0.0)


@settings(max_examples=examples(40), deadline=None)
@given(prefix_traces(), st.sampled_from(["scarce", "abundant"]), st.sampled_from([None, 1e5]))
def test_zero_capacity_gives_zero_hits(requests: list[tuple[int, list[int]]], rule: str, state: float | None) -> None:
    """A pool of 0 bytes holds nothing: no hits, no transfers, no load time."""
    replay = replay_caches(
        _trace(requests), _caches(0.0, 0.0, rule, state), kv_bytes_per_token=KV_PER_TOKEN, threshold_tokens=700.0
    )
    assert not np.any(replay.cached_tokens)
    assert not np.any(replay.transfer_bytes)
    assert not np.any(replay.load_s)


@settings(max_examples=examples(40), deadline=None)
@given(prefix_traces(), st.sampled_from([0.0, 700.0, 1500.0, math.inf]))
def test_infinite_capacity_matches_the_trace_reader(requests: list[tuple[int, list[int]]], threshold: float) -> None:
    """Infinite pools, full attention: one cluster (t = ∞), and the abundant rule at any t (the longest prefix
    anywhere is the longest in a single infinite cache), reuse exactly what read_trace(prefix_cache=True)
    counts."""
    trace = _trace(requests)
    oracle = _infinite_oracle(requests)
    one = replay_caches(trace, _caches(math.inf, math.inf), kv_bytes_per_token=KV_PER_TOKEN, threshold_tokens=math.inf)
    assert one.cached_tokens.tolist() == oracle
    anywhere = replay_caches(
        trace, _caches(math.inf, math.inf, "abundant"), kv_bytes_per_token=KV_PER_TOKEN, threshold_tokens=threshold
    )
    assert anywhere.cached_tokens.tolist() == oracle


@settings(max_examples=examples(40), deadline=None)
@given(prefix_traces())
def test_hybrid_never_reuses_more_than_full_attention_with_infinite_pools(
    requests: list[tuple[int, list[int]]],
) -> None:
    """With infinite pools the block run is the same, and a checkpoint can only shorten the usable prefix."""
    trace = _trace(requests)
    full = replay_caches(trace, _caches(math.inf, 0.0), kv_bytes_per_token=KV_PER_TOKEN, threshold_tokens=math.inf)
    hybrid = replay_caches(
        trace, _caches(math.inf, 0.0, state=1e5), kv_bytes_per_token=KV_PER_TOKEN, threshold_tokens=math.inf
    )
    assert np.all(hybrid.cached_tokens <= full.cached_tokens)


def test_lru_evicts_least_recently_used_first() -> None:
    """Touching refreshes; inserting evicts from the least recently used end until the entry fits."""
    lru = LruCache(3.0)
    for key in (1, 2, 3):
        lru.touch(key, 1.0)
    lru.touch(1, 1.0)  # 2 is now the least recently used
    lru.touch(4, 1.0)
    assert 2 not in lru and {1, 3, 4} <= {k for k in (1, 3, 4) if k in lru}
    lru.touch(5, 2.0)  # evicts 3 then 1
    assert 3 not in lru and 1 not in lru and 4 in lru and 5 in lru
    lru.touch(6, 4.0)  # larger than the pool: it empties
    assert len(lru) == 0 and lru.used_bytes == 0.0
    with pytest.raises(ValueError, match="capacity"):
        LruCache(-1.0)


def test_hybrid_hit_needs_a_checkpoint_at_the_exact_length() -> None:
    """A state is reusable only where one was stored: a request ending after 3 full blocks leaves a
    checkpoint at 3; a later request sharing only 2 of them can reuse nothing, one sharing all 3 reuses 3."""
    cache = ClusterPrefixCache(math.inf, BLOCK_BYTES, 1e5)
    cache.store([1, 2, 3], 3, 0)
    assert cache.match([1, 2, 9, 10], 4) == 0
    assert cache.match([1, 2, 3, 11], 4) == 3
    full = ClusterPrefixCache(math.inf, BLOCK_BYTES, None)
    full.store([1, 2, 3], 3, 0)
    assert full.match([1, 2, 9, 10], 4) == 2


def test_abundant_rule_moves_the_prefix_across_the_link() -> None:
    """A prefix cached only on PrfaaS, for a request routed locally under the abundant rule, crosses the link
    (its KV bytes); under the scarce rule the local cache is judged alone and nothing moves."""
    requests = [(4 * BLOCK, [0, 1, 2, 3]), (4 * BLOCK + 100, [0, 1, 2, 3, 4])]
    trace = _trace(requests)
    # t = 1000: the first request (2048 uncached) goes to PrfaaS; the second has 100 tokens beyond PrfaaS's hit.
    abundant = replay_caches(
        trace, _caches(math.inf, math.inf, "abundant"), kv_bytes_per_token=KV_PER_TOKEN, threshold_tokens=1000.0
    )
    assert abundant.offloaded.tolist() == [True, False]
    assert abundant.cached_tokens.tolist() == [0, 4 * BLOCK]
    assert abundant.transfer_bytes.tolist() == [0.0, 4 * BLOCK * KV_PER_TOKEN]
    assert abundant.transfer_bytes_total == {"to_prfaas": 0.0, "to_local": 4 * BLOCK * KV_PER_TOKEN}
    scarce = replay_caches(
        trace, _caches(math.inf, math.inf, "scarce"), kv_bytes_per_token=KV_PER_TOKEN, threshold_tokens=1000.0
    )
    assert scarce.offloaded.tolist() == [True, True]
    assert scarce.cached_tokens.tolist() == [0, 4 * BLOCK]
    assert not np.any(scarce.transfer_bytes)


def test_replay_of_the_shipped_conversation_trace_matches_the_reader() -> None:
    """On the Mooncake conversation trace an infinite single cache reproduces the reader's cached tokens."""
    trace = read_trace(TRACES / "conversation_trace.jsonl", prefix_cache=True)
    replay = replay_caches(
        trace, _caches(math.inf, math.inf), kv_bytes_per_token=KV_PER_TOKEN, threshold_tokens=math.inf
    )
    assert trace.cached_tokens is not None
    assert np.array_equal(replay.cached_tokens, trace.cached_tokens)


def test_replay_refuses_traces_without_blocks_and_bad_parameters() -> None:
    """No hash ids, a non-positive KV size or load bandwidth: ValueError naming the problem."""
    bare = Trace(
        source="bare",
        arrival_s=np.zeros(1),
        input_tokens=np.ones(1, dtype=np.int64),
        output_tokens=np.ones(1, dtype=np.int64),
    )
    with pytest.raises(ValueError, match="block hashes"):
        replay_caches(bare, _caches(1.0, 1.0), kv_bytes_per_token=1.0, threshold_tokens=0.0)
    trace = _trace([(BLOCK, [0])])
    with pytest.raises(ValueError, match="KV bytes per token"):
        replay_caches(trace, _caches(1.0, 1.0), kv_bytes_per_token=0.0, threshold_tokens=0.0)
