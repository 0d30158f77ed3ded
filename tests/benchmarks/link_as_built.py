"""The link as built (issue 22): the TCP model against published measurements, and the paper scenario on three
links as built.

    python3 -m tests.benchmarks.link_as_built            # both tables (the sizing takes a few minutes)
    python3 -m tests.benchmarks.link_as_built --measured # the measured-vs-model table only

Table 1 reads tests/validation/tcp_measurements.yaml (each point with its source) and prints the measured
goodput beside the model's, with the loss read two ways where the source counts retransmissions (as loss
events, which overstates them when losses come in bursts; and as none, leaving the window to bind).

Table 2 puts workloads/paper-case-study.yaml on links of 10 ms / 0 %, 40 ms / 0.05 % and 80 ms / 0.1 % loss,
each with 6 MiB windows (Linux's default largest receive buffer) and 8 pooled connections (the replication's
operating point) or 256, and prints the deliverable goodput of the 100 Gbit/s link, the Λ_max plan and its
unloaded TTFT, the goodput within P90 TTFT <= 5 s, and ``size``'s answer for the scenario's target (3 req/s
within P90 TTFT <= 5 s): the deployment and the link bandwidth to buy.
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from prfaas_plan.errors import InfeasibleError
from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.optimize import search
from prfaas_plan.optimize.cost import unit_prices
from prfaas_plan.optimize.sizing import default_search_space, max_rate, size
from prfaas_plan.physics.tcp import MSS_BYTES, deliverable_bytes_per_s, padhye_packets_per_s
from prfaas_plan.spec.scenario import TcpPath
from prfaas_plan.throughput import stage_model
from prfaas_plan.units import GBIT_PER_S, MIB

REPO = Path(__file__).resolve().parents[2]
MEASUREMENTS = REPO / "tests" / "validation" / "tcp_measurements.yaml"
PAPER = REPO / "workloads" / "paper-case-study.yaml"
#: The three links of issue 22: (RTT ms, loss probability).
LINKS = ((10.0, 0.0), (40.0, 0.0005), (80.0, 0.001))
WINDOW_MIB = 6.0
CONNECTIONS = (8, 256)


def model_gbit_per_s(point: dict[str, Any], loss_rate: float) -> float:
    """The model's goodput for one measured point, Gbit/s (the nominal rate unbounded where the source has none)."""
    window = point.get("window_mib")
    path = TcpPath(
        rtt_s=point["rtt_ms"] / 1e3,
        connections=int(point["connections"]),
        window_bytes=None if window is None else window * MIB,
        loss_rate=loss_rate,
    )
    nominal = point.get("nominal_gbit_per_s")
    return deliverable_bytes_per_s(math.inf if nominal is None else nominal * GBIT_PER_S, path) / GBIT_PER_S


def measured_points() -> list[dict[str, Any]]:
    points: list[dict[str, Any]] = yaml.safe_load(MEASUREMENTS.read_text())["points"]
    return points


def measured_table() -> None:
    print("Measured vs model (physics/tcp.py: Padhye 1998, MSS 1448 B, T0 = RTT + 200 ms, b = 1)")
    print(f"{'point':34s} {'measured':>10s} {'model':>10s} {'ratio':>7s} {'model, retx as loss':>20s}  domain")
    for point in measured_points():
        model = model_gbit_per_s(point, point["loss_rate"])
        retx = point.get("retransmitted_fraction")
        as_loss = f"{model_gbit_per_s(point, retx):.3f}" if retx else "-"
        measured = point["measured_gbit_per_s"]
        print(
            f"{point['name']:34s} {measured:10.4g} {model:10.4g} {model / measured:7.2f} {as_loss:>20s}  "
            f"{'in' if point['in_domain'] else 'OUT'}"
        )
    rtt, p = 0.02975, 1.42e-4
    per_connection = MSS_BYTES * padhye_packets_per_s(rtt, p) / GBIT_PER_S
    print(
        f"(one connection at {rtt * 1e3:g} ms and p = {p:g}: {per_connection:.3f} Gbit/s by Padhye; the replication's"
        " 8 connections carried 14.72 Gbit/s, so its retransmissions were far from independent loss events)"
    )


def _show(value: float, fmt: str = ".2f") -> str:
    return "-" if value is None or not math.isfinite(value) else format(value, fmt)


def scenario_table() -> None:
    base = load_scenario(PAPER)
    target = base.target
    assert target is not None
    prices = unit_prices(base)
    print()
    print(
        f"Paper scenario, {base.link.bandwidth_bytes_per_s / GBIT_PER_S:g} Gbit/s link bought, "
        f"windows {WINDOW_MIB:g} MiB; size for {target.rate_req_per_s:g} req/s within "
        f"P{target.quantile * 100:g} TTFT <= {target.ttft_slo_s:g} s"
    )
    header = (
        f"{'RTT ms':>6s} {'loss %':>6s} {'conns':>5s} {'deliv Gbit/s':>12s} {'Λmax':>6s} {'t':>8s} {'p':>6s} "
        f"{'TTFT mean/P90 s':>16s} {'goodput@5s':>10s}  size: deployment, link to buy"
    )
    print(header)
    rows = [(0.0, 0.0, 1)] + [(r, p, n) for r, p in LINKS for n in CONNECTIONS]
    for rtt_ms, loss, n in rows:
        path = (
            TcpPath()
            if rtt_ms == 0
            else TcpPath(rtt_s=rtt_ms / 1e3, connections=n, window_bytes=WINDOW_MIB * MIB, loss_rate=loss)
        )
        scenario = replace(base, link=replace(base.link, tcp=path))
        model = stage_model(scenario)
        plan = search(model)
        goodput = max_rate(model, target.ttft_slo, resolution_tokens=1024.0).goodput_req_per_s
        space = default_search_space(model, prices, target)
        try:
            sized = size(
                model,
                prices,
                target,
                bandwidths_bytes_per_s=space.bandwidths_bytes_per_s,
                max_prfaas=space.max_prfaas,
                max_local=space.max_local,
            )
            best = sized.cheapest
            link = (
                f"{best.bandwidth_bytes_per_s / GBIT_PER_S:g} Gbit/s"
                f" (delivers {deliverable_bytes_per_s(best.bandwidth_bytes_per_s, path) / GBIT_PER_S:.3g})"
                if best.n_prfaas > 0
                else "no link"
            )
            answer = f"{best.label} {best.n_prfaas}+{best.n_local} inst, ${best.usd_per_hour:,.0f}/h, {link}"
        except InfeasibleError as error:
            answer = f"infeasible ({str(error).splitlines()[0][:60]})"
        name = "nominal" if rtt_ms == 0 else f"{rtt_ms:6g}"
        print(
            f"{name:>6s} {loss * 100:6.3g} {n:5d} {model.link_bandwidth_bytes_per_s / GBIT_PER_S:12.3f} "
            f"{plan.throughput_req_per_s:6.2f} {plan.threshold_tokens:8,.0f} {plan.offload_fraction:6.1%} "
            f"{_show(plan.ttft_unloaded_mean_s):>7s}/{_show(plan.ttft_unloaded_p90_s):<8s} {goodput:10.2f}  {answer}",
            flush=True,
        )


if __name__ == "__main__":
    measured_table()
    if "--measured" not in sys.argv:
        scenario_table()
