"""Stage-model inputs of one pool by its method (measured, calibrated, roofline): prefill-time and KV-size
curves and decode capacity (``pool_costs``). How well its fitted curves match their points is
``physics.fits.pool_fit_reports``."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from prfaas_plan.physics.curves import fit_profile
from prfaas_plan.physics.pool_costs import SPLIT_LENGTHS_TOKENS, PoolCosts
from prfaas_plan.spec.hardware import RooflineParams
from prfaas_plan.spec.scenario import ModelCard, Pool

if TYPE_CHECKING:
    from prfaas_plan.physics.curves import Curve
    from prfaas_plan.spec.hardware import Accelerator
    from prfaas_plan.spec.model import Architecture

# The roofline's modules (calibration, decode, prefill, roofline) are imported by the functions that price a
# roofline or calibrated pool: a scenario of measured pools never loads them (start-up time).


def _scaled(curve: Curve, factor: float) -> Curve:
    """``curve`` with every value multiplied by ``factor``."""
    if factor == 1.0:
        return curve
    from prfaas_plan.physics.tabulated import TabulatedCurve

    if isinstance(curve, TabulatedCurve):
        return replace(curve, knot_values=tuple(v * factor for v in curve.knot_values))
    return replace(curve, coefficients=tuple(c * factor for c in curve.coefficients))


def _time_scaled(costs: PoolCosts, pool: Pool) -> PoolCosts:
    """``costs`` with the pool's time scales applied (``Pool.prefill_time_scale``, ``decode_time_scale``): the
    prefill curve and the decode step multiplied. A derived pool's batch was found against the TPOT divided by
    the decode scale (a step f times slower meets a TPOT t exactly where the priced one meets t / f); a measured
    pool's (batch, step) pair keeps its batch."""
    fp, fd = pool.prefill_time_scale, pool.decode_time_scale
    if fp == 1.0 and fd == 1.0:
        return costs
    note = f" x {fp:.3g} (error band edge)" if fp != 1.0 else ""
    step = costs.decode_step_time_s
    return replace(
        costs,
        prefill=_scaled(costs.prefill, fp),
        prefill_source=costs.prefill_source + note,
        decode_step_time_s=None if step is None else step * fd,
        decode_source=costs.decode_source + (f"; step x {fd:.3g} (error band edge)" if fd != 1.0 else ""),
    )


def pool_costs(
    pool: Pool,
    card: ModelCard,
    *,
    context_tokens: float,
    tpot_s: float,
    with_decode: bool = True,
    prefix_tokens: float = 0.0,
) -> PoolCosts:
    """Prefill curve, KV-size curve and decode capacity of a pool by its method (measured, calibrated,
    roofline). Decode capacity from the roofline is computed at ``context_tokens`` against ``tpot_s``.

    ``prefix_tokens`` (c) prices every prefill of l uncached tokens as following c cached ones (a prefix-cache
    hit): attention over c + l positions and the KV of the l new tokens shipped. Only roofline and calibrated
    pools can price it; measured points are for c = 0, and asking them for c > 0 is a ValueError."""
    profile = pool.profile
    if prefix_tokens < 0:
        raise ValueError(f"prefix_tokens must be >= 0, got {prefix_tokens}")
    if pool.method == "measured" and prefix_tokens > 0:
        raise ValueError("a measured pool's profile has no cached-prefix cost; use method roofline or calibrated")
    if pool.method == "measured":
        assert profile is not None  # the loader requires measured points for a measured pool
        kv = fit_profile(profile.kv_cache) if profile.kv_cache is not None else None
        decode = profile.decode
        costs = PoolCosts(
            prefill=fit_profile(profile.prefill),
            prefill_source=(
                f"{profile.prefill.provenance} points ({pool.hardware_key}), degree-{profile.prefill.fit_degree} fit"
            ),
            kv_bytes=kv,
            kv_source=f"{profile.kv_cache.provenance} points ({pool.hardware_key})" if profile.kv_cache else "none",
            decode_max_batch=decode.max_batch if decode else None,
            decode_step_time_s=decode.step_time_s if decode else None,
            decode_source=f"{decode.provenance} profile ({pool.hardware_key})" if decode else "none",
        )
        return _time_scaled(costs, pool)
    from prfaas_plan.physics.decode import decode_capacity, decode_step_time
    from prfaas_plan.physics.prefill import kv_transfer_curve, prefill_curve, prefill_time
    from prfaas_plan.physics.roofline import Instance, time_splits

    arch = card.architecture
    assert arch is not None  # the loader requires an architecture for roofline and calibrated pools
    instance = Instance(accelerator=pool.accelerator, gpus=pool.gpus_per_instance)
    params = pool.roofline
    label = (
        "roofline, serving defaults" + dtype_peak_note(arch)
        if params == RooflineParams()
        else (
            f"roofline ({params.source}: {gemm_label(arch, params, pool.accelerator)}, "
            f"{attention_label(arch, params)}, e_m {params.memory_efficiency:.2f}, "
            f"overhead {params.overhead_s:.3f} s + "
            f"{params.layer_overhead_s * 1e3:.2f} ms per layer per chunk"
            + _moe_note(arch, params)
            + (
                f"; KV handoff {params.kv_handoff_s:.3f} s per request: in TTFT and Φ_kv, not in capacity)"
                if params.kv_handoff_s
                else ")"
            )
        )
    )
    if pool.method == "calibrated":
        assert pool.calibration is not None and pool.calibration_accelerator is not None
        points = pool.calibration.prefill
        base = "the serving defaults" if params == RooflineParams() else params.source
        params = calibrated_params(pool, arch)
        label = (
            f"roofline calibrated on {pool.calibration_accelerator.key} {points.provenance} points "
            f"(e_c {params.compute_efficiency:.2f}, e_m {params.memory_efficiency:.2f}, "
            f"overhead {params.overhead_s:.3f} s; {attention_label(arch, params)} and "
            f"{params.layer_overhead_s * 1e3:.2f} ms per layer per chunk{_moe_note(arch, params)} from {base})"
        )
    fd = pool.decode_time_scale
    if pool.shape is not None:  # a named instance shape: priced by physics.shapes
        from prfaas_plan.physics.shapes import shaped_pool_costs

        costs = shaped_pool_costs(
            pool.accelerator,
            pool.shape,
            card,
            params,
            label,
            context_tokens=context_tokens,
            tpot_s=tpot_s / fd,
            with_decode=with_decode,
            prefix_tokens=prefix_tokens,
        )
        return _time_scaled(costs, pool)
    capacity = decode_capacity(arch, instance, params, context_tokens, tpot_s / fd) if with_decode else None
    split_lengths = np.asarray(SPLIT_LENGTHS_TOKENS)
    decode_split = None
    if capacity is not None and capacity.max_batch >= 1:
        batch = np.asarray(float(capacity.max_batch))
        decode_split = time_splits(decode_step_time(arch, instance, params, batch, context_tokens), batch)[0]
    return _time_scaled(
        PoolCosts(
            kv_handoff_s=params.kv_handoff_s,
            prefill=prefill_curve(arch, instance, params, source=label, cached_tokens=prefix_tokens),
            prefill_source=label + (f", after a cached prefix of {prefix_tokens:,.0f} tokens" if prefix_tokens else ""),
            kv_bytes=kv_transfer_curve(arch, prefix_tokens),
            kv_source=f"model card '{card.key}' architecture" + (" (inferred dimensions)" if card.inferred else ""),
            decode_max_batch=capacity.max_batch if capacity else None,
            decode_step_time_s=capacity.step_time_s if capacity else None,
            decode_source=(
                f"{label}: batch {capacity.max_batch} at {capacity.context_tokens:,.0f} tokens of context, "
                f"limited by {capacity.limited_by}"
                if capacity
                else (f"{label}: not one request's cache fits beside the weights" if with_decode else "not computed")
            ),
            roofline=params,
            prefill_split=time_splits(
                prefill_time(arch, instance, params, split_lengths, prefix_tokens), split_lengths
            ),
            decode_split=decode_split,
        ),
        pool,
    )


def calibrated_params(pool: Pool, arch: Architecture) -> RooflineParams:
    """A calibrated pool's roofline: its parameters fitted to its calibration's measured prefill points
    (``physics.calibration``), with no separate KV handoff: the fitted per-request cost holds the one in the points
    as they were timed (the paper's profiles time disaggregated prefill instances)."""
    from prfaas_plan.physics.calibration import calibrate
    from prfaas_plan.physics.roofline import Instance

    assert pool.calibration is not None and pool.calibration_accelerator is not None
    points = pool.calibration.prefill
    fitted = calibrate(
        arch,
        Instance(accelerator=pool.calibration_accelerator, gpus=pool.calibration.gpus_per_instance),
        points.lengths_tokens,
        points.values,
        base=pool.roofline,
        leave_one_out=False,
    )
    return replace(fitted.params, kv_handoff_s=0.0)


def gemm_label(arch: Architecture, params: RooflineParams, accelerator: Accelerator) -> str:
    """``e_c`` as the model's GEMMs run: the efficiency of each compute dtype its weights and routed experts
    multiply in (``physics.roofline.compute_dtype``), named where it is not bf16, e.g. ``e_c 0.16 (fp8)``; a
    dtype the accelerator has no peak for runs at its bf16 peak, and is named so. For a model with routed
    experts, the factor their grouped GEMMs run at against that rate, where it is not 1 (``e_c 0.75, experts x
    0.27``)."""
    from prfaas_plan.physics.roofline import moe_layers

    parts = []
    for d, wider in _weights_wider(arch).items():
        name = "" if d == "bf16" else f" ({d})" if d in accelerator.dense_flop_per_s else f" ({d} at the bf16 peak)"
        if wider:
            name = f" ({wider} at the {d} peak)"
        parts.append(f"{params.gemm_efficiency(d):.2f}{name}")
    experts = ""
    if params.expert_gemm_efficiency != 1.0 and moe_layers(arch)[0]:
        experts = f", experts x {params.expert_gemm_efficiency:.2f}"
    return "e_c " + " / ".join(parts) + experts


def _weights_wider(arch: Architecture) -> dict[str, str]:
    """Each compute dtype the weights and routed experts multiply in (sorted), with the stored dtypes wider than
    it among the groups priced in it (``_wider_than``; '' when none is)."""
    from prfaas_plan.physics.roofline import compute_dtype

    groups = ("weights", "experts")
    return {
        d: _wider_than(arch, d, [arch.dtypes.dtype_of(g) for g in groups if compute_dtype(arch, g) == d])
        for d in sorted({compute_dtype(arch, g) for g in groups})
    }


def _wider_than(arch: Architecture, computed: str, stored: list[str]) -> str:
    """The stored dtypes wider than the dtype their matmuls are priced in (fp32 weights or KV at the bf16 peak:
    the accelerator profiles hold no fp32 tensor rate), joined by '/'; '' when none is (narrower storage, int4
    or fp8 weights run as bf16, is what such kernels do)."""
    from prfaas_plan.spec.model import DTYPE_BYTES

    return "/".join(sorted({d for d in stored if DTYPE_BYTES.get(d, 0.0) > DTYPE_BYTES[computed]}))


def attention_label(arch: Architecture, params: RooflineParams) -> str:
    """``e_a`` as the model's attention runs (``physics.roofline.attention_dtype``), a KV cache stored wider
    than that dtype named, e.g. ``e_a 0.76 (fp32 KV at the bf16 peak)``."""
    from prfaas_plan.physics.roofline import attention_dtype

    computed = attention_dtype(arch)
    wider = _wider_than(arch, computed, [arch.dtypes.kv_cache])
    return f"e_a {params.attention_efficiency:.2f}" + (f" ({wider} KV at the {computed} peak)" if wider else "")


def dtype_peak_note(arch: Architecture) -> str:
    """For a label that names no efficiency (the serving defaults): the weights or KV stored wider than the dtype
    they are priced in, e.g. `` (fp32 weights, fp32 KV at the bf16 peak)``; '' when none is."""
    from prfaas_plan.physics.roofline import attention_dtype

    parts = [f"{wider} weights at the {d} peak" for d, wider in _weights_wider(arch).items() if wider]
    computed = attention_dtype(arch)
    if wider := _wider_than(arch, computed, [arch.dtypes.kv_cache]):
        parts.append(f"{wider} KV at the {computed} peak")
    return f" ({'; '.join(parts)})" if parts else ""


def _moe_note(arch: Architecture, params: RooflineParams) -> str:
    """The per-MoE-layer prefill cost for a pool's label, where the engine has one and the model MoE layers."""
    from prfaas_plan.physics.roofline import moe_layers

    if not params.moe_layer_overhead_s or not moe_layers(arch)[0]:
        return ""
    return f" (+ {params.moe_layer_overhead_s * 1e3:.2f} ms per MoE layer)"
