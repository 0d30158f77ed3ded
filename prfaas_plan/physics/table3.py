"""The paper's Table 3 layout for one pool: S_kv, T_prefill and the KV throughput Φ_kv = S_kv / T_prefill
(Eq. 1) at given lengths."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from prfaas_plan.physics.pools import pool_costs
from prfaas_plan.spec.scenario import ModelCard, Pool


@dataclass(frozen=True, slots=True, kw_only=True)
class KvRow:
    """One row of the paper's Table 3 layout: S_kv, prefill time and Φ_kv = S_kv / T_prefill at a length."""

    length_tokens: float
    kv_bytes: float
    prefill_s: float
    source: str

    @property
    def kv_bytes_per_s(self) -> float:
        """Φ_kv (Eq. 1), bytes/s."""
        return self.kv_bytes / self.prefill_s


def kv_rows(pool: Pool, card: ModelCard, lengths_tokens: tuple[float, ...]) -> list[KvRow]:
    """S_kv, T_prefill and Φ_kv of one instance of ``pool`` at each length (paper Eq. 1, Table 3 layout)."""
    costs = pool_costs(pool, card, context_tokens=0.0, tpot_s=1.0, with_decode=False)
    if costs.kv_bytes is None:
        raise ValueError("the pool has no KV-size curve")
    lengths = np.asarray(lengths_tokens, dtype=np.float64)
    kv = costs.kv_bytes(lengths)
    prefill = costs.prefill(lengths)
    source = f"prefill: {costs.prefill_source}; kv: {costs.kv_source}"
    return [
        KvRow(length_tokens=float(length), kv_bytes=float(size), prefill_s=float(time), source=source)
        for length, size, time in zip(lengths, kv, prefill, strict=True)
    ]
