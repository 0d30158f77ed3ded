"""Calibration of roofline efficiencies to one model's measured prefill points: a least-squares fit of the
GEMM efficiency and the per-request overhead, with in-sample and leave-one-out errors. The attention
efficiency, the per-layer overhead and the chunk size keep ``base``'s values (``physics.serving`` fits those
across models)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.physics.ops import forward_ops
from prfaas_plan.physics.prefill import prefill_seconds, serving_overhead_s
from prfaas_plan.physics.roofline import ATTENTION_OPS, Instance, op_peak_flop_per_s, roofline_time, shape_factor
from prfaas_plan.spec.hardware import RooflineParams
from prfaas_plan.spec.model import Architecture


@frozen
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
    unit = replace(base, compute_efficiency=1.0, memory_efficiency=1.0, attention_efficiency=1.0)
    attention = np.array([op.name in ATTENTION_OPS for op in ops])[:, None]
    rates = [
        op_peak_flop_per_s(op, arch, instance)
        * (base.attention_efficiency if op.name in ATTENTION_OPS else 1.0)
        / shape_factor(op, instance, base)
        for op in ops
    ]
    compute = np.stack([np.broadcast_to(op.matmul_flops / r, lengths.shape) for op, r in zip(ops, rates, strict=True)])
    memory = np.stack([np.broadcast_to(op.bytes / instance.bytes_per_s, lengths.shape) for op in ops])
    # Communication and the per-layer chunk overhead do not depend on the fitted parameters.
    fixed = roofline_time(ops, arch, instance, unit, lengths).communication_s + serving_overhead_s(
        arch, replace(base, overhead_s=0.0), lengths
    )
    weights = 1.0 / measured

    def body(ec: NDArray[np.float64], em: NDArray[np.float64]) -> NDArray[np.float64]:
        """Σ_ops max(C/e, M/e_m) + fixed, for broadcast (e_c, e_m) arrays (e = e_c for GEMMs; the attention
        terms already carry their own efficiency); lengths on the last axis."""
        gemm = np.where(attention, compute, compute / ec[..., None, None])
        per_op = np.maximum(gemm, memory / em[..., None, None])
        return np.asarray(per_op.sum(axis=-2) + fixed, dtype=np.float64)

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
    # The fit divides every GEMM by the one e_c, whatever its dtype and the routed experts' alike: the fitted
    # parameters price them so too (no per-dtype figure of ``base`` may override it, or an FP8 model would be
    # priced at base's FP8 rate; nor its experts' factor, or the experts would run slower than fitted).
    return base.one_gemm_rate(
        ec,
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
