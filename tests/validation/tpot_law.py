"""The TPOT law (``latency.tpot``) against the simulator (``sim.batch_decode``): per-request mean TPOT, its
mean and P90, closed form beside simulated, at fractions of a load.

Two feeds. ``decode``: Poisson arrivals reach the decode stage unchanged (ample prefill instances and link,
so each request only gains a random delay: the output of an M/G/∞ stage fed by Poisson is Poisson), at 50/70/90 %
of the decode stage's capacity on the plan's N_d; the law's assumptions hold. ``plan``: the scenario's
throughput-optimal plan at 50/70/90 % of its Λ_max, where the decode stage is fed by the prefill pools' and
link's departures, smoother than Poisson near the bottleneck's saturation (the law assumes Poisson).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.latency.tpot import decode_capacity_req_per_s, tpot_under_load
from prfaas_plan.optimize import search
from prfaas_plan.sim.arrivals import Poisson
from prfaas_plan.sim.cluster import ClusterConfig
from prfaas_plan.sim.run import simulate
from prfaas_plan.sim.summary import summarize
from prfaas_plan.sim.workload import synthetic_workload
from prfaas_plan.throughput import stage_model

REPO = Path(__file__).resolve().parents[2]
#: Ample prefill: instances of each pool in the ``decode`` feed, and the link's bytes/s there.
_AMPLE_INSTANCES = 400
_AMPLE_LINK_BYTES_PER_S = 1e15


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One load: the rate, the decode load, and TPOT mean and P90 (s), closed form and simulated (mean over
    seeds, with the seeds' spread as a standard error)."""

    feed: str
    load: float
    rate_req_per_s: float
    decode_load: float
    closed_mean_s: float
    closed_p90_s: float
    sim_mean_s: float
    sim_p90_s: float
    sim_p90_se_s: float

    @property
    def p90_gap(self) -> float:
        """(closed - simulated) / simulated, P90."""
        return (self.closed_p90_s - self.sim_p90_s) / self.sim_p90_s

    @property
    def mean_gap(self) -> float:
        """(closed - simulated) / simulated, mean."""
        return (self.closed_mean_s - self.sim_mean_s) / self.sim_mean_s


def compare(
    scenario: str, feed: str, loads: tuple[float, ...] = (0.5, 0.7, 0.9), requests: int = 12_000, seeds: int = 2
) -> list[Row]:
    """Closed form against simulation at each load (module docstring: the two feeds)."""
    spec = load_scenario(REPO / "workloads" / scenario)
    model = stage_model(spec)
    plan = search(model)
    n_d = plan.n_pd_decode
    if feed == "decode":
        model = replace(
            model,
            n_prfaas=_AMPLE_INSTANCES,
            n_local=_AMPLE_INSTANCES + n_d,
            link_bandwidth_bytes_per_s=_AMPLE_LINK_BYTES_PER_S,
        )
        threshold, n_p = float(model.lengths.mean_tokens), _AMPLE_INSTANCES
        full = decode_capacity_req_per_s(model, n_d)
    else:
        assert plan.threshold_tokens is not None
        threshold, n_p, full = plan.threshold_tokens, plan.n_pd_prefill, plan.throughput_req_per_s
    rows = []
    for load in loads:
        rate = load * full
        law = tpot_under_load(model, rate, n_d)
        means, p90s = [], []
        for seed in range(seeds):
            rng = np.random.default_rng(1000 + seed)
            arrivals = Poisson(rate_req_per_s=rate)
            workload = synthetic_workload(rng, arrivals, model.lengths, spec.traffic.output_length, requests)
            config = ClusterConfig(model=model, threshold_tokens=threshold, n_pd_prefill=n_p, n_pd_decode=n_d)
            summary = summarize(simulate(config, workload))
            means.append(summary.tpot_mean_s)
            p90s.append(summary.tpot_p90_s)
        rows.append(
            Row(
                feed=feed,
                load=load,
                rate_req_per_s=rate,
                decode_load=law.load,
                closed_mean_s=law.tpot_mean_s,
                closed_p90_s=law.tpot_p90_s,
                sim_mean_s=statistics.fmean(means),
                sim_p90_s=statistics.fmean(p90s),
                sim_p90_se_s=statistics.stdev(p90s) / len(p90s) ** 0.5 if len(p90s) > 1 else float("nan"),
            )
        )
    return rows


def format_table(rows: list[Row]) -> str:
    """A plain-text table, TPOT in ms."""
    lines = ["feed    load  rate(req/s)  decode load  mean cf/sim (ms)    P90 cf/sim ± se (ms)     P90 gap"]
    for r in rows:
        lines.append(
            f"{r.feed:7s} {r.load:4.0%}  {r.rate_req_per_s:10.3f}  {r.decode_load:10.0%}  "
            f"{r.closed_mean_s * 1e3:7.2f} / {r.sim_mean_s * 1e3:6.2f}   "
            f"{r.closed_p90_s * 1e3:7.2f} / {r.sim_p90_s * 1e3:6.2f} ± {r.sim_p90_se_s * 1e3:4.2f}  {r.p90_gap:+7.1%}"
        )
    return "\n".join(lines)
