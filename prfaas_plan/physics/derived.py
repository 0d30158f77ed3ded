"""Stage-model inputs derived from a model card and an instance: prefill-time and KV-size curves, decode
capacity, and the calibration of roofline efficiencies to measured prefill points.

Prefill is priced for a single request with no cached prefix (the scenario's lengths are uncached tokens;
a cached prefix would add attention cost over c + l positions, which ``physics.ops`` supports but the
stage model does not yet carry). Curves are tabulated on a geometric grid of lengths and interpolated
linearly, so their expectations stay exact and closed-form (``TabulatedCurve``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from prfaas_plan.physics.curves import Curve, TabulatedCurve, fit_profile
from prfaas_plan.physics.memory import cache_bytes, transfer_bytes, weight_bytes
from prfaas_plan.physics.ops import forward_ops
from prfaas_plan.physics.roofline import Instance, compute_dtype, roofline_time
from prfaas_plan.spec.hardware import ProfilePoints, RooflineParams
from prfaas_plan.spec.model import Architecture
from prfaas_plan.spec.scenario import ModelCard, Pool

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


@dataclass(frozen=True, slots=True, kw_only=True)
class DecodeCapacity:
    """The largest decode batch of one instance and its step time; ``limited_by`` names the binding limit."""

    max_batch: int
    step_time_s: float
    limited_by: str
    context_tokens: float


def decode_step_seconds(
    arch: Architecture, instance: Instance, params: RooflineParams, batch: NDArray[np.float64], context_tokens: float
) -> NDArray[np.float64]:
    """Roofline time of one decode step for ``batch`` sequences of ``context_tokens`` each."""
    ops = forward_ops(arch, cached=context_tokens, new=1.0, batch=batch, decode=True)
    return roofline_time(ops, arch, instance, params, batch, overhead_s=params.decode_step_overhead_s).total_s


def decode_capacity(
    arch: Architecture, instance: Instance, params: RooflineParams, context_tokens: float, tpot_s: float
) -> DecodeCapacity | None:
    """Largest batch B whose cache fits beside the weights and whose step time meets the TPOT SLO.

    Memory: weights + B · cache_bytes(context) <= usable instance memory. Time: step(B) <= tpot_s; the step
    time is non-decreasing in B, so the answer is the smaller of the two limits. None when not even one
    request fits (the binding limit is then reported by the caller).
    """
    free = instance.memory_bytes - weight_bytes(arch)
    per_request = float(cache_bytes(arch, context_tokens))
    memory_limit = int(free // per_request) if free > 0 else 0
    if memory_limit < 1:
        return None
    batches = np.arange(1, min(memory_limit, 4096) + 1, dtype=np.float64)
    steps = decode_step_seconds(arch, instance, params, batches, context_tokens)
    meets = np.flatnonzero(steps <= tpot_s)
    if meets.size == 0:
        return DecodeCapacity(
            max_batch=0, step_time_s=float(steps[0]), limited_by="tpot_slo", context_tokens=context_tokens
        )
    best = int(meets[-1])
    limited_by = "memory" if best + 1 == batches.size and memory_limit <= 4096 else "tpot_slo"
    if best + 1 == batches.size and memory_limit > 4096:
        limited_by = "batch_cap_4096"
    return DecodeCapacity(
        max_batch=int(batches[best]),
        step_time_s=float(steps[best]),
        limited_by=limited_by,
        context_tokens=context_tokens,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    """Roofline parameters fitted to measured prefill points, with in-sample and leave-one-out errors."""

    params: RooflineParams
    lengths_tokens: tuple[float, ...]
    measured_s: tuple[float, ...]
    fitted_s: tuple[float, ...]
    leave_one_out_s: tuple[float, ...]

    @property
    def relative_residuals(self) -> tuple[float, ...]:
        """(fitted - measured) / measured per point."""
        return tuple(f / m - 1 for f, m in zip(self.fitted_s, self.measured_s, strict=True))

    @property
    def leave_one_out_relative(self) -> tuple[float, ...]:
        """(prediction from the other points - measured) / measured per point."""
        return tuple(p / m - 1 for p, m in zip(self.leave_one_out_s, self.measured_s, strict=True))


# Calibration first scans the compute efficiency on this log grid (the best overhead for each value is
# closed form), then polishes the best cell by least squares: the max() in the roofline makes the objective
# piecewise smooth, and a local solver started from one guess can stall on a kink.
_EFFICIENCY_GRID = np.geomspace(0.01, 1.0, 48)


def _fit(
    arch: Architecture,
    instance: Instance,
    base: RooflineParams,
    lengths: NDArray[np.float64],
    measured: NDArray[np.float64],
) -> RooflineParams:
    from scipy.optimize import least_squares  # calibration only; keeps scipy off the start-up path

    ops = forward_ops(arch, cached=0.0, new=lengths)
    unit = RooflineParams(
        compute_efficiency=1.0, memory_efficiency=1.0, communication_efficiency=base.communication_efficiency
    )
    flops_rate = instance.flop_per_s(compute_dtype(arch))
    compute = np.stack([np.broadcast_to(op.matmul_flops / flops_rate, lengths.shape) for op in ops])
    memory = np.stack([np.broadcast_to(op.bytes / instance.bytes_per_s, lengths.shape) for op in ops])
    comm = roofline_time(ops, arch, instance, unit, lengths).communication_s
    weights = 1.0 / measured

    def body(ec: NDArray[np.float64], em: NDArray[np.float64]) -> NDArray[np.float64]:
        """Σ_ops max(C/e_c, M/e_m) + communication, for broadcast (e_c, e_m) arrays; lengths on the last axis."""
        per_op = np.maximum(compute / ec[..., None, None], memory / em[..., None, None])
        return np.asarray(per_op.sum(axis=-2) + comm, dtype=np.float64)

    def best_overhead(times: NDArray[np.float64]) -> NDArray[np.float64]:
        """argmin_o Σ ((T_i + o)/m_i - 1)^2 over o >= 0, in closed form."""
        best = ((1.0 - times * weights) * weights).sum(axis=-1) / (weights**2).sum()
        return np.asarray(np.maximum(best, 0.0), dtype=np.float64)

    # Prefill at these lengths is compute-bound, so its points cannot identify the memory efficiency: a fit
    # of all three parameters explains the large fixed latency with an absurd e_m (about 0.04 on Table 5),
    # which then starves decode. e_m stays at its prior; e_c and the overhead are fitted.
    em_fixed = np.array(base.memory_efficiency)
    times = body(_EFFICIENCY_GRID, np.broadcast_to(em_fixed, _EFFICIENCY_GRID.shape))
    overhead = best_overhead(times)
    loss = (((times + overhead[..., None]) * weights - 1.0) ** 2).sum(axis=-1)
    i = int(np.argmin(loss))
    start = np.array([_EFFICIENCY_GRID[i], overhead[i]])

    def residuals(theta: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.asarray((body(np.array(theta[0]), em_fixed) + theta[1]) * weights - 1.0)

    fit = least_squares(residuals, start, bounds=([1e-3, 0.0], [1.0, np.inf]), xtol=1e-12, ftol=1e-12)
    theta = fit.x if fit.cost <= 0.5 * float(loss[i]) else start
    ec, fitted_overhead = (float(v) for v in theta)
    em = float(em_fixed)
    return replace(
        base,
        compute_efficiency=ec,
        memory_efficiency=em,
        overhead_s=fitted_overhead,
        source=f"least squares on {lengths.size} measured prefill points (relative residuals)",
    )


def calibrate(
    arch: Architecture,
    instance: Instance,
    lengths_tokens: tuple[float, ...],
    measured_s: tuple[float, ...],
    base: RooflineParams | None = None,
    *,
    leave_one_out: bool = True,
) -> Calibration:
    """Fit the compute efficiency and the fixed overhead to measured prefill latencies (least squares on
    relative residuals, efficiency in (0, 1], overhead >= 0; the memory efficiency keeps ``base``'s value,
    see ``_fit``), and predict each point from a fit to the others (leave-one-out)."""
    base = base or RooflineParams()
    lengths = np.asarray(lengths_tokens, dtype=np.float64)
    measured = np.asarray(measured_s, dtype=np.float64)
    params = _fit(arch, instance, base, lengths, measured)
    loo = []
    for i in range(lengths.size if leave_one_out else 0):
        keep = np.arange(lengths.size) != i
        held = _fit(arch, instance, base, lengths[keep], measured[keep])
        loo.append(float(prefill_seconds(arch, instance, held, lengths[i : i + 1])[0]))
    return Calibration(
        params=params,
        lengths_tokens=tuple(float(v) for v in lengths),
        measured_s=tuple(float(v) for v in measured),
        fitted_s=tuple(float(v) for v in prefill_seconds(arch, instance, params, lengths)),
        leave_one_out_s=tuple(loo),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
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


def pool_costs(
    pool: Pool, card: ModelCard, *, context_tokens: float, tpot_s: float, with_decode: bool = True
) -> PoolCosts:
    """Prefill curve, KV-size curve and decode capacity of a pool by its method (measured, calibrated,
    roofline). Decode capacity from the roofline is computed at ``context_tokens`` against ``tpot_s``."""
    profile = pool.profile
    if pool.method == "measured":
        assert profile is not None  # the loader requires measured points for a measured pool
        kv = fit_profile(profile.kv_cache) if profile.kv_cache is not None else None
        decode = profile.decode
        return PoolCosts(
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
    arch = card.architecture
    assert arch is not None  # the loader requires an architecture for roofline and calibrated pools
    instance = Instance(accelerator=pool.accelerator, gpus=pool.gpus_per_instance)
    params = pool.roofline
    label = (
        "roofline, default efficiencies"
        if params == RooflineParams()
        else (
            f"roofline ({params.source}: e_c {params.compute_efficiency:.2f}, e_m {params.memory_efficiency:.2f}, "
            f"overhead {params.overhead_s:.3f} s)"
        )
    )
    if pool.method == "calibrated":
        assert pool.calibration is not None and pool.calibration_accelerator is not None
        points = pool.calibration.prefill
        fitted = calibrate(
            arch,
            Instance(accelerator=pool.calibration_accelerator, gpus=pool.calibration.gpus_per_instance),
            points.lengths_tokens,
            points.values,
            base=params,
            leave_one_out=False,
        )
        params = fitted.params
        label = (
            f"roofline calibrated on {pool.calibration_accelerator.key} {points.provenance} points "
            f"(e_c {params.compute_efficiency:.2f}, e_m {params.memory_efficiency:.2f}, "
            f"overhead {params.overhead_s:.3f} s)"
        )
    capacity = decode_capacity(arch, instance, params, context_tokens, tpot_s) if with_decode else None
    return PoolCosts(
        prefill=prefill_curve(arch, instance, params, source=label),
        prefill_source=label,
        kv_bytes=kv_transfer_curve(arch),
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
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class FitReport:
    """How well one pool's cost curve matches its points: a polynomial fit's residuals, or a roofline
    calibration's residuals with leave-one-out predictions. Values in ``unit`` (s or bytes)."""

    name: str
    method: str
    provenance: str
    unit: str
    lengths_tokens: tuple[float, ...]
    given: tuple[float, ...]
    fitted: tuple[float, ...]
    leave_one_out: tuple[float, ...] = ()
    parameters: Mapping[str, float] = field(default_factory=dict, hash=False)
    source: str = ""


def _poly_report(name: str, points: ProfilePoints, unit: str) -> FitReport:
    curve = fit_profile(points)
    return FitReport(
        name=name,
        method=f"degree-{points.fit_degree} least squares",
        provenance=points.provenance,
        unit=unit,
        lengths_tokens=points.lengths_tokens,
        given=points.values,
        fitted=tuple(float(v) for v in curve(np.asarray(points.lengths_tokens))),
        parameters={f"c{k}": c for k, c in enumerate(curve.coefficients)},
        source=points.source,
    )


def pool_fit_reports(pool: Pool, card: ModelCard, role: str) -> list[FitReport]:
    """Fit reports of one pool: polynomial fits of measured points, or the calibration (with leave-one-out)
    of a calibrated roofline pool. A pure roofline pool has nothing fitted and returns no report."""
    reports: list[FitReport] = []
    if pool.method == "measured" and pool.profile is not None:
        reports.append(_poly_report(f"prefill {pool.hardware_key}", pool.profile.prefill, "s"))
        if role == "prfaas" and pool.profile.kv_cache is not None:
            reports.append(_poly_report(f"kv_cache {pool.hardware_key}", pool.profile.kv_cache, "bytes"))
    elif pool.method == "calibrated" and card.architecture is not None:
        assert pool.calibration is not None and pool.calibration_accelerator is not None
        points = pool.calibration.prefill
        result = calibrate(
            card.architecture,
            Instance(accelerator=pool.calibration_accelerator, gpus=pool.calibration.gpus_per_instance),
            points.lengths_tokens,
            points.values,
            base=pool.roofline,
        )
        reports.append(
            FitReport(
                name=f"prefill {pool.calibration_accelerator.key} -> {pool.hardware_key} (roofline)",
                method="roofline calibration (least squares, leave-one-out)",
                provenance=points.provenance,
                unit="s",
                lengths_tokens=result.lengths_tokens,
                given=result.measured_s,
                fitted=result.fitted_s,
                leave_one_out=result.leave_one_out_s,
                parameters={
                    "compute_efficiency": result.params.compute_efficiency,
                    "memory_efficiency": result.params.memory_efficiency,
                    "overhead_s": result.params.overhead_s,
                },
                source=points.source,
            )
        )
    return reports


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
