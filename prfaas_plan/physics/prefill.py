"""What prefilling one request costs, tabulated from the roofline: its time T_prefill(l) and the KV bytes
S_kv(l) it produces for transfer.

Prefill is priced for a single request with no cached prefix (the scenario's lengths are uncached tokens;
a cached prefix would add attention cost over c + l positions, which ``physics.ops`` supports but the
stage model does not yet carry). Curves are tabulated on a geometric grid of lengths and interpolated
linearly, so their expectations stay exact and closed-form (``TabulatedCurve``).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from prfaas_plan.physics.curves import TabulatedCurve
from prfaas_plan.physics.memory import transfer_bytes
from prfaas_plan.physics.ops import forward_ops
from prfaas_plan.physics.roofline import Instance, roofline_time
from prfaas_plan.spec.hardware import RooflineParams
from prfaas_plan.spec.model import Architecture

# Knots of tabulated curves: geometric from 1 token to 4M tokens. Prefill time is smooth in l, so linear
# interpolation between knots 2.2 % apart errs by well under 0.1 %.
_GRID = np.unique(np.concatenate((np.geomspace(1.0, 4_194_304.0, 641), [128.0, 131_072.0])))


def prefill_seconds(
    arch: Architecture, instance: Instance, params: RooflineParams, lengths: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Roofline prefill time of one request of each length (no cached prefix), seconds."""
    ops = forward_ops(arch, cached=0.0, new=lengths)
    return roofline_time(ops, arch, instance, params, lengths).total_s


def prefill_curve(arch: Architecture, instance: Instance, params: RooflineParams, source: str) -> TabulatedCurve:
    """T_prefill(l) tabulated from the roofline."""
    return TabulatedCurve(
        knots_tokens=tuple(_GRID),
        knot_values=tuple(prefill_seconds(arch, instance, params, _GRID)),
        provenance="derived",
        source=source,
    )


def kv_transfer_curve(arch: Architecture) -> TabulatedCurve:
    """S_kv(l): bytes shipped for a request of l uncached tokens (growing KV + SWA windows + linear state).

    Piecewise linear exactly (the windows add kinks at their sizes, which are knots).
    """
    windows = [float(g.attention.window) for g in arch.layers if g.attention.kind == "swa"]
    knots = np.unique(np.concatenate((_GRID, windows)))
    return TabulatedCurve(
        knots_tokens=tuple(knots),
        knot_values=tuple(transfer_bytes(arch, 0.0, knots)),
        provenance="derived",
        source="model card architecture (physics.memory.transfer_bytes)",
    )
