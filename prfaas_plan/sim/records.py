"""What a simulation run produces: per-request records (read-only arrays) and the run's engine tallies."""

from __future__ import annotations

from dataclasses import field

import numpy as np
import numpy.typing as npt

from prfaas_plan._frozen import frozen

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: Where a request can be, in order; every request in the system is in exactly one of these at a time.
STATES = (
    "prfaas_queue",
    "local_queue",
    "prfaas_prefill",
    "local_prefill",
    "transfer",
    "decode_queue",
    "decode",
)

#: Record columns in the order they are written, all times in seconds since the first arrival.
COLUMNS = (
    "arrival_s",
    "input_tokens",
    "output_tokens",
    "offloaded",
    "prefill_start_s",
    "prefill_end_s",
    "transfer_start_s",
    "kv_ready_s",
    "decode_start_s",
    "first_token_s",
    "finish_s",
)


def _read_only(array: npt.ArrayLike) -> FloatArray:
    out = np.array(array, dtype=np.float64)
    out.setflags(write=False)
    return out


@frozen(eq=False)
class Records:
    """One row per request, in arrival order (times in s; NaN where an event had not happened by the horizon).

    - ``offloaded``: routed to PrfaaS (uncached input > threshold);
    - ``prefill_start_s`` / ``prefill_end_s``: service on a prefill instance of the request's route;
    - ``transfer_start_s``: the KV transfer's start (prefill end; prefill start when pipelined layer-wise;
      NaN for local requests when the intra-cluster transfer is not modelled);
    - ``kv_ready_s``: the whole KV cache is at the decode cluster (the prefill end when there is no transfer);
    - ``decode_start_s``: admission into a decode slot; ``first_token_s``: the end of TTFT (admission, plus
      one decode step where the scenario counts it); ``finish_s``: the last output token.
    """

    arrival_s: FloatArray
    input_tokens: FloatArray
    output_tokens: FloatArray
    offloaded: BoolArray
    prefill_start_s: FloatArray
    prefill_end_s: FloatArray
    transfer_start_s: FloatArray
    kv_ready_s: FloatArray
    decode_start_s: FloatArray
    first_token_s: FloatArray
    finish_s: FloatArray

    @staticmethod
    def build(*, offloaded: npt.ArrayLike, **times: npt.ArrayLike) -> Records:
        """Records from equal-length columns (copied into read-only arrays): ``offloaded`` and every time
        and token column of ``COLUMNS`` by name."""
        flags = np.array(offloaded, dtype=bool)
        flags.setflags(write=False)
        floats = {name: _read_only(times[name]) for name in COLUMNS if name != "offloaded"}
        if any(a.shape != flags.shape or a.ndim != 1 for a in floats.values()):
            raise ValueError("record columns must be one-dimensional and of equal length")
        return Records(offloaded=flags, **floats)

    @property
    def n_requests(self) -> int:
        """Number of requests (rows)."""
        return int(self.arrival_s.shape[0])

    @property
    def ttft_s(self) -> FloatArray:
        """Time to first token, first_token − arrival (s); NaN if not reached by the horizon."""
        return self.first_token_s - self.arrival_s

    @property
    def prefill_wait_s(self) -> FloatArray:
        """Wait in the prefill queue of the request's route (s)."""
        return self.prefill_start_s - self.arrival_s

    @property
    def decode_wait_s(self) -> FloatArray:
        """Wait for a decode slot once the KV cache is ready (s)."""
        return self.decode_start_s - self.kv_ready_s

    def columns(self) -> dict[str, npt.NDArray[np.generic]]:
        """Every column by name, in ``COLUMNS`` order."""
        return {name: getattr(self, name) for name in COLUMNS}


@frozen(eq=False)
class SimResult:
    """A finished run: its records and what the engine tallied while it ran.

    ``end_s`` is the simulated time the run stopped (the horizon, or the last event when the system drained).
    ``in_system`` counts the requests in each state of ``STATES`` at ``end_s``; ``state_time_s`` is the
    integral over [0, end_s] of the number of requests in each state (request-seconds), so
    ``state_time_s[s] / end_s`` is the time-average occupancy of state s. ``egress_bin_bytes[k]`` is what the
    link delivered during [k·egress_bin_s, (k+1)·egress_bin_s).
    """

    records: Records
    end_s: float
    events: int
    arrived: int
    completed: int
    in_system: dict[str, int]
    state_time_s: dict[str, float]
    egress_bin_s: float
    egress_bin_bytes: FloatArray = field(repr=False)
    link_delivered_bytes: float
    link_bandwidth_bytes_per_s: float
    bandwidth_profile: tuple[tuple[float, float], ...]
    n_prfaas: int
    n_pd_prefill: int
    n_pd_decode: int
    decode_slots: int
    #: Requests the run gave up on (no policy here drops any): arrived = completed + in system + dropped.
    dropped: int = 0
    #: Prefills started again after their instance was lost (a request may count more than once), and
    #: decodes resumed elsewhere after a re-prefill.
    restarted_prefills: int = 0
    resumed_decodes: int = 0
    #: Requests sent to the other prefill pool because their own had no instance left.
    rerouted: int = 0
    #: (time_s, threshold_tokens) each time the short-term scheduler changed t; (time_s, N_p, N_d) each time
    #: a role conversion finished (the first entry is the plan at 0 s).
    threshold_changes: tuple[tuple[float, float], ...] = ()
    role_changes: tuple[tuple[float, int, int], ...] = ()
    #: Bytes of cached prefixes moved across the link before their prefills (abundant rule), both directions.
    cache_moved_bytes: float = 0.0

    @property
    def in_flight(self) -> int:
        """Requests still in the system at ``end_s``."""
        return sum(self.in_system.values())
