"""What a cross-datacentre link built of TCP connections delivers, and the round trip every transfer pays.

A link is bought at a nominal rate B (``spec.scenario.Link.bandwidth_bytes_per_s``). The KV caches cross it
on ``n`` pooled TCP connections (``spec.scenario.TcpPath``); each connection's steady rate is bounded by

- its congestion control under random loss: the Padhye et al. (1998) throughput of a loss-based (Reno)
  sender, ``padhye_packets_per_s``, times the segment size;
- its window over the round trip, W / RTT (the socket buffers cap the window; Padhye's W_max term);
- a per-connection cap, when the network enforces one (a cloud's per-flow limit);

and the link delivers D = min(B, n · min(those three)) (``deliverable_bytes_per_s``). With none of them set
(no loss, no window, no cap), D = B exactly: the nominal link the planner assumed before.

Why Padhye rather than Mathis et al. (1997): Mathis's B = (MSS / RTT) · sqrt(3 / (2 b p)) counts only the
fast-retransmit sawtooth, and at the loss rates a lossy long path shows (0.1 % and up) the retransmission
timeouts Padhye adds take a visible share of the time; at small p the two agree
(the timeouts' share of the time per packet grows as sqrt(p) · T0 / RTT; ``tests/physics/test_tcp.py`` checks
Padhye <= Mathis everywhere and their ratio -> 1 as p -> 0).

Domain and limits of the model (stated, not hidden):

- it is the steady state of a *loss-based* sender (Reno; Linux's default CUBIC behaves so in its "TCP-friendly"
  region, which covers the small windows that loss rates of 0.01 % and up allow: RFC 8312 §4.2). A
  delay-based sender (BBR) does not back off on random loss: model it with ``loss_rate: 0`` and its window;
- ``loss_rate`` is Padhye's p, the probability that a packet is lost given the previous one was not: loss
  *events*. A retransmission count overstates it when losses come in bursts (one event, many packets);
- connections are pooled and kept busy: no transfer pays a handshake or slow start (the replication of the
  design measured 3.6 Gbit/s instead of about 14.7 Gbit/s when its pool was off; that regime is outside this
  model: tests/benchmarks/link_as_built.py);
- the n connections share the path's losses independently (each sees p), and the link's nominal rate is the
  only shared bottleneck.

Units: seconds, bytes, bytes per second; loss rates are probabilities in [0, 1).
"""

from __future__ import annotations

import math

from prfaas_plan.spec.scenario import TcpPath

#: Bytes of payload per segment: Ethernet's 1,500-byte MTU (RFC 894) less 20 bytes of IPv4 header, 20 of TCP
#: header and 12 of the timestamp option that Linux sends by default (RFC 7323). A path with jumbo frames
#: carries more per segment; this is the public-internet and cloud inter-region case (the replication's
#: path MTU was 1,500).
MSS_BYTES = 1448.0
#: Linux's floor on the retransmission timeout, TCP_RTO_MIN = HZ/5 = 200 ms (include/net/tcp.h). Linux sets
#: the timeout to the smoothed RTT plus a variance term floored at this value (net/ipv4/tcp_input.c,
#: tcp_rtt_estimator), so Padhye's T0 is taken as RTT + RTO_MIN_S.
RTO_MIN_S = 0.2
#: Padhye's b, packets acknowledged per ACK: 1, because Linux grows the window by the packets each ACK covers
#: (tcp_cong_avoid_ai counts them), so delayed ACKs do not slow the growth (RFC 3465's byte counting).
PACKETS_PER_ACK = 1.0
#: Round trips every transfer pays on top of its bytes: 1. The decode side pulls the KV cache (the paper's
#: transfer engine reads remote memory): its read request crosses the path (half a round trip) and the last
#: byte comes back (the other half). Pooled connections pay no handshake and, kept busy, no slow start; a
#: completion notice is assumed to ride with the data. The time is latency, not link occupancy.
ROUND_TRIPS_PER_TRANSFER = 1.0


def padhye_packets_per_s(
    rtt_s: float, loss_rate: float, *, rto_s: float | None = None, packets_per_ack: float = PACKETS_PER_ACK
) -> float:
    """Steady throughput of one loss-based TCP connection, packets/s, with no window limit (Padhye et al. 1998,
    "Modeling TCP Throughput: A Simple Model and its Empirical Validation", SIGCOMM '98, Eq. 31 without W_max):

        B(p) = 1 / ( RTT · sqrt(2 b p / 3) + T0 · min(1, 3 sqrt(3 b p / 8)) · p · (1 + 32 p²) )

    RTT the round trip (s), p the loss-event probability, b packets per ACK, T0 the retransmission timeout
    (s; default RTT + ``RTO_MIN_S``). Domain: 0 <= p < 1, RTT >= 0. Returns +inf when p = 0 (no loss bounds the
    connection: only its window or cap does). Non-increasing in RTT and in p.
    """
    if not 0.0 <= loss_rate < 1.0:
        raise ValueError(f"loss_rate must be in [0, 1), got {loss_rate!r}")
    if rtt_s < 0.0:
        raise ValueError(f"rtt_s must be >= 0, got {rtt_s!r}")
    if loss_rate == 0.0:
        return math.inf
    timeout_s = rtt_s + RTO_MIN_S if rto_s is None else rto_s
    b, p = packets_per_ack, loss_rate
    sawtooth_s = rtt_s * math.sqrt(2.0 * b * p / 3.0)
    timeouts_s = timeout_s * min(1.0, 3.0 * math.sqrt(3.0 * b * p / 8.0)) * p * (1.0 + 32.0 * p * p)
    per_packet_s = sawtooth_s + timeouts_s
    return math.inf if per_packet_s == 0.0 else 1.0 / per_packet_s  # 0: p so small the time underflows


def mathis_packets_per_s(rtt_s: float, loss_rate: float, *, packets_per_ack: float = PACKETS_PER_ACK) -> float:
    """The Mathis et al. (1997) bound, packets/s: sqrt(3 / (2 b p)) / RTT ("The Macroscopic Behavior of the TCP
    Congestion Avoidance Algorithm", CCR 27(3)); the sawtooth term of Padhye alone. +inf when p = 0 or RTT = 0.
    Used as a check on ``padhye_packets_per_s`` (which is never above it)."""
    if loss_rate == 0.0 or rtt_s == 0.0:
        return math.inf
    return math.sqrt(3.0 / (2.0 * packets_per_ack * loss_rate)) / rtt_s


def connection_bytes_per_s(path: TcpPath, *, mss_bytes: float = MSS_BYTES) -> float:
    """One connection's steady rate, bytes/s: min(MSS · Padhye(RTT, p), W / RTT, cap); +inf when none binds
    (no loss, and no window with a round trip, and no cap). The window bound needs RTT > 0 (W / 0 is no bound)."""
    rate = mss_bytes * padhye_packets_per_s(path.rtt_s, path.loss_rate)
    if path.window_bytes is not None and path.rtt_s > 0.0:
        rate = min(rate, path.window_bytes / path.rtt_s)
    if path.connection_cap_bytes_per_s is not None:
        rate = min(rate, path.connection_cap_bytes_per_s)
    return rate


def tcp_ceiling_bytes_per_s(path: TcpPath, *, mss_bytes: float = MSS_BYTES) -> float:
    """What the connections can carry together, bytes/s: n · ``connection_bytes_per_s`` (+inf when unbounded)."""
    return path.connections * connection_bytes_per_s(path, mss_bytes=mss_bytes)


def deliverable_bytes_per_s(nominal_bytes_per_s: float, path: TcpPath, *, mss_bytes: float = MSS_BYTES) -> float:
    """The goodput a link of nominal rate B delivers over ``path``: min(B, n · per-connection rate), bytes/s.

    Never above B; equal to B when the path has no loss, window or cap (the defaults); non-increasing in RTT
    and loss; tends to B as RTT · loss -> 0 with loss -> 0 and no window or cap binding.
    """
    return min(float(nominal_bytes_per_s), tcp_ceiling_bytes_per_s(path, mss_bytes=mss_bytes))


def transfer_latency_s(path: TcpPath) -> float:
    """The fixed time every transfer pays on top of its bytes: ``ROUND_TRIPS_PER_TRANSFER`` · RTT (s)."""
    return ROUND_TRIPS_PER_TRANSFER * path.rtt_s
