"""Faults and the dual-timescale scheduler on the paper scenario (issue 12), as figures to read, not to pass.

    python3 -m tests.benchmarks.dynamics_study [--requests 20000] [--slo-s 10]

1. Faults at 70 % of Λ_max: a PrfaaS instance lost (for good, and for 600 s), a decode instance lost, a 60 s
   link outage. Request accounting, restarted/resumed/rerouted work, baseline and peak binned P90 TTFT,
   recovery time (``sim.faults.fault_impact``: 60 s bins, within 50 % of the P90 of the 600 s before the
   fault; the no-fault row shows the bins' own noise).
2. Static optimum vs adaptive (short term, long term, both) vs naive (everything offloaded, every local
   instance decoding) on: a synthetic day with a 3x diurnal swing (amplitude 0.5, compressed to a 2 h
   period), a link that drops to 30 % for five minutes, the Azure conversation trace (its rate drifts)
   rescaled to 70 % of its plan's Λ_max. Throughput (completed / span), P90 and P99 TTFT and SLO
   attainment (share of requests with TTFT <= ``--slo-s``; the paper states no TTFT SLO).
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import replace

import numpy as np

from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.io.traces import read_trace, resolve_trace_path
from prfaas_plan.lengths import Fixed
from prfaas_plan.optimize import search
from prfaas_plan.sim.arrivals import Diurnal, Poisson
from prfaas_plan.sim.cluster import ClusterConfig
from prfaas_plan.sim.faults import fault_impact
from prfaas_plan.sim.records import SimResult
from prfaas_plan.sim.run import simulate
from prfaas_plan.sim.workload import Workload, synthetic_workload, trace_workload
from prfaas_plan.spec.dynamics import InstanceLoss, RoleControl, ThresholdControl
from prfaas_plan.studies.planning import trace_model
from prfaas_plan.throughput import StageModel, stage_model
from tests.conftest import PAPER_SCENARIO


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--slo-s", type=float, default=10.0)
    args = parser.parse_args()
    model = stage_model(load_scenario(PAPER_SCENARIO))
    faults(model, args.requests)
    policies(model, args.requests, args.slo_s)


def _plan_config(model: StageModel) -> tuple[ClusterConfig, float]:
    plan = search(model)
    assert plan.threshold_tokens is not None
    config = ClusterConfig(
        model=model,
        threshold_tokens=plan.threshold_tokens,
        n_pd_prefill=plan.n_pd_prefill,
        n_pd_decode=plan.n_pd_decode,
        egress_bin_s=1.0,
    )
    return config, plan.throughput_req_per_s


def faults(model: StageModel, requests: int) -> None:
    config, lam = _plan_config(model)
    rng = np.random.default_rng(0)
    workload = synthetic_workload(rng, Poisson(rate_req_per_s=0.7 * lam), model.lengths, Fixed(tokens=1024), requests)
    fault_s = float(workload.arrival_s[requests // 3])
    bw = model.link_bandwidth_bytes_per_s
    cases = {
        "none": config,
        "PrfaaS instance lost": replace(config, losses=(InstanceLoss(pool="prfaas", at_s=fault_s),)),
        "PrfaaS instance lost 600 s": replace(
            config, losses=(InstanceLoss(pool="prfaas", at_s=fault_s, restore_s=fault_s + 600),)
        ),
        "decode instance lost": replace(config, losses=(InstanceLoss(pool="decode", at_s=fault_s),)),
        "local prefill lost 600 s": replace(
            config, losses=(InstanceLoss(pool="local_prefill", at_s=fault_s, restore_s=fault_s + 600),)
        ),
        "60 s link outage": replace(config, bandwidth_profile=((0.0, bw), (fault_s, 0.0), (fault_s + 60, bw))),
    }
    print(f"Faults at 70 % of Λ_max = {lam:.3f} req/s, {requests:,} requests, fault at {fault_s:,.0f} s")
    print(
        f"{'case':<28} {'arrived':>8} {'done':>8} {'flight':>6} {'drop':>4} {'restart':>7} {'resume':>6} "
        f"{'reroute':>7} {'P90 base':>8} {'P90 peak':>8} {'recovery s':>10} {'req/s wall':>10}"
    )
    for name, case in cases.items():
        start = time.perf_counter()
        result = simulate(case, workload)
        wall = time.perf_counter() - start
        impact = fault_impact(result.records, fault_s=fault_s, bin_s=60.0, tolerance=0.5)
        recovery = "never" if impact.recovery_s is None else f"{impact.recovery_s:,.0f}"
        print(
            f"{name:<28} {result.arrived:>8,} {result.completed:>8,} {result.in_flight:>6,} {result.dropped:>4} "
            f"{result.restarted_prefills:>7} {result.resumed_decodes:>6} {result.rerouted:>7} "
            f"{impact.baseline_p90_s:>8.2f} {impact.peak_p90_s:>8.2f} {recovery:>10} {requests / wall:>10,.0f}"
        )


def _figures(result: SimResult, slo_s: float) -> str:
    records = result.records
    ttft = records.ttft_s
    span = float(np.nanmax(records.finish_s) - records.arrival_s[0])
    throughput = result.completed / span if span > 0 else math.nan
    with np.errstate(invalid="ignore"):
        attained = float(np.mean(np.where(np.isnan(ttft), False, ttft <= slo_s)))
    p90, p99 = np.nanpercentile(ttft, [90, 99])
    moves = len(result.threshold_changes)
    roles = " ".join(f"{p}/{d}" for _, p, d in result.role_changes[1:]) or "-"
    return f"{throughput:>8.3f} {p90:>8.2f} {p99:>8.2f} {attained:>6.1%} {moves:>6} {roles}"


def _policies(config: ClusterConfig, model: StageModel) -> dict[str, ClusterConfig]:
    short = ThresholdControl()
    long = RoleControl()
    return {
        "static optimum": config,
        "adaptive short term": replace(config, threshold_control=short),
        "adaptive long term": replace(config, role_control=long),
        "adaptive both": replace(config, threshold_control=short, role_control=long),
        "naive (all offloaded)": replace(
            config, threshold_tokens=-1.0, n_pd_prefill=0, n_pd_decode=config.n_pd_prefill + config.n_pd_decode
        ),
    }


def policies(model: StageModel, requests: int, slo_s: float) -> None:
    config, lam = _plan_config(model)
    rng = np.random.default_rng(1)
    day = synthetic_workload(
        rng,
        Diurnal(rate_req_per_s=0.6 * lam, amplitude=0.5, period_s=7200.0),
        model.lengths,
        Fixed(tokens=1024),
        requests,
    )
    steady = synthetic_workload(
        np.random.default_rng(2), Poisson(rate_req_per_s=0.7 * lam), model.lengths, Fixed(tokens=1024), requests
    )
    drop_s = float(steady.arrival_s[requests // 3])
    bw = model.link_bandwidth_bytes_per_s
    drop = ((0.0, bw), (drop_s, 0.3 * bw), (drop_s + 300.0, bw))
    azure = read_trace(resolve_trace_path("azure-conv"))
    azure_model = trace_model(model, azure)
    azure_config, azure_lam = _plan_config(azure_model)
    azure_workload: Workload = trace_workload(azure, requests, 0.7 * azure_lam)
    runs = [
        ("diurnal 3x (2 h period)", config, day, ()),
        ("link at 30 % for 5 min", config, steady, drop),
        ("Azure conv (rate drifts)", azure_config, azure_workload, ()),
    ]
    for title, base, workload, profile in runs:
        print(f"\n{title}: {workload.n_requests:,} requests, mean rate {workload.mean_rate_req_per_s:.3f} req/s")
        print(f"{'policy':<24} {'req/s':>8} {'P90 s':>8} {'P99 s':>8} {'SLO':>6} {'t moves':>6} roles N_p/N_d")
        for name, policy in _policies(base, model).items():
            if profile:
                policy = replace(policy, bandwidth_profile=profile)
            result = simulate(policy, workload)
            print(f"{name:<24} {_figures(result, slo_s)}")


if __name__ == "__main__":
    main()
