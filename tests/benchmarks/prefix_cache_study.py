"""Hybrid prefix caches on the Mooncake conversation trace: hit rates per cluster over a range of cache sizes,
the incremental-length distribution they leave, and the optimal threshold and Λ_max with and without them;
the scarce and abundant rules compared at 100 and 10 Gbit/s (issue 12).

    python3 -m tests.benchmarks.prefix_cache_study [--hybrid-state-mib 64]

Both clusters get the same pool size; the KV bytes per token are the slope of the paper scenario's KV
curve. The threshold each replay routes on is the optimum for the infinite-cache incremental lengths (the
planner's view); the plan columns then re-optimise t and N_p on the lengths the replay produced.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import replace

import numpy as np

from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.io.traces import read_trace
from prfaas_plan.lengths import Empirical
from prfaas_plan.optimize import search
from prfaas_plan.sim.prefix_cache import CacheReplay, replay_caches
from prfaas_plan.spec.dynamics import ClusterCache, PrefixCaches
from prfaas_plan.studies.planning import trace_model
from prfaas_plan.throughput import stage_model
from prfaas_plan.units import GB, GBIT_PER_S
from tests.conftest import PAPER_SCENARIO, TRACES

#: Pool sizes per cluster, GB (host DRAM + SSD over the cluster's nodes); inf = unbounded.
SIZES_GB = (0.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0, math.inf)
#: Loading a hit: one node's PCIe Gen5 x16 host-to-device copy, about 50 GB/s (an assumption, not measured).
LOAD_BYTES_PER_S = 50 * GB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hybrid-state-mib", type=float, default=None, help="linear-attention state per checkpoint")
    args = parser.parse_args()
    state = None if args.hybrid_state_mib is None else args.hybrid_state_mib * 2**20
    model = stage_model(load_scenario(PAPER_SCENARIO))
    trace = read_trace(TRACES / "conversation_trace.jsonl", prefix_cache=True)
    per_token = float(model.kv_bytes(32768.0) - model.kv_bytes(0.0)) / 32768.0
    print(
        f"trace: {trace.n_requests:,} requests, {trace.block_ids.size if trace.block_ids is not None else 0:,} blocks"
    )
    print(f"KV bytes per token {per_token / 1e3:.1f} kB; hybrid state {state} B; load {LOAD_BYTES_PER_S / GB:.0f} GB/s")
    assert trace.block_ids is not None
    footprint = len(np.unique(trace.block_ids)) * 512 * per_token
    print(f"footprint of every distinct block: {footprint / GB:,.0f} GB")
    no_cache = search(trace_model(model, replace(trace, cached_tokens=None)))
    infinite = search(trace_model(model, trace))
    assert infinite.threshold_tokens is not None
    threshold = infinite.threshold_tokens
    print(
        f"no cache: t = {no_cache.threshold_tokens or math.nan:,.0f}, "
        f"Λ_max = {no_cache.throughput_req_per_s:.3f} req/s; "
        f"infinite cache: t = {threshold:,.0f}, Λ_max = {infinite.throughput_req_per_s:.3f} req/s"
    )
    for rule in ("scarce", "abundant"):
        print(f"\nrule {rule}, routing at t = {threshold:,.0f}")
        header = (
            f"{'pool GB':>8} {'PrfaaS tok':>10} {'req':>6} {'local tok':>10} {'req':>6} {'all tok':>8} "
            f"{'inc p10':>8} {'p50':>7} {'p90':>7} {'p99':>7} {'mean':>7} {'xfer GB':>8} {'t*':>7} {'Λmax':>6} {'s':>5}"
        )
        print(header)
        for size_gb in SIZES_GB:
            start = time.perf_counter()
            replay = replay_caches(
                trace, _caches(size_gb * GB, rule, state), kv_bytes_per_token=per_token, threshold_tokens=threshold
            )
            wall = time.perf_counter() - start
            plan = search(replace(trace_model(model, trace), lengths=Empirical(values=replay.incremental_tokens)))
            print(_row(size_gb, replay, plan.threshold_tokens, plan.throughput_req_per_s, wall))
    print("\nscarce vs abundant at 300 GB per cluster, by link bandwidth")
    for gbit in (100.0, 10.0):
        linked = replace(model, link_bandwidth_bytes_per_s=gbit * GBIT_PER_S)
        for rule in ("scarce", "abundant"):
            replay = replay_caches(
                trace, _caches(300 * GB, rule, state), kv_bytes_per_token=per_token, threshold_tokens=threshold
            )
            plan = search(replace(trace_model(linked, trace), lengths=Empirical(values=replay.incremental_tokens)))
            seconds = trace.duration_s
            moved = sum(replay.transfer_bytes_total.values())
            print(
                f"{gbit:>5.0f} Gbit/s {rule:>9}: t* = {plan.threshold_tokens or math.nan:>7,.0f}, "
                f"Λ_max = {plan.throughput_req_per_s:.3f} req/s, binding {'+'.join(plan.binding)}, "
                f"cache transfers {moved / GB:,.0f} GB = {moved * 8 / seconds / 1e9:.2f} Gbit/s over the trace's "
                f"{seconds:,.0f} s"
            )


def _caches(size_bytes: float, rule: str, state_bytes: float | None) -> PrefixCaches:
    cache = ClusterCache(capacity_bytes=size_bytes, load_bandwidth_bytes_per_s=LOAD_BYTES_PER_S)
    return PrefixCaches(prfaas=cache, local=cache, rule=rule, linear_state_bytes=state_bytes)  # type: ignore[arg-type]


def _row(size_gb: float, replay: CacheReplay, t: float | None, lam: float, wall: float) -> str:
    rates = replay.hit_rates()
    q = np.quantile(replay.incremental_tokens, [0.1, 0.5, 0.9, 0.99])
    moved = sum(replay.transfer_bytes_total.values())
    return (
        f"{size_gb:>8,.0f} {rates['prfaas'].token_hit_rate:>10.3f} {rates['prfaas'].request_hit_rate:>6.3f} "
        f"{rates['local'].token_hit_rate:>10.3f} {rates['local'].request_hit_rate:>6.3f} "
        f"{rates['all'].token_hit_rate:>8.3f} {q[0]:>8,.0f} {q[1]:>7,.0f} {q[2]:>7,.0f} {q[3]:>7,.0f} "
        f"{float(np.mean(replay.incremental_tokens)):>7,.0f} {moved / GB:>8,.0f} {t or math.nan:>7,.0f} {lam:>6.3f} "
        f"{wall:>5.2f}"
    )


if __name__ == "__main__":
    main()
