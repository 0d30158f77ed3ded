"""What the stage model needs of one pool (``PoolCosts``), apart from how ``physics.pools`` and
``physics.shapes`` build it, so that neither imports the other."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prfaas_plan._frozen import frozen
from prfaas_plan.spec.hardware import RooflineParams

if TYPE_CHECKING:  # annotations only (a measured pool never loads the roofline)
    from prfaas_plan.physics.curves import Curve
    from prfaas_plan.physics.roofline import TimeSplit


@frozen
class PoolCosts:
    """What the stage model needs of one pool, with a line saying where each number came from."""

    prefill: Curve
    prefill_source: str
    kv_bytes: Curve | None
    kv_source: str
    decode_max_batch: int | None
    decode_step_time_s: float | None
    decode_source: str
    roofline: RooflineParams | None = None
    prefill_split: tuple[TimeSplit, ...] = ()
    decode_split: TimeSplit | None = None
    #: A disaggregated prefill's wait per request until its KV is handed off (``EngineProfile.kv_handoff_s``):
    #: latency, not prefill-instance time; 0 where the prefill curve was measured or calibrated on times that
    #: hold it.
    kv_handoff_s: float = 0.0


#: Lengths at which a roofline pool reports how its prefill time splits (the paper's Table 3 lengths).
SPLIT_LENGTHS_TOKENS = (1_000.0, 8_000.0, 32_000.0, 128_000.0)
