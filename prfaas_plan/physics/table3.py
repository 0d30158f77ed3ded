"""The paper's Table 3 layout for one pool: S_kv, T_prefill and the KV throughput Φ_kv = S_kv / T_prefill
(Eq. 1) at given lengths.

Φ_kv is what one prefill instance of a disaggregated deployment produces, one request at a time: its T_prefill
runs until the KV is handed to the decode side, so it is the batch-1 prefill (what a benchmark of an aggregated
server times) plus the engine's KV handoff (``RooflineParams.kv_handoff_s``: a wait for the decode side, not GPU
time, which the planner's prefill curves leave out)."""

from __future__ import annotations

import numpy as np

from prfaas_plan._frozen import frozen
from prfaas_plan.physics.pools import pool_costs
from prfaas_plan.spec.scenario import ModelCard, Pool


@frozen
class KvRow:
    """One row of the paper's Table 3 layout: S_kv, prefill time and Φ_kv = S_kv / T_prefill at a length."""

    length_tokens: float
    kv_bytes: float
    prefill_s: float  # batch-1 prefill, as an aggregated server times it
    source: str
    handoff_s: float = 0.0  # the disaggregated prefill's wait until its KV is handed off

    @property
    def disaggregated_prefill_s(self) -> float:
        """T_prefill of a disaggregated prefill instance: the prefill and the KV handoff, s."""
        return self.prefill_s + self.handoff_s

    @property
    def kv_bytes_per_s(self) -> float:
        """Φ_kv (Eq. 1) = S_kv / (T_prefill until the KV is handed off), bytes/s."""
        return self.kv_bytes / self.disaggregated_prefill_s


def kv_rows(pool: Pool, card: ModelCard, lengths_tokens: tuple[float, ...]) -> list[KvRow]:
    """S_kv, T_prefill and Φ_kv of one instance of ``pool`` at each length (paper Eq. 1, Table 3 layout)."""
    costs = pool_costs(pool, card, context_tokens=0.0, tpot_s=1.0, with_decode=False)
    if costs.kv_bytes is None:
        raise ValueError("the pool has no KV-size curve")
    lengths = np.asarray(lengths_tokens, dtype=np.float64)
    kv = costs.kv_bytes(lengths)
    prefill = costs.prefill(lengths)
    handoff = costs.kv_handoff_s
    source = f"prefill: {costs.prefill_source}; kv: {costs.kv_source}"
    return [
        KvRow(
            length_tokens=float(length), kv_bytes=float(size), prefill_s=float(time), source=source, handoff_s=handoff
        )
        for length, size, time in zip(lengths, kv, prefill, strict=True)
    ]
