"""Fit an engine profile's terms to public serving measurements, and its error by leave-one-source-out
cross-validation.

Each measurement (``spec.hardware.CorpusMeasurement``) is a batch-1 prefill of l tokens or a decode step of B
sequences at c tokens of context, of one model card on one instance, timed on one engine. Its prediction is the
engine-aware roofline (``physics.engine``, ``physics.prefill``, ``physics.decode``):

    T = sum over ops of max(FLOPs x shape / (peak x e_op), bytes / (B x e_m)) + collectives + overhead
    e_op  = min(1, prior(generation, dtype) x s)   for GEMMs (s: the engine's fitted GEMM scale)
          = attention_efficiency                    for attention cores
    overhead = o_req + chunks x layers x o_chunk    (prefill)
             = o_step + layers x o_layer             (decode; the eager pair where cuda_graphs is false)

Fitted per engine (``FIT_TERMS``): s, o_req, o_chunk, o_step, o_layer, by least squares on log(pred / meas)
plus weak priors (``prior_weight`` x the log of each term's ratio to its prior, overheads softened by a floor of
1/10 of the prior) that keep a term the data cannot identify near its published prior instead of at a bound.
The other terms (chunk size, collective latencies, attention efficiency, grouped-GEMM curve, eager costs) stay
at their sourced values. Every kernel piece is priced once at unit efficiency, so a fit costs array arithmetic.

A decode metric that averages over all of a request's steps (mean ITL, per-request TPOT) also carries the
prefills of the requests that arrive meanwhile (continuous batching runs them between or inside decode steps):
such a measurement names them (``interleaved_input_tokens`` l_in, ``interleaved_output_tokens`` l_out) and its
step is priced as decode(B) + ((B - 1) / l_out) x prefill(l_in) (the other requests' turnover), the prefill's
kernels and per-chunk costs without the per-request cost (host-side work that overlaps the GPU). A median ITL
skips those steps and names none.

Leave-one-source-out: each source's measurements are predicted by the terms fitted on the engine's other
sources; those held-out ratios are the error to quote, the in-sample ones are not. A measurement the corpus
excludes from fitting (``exclude_from_fit``, with its physical reason) is predicted and reported but never fitted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from prfaas_plan.physics.decode import decode_step_time
from prfaas_plan.physics.engine import engine_params
from prfaas_plan.physics.ops import Op, forward_ops
from prfaas_plan.physics.prefill import prefill_chunks, prefill_time
from prfaas_plan.physics.roofline import (
    _GEMM_GROUP,
    ATTENTION_OPS,
    Instance,
    communication_s,
    compute_dtype,
    memory_bytes,
    op_peak_flop_per_s,
    shape_factor,
)
from prfaas_plan.spec.hardware import CorpusMeasurement, EngineProfile, RooflineParams
from prfaas_plan.spec.model import Architecture

Array = NDArray[np.float64]

#: The fitted terms, in the solver's order (``gemm_efficiency_scale`` multiplies the prior GEMM table).
FIT_TERMS = (
    "gemm_efficiency_scale",
    "request_overhead_s",
    "prefill_layer_overhead_s",
    "decode_step_overhead_s",
    "decode_layer_overhead_s",
)
_PHASE_OF = {
    "request_overhead_s": "prefill",
    "prefill_layer_overhead_s": "prefill",
    "decode_step_overhead_s": "decode",
    "decode_layer_overhead_s": "decode",
}
_UPPER = np.array([20.0, 5.0, 0.05, 0.2, 0.01])
DEFAULT_PRIOR_WEIGHT = 0.1


@dataclass(frozen=True, slots=True, kw_only=True)
class CorpusCase:
    """One measurement with what pricing it needs: the card (dtypes as served), the instance and the
    accelerator's generation."""

    measurement: CorpusMeasurement
    arch: Architecture
    instance: Instance
    generation: str


@dataclass(frozen=True, slots=True, kw_only=True)
class _Pieces:
    unit_gemm_s: Array  # GEMM ops: FLOPs x shape / peak
    gemm_prior: Array  # their prior efficiency
    attention_s: Array  # attention ops at the engine's attention efficiency (fixed)
    gemm_memory_s: Array
    attention_memory_s: Array
    other_memory_s: float  # ops without matmuls (embeddings, norms)
    fixed_s: float  # collectives
    overhead_counts: Array  # multipliers of (o_req, o_chunk, o_step, o_layer)
    eager_s: float  # eager decode cost where cuda_graphs is false (fixed)
    measured_s: float


def case_params(case: CorpusCase, engine: EngineProfile, base: RooflineParams | None = None) -> RooflineParams:
    """The roofline parameters ``engine`` prices ``case`` with (its generation, CUDA graphs unless the source
    says they were off, expert parallelism)."""
    m = case.measurement
    return engine_params(
        engine,
        case.generation,
        cuda_graphs=m.cuda_graphs is not False,
        expert_parallel=m.expert_parallel > 1,
        base=base,
    )


def interleaved_per_step(m: CorpusMeasurement) -> float:
    """Prefills per decode step a measurement's metric carries: (B - 1) / output tokens where it averages over
    a request's steps (the other B - 1 requests of a closed loop each turn over once per output length; its own
    prefill comes before its decode), else 0 (module docstring)."""
    if m.phase != "decode" or m.interleaved_output_tokens <= 0:
        return 0.0
    return (m.batch - 1) / m.interleaved_output_tokens


def predict(case: CorpusCase, engine: EngineProfile, base: RooflineParams | None = None) -> float:
    """The engine-aware roofline's time for one measurement, seconds (``physics.prefill``, ``physics.decode``;
    a decode metric with interleaved prefills adds their share, module docstring)."""
    m = case.measurement
    params = case_params(case, engine, base)
    if not m.includes_request_overhead:
        params = replace(params, overhead_s=0.0)
    if m.phase == "prefill":
        return float(prefill_time(case.arch, case.instance, params, np.asarray([m.tokens])).total_s[0])
    batch = np.asarray([float(m.batch)])
    step = float(decode_step_time(case.arch, case.instance, params, batch, m.tokens).total_s[0])
    share = interleaved_per_step(m)
    if share > 0:
        kernels = replace(params, overhead_s=0.0)
        lengths = np.asarray([m.interleaved_input_tokens])
        step += share * float(prefill_time(case.arch, case.instance, kernels, lengths).total_s[0])
    return step


def _pieces(case: CorpusCase, engine: EngineProfile, base: RooflineParams | None) -> _Pieces:
    m = case.measurement
    params = case_params(case, engine, base)
    arch, instance = case.arch, case.instance
    parts: list[tuple[list[Op], float]] = []  # (ops, weight)
    if m.phase == "prefill":
        tokens = np.asarray([m.tokens])
        parts.append((forward_ops(arch, cached=0.0, new=tokens), 1.0))
        chunks = float(prefill_chunks(params, tokens)[0])
        comm = float(communication_s(arch, instance, tokens, params, chunks)[0])
        counts = np.array([1.0 if m.includes_request_overhead else 0.0, chunks * arch.n_layers, 0.0, 0.0])
        eager = 0.0
    else:
        batch = np.asarray([float(m.batch)])
        parts.append((forward_ops(arch, cached=m.tokens, new=1.0, batch=batch, decode=True), 1.0))
        comm = float(communication_s(arch, instance, batch, params)[0])
        graphs = m.cuda_graphs is not False  # unknown: the engines' default, CUDA graphs on
        counts = np.array([0.0, 0.0, 1.0, float(arch.n_layers)]) if graphs else np.zeros(4)
        eager = 0.0 if graphs else params.decode_step_overhead_s + arch.n_layers * params.decode_layer_overhead_s
        share = interleaved_per_step(m)
        if share > 0:  # the arriving requests' prefills, without their per-request cost
            lengths = np.asarray([m.interleaved_input_tokens])
            parts.append((forward_ops(arch, cached=0.0, new=lengths), share))
            chunks = float(prefill_chunks(params, lengths)[0])
            comm += share * float(communication_s(arch, instance, lengths, params, chunks)[0])
            counts = counts + np.array([0.0, share * chunks * arch.n_layers, 0.0, 0.0])
    rate = instance.bytes_per_s * params.memory_efficiency
    gemm, prior, gemm_mem, att, att_mem = [], [], [], [], []
    other_mem = 0.0
    for ops, weight in parts:
        for op in ops:
            flops = float(np.ravel(op.matmul_flops)[0])
            memory = weight * float(np.ravel(memory_bytes(op, instance))[0]) / rate
            if flops <= 0:
                other_mem += memory
                continue
            shape = float(np.ravel(shape_factor(op, instance, params))[0])
            unit = weight * flops / op_peak_flop_per_s(op, arch, instance) * shape
            if op.name in ATTENTION_OPS:
                att.append(unit / params.attention_efficiency)
                att_mem.append(memory)
            else:
                dtype = compute_dtype(arch, _GEMM_GROUP.get(op.name, "weights"))
                gemm.append(unit)
                prior.append(_prior_efficiency(engine, case.generation, dtype))
                gemm_mem.append(memory)
    return _Pieces(
        unit_gemm_s=np.array(gemm),
        gemm_prior=np.array(prior),
        attention_s=np.array(att),
        gemm_memory_s=np.array(gemm_mem),
        attention_memory_s=np.array(att_mem),
        other_memory_s=other_mem,
        fixed_s=comm,
        overhead_counts=counts,
        eager_s=eager,
        measured_s=m.measured_s,
    )


def _prior_efficiency(engine: EngineProfile, generation: str, dtype: str) -> float:
    """The engine's GEMM efficiency prior for (generation, dtype), before its fitted scale."""
    return replace(engine, gemm_efficiency_scale=1.0).gemm_efficiency_of(generation, dtype)


def _predict_pieces(p: _Pieces, theta: Array) -> float:
    scale, o_req, o_chunk, o_step, o_layer = theta
    eff = np.minimum(1.0, p.gemm_prior * scale)
    gemm = np.maximum(p.unit_gemm_s / eff, p.gemm_memory_s).sum() if p.unit_gemm_s.size else 0.0
    att = np.maximum(p.attention_s, p.attention_memory_s).sum() if p.attention_s.size else 0.0
    overhead = float(p.overhead_counts @ np.array([o_req, o_chunk, o_step, o_layer]))
    return float(gemm + att + p.other_memory_s + p.fixed_s + overhead + p.eager_s)


def engine_theta(engine: EngineProfile) -> Array:
    """The fitted terms of ``engine`` as the solver's vector (``FIT_TERMS``)."""
    return np.array(
        [
            engine.gemm_efficiency_scale,
            engine.request_overhead_s,
            engine.prefill_layer_overhead_s,
            engine.decode_step_overhead_s,
            engine.decode_layer_overhead_s,
        ]
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineFit:
    """Fitted terms of one engine (``FIT_TERMS`` -> value), the ids fitted on and the phases they covered."""

    engine: str
    values: dict[str, float]
    fitted_on: tuple[str, ...]

    def apply(self, engine: EngineProfile) -> EngineProfile:
        """``engine`` with the fitted terms in place."""
        terms: dict[str, Any] = dict(self.values)
        return replace(engine, fitted=tuple(self.values), fitted_on=self.fitted_on, **terms)


def fitted_cases(cases: Sequence[CorpusCase]) -> list[CorpusCase]:
    """The cases a fit uses: all but those the corpus excludes from fitting (``exclude_from_fit``)."""
    return [c for c in cases if not c.measurement.exclude_from_fit]


def fit_engine(
    cases: Sequence[CorpusCase],
    engine: EngineProfile,
    *,
    prior_weight: float = DEFAULT_PRIOR_WEIGHT,
    base: RooflineParams | None = None,
) -> EngineFit:
    """Fit ``FIT_TERMS`` of ``engine`` to ``cases`` (module docstring); ``engine``'s current terms are the
    priors. Terms of a phase with no measurement are not fitted (left out of the result); measurements
    excluded from fitting are skipped."""
    from scipy.optimize import least_squares  # fitting only

    cases = fitted_cases(cases)
    if not cases:
        raise ValueError(f"no measurements to fit engine {engine.key} on")
    pieces = [_pieces(c, engine, base) for c in cases]
    measured = np.array([p.measured_s for p in pieces])
    phases = {c.measurement.phase for c in cases}
    active = np.array([t == "gemm_efficiency_scale" or _PHASE_OF[t] in phases for t in FIT_TERMS])
    prior = engine_theta(engine)
    floor = np.maximum(prior * 0.1, 1e-9)

    def full(x: Array) -> Array:
        theta = prior.copy()
        theta[active] = x
        return theta

    def residuals(x: Array) -> Array:
        theta = full(x)
        pred = np.array([_predict_pieces(p, theta) for p in pieces])
        fit = np.log(pred / measured)
        regular = prior_weight * np.log((theta[active] + floor[active]) / (prior[active] + floor[active]))
        return np.concatenate([fit, regular])

    lower = np.where(np.arange(len(FIT_TERMS)) == 0, 0.02, 0.0)[active]
    upper = _UPPER[active]
    best, best_cost = None, np.inf
    for start in (prior[active], np.clip(prior[active] * 3, lower, upper), np.clip(prior[active] / 3, lower, upper)):
        start = np.clip(start, lower + 1e-12, upper - 1e-12)
        result = least_squares(residuals, start, bounds=(lower, upper), x_scale="jac", xtol=1e-12, ftol=1e-12)
        if result.cost < best_cost:
            best, best_cost = np.asarray(result.x, dtype=np.float64), float(result.cost)
    assert best is not None
    theta = full(best)
    values = {t: float(v) for t, v, a in zip(FIT_TERMS, theta, active, strict=True) if a}
    return EngineFit(engine=engine.key, values=values, fitted_on=tuple(c.measurement.id for c in cases))


@dataclass(frozen=True, slots=True, kw_only=True)
class HeldOutPoint:
    """One measurement predicted by the engine's terms fitted without its source, and in-sample."""

    id: str
    source: str
    engine: str
    phase: str
    measured_s: float
    held_out_s: float
    in_sample_s: float
    excluded: str = ""  # the corpus's reason for keeping it out of every fit; "" when fitted

    @property
    def ratio(self) -> float:
        """Held-out predicted / measured."""
        return self.held_out_s / self.measured_s


def factor_stats(ratios: Sequence[float]) -> tuple[float, float]:
    """(median factor exp(median |log r|), share within a factor 2) of predicted / measured ratios."""
    logs = np.abs(np.log(np.asarray(ratios, dtype=np.float64)))
    return float(np.exp(np.median(logs))), float(np.mean(logs <= np.log(2.0)))


def cross_validate_engine(
    cases: Sequence[CorpusCase],
    engine: EngineProfile,
    *,
    prior_weight: float = DEFAULT_PRIOR_WEIGHT,
    base: RooflineParams | None = None,
) -> tuple[EngineFit, tuple[HeldOutPoint, ...]]:
    """Fit on every case, then leave each source out and predict its cases (module docstring). A source that is
    the engine's only one is predicted by the priors (the profile as given). Excluded measurements are
    predicted (held out by construction) but fitted nowhere."""
    everything = fit_engine(cases, engine, prior_weight=prior_weight, base=base)
    fitted = everything.apply(engine)
    points: list[HeldOutPoint] = []
    for source in dict.fromkeys(c.measurement.source for c in cases):
        keep = fitted_cases([c for c in cases if c.measurement.source != source])
        held = fit_engine(keep, engine, prior_weight=prior_weight, base=base).apply(engine) if keep else engine
        for c in cases:
            if c.measurement.source == source:
                points.append(
                    HeldOutPoint(
                        id=c.measurement.id,
                        source=source,
                        engine=engine.key,
                        phase=c.measurement.phase,
                        measured_s=c.measurement.measured_s,
                        held_out_s=predict(c, held, base),
                        in_sample_s=predict(c, fitted, base),
                        excluded=c.measurement.exclude_from_fit,
                    )
                )
    return everything, tuple(points)
