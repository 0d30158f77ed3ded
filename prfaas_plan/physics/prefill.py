"""What prefilling one request costs, tabulated from the roofline: its time T_prefill(l) and the KV bytes
S_kv(l) it produces for transfer.

Prefill is priced for a single request of l new (uncached) tokens after c cached ones (c = 0 unless given:
the scenario's lengths are uncached tokens). A cached prefix costs its attention reads and scores over
c + l positions and the MLA decompression of its latents (``physics.ops``), not its projections.

Serving time = kernel time + serving overhead (``RooflineParams``):

    T(c, l) = roofline kernels(c, l) + overhead_s
              + ceil(l / prefill_chunk_tokens) · (layers · layer_overhead_s + MoE layers · moe_layer_overhead_s)

``prefill_kernel_seconds`` gives the kernels alone. Curves are tabulated on a geometric grid of lengths and
interpolated linearly, so their expectations stay exact and closed-form (``TabulatedCurve``).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from prfaas_plan.lengths import distinct_sorted
from prfaas_plan.physics.memory import transfer_bytes
from prfaas_plan.physics.ops import forward_ops
from prfaas_plan.physics.roofline import Instance, RooflineTime, moe_layers, roofline_time
from prfaas_plan.physics.tabulated import TabulatedCurve
from prfaas_plan.spec.hardware import RooflineParams
from prfaas_plan.spec.model import Architecture

# Knots of tabulated curves: geometric from 1 token to 4M tokens. Prefill time is smooth in l, so linear
# interpolation between knots 2.4 % apart errs by well under 0.1 %, but for the chunk count (``prefill_knots``).
_GRID = distinct_sorted(np.concatenate((np.geomspace(1.0, 4_194_304.0, 641), [128.0, 131_072.0])))
#: Chunk boundaries up to this many tokens get knots of their own (``prefill_knots``), at most
#: ``CHUNK_BOUNDARY_KNOTS`` of them: past 262,144 tokens one chunk's per-layer cost is a small share of the
#: prefill (0.2 % for an 8,192-token chunk on the corpus's models), and each knot lengthens every expectation.
CHUNK_BOUNDARY_TOKENS = 262_144.0
CHUNK_BOUNDARY_KNOTS = 1_024


def prefill_knots(params: RooflineParams) -> NDArray[np.float64]:
    """The knots of a tabulated prefill curve: ``_GRID`` plus each chunk boundary c = k x prefill_chunk_tokens up to
    ``CHUNK_BOUNDARY_TOKENS`` (at most ``CHUNK_BOUNDARY_KNOTS``) and the first whole token past it, floor(c) + 1,
    so that the step of one chunk's per-layer cost falls between them instead of being smeared over a 2.4 % knot
    interval (an 8,192-token prompt, exactly one chunk of SGLang's, was priced with 18 % of a second chunk's cost,
    a 32,768-token one with 36 % of a fifth's)."""
    chunk = float(params.prefill_chunk_tokens)
    if not np.isfinite(chunk) or chunk <= 0:
        return _GRID
    count = int(min(CHUNK_BOUNDARY_KNOTS, CHUNK_BOUNDARY_TOKENS // chunk))  # the bounds stay inside _GRID
    bounds = chunk * np.arange(1, count + 1, dtype=np.float64)
    return distinct_sorted(np.concatenate((_GRID, bounds, np.floor(bounds) + 1.0)))


def prefill_chunks(params: RooflineParams, new_tokens: ArrayLike) -> NDArray[np.float64]:
    """Forward passes a chunked prefill of ``new_tokens`` takes: ceil(l / prefill_chunk_tokens), at least 1."""
    new = np.asarray(new_tokens, dtype=np.float64)
    return np.asarray(np.maximum(np.ceil(new / params.prefill_chunk_tokens), 1.0), dtype=np.float64)


def serving_overhead_s(arch: Architecture, params: RooflineParams, new_tokens: ArrayLike) -> NDArray[np.float64]:
    """What the serving framework adds to a prefill's kernels, seconds: overhead_s per request plus, per chunk,
    layer_overhead_s per decoder layer and moe_layer_overhead_s per MoE layer (``RooflineParams``)."""
    chunks = prefill_chunks(params, new_tokens)
    return np.asarray(params.overhead_s + chunks * chunk_overhead_s(arch, params), dtype=np.float64)


def chunk_layer_counts(arch: Architecture) -> tuple[float, float]:
    """What one prefill chunk's per-layer overheads multiply: (decoder layers, MoE layers). The corpus fit
    (``physics.corpus_fit``) prices by these counts, the planner by ``chunk_overhead_s``."""
    return float(arch.n_layers), float(moe_layers(arch)[0])


def chunk_overhead_s(arch: Architecture, params: RooflineParams) -> float:
    """One prefill chunk's per-layer overheads, seconds: layers x layer_overhead_s + MoE layers x
    moe_layer_overhead_s."""
    layers, moe = chunk_layer_counts(arch)
    return layers * params.layer_overhead_s + moe * params.moe_layer_overhead_s


def prefill_time(
    arch: Architecture,
    instance: Instance,
    params: RooflineParams,
    lengths: ArrayLike,
    cached: ArrayLike = 0.0,
) -> RooflineTime:
    """The priced prefill of ``lengths`` new tokens after ``cached`` ones: serving time with its compute,
    memory, communication and overhead parts (``RooflineTime``)."""
    new = np.asarray(lengths, dtype=np.float64)
    ops = forward_ops(arch, cached=cached, new=new)
    return roofline_time(
        ops,
        arch,
        instance,
        params,
        new,
        overhead_s=serving_overhead_s(arch, params, new),
        passes=prefill_chunks(params, new),
    )


def prefill_seconds(
    arch: Architecture,
    instance: Instance,
    params: RooflineParams,
    lengths: NDArray[np.float64],
    cached: ArrayLike = 0.0,
) -> NDArray[np.float64]:
    """Serving time of one prefill of each length (after ``cached`` tokens, default none), seconds."""
    return prefill_time(arch, instance, params, lengths, cached).total_s


def prefill_kernel_seconds(
    arch: Architecture,
    instance: Instance,
    params: RooflineParams,
    lengths: NDArray[np.float64],
    cached: ArrayLike = 0.0,
) -> NDArray[np.float64]:
    """Kernel-only time of one prefill of each length: the roofline without any serving overhead, seconds."""
    return prefill_time(arch, instance, params.kernel_only, lengths, cached).total_s


def prefill_curve(
    arch: Architecture, instance: Instance, params: RooflineParams, source: str, cached_tokens: float = 0.0
) -> TabulatedCurve:
    """T_prefill(l) tabulated from the roofline (serving time; after ``cached_tokens`` of prefix, default 0).

    The chunk count is a step function of l; the table has knots at each chunk boundary up to 262,144 tokens and at
    the first whole token past it (``prefill_knots``), so each step of layers x layer_overhead_s is exact there;
    past them it is smeared over one knot interval."""
    knots = prefill_knots(params)
    return TabulatedCurve(
        knots_tokens=tuple(knots),
        knot_values=tuple(prefill_seconds(arch, instance, params, knots, cached_tokens)),
        provenance="derived",
        source=source,
    )


def kv_transfer_curve(arch: Architecture, cached_tokens: float = 0.0) -> TabulatedCurve:
    """S_kv(l): bytes shipped for a request of l uncached tokens after ``cached_tokens`` of prefix (growing KV
    of the l new tokens + SWA windows after c + l + linear state; ``physics.memory.transfer_bytes``).

    Piecewise linear exactly (the windows add kinks where c + l reaches their sizes, which are knots).
    """
    windows = [float(g.attention.window) - cached_tokens for g in arch.layers if g.attention.kind == "swa"]
    knots = distinct_sorted(np.concatenate((_GRID, [w for w in windows if w > 0])))
    return TabulatedCurve(
        knots_tokens=tuple(knots),
        knot_values=tuple(transfer_bytes(arch, cached_tokens, knots)),
        provenance="derived",
        source="model card architecture (physics.memory.transfer_bytes)",
    )
