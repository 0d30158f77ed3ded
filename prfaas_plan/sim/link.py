"""The cross-datacenter link: bandwidth shared equally among the transfers in flight (processor sharing).

With n transfers in flight each one receives B(t)/n bytes/s. Rather than updating every transfer's
remaining bytes on each change (O(n) per event), the link keeps a *virtual clock* V(t), the bytes any one
transfer in flight has received since the link was created, with dV/dt = B(t)/n(t) while n > 0. A transfer
of S bytes that starts when the clock reads V0 finishes when it reads V0 + S, so transfers sit in a min-heap
keyed by that finish reading and each start or finish costs O(log n). Between changes the clock runs at a
constant rate, so the next finish time is exact: now + (V_next - V) * n / B.

B(t) is piecewise constant: the nominal bandwidth, or a profile of (time, bandwidth) steps. A bandwidth of
zero (an outage) stops every transfer until it returns. The link also tallies the bytes it delivers in
fixed time bins, for the mean and peak egress. At most ``MAX_BINS`` bins are kept: a run that outlasts them
(a link so slow that transfers take years of simulated time) has its bins merged pairwise, doubling their
width (``bin_s``), so memory stays bounded whatever the span.
"""

from __future__ import annotations

import heapq
import math
from array import array

import numpy as np
import numpy.typing as npt

# A transfer is done when the virtual clock has passed its finish reading to within this relative tolerance
# (the clock is advanced by floating-point products; exact equality cannot be relied on).
FINISH_RTOL = 1e-12
#: The most egress bins kept (32 MiB of float64): 1 s bins cover 48 days of simulated time; a longer run
#: (a study allows 116 days, ``studies.simulate.MAX_HORIZON_S``; a verification run at a tiny offered rate
#: may span years) gets bins of 2 s, 4 s, ..., so its peak egress is the peak of a wider bin.
MAX_BINS = 1 << 22


class SharedLink:
    """Processor-sharing link state. Times in s, sizes in bytes, bandwidth in bytes/s."""

    __slots__ = (
        "bandwidth_bytes_per_s",
        "bin_s",
        "bins",
        "busy_s",
        "delivered_bytes",
        "finishing",
        "last_s",
        "virtual_bytes",
    )

    def __init__(self, bandwidth_bytes_per_s: float, bin_s: float) -> None:
        # The state is public for the static cluster's fused loop (``sim.cluster``), which runs the same
        # arithmetic in local variables and writes the state back; everything else goes through the methods.
        self.bandwidth_bytes_per_s = bandwidth_bytes_per_s  # the bandwidth now
        self.virtual_bytes = 0.0  # the virtual clock V
        self.last_s = 0.0  # when V was last advanced
        self.finishing: list[tuple[float, int]] = []  # (V at which it finishes, request): a min-heap
        self.bin_s = bin_s  # the bins' width now: the width asked for, doubled each time MAX_BINS was reached
        self.bins = array("d")  # bytes delivered in each bin so far
        self.delivered_bytes = 0.0
        self.busy_s = 0.0

    @property
    def in_flight(self) -> int:
        """Number of transfers sharing the link now."""
        return len(self.finishing)

    @property
    def bin_bytes(self) -> list[float]:
        """Bytes delivered in each bin [k·bin_s, (k+1)·bin_s) so far (a copy)."""
        return self.bins.tolist()

    def bin_array(self) -> npt.NDArray[np.float64]:
        """The bins as a float64 array (a copy), without a Python float per bin."""
        return np.frombuffer(self.bins, dtype=np.float64).copy() if self.bins else np.zeros(0)

    def _coarsen(self) -> None:
        """Merge the bins pairwise, doubling their width."""
        old = self.bins
        if len(old) % 2:
            old.append(0.0)
        pairs = np.frombuffer(old, dtype=np.float64).reshape(-1, 2).sum(axis=1)
        self.bins = array("d", pairs.tobytes())
        self.bin_s *= 2.0

    def _advance(self, now_s: float) -> None:
        """Run the virtual clock (and the egress tally) from the last change up to ``now_s``."""
        elapsed = now_s - self.last_s
        n = len(self.finishing)
        if n and elapsed > 0.0 and self.bandwidth_bytes_per_s > 0.0:
            rate = self.bandwidth_bytes_per_s
            self.virtual_bytes += elapsed * rate / n
            self.delivered_bytes += elapsed * rate
            self.busy_s += elapsed
            self.tally(self.last_s, now_s, rate)
        self.last_s = now_s

    def tally(self, start_s: float, end_s: float, rate: float) -> None:
        """Add ``rate`` bytes/s over [start_s, end_s) to the egress bins (coarsening them when needed)."""
        while True:
            width = self.bin_s
            first, last = int(start_s // width), int(end_s // width)
            if last > first and last * width >= end_s:
                last -= 1  # the interval ends exactly on a bin edge: nothing falls in the next bin
            if last < MAX_BINS:
                break
            self._coarsen()
        bins = self.bins
        if last >= len(bins):
            bins.extend(array("d", bytes(8 * (last + 1 - len(bins)))))
        if first == last:
            bins[first] += (end_s - start_s) * rate
            return
        bins[first] += ((first + 1) * width - start_s) * rate
        if last > first + 1:
            # Bins strictly inside the interval lie after every earlier interval (time only moves forward):
            # still empty, so they are set, in one slice, rather than added to one by one.
            bins[first + 1 : last] = array("d", [width * rate]) * (last - first - 1)
        bins[last] += (end_s - last * width) * rate

    def advance_to(self, now_s: float) -> None:
        """Bring the tallies (delivered bytes, busy time, bins) up to ``now_s`` without changing anything."""
        self._advance(now_s)

    def start(self, now_s: float, size_bytes: float, request: int) -> None:
        """A transfer of ``size_bytes`` for ``request`` joins the link at ``now_s``."""
        self._advance(now_s)
        heapq.heappush(self.finishing, (self.virtual_bytes + size_bytes, request))

    def set_bandwidth(self, now_s: float, bandwidth_bytes_per_s: float) -> None:
        """Change the link's bandwidth from ``now_s`` on (a step of the bandwidth profile)."""
        self._advance(now_s)
        self.bandwidth_bytes_per_s = bandwidth_bytes_per_s

    def finish_due(self, now_s: float) -> list[int]:
        """Remove and return the requests whose transfers are complete at ``now_s`` (in finish order).

        Call it at the time ``next_finish_s`` announced; the first transfer is taken as done even when the
        clock falls a rounding error short of its finish reading.
        """
        self._advance(now_s)
        finish, done = self.finishing, []
        if finish:
            done.append(heapq.heappop(finish)[1])
            limit = self.virtual_bytes * (1.0 + FINISH_RTOL)
            while finish and finish[0][0] <= limit:
                done.append(heapq.heappop(finish)[1])
        return done

    def next_finish_s(self, now_s: float) -> float:
        """When the next transfer will finish if nothing changes (inf when none is in flight or B = 0).

        Only valid right after a ``start``, ``set_bandwidth`` or ``finish_due`` at ``now_s``.
        """
        finish = self.finishing
        if not finish or self.bandwidth_bytes_per_s <= 0.0:
            return math.inf
        remaining = max(finish[0][0] - self.virtual_bytes, 0.0)
        return now_s + remaining * len(finish) / self.bandwidth_bytes_per_s
