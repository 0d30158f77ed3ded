"""The serving model's defaults fitted across models, and their error by leave-one-model-out cross-validation.

Serving time of a prefill (``RooflineParams``, ``physics.prefill``):

    T(l) = Σ_GEMMs max(FLOPs / (F · e_c), bytes / (B · e_m)) + Σ_attention max(FLOPs / (F_kv · e_a), ...)
           + all-reduces / e_n + o_req + ceil(l / chunk) · layers · o_layer

Four parameters are fitted to measured single-request prefill latencies of several models: the GEMM and
attention efficiencies (e_c, e_a) and the per-request and per-layer-per-chunk overheads (o_req, o_layer);
e_m, e_n and the chunk size keep their given values. The loss is the sum of squared log ratios
ln(predicted / measured) over every point, so each point counts by its relative error whatever its length.

Leave-one-model-out: for each model, the parameters are fitted to the other models' points only and that
model's points are predicted from them. Those held-out predictions are the error figures to quote for a model
the planner has never seen; the in-sample residuals of the fit on all models are not.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.physics.memory import transfer_bytes
from prfaas_plan.physics.ops import forward_ops
from prfaas_plan.physics.prefill import prefill_chunks, prefill_seconds
from prfaas_plan.physics.roofline import ATTENTION_OPS, Instance, communication_s, op_peak_flop_per_s, shape_factor
from prfaas_plan.spec.engine import ServingPoints
from prfaas_plan.spec.hardware import RooflineParams
from prfaas_plan.spec.model import Architecture

Array = NDArray[np.float64]

#: Order of the fitted parameters in the solver's vector.
FITTED = ("compute_efficiency", "attention_efficiency", "overhead_s", "layer_overhead_s")
# Bounds: efficiencies in (0, 1] of peak; overheads non-negative and below what any point could carry.
_LOWER = np.array([1e-3, 1e-3, 0.0, 0.0])
_UPPER = np.array([1.0, 1.0, 10.0, 1.0])
# Starting points of the local solver: the objective is piecewise smooth (the roofline's max), so a few
# starts across the plausible range guard against a kink that stalls one of them.
_STARTS = (
    (0.5, 0.7, 0.3, 1e-3),
    (0.2, 0.4, 0.1, 1e-4),
    (0.9, 0.9, 0.4, 5e-3),
)


@frozen
class ServingObservation:
    """Measured single-request prefill latencies of one model on one instance (no cached prefix)."""

    model: str
    arch: Architecture
    instance: Instance
    lengths_tokens: tuple[float, ...]
    measured_s: tuple[float, ...]
    source: str


def observation(points: ServingPoints, arch: Architecture, instance: Instance) -> ServingObservation:
    """Published points as latencies: a KV throughput Φ is converted by T = S_kv(l) / Φ (paper Eq. 1) with
    S_kv from the card's architecture (``physics.memory.transfer_bytes``, no cached prefix)."""
    lengths = np.asarray(points.lengths_tokens, dtype=np.float64)
    values = np.asarray(points.values, dtype=np.float64)
    latency = values if points.quantity == "latency_s" else transfer_bytes(arch, 0.0, lengths) / values
    return ServingObservation(
        model=points.model,
        arch=arch,
        instance=instance,
        lengths_tokens=points.lengths_tokens,
        measured_s=_floats(latency),
        source=f"{points.source} ({points.engine})",
    )


@frozen
class _Priced:
    """One observation's roofline pieces at unit efficiency (lengths on the last axis)."""

    gemm_s: Array  # ops x lengths, FLOPs / F
    attention_s: Array  # ops x lengths, FLOPs / F_kv (zero for GEMM rows)
    memory_s: Array  # ops x lengths, bytes / (B · e_m)
    communication_s: Array  # lengths
    layer_chunks: Array  # lengths: chunks x layers
    measured_s: Array


def _price(obs: ServingObservation, base: RooflineParams) -> _Priced:
    arch, instance = obs.arch, obs.instance
    lengths = np.asarray(obs.lengths_tokens, dtype=np.float64)
    ops = forward_ops(arch, cached=0.0, new=lengths)
    is_attention = np.array([op.name in ATTENTION_OPS for op in ops])[:, None]
    seconds = np.stack(
        [
            np.broadcast_to(
                op.matmul_flops / op_peak_flop_per_s(op, arch, instance) * shape_factor(op, instance, base),
                lengths.shape,
            )
            for op in ops
        ]
    )
    memory = np.stack([np.broadcast_to(op.bytes, lengths.shape) for op in ops])
    return _Priced(
        gemm_s=np.where(is_attention, 0.0, seconds),
        attention_s=np.where(is_attention, seconds, 0.0),
        memory_s=memory / (instance.bytes_per_s * base.memory_efficiency),
        communication_s=communication_s(arch, instance, lengths, base),
        layer_chunks=prefill_chunks(base, lengths) * arch.n_layers,
        measured_s=np.asarray(obs.measured_s, dtype=np.float64),
    )


def _predict(priced: _Priced, theta: Array) -> Array:
    ec, ea, o_req, o_layer = theta
    compute = priced.gemm_s / ec + priced.attention_s / ea
    kernels = np.maximum(compute, priced.memory_s).sum(axis=0) + priced.communication_s
    return np.asarray(kernels + o_req + o_layer * priced.layer_chunks, dtype=np.float64)


def _solve(priced: list[_Priced]) -> Array:
    from scipy.optimize import least_squares  # fitting only; keeps scipy off the start-up path

    def residuals(theta: Array) -> Array:
        return np.concatenate([np.log(_predict(p, theta) / p.measured_s) for p in priced])

    best: Array | None = None
    best_cost = np.inf
    for start in _STARTS:
        fit = least_squares(residuals, np.array(start), bounds=(_LOWER, _UPPER), x_scale="jac", xtol=1e-12)
        if fit.cost < best_cost:
            best, best_cost = np.asarray(fit.x, dtype=np.float64), float(fit.cost)
    assert best is not None
    return best


def _params(base: RooflineParams, theta: Array, source: str) -> RooflineParams:
    ec, ea, o_req, o_layer = (float(v) for v in theta)
    # ``_price`` divides every GEMM by the one e_c, whatever its dtype, the routed experts' alike: the fitted
    # parameters price them so too (as ``physics.calibration`` does), not at base's per-dtype or experts' rates.
    return base.one_gemm_rate(ec, source=source, attention_efficiency=ea, overhead_s=o_req, layer_overhead_s=o_layer)


def fit_serving(observations: tuple[ServingObservation, ...], base: RooflineParams | None = None) -> RooflineParams:
    """Fit e_c, e_a, overhead_s and layer_overhead_s to every observation (module docstring); the other fields
    of ``base`` (default ``RooflineParams()``) are kept."""
    base = base or RooflineParams()
    theta = _solve([_price(obs, base) for obs in observations])
    models = ", ".join(dict.fromkeys(obs.model for obs in observations))
    return _params(base, theta, f"least squares on log ratios over {models}")


@frozen
class HeldOut:
    """One model's points predicted by parameters fitted without it, beside the all-model fit."""

    model: str
    lengths_tokens: tuple[float, ...]
    measured_s: tuple[float, ...]
    held_out_s: tuple[float, ...]
    in_sample_s: tuple[float, ...]
    kernel_only_s: tuple[float, ...]
    params: RooflineParams  # fitted without this model

    @property
    def held_out_ratios(self) -> tuple[float, ...]:
        """predicted (fitted without this model) / measured, per point."""
        return tuple(p / m for p, m in zip(self.held_out_s, self.measured_s, strict=True))


@frozen
class CrossValidation:
    """The all-model fit and each model's held-out predictions."""

    params: RooflineParams
    models: tuple[HeldOut, ...]

    @property
    def held_out_ratios(self) -> Array:
        """Every point's predicted / measured, each from the fit without its model."""
        return np.array([r for m in self.models for r in m.held_out_ratios])

    @property
    def median_factor(self) -> float:
        """Median over points of max(ratio, 1/ratio): the typical held-out error as a factor >= 1."""
        return float(np.exp(np.median(np.abs(np.log(self.held_out_ratios)))))

    @property
    def worst_factor(self) -> float:
        """Largest max(ratio, 1/ratio) over points."""
        return float(np.exp(np.max(np.abs(np.log(self.held_out_ratios)))))


def cross_validate(observations: tuple[ServingObservation, ...], base: RooflineParams | None = None) -> CrossValidation:
    """Fit on all observations, then leave each model out in turn and predict its points (module docstring)."""
    base = base or RooflineParams()
    priced = [_price(obs, base) for obs in observations]
    everything = fit_serving(observations, base)
    held: list[HeldOut] = []
    for model in dict.fromkeys(obs.model for obs in observations):
        keep = [p for p, obs in zip(priced, observations, strict=True) if obs.model != model]
        if not keep:
            raise ValueError("leave-one-model-out needs observations of at least two models")
        params = _params(base, _solve(keep), f"least squares on log ratios without {model}")
        for obs in observations:
            if obs.model != model:
                continue
            lengths = np.asarray(obs.lengths_tokens, dtype=np.float64)
            held.append(
                HeldOut(
                    model=model,
                    lengths_tokens=obs.lengths_tokens,
                    measured_s=obs.measured_s,
                    held_out_s=_floats(prefill_seconds(obs.arch, obs.instance, params, lengths)),
                    in_sample_s=_floats(prefill_seconds(obs.arch, obs.instance, everything, lengths)),
                    kernel_only_s=_floats(prefill_seconds(obs.arch, obs.instance, params.kernel_only, lengths)),
                    params=params,
                )
            )
    return CrossValidation(params=everything, models=tuple(held))


def _floats(values: Array) -> tuple[float, ...]:
    return tuple(float(v) for v in values)
