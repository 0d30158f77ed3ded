"""Fit the engine profiles' terms to public serving measurements, and their error by leave-one-source-out
cross-validation.

Each measurement (``spec.hardware.CorpusMeasurement``) is a batch-1 prefill of l tokens or a decode step of B
sequences at c tokens of context, of one model card on one instance, timed on one engine. Its prediction is the
engine-aware roofline (``physics.engine``, ``physics.prefill``, ``physics.decode``):

    T = sum over ops of max(FLOPs x shape / (peak x e_op), bytes / (B x e_m)) + collectives + overhead
    e_op  = min(1, prior(generation, dtype) x s)   for dense GEMMs (s: the fitted GEMM scale)
          = min(1, min(1, prior x s) x x_exp)       for the routed experts' grouped GEMMs (x_exp: their factor)
          = e_att                                   for attention cores (the engine's, prior FlashAttention-3's)
    overhead = o_req + chunks x (layers x o_chunk + MoE layers x o_moe) [+ o_handoff]
                                                                       (prefill; o_handoff where disaggregated)
             = f_gen x (o_step + layers x o_layer + kernels x o_op)    (decode; eager pair without CUDA graphs)

o_handoff (``kv_handoff_s``): a prefill timed on a disaggregated prefill instance until its KV was handed to the
decode side (``CorpusMeasurement.disaggregated``) also waits for the handoff; no public corpus point is one.
kernels: the matrix-multiply kernels of a step (``physics.ops.matmul_kernels``); f_gen: the decode-overhead
factor of the accelerator's generation (1 unless fitted: ``overhead_scale_cdna3``). Collectives that span more
GPUs than one scale-up domain cross the scale-out NICs at the inter-node alpha (``physics.roofline``).

The corpus fit (``fit_corpus``) fits ``CORPUS_TERMS`` of every engine at once: the terms in ``SHARED_TERMS``
(the platform's and the kernels', not an engine's) one value for all engines, the others one per engine. The GEMM
scale and the experts' factor are shared: a dense layer's GEMMs are the same library kernels (cuBLAS, CUTLASS) on
every engine, and a batch-1 prefill sends each routed expert few enough tokens that its grouped GEMM runs far below
the dense rate whichever kernel an engine calls; what the engines differ in is their fixed costs. The factor is an
empirical remainder on top of the grouped GEMM's small-M tile curve (``expert_gemm_half_rows``, priced in
``shape_factor``), fitted on prefills and applied to the routed experts in decode too. A user's calibration
from its own benchmarks (``fit_engine``) fits ``FIT_TERMS`` of one engine. Both: least squares on
log(pred / meas) plus weak priors (``prior_weight`` x the log of each term's ratio to its prior, overheads
softened by a floor of 1/10 of the prior) that keep a term the data cannot identify near its published prior
instead of at a bound. A term is fitted only where the measurements carry it: a phase's overheads need a
measurement of that phase, the GEMM scale and the attention efficiency a prefill (a decode step's GEMMs run at
small M, where the large-M efficiency is not what binds), the experts' factor a prefill of a model with routed
experts, a generation's factor a decode step on that generation. The other terms (chunk size, collective
latencies, grouped-GEMM curve, eager costs) stay at their sourced values. Every kernel piece is priced once at
unit efficiency, so a fit costs array arithmetic.

A decode metric that averages over all of a request's steps (mean ITL, per-request TPOT) also carries the
prefills of the requests that arrive meanwhile (continuous batching runs them between or inside decode steps):
such a measurement names them (``interleaved_input_tokens`` l_in, ``interleaved_output_tokens`` l_out) and its
step is priced as decode(B) + ((B - 1) / l_out) x prefill(l_in) (the other requests' turnover), the prefill's
kernels and per-chunk costs without the per-request cost (host-side work that overlaps the GPU). A median ITL
skips those steps and names none.

Leave-one-source-out: each source's measurements are predicted by the terms fitted on the other sources (a
source that timed several engines is left out of all of them); those held-out ratios are the error to quote,
the in-sample ones are not. A measurement the corpus excludes from fitting (``exclude_from_fit``, with its
physical reason) is predicted and reported but never fitted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.physics.decode import decode_overhead_s, decode_step_time
from prfaas_plan.physics.engine import engine_params
from prfaas_plan.physics.ops import Op, forward_ops, matmul_kernels
from prfaas_plan.physics.prefill import chunk_layer_counts, prefill_chunks, prefill_time
from prfaas_plan.physics.roofline import (
    _GEMM_GROUP,
    ATTENTION_OPS,
    Instance,
    communication_s,
    compute_dtype,
    memory_bytes,
    moe_layers,
    op_peak_flop_per_s,
    shape_factor,
)
from prfaas_plan.spec.engine import CorpusMeasurement, EngineProfile
from prfaas_plan.spec.hardware import RooflineParams
from prfaas_plan.spec.model import Architecture

Array = NDArray[np.float64]

#: The terms a fit may move, in the solver's order (``gemm_efficiency_scale`` multiplies the prior GEMM table;
#: ``overhead_scale_<generation>`` is the engine's factor on its decode overheads on that generation).
ALL_TERMS = (
    "gemm_efficiency_scale",
    "request_overhead_s",
    "prefill_layer_overhead_s",
    "decode_step_overhead_s",
    "decode_layer_overhead_s",
    "decode_op_overhead_s",
    "overhead_scale_cdna3",
    "attention_efficiency",
    "kv_handoff_s",
    "prefill_moe_layer_overhead_s",
    "expert_gemm_scale",
)
#: The terms a calibration from one deployment's benchmarks fits (``fit_engine``'s default).
FIT_TERMS = ALL_TERMS[:5]
#: The terms the public corpus fits (``fit_corpus``): the routed experts' own GEMM factor beside the dense scale;
#: per matrix-multiply kernel rather than per layer in
#: decode (a layer's kernels differ by a factor 2.4 between dense and MLA-with-experts models), the CDNA 3
#: factor on decode overheads, and the prefill cost per MoE layer per chunk beside the per-layer one (fitted
#: where the engine's measurements include a prefill of a model with MoE layers). Not the attention efficiency:
#: the corpus's prompts (at most 8K tokens but one benchmark's two dense prompts) spend at most about a quarter of
#: their kernel time in attention, too little to tell it from the GEMM rate, while it decides every prompt of 32K
#: and more (``tests/benchmarks/corpus_cv.py`` sets it from long-prompt evidence where some exists, else leaves its
#: prior).
CORPUS_TERMS = (
    "gemm_efficiency_scale",
    "request_overhead_s",
    "prefill_layer_overhead_s",
    "decode_step_overhead_s",
    "decode_op_overhead_s",
    "overhead_scale_cdna3",
    "prefill_moe_layer_overhead_s",
    "expert_gemm_scale",
)
#: Of those, the ones one value serves every engine with: the platform's and the GEMM kernels', not the engine's
#: (module docstring).
SHARED_TERMS = ("overhead_scale_cdna3", "gemm_efficiency_scale", "expert_gemm_scale")
_PHASE_OF = {
    "request_overhead_s": "prefill",
    "prefill_layer_overhead_s": "prefill",
    "decode_step_overhead_s": "decode",
    "decode_layer_overhead_s": "decode",
    "decode_op_overhead_s": "decode",
    "overhead_scale_cdna3": "decode",
    "attention_efficiency": "prefill",
    "gemm_efficiency_scale": "prefill",
    "kv_handoff_s": "prefill",
    "prefill_moe_layer_overhead_s": "prefill",
    "expert_gemm_scale": "prefill",
}
_LOWER = np.array([0.02, 0.0, 0.0, 0.0, 0.0, 0.0, 0.05, 0.05, 0.0, 0.0, 0.02])
_UPPER = np.array([20.0, 5.0, 0.05, 0.2, 0.01, 0.001, 20.0, 1.0, 5.0, 0.05, 5.0])
_SCALED = {"cdna3": 6}  # generation -> index of its decode-overhead factor in ALL_TERMS
DEFAULT_PRIOR_WEIGHT = 0.1


@frozen
class CorpusCase:
    """One measurement with what pricing it needs: the card (dtypes as served), the instance and the
    accelerator's generation."""

    measurement: CorpusMeasurement
    arch: Architecture
    instance: Instance
    generation: str


@frozen
class _Pieces:
    unit_gemm_s: Array  # GEMM ops: FLOPs x shape / peak
    gemm_prior: Array  # their prior efficiency
    gemm_expert: Array  # 1.0 where the GEMM is a routed experts' grouped GEMM, else 0.0
    attention_s: Array  # attention ops at unit efficiency (FLOPs x shape / peak)
    gemm_memory_s: Array
    attention_memory_s: Array
    other_memory_s: float  # ops without matmuls (embeddings, norms)
    fixed_s: float  # collectives
    overhead_counts: Array  # multipliers of (o_req, o_chunk, o_step, o_layer, o_op, o_handoff, o_moe_chunk)
    scale_index: int  # index in ALL_TERMS of the decode overheads' generation factor; -1: none (factor 1)
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
        handoff = params.kv_handoff_s if m.disaggregated else 0.0
        return float(prefill_time(case.arch, case.instance, params, np.asarray([m.tokens])).total_s[0]) + handoff
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
        request = 1.0 if m.includes_request_overhead else 0.0
        handoff = 1.0 if m.disaggregated else 0.0
        layers, moe = chunk_layer_counts(arch)
        counts = np.array([request, chunks * layers, 0.0, 0.0, 0.0, handoff, chunks * moe])
        eager = 0.0
    else:
        batch = np.asarray([float(m.batch)])
        parts.append((forward_ops(arch, cached=m.tokens, new=1.0, batch=batch, decode=True), 1.0))
        comm = float(communication_s(arch, instance, batch, params)[0])
        graphs = m.cuda_graphs is not False  # unknown: the engines' default, CUDA graphs on
        kernels = matmul_kernels(arch)
        counts = np.array([0.0, 0.0, 1.0, float(arch.n_layers), kernels, 0.0, 0.0]) if graphs else np.zeros(7)
        eager = 0.0 if graphs else decode_overhead_s(arch, params)
        share = interleaved_per_step(m)
        if share > 0:  # the arriving requests' prefills, without their per-request cost
            lengths = np.asarray([m.interleaved_input_tokens])
            parts.append((forward_ops(arch, cached=0.0, new=lengths), share))
            chunks = float(prefill_chunks(params, lengths)[0])
            comm += share * float(communication_s(arch, instance, lengths, params, chunks)[0])
            layers, moe = chunk_layer_counts(arch)
            counts = counts + np.array([0.0, share * chunks * layers, 0.0, 0.0, 0.0, 0.0, share * chunks * moe])
    rate = instance.bytes_per_s * params.memory_efficiency
    gemm, prior, gemm_mem, att, att_mem, expert = [], [], [], [], [], []
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
                att.append(unit)
                att_mem.append(memory)
            else:
                dtype = compute_dtype(arch, _GEMM_GROUP.get(op.name, "weights"))
                gemm.append(unit)
                expert.append(1.0 if op.routing is not None else 0.0)
                prior.append(_prior_efficiency(engine, case.generation, dtype))
                gemm_mem.append(memory)
    return _Pieces(
        unit_gemm_s=np.array(gemm),
        gemm_prior=np.array(prior),
        gemm_expert=np.array(expert),
        attention_s=np.array(att),
        gemm_memory_s=np.array(gemm_mem),
        attention_memory_s=np.array(att_mem),
        other_memory_s=other_mem,
        fixed_s=comm,
        overhead_counts=counts,
        scale_index=_SCALED.get(case.generation, -1),
        eager_s=eager,
        measured_s=m.measured_s,
    )


def _memo_pieces(
    case: CorpusCase,
    engine: EngineProfile,
    base: RooflineParams | None,
    memo: dict[tuple[str, CorpusMeasurement], _Pieces] | None,
) -> _Pieces:
    """``_pieces``, kept in ``memo`` by (engine, measurement) where one is given: the folds of one
    cross-validation price the same cases with the same engine and base many times over. Keyed by the whole
    measurement, not its id, so two measurements that share an id are never priced as one."""
    if memo is None:
        return _pieces(case, engine, base)
    key = (engine.key, case.measurement)
    if key not in memo:
        memo[key] = _pieces(case, engine, base)
    return memo[key]


def _prior_efficiency(engine: EngineProfile, generation: str, dtype: str) -> float:
    """The engine's GEMM efficiency prior for (generation, dtype), before its fitted scale."""
    return replace(engine, gemm_efficiency_scale=1.0).gemm_efficiency_of(generation, dtype)


def _gemm_efficiency(prior: Array, expert: Array, scale: Array | float, expert_scale: Array | float) -> Array:
    """GEMM efficiencies from their priors: each times the engine's scale (at most 1), a routed experts' grouped
    GEMM (``expert`` 1) that times the experts' own factor again (at most 1), as ``physics.roofline.op_efficiency``
    prices them."""
    dense = np.minimum(1.0, prior * scale)
    return np.where(expert > 0, np.minimum(1.0, dense * expert_scale), dense)


def _predict_pieces(p: _Pieces, theta: Array) -> float:
    """One case's time from its pieces and the terms ``theta`` (``ALL_TERMS`` order)."""
    eff = _gemm_efficiency(p.gemm_prior, p.gemm_expert, theta[0], theta[10])
    gemm = np.maximum(p.unit_gemm_s / eff, p.gemm_memory_s).sum() if p.unit_gemm_s.size else 0.0
    att = np.maximum(p.attention_s / theta[7], p.attention_memory_s).sum() if p.attention_s.size else 0.0
    c = p.overhead_counts
    factor = theta[p.scale_index] if p.scale_index >= 0 else 1.0
    prefill = float(c[:2] @ theta[1:3]) + float(c[6] * theta[9])
    overhead = prefill + factor * float(c[2:5] @ theta[3:6]) + float(c[5] * theta[8])
    return float(gemm + att + p.other_memory_s + p.fixed_s + overhead + p.eager_s)


def engine_theta(engine: EngineProfile) -> Array:
    """The fittable terms of ``engine`` as the solver's vector (``ALL_TERMS``)."""
    return np.array([_term(engine, t) for t in ALL_TERMS])


def _term(engine: EngineProfile, term: str) -> float:
    if term.startswith("overhead_scale_"):
        return engine.overhead_scale_of(term.removeprefix("overhead_scale_"))
    return float(getattr(engine, term))


@frozen
class EngineFit:
    """Fitted terms of one engine (term of ``ALL_TERMS`` -> value), the ids fitted on and the phases they
    covered."""

    engine: str
    values: dict[str, float]
    fitted_on: tuple[str, ...]

    def apply(self, engine: EngineProfile) -> EngineProfile:
        """``engine`` with the fitted terms in place."""
        terms: dict[str, Any] = {t: v for t, v in self.values.items() if not t.startswith("overhead_scale_")}
        scales = dict(engine.overhead_scale)
        for t, v in self.values.items():
            if t.startswith("overhead_scale_"):
                scales[t.removeprefix("overhead_scale_")] = v
        return replace(
            engine,
            fitted=tuple(self.values),
            fitted_on=self.fitted_on,
            overhead_scale=tuple(sorted(scales.items())),
            **terms,
        )


def fitted_cases(cases: Sequence[CorpusCase]) -> list[CorpusCase]:
    """The cases a fit uses: all but those the corpus excludes from fitting (``exclude_from_fit``)."""
    return [c for c in cases if not c.measurement.exclude_from_fit]


def _identified(term: str, cases: Sequence[CorpusCase]) -> bool:
    """Whether ``cases`` carry ``term`` at all: a phase's overheads need a measurement of that phase, a
    generation's factor a decode measurement on that generation, the KV handoff a disaggregated prefill, the
    per-MoE-layer prefill cost a prefill of a model with MoE layers; the GEMM scale a prefill."""
    phases = {c.measurement.phase for c in cases}
    if term == "gemm_efficiency_scale":
        return "prefill" in phases
    if term.startswith("overhead_scale_"):
        generation = term.removeprefix("overhead_scale_")
        return any(c.measurement.phase == "decode" and c.generation == generation for c in cases)
    if term == "kv_handoff_s":
        return any(c.measurement.disaggregated for c in cases)
    if term in ("prefill_moe_layer_overhead_s", "expert_gemm_scale"):
        return any(c.measurement.phase == "prefill" and moe_layers(c.arch)[0] for c in cases)
    return _PHASE_OF[term] in phases


@frozen
class _Batch:
    """Many cases' pieces laid out as arrays, so a fit prices them all at once (``predict``)."""

    unit_gemm_s: Array
    gemm_prior: Array
    gemm_expert: Array
    gemm_memory_s: Array
    gemm_case: NDArray[np.intp]  # the case each GEMM belongs to
    unit_attention_s: Array
    attention_memory_s: Array
    attention_case: NDArray[np.intp]  # the case each attention core belongs to
    constant_s: Array  # per case: other memory, collectives, eager cost (nothing fitted moves them)
    counts: Array  # per case: overhead multipliers (o_req, o_chunk, o_step, o_layer, o_op, o_handoff, o_moe_chunk)
    scale_index: NDArray[np.intp]  # per case: ALL_TERMS index of its decode-overhead factor; -1 for none

    @staticmethod
    def of(pieces: Sequence[_Pieces]) -> _Batch:
        """The pieces of several cases as one batch."""
        constant = [p.other_memory_s + p.fixed_s + p.eager_s for p in pieces]
        return _Batch(
            unit_gemm_s=np.concatenate([p.unit_gemm_s for p in pieces]),
            gemm_prior=np.concatenate([p.gemm_prior for p in pieces]),
            gemm_expert=np.concatenate([p.gemm_expert for p in pieces]),
            gemm_memory_s=np.concatenate([p.gemm_memory_s for p in pieces]),
            gemm_case=np.concatenate([np.full(p.unit_gemm_s.size, i, dtype=np.intp) for i, p in enumerate(pieces)]),
            unit_attention_s=np.concatenate([p.attention_s for p in pieces]),
            attention_memory_s=np.concatenate([p.attention_memory_s for p in pieces]),
            attention_case=np.concatenate(
                [np.full(p.attention_s.size, i, dtype=np.intp) for i, p in enumerate(pieces)]
            ),
            constant_s=np.array(constant, dtype=np.float64),
            counts=np.stack([p.overhead_counts for p in pieces]),
            scale_index=np.array([p.scale_index for p in pieces], dtype=np.intp),
        )

    def predict(self, theta: Array) -> Array:
        """Every case's time, ``theta`` one row of ``ALL_TERMS`` values per case (``_predict_pieces``)."""
        n = self.constant_s.size
        case = self.gemm_case
        eff = _gemm_efficiency(self.gemm_prior, self.gemm_expert, theta[case, 0], theta[case, 10])
        gemm = np.bincount(self.gemm_case, weights=np.maximum(self.unit_gemm_s / eff, self.gemm_memory_s), minlength=n)
        ac = self.attention_case
        attention = np.maximum(self.unit_attention_s / theta[ac, 7], self.attention_memory_s)
        gemm = gemm + np.bincount(ac, weights=attention, minlength=n)
        factor = np.where(self.scale_index >= 0, theta[np.arange(n), np.maximum(self.scale_index, 0)], 1.0)
        prefill = np.einsum("ij,ij->i", self.counts[:, :2], theta[:, 1:3])
        decode = np.einsum("ij,ij->i", self.counts[:, 2:5], theta[:, 3:6])
        prefill = prefill + self.counts[:, 6] * theta[:, 9]  # per MoE layer per chunk
        handoff = self.counts[:, 5] * theta[:, 8]
        return np.asarray(self.constant_s + gemm + prefill + factor * decode + handoff, dtype=np.float64)


def fit_corpus(
    cases: Sequence[CorpusCase],
    engines: Mapping[str, EngineProfile],
    *,
    terms: Sequence[str] = CORPUS_TERMS,
    shared: Sequence[str] = SHARED_TERMS,
    prior_weight: float = DEFAULT_PRIOR_WEIGHT,
    base: RooflineParams | None = None,
    memo: dict[tuple[str, CorpusMeasurement], _Pieces] | None = None,
) -> dict[str, EngineFit]:
    """Fit ``terms`` of every engine of ``engines`` on its measurements among ``cases`` at once, each term of
    ``shared`` one value for all engines (fitted on all their measurements), the others one per engine (module
    docstring); each engine's current terms are the priors (a shared term's prior: the first engine's). A term
    no measurement carries is not fitted (left out of the result); excluded measurements are skipped; an
    engine with no measurement gets no fit."""
    from scipy.optimize import least_squares  # fitting only

    cases = fitted_cases(cases)
    by_engine = {k: [c for c in cases if c.measurement.engine == k] for k in engines}
    by_engine = {k: v for k, v in by_engine.items() if v}
    if not by_engine:
        raise ValueError(f"no measurements to fit engines {', '.join(engines)} on")
    index = {t: i for i, t in enumerate(ALL_TERMS)}
    slots: list[tuple[str | None, str]] = []  # (engine, term) of each solver variable; None: shared
    for t in terms:
        if t in shared and _identified(t, cases):
            slots.append((None, t))
    for k, mine in by_engine.items():
        slots += [(k, t) for t in terms if t not in shared and _identified(t, mine)]
    priors = {k: engine_theta(engines[k]) for k in by_engine}
    first = next(iter(by_engine))
    prior = np.array([priors[k or first][index[t]] for k, t in slots])
    floor = np.maximum(prior * 0.1, 1e-9)
    lower = np.array([_LOWER[index[t]] for _, t in slots])
    upper = np.array([_UPPER[index[t]] for _, t in slots])
    where = {k: np.full(len(ALL_TERMS), -1) for k in by_engine}
    for j, (owner, t) in enumerate(slots):
        for key in by_engine if owner is None else (owner,):
            where[key][index[t]] = j
    order = [(k, _memo_pieces(c, engines[k], base, memo)) for k, mine in by_engine.items() for c in mine]
    batch = _Batch.of([p for _, p in order])
    # Row i of ``slot`` maps ALL_TERMS to case i's solver variable (-1: its engine's prior, in ``fixed``).
    slot = np.stack([where[k] for k, _ in order])
    fixed = np.stack([priors[k] for k, _ in order])
    measured = np.array([p.measured_s for _, p in order])

    def residuals(x: Array) -> Array:
        theta = np.where(slot >= 0, x[np.maximum(slot, 0)], fixed)
        regular = prior_weight * np.log((x + floor) / (prior + floor))
        return np.concatenate([np.log(batch.predict(theta) / measured), regular])

    best, best_cost = None, np.inf
    for start in (prior, prior * 3, prior / 3):
        start = np.clip(start, lower + 1e-12, upper - 1e-12)
        result = least_squares(residuals, start, bounds=(lower, upper), x_scale="jac", xtol=1e-12, ftol=1e-12)
        if result.cost < best_cost:
            best, best_cost = np.asarray(result.x, dtype=np.float64), float(result.cost)
    assert best is not None
    out = {}
    for k, mine in by_engine.items():
        values = {t: float(best[where[k][index[t]]]) for t in terms if where[k][index[t]] >= 0}
        out[k] = EngineFit(engine=k, values=values, fitted_on=tuple(c.measurement.id for c in mine))
    return out


def fit_engine(
    cases: Sequence[CorpusCase],
    engine: EngineProfile,
    *,
    terms: Sequence[str] = FIT_TERMS,
    prior_weight: float = DEFAULT_PRIOR_WEIGHT,
    base: RooflineParams | None = None,
    memo: dict[tuple[str, CorpusMeasurement], _Pieces] | None = None,
) -> EngineFit:
    """Fit ``terms`` (default ``FIT_TERMS``) of ``engine`` to ``cases`` (all taken as its measurements; module
    docstring); ``engine``'s current terms are the priors. Terms of a phase with no measurement are not fitted
    (left out of the result); measurements excluded from fitting are skipped."""
    mine = [replace(c, measurement=replace(c.measurement, engine=engine.key)) for c in cases]
    if not fitted_cases(mine):
        raise ValueError(f"no measurements to fit engine {engine.key} on")
    fits = fit_corpus(
        mine, {engine.key: engine}, terms=terms, shared=(), prior_weight=prior_weight, base=base, memo=memo
    )
    return fits[engine.key]


@frozen
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
    memo: dict[tuple[str, CorpusMeasurement], _Pieces] = {}  # every fold prices the same cases with the same engine
    everything = fit_engine(cases, engine, prior_weight=prior_weight, base=base, memo=memo)
    fitted = everything.apply(engine)
    points: list[HeldOutPoint] = []
    for source in dict.fromkeys(c.measurement.source for c in cases):
        keep = fitted_cases([c for c in cases if c.measurement.source != source])
        held = (
            fit_engine(keep, engine, prior_weight=prior_weight, base=base, memo=memo).apply(engine) if keep else engine
        )
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


#: A fit of every engine on some cases, the source left out (None: none): the fitted terms and the profiles to
#: predict with (``cross_validate_corpus``'s ``fold_fit``).
FoldFit = Callable[[Sequence[CorpusCase], str | None], tuple[dict[str, EngineFit], dict[str, EngineProfile]]]


def cross_validate_corpus(
    cases: Sequence[CorpusCase],
    engines: Mapping[str, EngineProfile],
    *,
    terms: Sequence[str] = CORPUS_TERMS,
    shared: Sequence[str] = SHARED_TERMS,
    prior_weight: float = DEFAULT_PRIOR_WEIGHT,
    base: RooflineParams | None = None,
    fold_fit: FoldFit | None = None,
) -> tuple[dict[str, EngineFit], tuple[HeldOutPoint, ...]]:
    """``fit_corpus`` on every case, then leave each source out (of every engine at once: a source that timed
    several engines leaves all of them) and predict its cases by the terms fitted on the other sources; an
    engine left with no measurement is predicted by its priors (the profile as given). Excluded measurements
    are predicted but fitted nowhere. ``fold_fit`` replaces the plain ``fit_corpus`` of every fold and of the
    all-source fit (a fit that also sets terms from other evidence, redone in each fold so that no fold sees its
    own source)."""
    options: dict[str, Any] = {"terms": terms, "shared": shared, "prior_weight": prior_weight, "base": base}

    def plain(
        keep: Sequence[CorpusCase], held_out: str | None
    ) -> tuple[dict[str, EngineFit], dict[str, EngineProfile]]:
        # The all-source fit refuses an empty corpus (fit_corpus); a fold left with nothing keeps the priors.
        fits = fit_corpus(keep, engines, **options) if held_out is None or fitted_cases(keep) else {}
        return fits, {k: fits[k].apply(e) if k in fits else e for k, e in engines.items()}

    fit = fold_fit or plain
    everything, fitted = fit(cases, None)
    points: list[HeldOutPoint] = []
    for source in dict.fromkeys(c.measurement.source for c in cases):
        keep = fitted_cases([c for c in cases if c.measurement.source != source])
        _, held = fit(keep, source)
        for c in cases:
            m = c.measurement
            if m.source == source:
                points.append(
                    HeldOutPoint(
                        id=m.id,
                        source=source,
                        engine=m.engine,
                        phase=m.phase,
                        measured_s=m.measured_s,
                        held_out_s=predict(c, held[m.engine], base),
                        in_sample_s=predict(c, fitted[m.engine], base),
                        excluded=m.exclude_from_fit,
                    )
                )
    return everything, tuple(points)
