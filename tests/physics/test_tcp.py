"""The link as built (issue 22): the TCP throughput model's properties, the loader's link fields, and the round
trip each transfer pays in the closed form and in the simulator."""

from __future__ import annotations

import math
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from prfaas_plan.errors import InputError
from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.latency.unloaded import route_latency, unloaded_ttft
from prfaas_plan.optimize.sizing import bandwidth_knee
from prfaas_plan.physics.tcp import (
    MSS_BYTES,
    connection_bytes_per_s,
    deliverable_bytes_per_s,
    mathis_packets_per_s,
    padhye_packets_per_s,
    transfer_latency_s,
)
from prfaas_plan.sim.run import simulate
from prfaas_plan.sim.workload import Workload
from prfaas_plan.spec.scenario import TcpPath, TransferMode
from prfaas_plan.throughput import link_bought_bytes_per_s, stage_model, with_link_rate
from prfaas_plan.units import GBIT_PER_S, MIB
from tests.conftest import PAPER_SCENARIO
from tests.sim.helpers import all_offloaded, queue_model

rtts = st.floats(min_value=0.0, max_value=2.0, allow_nan=False)
losses = st.floats(min_value=0.0, max_value=0.5, allow_nan=False)
nominals = st.floats(min_value=1e5, max_value=1e14, allow_nan=False)
windows = st.one_of(st.none(), st.floats(min_value=1024.0, max_value=2.0**30))
caps = st.one_of(st.none(), st.floats(min_value=1e5, max_value=1e13))
connections = st.integers(min_value=1, max_value=65_536)


@given(nominal=nominals, rtt=rtts, loss=losses, window=windows, cap=caps, n=connections)
def test_deliverable_never_exceeds_nominal(
    nominal: float, rtt: float, loss: float, window: float | None, cap: float | None, n: int
) -> None:
    path = TcpPath(rtt_s=rtt, connections=n, window_bytes=window, connection_cap_bytes_per_s=cap, loss_rate=loss)
    rate = deliverable_bytes_per_s(nominal, path)
    assert 0.0 < rate <= nominal


@given(
    nominal=nominals,
    rtt=rtts,
    loss=losses,
    more_rtt=st.floats(min_value=0.0, max_value=1.0),
    more_loss=st.floats(min_value=0.0, max_value=0.3),
    window=windows,
    n=connections,
)
def test_deliverable_never_falls_as_rtt_and_loss_fall(
    nominal: float, rtt: float, loss: float, more_rtt: float, more_loss: float, window: float | None, n: int
) -> None:
    """A path with a shorter round trip and less loss (each no larger) never delivers less."""
    better = TcpPath(rtt_s=rtt, connections=n, window_bytes=window, loss_rate=loss)
    worse = replace(better, rtt_s=rtt + more_rtt, loss_rate=min(loss + more_loss, 0.5))
    assert deliverable_bytes_per_s(nominal, worse) <= deliverable_bytes_per_s(nominal, better)


@given(nominal=nominals, rtt=st.floats(min_value=1e-4, max_value=2.0), n=connections)
def test_deliverable_approaches_nominal_as_rtt_times_loss_falls(nominal: float, rtt: float, n: int) -> None:
    """With nothing but loss bounding the connections, RTT · p -> 0 brings the rate up to B: it never falls
    along the path and equals B once the connections can carry it. Two paths: p -> 0 at a fixed RTT, and RTT
    and p falling together."""
    fixed_rtt = [TcpPath(rtt_s=rtt, connections=n, loss_rate=10.0**-k) for k in range(1, 40)]
    both = [TcpPath(rtt_s=rtt / 2.0**k, connections=n, loss_rate=10.0**-k) for k in range(1, 40)]
    for paths in (fixed_rtt, both):
        rates = [deliverable_bytes_per_s(nominal, path) for path in paths]
        assert all(b >= a for a, b in pairwise(rates))
        assert rates[-1] == nominal


def test_default_path_is_the_nominal_link_exactly() -> None:
    path = TcpPath()
    assert path.nominal
    for nominal in (1.0, 12.5e9, 1.25e14, 3.3e7):
        assert deliverable_bytes_per_s(nominal, path) == nominal
    assert transfer_latency_s(path) == 0.0


@given(rtt=st.floats(min_value=1e-4, max_value=2.0), loss=st.floats(min_value=1e-9, max_value=0.5))
def test_padhye_is_never_above_mathis(rtt: float, loss: float) -> None:
    """Padhye adds the timeout term to Mathis's sawtooth (same b), so it can only be slower."""
    assert padhye_packets_per_s(rtt, loss) <= mathis_packets_per_s(rtt, loss) * (1 + 1e-12)


def test_padhye_tends_to_mathis_as_loss_falls() -> None:
    """The timeout share of the time per packet falls as sqrt(p) · T0 / RTT: Padhye -> Mathis as p -> 0."""
    ratios = [padhye_packets_per_s(0.04, p) / mathis_packets_per_s(0.04, p) for p in (1e-2, 1e-4, 1e-6, 1e-8)]
    assert all(b > a for a, b in pairwise(ratios))
    assert ratios[-1] > 0.9999
    assert ratios[0] < 0.97  # at 1 % loss the timeouts are visible (why Padhye, not Mathis)


def test_window_and_cap_bound_each_connection() -> None:
    path = TcpPath(rtt_s=0.05, window_bytes=4 * MIB, connections=3)
    assert connection_bytes_per_s(path) == pytest.approx(4 * MIB / 0.05)
    assert deliverable_bytes_per_s(1e12, path) == pytest.approx(3 * 4 * MIB / 0.05)
    capped = TcpPath(rtt_s=0.05, connection_cap_bytes_per_s=1e8, connections=2)
    assert deliverable_bytes_per_s(1e12, capped) == pytest.approx(2e8)
    lossy = TcpPath(rtt_s=0.05, loss_rate=1e-3)
    assert connection_bytes_per_s(lossy) == pytest.approx(MSS_BYTES * padhye_packets_per_s(0.05, 1e-3))


def test_out_of_domain_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="loss_rate"):
        padhye_packets_per_s(0.01, 1.0)
    with pytest.raises(ValueError, match="rtt_s"):
        padhye_packets_per_s(-0.01, 0.01)


# -- the scenario's link section --------------------------------------------------------------------------

LINK_LINE = "    bandwidth_gbit_per_s: 100  # aggregate cross-cluster VPC bandwidth (paper §4.1)"


def _with_link(tmp_path: Path, extra: str) -> Path:
    text = PAPER_SCENARIO.read_text()
    assert LINK_LINE in text
    path = tmp_path / "link.yaml"
    path.write_text(text.replace(LINK_LINE, "    bandwidth_gbit_per_s: 100\n" + extra, 1))
    return path


def test_the_link_section_reads_the_tcp_shape(tmp_path: Path) -> None:
    path = _with_link(tmp_path, "    rtt_ms: 40\n    connections: 8\n    window_mib: 6\n    loss_rate: 0.0005\n")
    scenario = load_scenario(path)
    assert scenario.link.tcp == TcpPath(rtt_s=0.04, connections=8, window_bytes=6 * MIB, loss_rate=0.0005)
    model = stage_model(scenario)
    assert model.link_bandwidth_bytes_per_s == deliverable_bytes_per_s(100 * GBIT_PER_S, scenario.link.tcp)
    assert model.link_bandwidth_bytes_per_s < 100 * GBIT_PER_S
    assert link_bought_bytes_per_s(model) == 100 * GBIT_PER_S
    assert model.link_latency_s == pytest.approx(0.04)
    # A size bought is priced at its nominal rate and served at its deliverable one.
    resized = with_link_rate(model, 10 * GBIT_PER_S)
    assert link_bought_bytes_per_s(resized) == 10 * GBIT_PER_S
    assert resized.link_bandwidth_bytes_per_s == deliverable_bytes_per_s(10 * GBIT_PER_S, scenario.link.tcp)


def test_a_scenario_without_the_tcp_shape_is_the_nominal_link() -> None:
    model = stage_model(load_scenario(PAPER_SCENARIO))
    assert model.link_bandwidth_bytes_per_s == 100 * GBIT_PER_S
    assert model.link_latency_s == 0.0


@pytest.mark.parametrize(
    ("extra", "field", "message"),
    [
        ("    rtt_ms: -1\n", "deployment.link.rtt_ms", "must be >= 0"),
        ("    connections: 0\n", "deployment.link.connections", "must be >= 1"),
        ("    connections: 2.5\n", "deployment.link.connections", "integer"),
        ("    loss_rate: 0.9\n", "deployment.link.loss_rate", "must be <= 0.5"),
        ("    window_mib: 0\n", "deployment.link.window_mib", "must be > 0"),
        ("    window_mib: 4\n", "deployment.link.window_mib", "give rtt_ms > 0"),
        (
            "    rtt_ms: 10\n    window_mib: 4\n    connection_cap_gbit_per_s: 2\n",
            "deployment.link.connection_cap_gbit_per_s",
            "not both",
        ),
        ("    rtt_msec: 10\n", "deployment.link", "rtt_ms"),
    ],
)
def test_bad_link_fields_are_named(tmp_path: Path, extra: str, field: str, message: str) -> None:
    with pytest.raises(InputError) as info:
        load_scenario(_with_link(tmp_path, extra))
    problems = [str(p) for p in info.value.problems]
    assert any(field in p and message in p for p in problems), problems


# -- the round trip every transfer pays -----------------------------------------------------------------------


def test_unloaded_ttft_adds_the_round_trip_to_offloaded_requests(tmp_path: Path) -> None:
    """A link with RTT r and no loss, window or cap: the same rate, and every offloaded request r later."""
    plain = stage_model(load_scenario(PAPER_SCENARIO))
    shaped = replace(plain, link_tcp=TcpPath(rtt_s=0.08), link_latency_s=transfer_latency_s(TcpPath(rtt_s=0.08)))
    t = 19_400.0
    p = float(plain.lengths.sf(t))
    before = unloaded_ttft(plain.lengths, route_latency(plain), t)
    after = unloaded_ttft(shaped.lengths, route_latency(shaped), t)
    assert after.mean_s - before.mean_s == pytest.approx(0.08 * p, rel=1e-9)
    assert after.p99_s - before.p99_s == pytest.approx(0.08, rel=1e-6)  # the P99 request is offloaded
    modes: tuple[TransferMode, ...] = ("after_prefill", "layerwise")
    for mode in modes:
        route = route_latency(replace(shaped, transfer=mode))
        base = route_latency(replace(plain, transfer=mode))
        grid = np.array([20_000.0, 60_000.0, 131_072.0])
        assert np.allclose(route.offload_s(grid) - base.offload_s(grid), 0.08)


def test_the_simulator_makes_the_kv_ready_one_round_trip_after_the_link() -> None:
    """Same arrivals on a shared link: the round trip moves each KV-ready time by exactly r and leaves the link's
    occupancy alone (the transfers' finish times, hence the egress, are unchanged)."""
    rng = np.random.default_rng(7)
    n = 400
    lengths = rng.exponential(10_000.0, n)
    workload = Workload(
        arrival_s=np.cumsum(rng.exponential(1.0, n)),
        input_tokens=lengths,
        output_tokens=np.ones(n),
    )
    model = queue_model(n_prfaas=4, bandwidth_bytes_per_s=2e4)  # a link busy about half the time
    r = 0.25
    shaped = replace(model, link_latency_s=r)
    plain_run = simulate(all_offloaded(model, n_pd_decode=1), workload)
    shaped_run = simulate(all_offloaded(shaped, n_pd_decode=1), workload)
    plain_ready = plain_run.records.kv_ready_s
    shaped_ready = shaped_run.records.kv_ready_s
    assert np.allclose(shaped_ready - plain_ready, r, rtol=0, atol=1e-9)
    assert shaped_run.link_delivered_bytes == pytest.approx(plain_run.link_delivered_bytes)


def test_a_size_beyond_what_the_connections_carry_buys_nothing() -> None:
    """The knee table on a link whose 16 connections carry at most 16 · 4 MiB / 40 ms: every size above that
    ceiling serves the same rate, so the throughput stops rising while the price does not."""
    model = stage_model(load_scenario(PAPER_SCENARIO))
    path = TcpPath(rtt_s=0.04, connections=16, window_bytes=4 * MIB)
    model = with_link_rate(replace(model, link_tcp=path), 100 * GBIT_PER_S)
    ceiling = 16 * 4 * MIB / 0.04
    sizes = [ceiling / 2, ceiling * 2, ceiling * 20]
    knee = bandwidth_knee(model, sizes, resolution_tokens=4096.0)
    throughput = [p.throughput_req_per_s for p in knee.points]
    assert throughput[0] < throughput[1]
    assert throughput[1] == pytest.approx(throughput[2], rel=1e-12)
    assert math.isfinite(throughput[2])
