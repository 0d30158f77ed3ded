"""Calibrate an engine profile on a user's own benchmark results (``prfaas-plan calibrate``).

The result files (``io.bench_results``) give batch-1 prefill times and decode steps of one model on one
instance; the engine's fitted terms (``physics.corpus_fit.FIT_TERMS``: the GEMM efficiency scale and the
prefill and decode overheads) are refitted on them by the corpus fit's least squares, with the base engine
profile's values as the weak priors (a term the measurements cannot identify stays near the base engine's).

How sure: every measurement is also predicted by the terms fitted without it (leave-one-out; beyond
``MAX_LEAVE_ONE_OUT`` measurements, ``FOLDS``-fold cross-validation, measurement i in fold i mod ``FOLDS``, so
that the cost stays that of ``FOLDS`` + 1 fits; at most ``MAX_MEASUREMENTS`` are taken). The error band of
a phase is the ``coverage`` quantile of |log(held-out / measured)| over its measurements when there are at least
``MIN_BAND_POINTS`` of them; with fewer, the base engine's cross-validated band (``io.error_bands``) stands, widened
to this calibration's own worst in-sample error where that is wider (a band never claims less error than the fit
shows on its own points).

A measurement faster than the instance could run it with every FLOP and byte at the datasheet peak and no
overhead (``peak_bound_s``, less ``PEAK_SLACK``) is refused: no fit can explain it, and it is a prefix-cache hit,
another unit, another model or more GPUs than ``--gpus`` said.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InputError, Problem
from prfaas_plan.io.bench_results import MAX_PREFILL_OCCUPANCY, BenchFile, TooManyMeasurements, read_bench_file
from prfaas_plan.io.engine_profile import OPTIONAL_TERMS, TERMS, generation_of, load_named_engine
from prfaas_plan.io.error_bands import engine_band
from prfaas_plan.io.names import load_named_hardware, load_named_model
from prfaas_plan.physics.corpus_fit import CorpusCase, EngineFit, cross_validate_engine, predict
from prfaas_plan.physics.engine import with_dtypes
from prfaas_plan.physics.roofline import Instance, missing_peak
from prfaas_plan.spec.engine import CorpusMeasurement, EngineProfile
from prfaas_plan.spec.uncertainty import PhaseBand, model_kind

#: Fewest measurements of a phase whose leave-one-out errors make that phase's band.
MIN_BAND_POINTS = 3
#: Most measurements cross-validated one at a time; beyond, ``FOLDS`` folds (each fit is a least-squares solve
#: over every measurement, so leave-one-out costs grow with the square of their number: 400 took 30 s).
MAX_LEAVE_ONE_OUT = 40
FOLDS = 20
#: Most measurements one calibration takes (a sweep of 500 serving runs gives 1,000; this many take about 7 s).
MAX_MEASUREMENTS = 1000
#: Default share of held-out errors inside the band (the 80 % quantile of |log ratio|).
DEFAULT_COVERAGE = 0.8
#: A measurement may beat its datasheet-peak time by this share before it is refused (datasheets round; boost
#: clocks run a few per cent above the rated figure).
PEAK_SLACK = 0.1

ASSUMPTIONS = (
    "CUDA graphs on for decode (the engines' default); no expert parallelism; tensor parallelism over --gpus",
    "the terms the measurements cannot tell apart (e.g. the per-step and per-layer decode costs of one model) are "
    "split as the base engine's priors split them; their sum is what the measurements fix",
    "terms other than the fitted ones (chunk size, collective latencies, attention efficiency, grouped-GEMM curve, "
    "eager costs) stay at the base engine's values",
)


@frozen
class CalibrationPoint:
    """One measurement with its in-sample fit and its leave-one-out prediction, seconds."""

    id: str
    file: str
    run: int
    phase: str
    batch: int
    tokens: float
    measured_s: float
    statistic: str
    assumption: str
    fitted_s: float
    held_out_s: float


@frozen
class Calibration:
    """An engine profile calibrated on result files: the fitted profile, the files and what was read from each,
    every point's residuals and the error band per phase."""

    base: EngineProfile
    engine: EngineProfile
    fit: EngineFit
    files: tuple[BenchFile, ...]
    points: tuple[CalibrationPoint, ...]
    model: str
    hardware: str
    gpus: int
    generation: str
    weights_dtype: str
    kv_dtype: str
    coverage: float
    bands: dict[str, PhaseBand]
    assumptions: tuple[str, ...]
    #: What the reader must check before trusting the profile (a file recording another model than --model).
    notes: tuple[str, ...] = ()


def _band(
    points: Sequence[CalibrationPoint],
    phase: str,
    coverage: float,
    base: EngineProfile,
    held_out_by: str,
    measured: tuple[str, str, str],
) -> PhaseBand:
    """The phase's band from the held-out errors of its measurements (the base engine's band where there are
    too few), counting them as of ``measured`` = (model kind, model, GPU generation): a pool that prices
    another model or generation with this profile is outside a band calibrated on one."""
    mine = [p for p in points if p.phase == phase]
    kind, model, generation = measured
    if len(mine) >= MIN_BAND_POINTS:
        logs = np.abs(np.log([p.held_out_s / p.measured_s for p in mine]))
        tokens = [float(p.tokens) for p in mine]
        batches = [float(p.batch) for p in mine]
        return PhaseBand(
            factor=float(np.exp(np.quantile(logs, coverage))),
            points=len(mine),
            basis=f"{held_out_by} over this calibration's {len(mine)} {phase} measurements, {coverage:.0%} "
            "quantile of |log(predicted / measured)|",
            tokens=(min(tokens), max(tokens)),
            batch=(min(batches), max(batches)) if phase == "decode" else None,
            kinds=((kind, model, len(mine)),),
            generations=((generation, len(mine)),),
        )
    inherited = engine_band(base.key, phase)
    own = max((abs(float(np.log(p.fitted_s / p.measured_s))) for p in mine), default=0.0)
    widened = float(np.exp(own)) > inherited.factor
    basis = (
        f"fewer than {MIN_BAND_POINTS} {phase} measurements here ({len(mine)}): the base engine {base.key}'s band "
        f"({inherited.basis})"
    )
    if widened:
        basis += (
            f", widened to this calibration's own worst in-sample error, x/÷ {np.exp(own):.3g}: the fit misses its "
            "own measurements by more than the base band"
        )
    return PhaseBand(
        factor=max(inherited.factor, float(np.exp(own))),
        points=inherited.points,
        basis=basis,
        tokens=inherited.tokens,
        batch=inherited.batch,
        kinds=inherited.kinds,
        generations=inherited.generations,
    )


def _labels(files: Sequence[str]) -> list[str]:
    """Each file's name in its measurements' ids, unique among ``files`` (``_read_files`` refuses one file given
    twice): its base name, else (two files of one name in different folders) its path as given."""
    names = [Path(f).name for f in files]
    return [n if names.count(n) == 1 else f for n, f in zip(names, files, strict=True)]


def _read_files(paths: Sequence[str | Path], max_prefill_occupancy: float) -> list[BenchFile]:
    """Read ``paths`` in order. One file given twice (the same path, or the same bytes under another name) is an
    InputError on FILES naming both: its measurements would count twice, and leave-one-out would keep each
    one's twin in the fit, narrowing the error band for nothing. Reading stops, with an InputError on FILES,
    as soon as the running count of measurements passes ``MAX_MEASUREMENTS`` (no file after it is opened)."""
    files: list[BenchFile] = []
    by_path: dict[str, str] = {}
    by_hash: dict[str, str] = {}
    read = 0
    for path in paths:
        shown = str(path)
        real = os.path.realpath(path)
        if real in by_path:
            raise _given_twice(by_path[real], shown, "are the same file")
        try:
            bench = read_bench_file(
                path, shown, max_prefill_occupancy=max_prefill_occupancy, max_measurements=MAX_MEASUREMENTS - read
            )
        except TooManyMeasurements as exc:
            where = shown if exc.line is None else f"{shown} line {exc.line}"
            message = (
                f"{read + exc.count:,} measurements read by {where}, more than the {MAX_MEASUREMENTS:,} one "
                "calibration takes (reading stopped there): give fewer"
            )
            raise InputError(Problem(field="FILES", message=message)) from None
        read += len(bench.measurements)
        if bench.sha256 in by_hash:
            raise _given_twice(by_hash[bench.sha256], shown, f"hold the same bytes (sha256 {bench.sha256[:16]}…)")
        by_path[real], by_hash[bench.sha256] = shown, shown
        files.append(bench)
    return files


def peak_bound_s(case: CorpusCase, base: EngineProfile) -> float:
    """The fastest ``case`` could run on its instance: every GEMM and attention core at the datasheet's peak
    FLOP/s with no small-M tile, every byte at its peak bandwidth, collectives at their link's rate with no
    latency, no serving overhead (every term of the loader's in seconds at 0; ``base``'s chunk size kept)."""
    from dataclasses import replace

    from prfaas_plan.spec.hardware import RooflineParams

    times: dict[str, Any] = {n: 0.0 for n, _, _ in (*TERMS, *OPTIONAL_TERMS) if n.endswith("_s")}  # costs, latencies
    peak = replace(
        base,
        gemm_efficiency_scale=1e6,  # every prior x scale, capped at 1
        expert_gemm_scale=1.0,
        attention_efficiency=1.0,
        expert_gemm_half_rows=0.0,
        **times,
    )
    floor = RooflineParams(memory_efficiency=1.0, communication_efficiency=1.0).kernel_only
    return predict(case, peak, base=floor)


def _refuse_faster_than_peak(
    cases: Sequence[CorpusCase], origin: dict[str, tuple[str, int]], base: EngineProfile, hardware: str
) -> None:
    """InputError on the first measurement faster than ``peak_bound_s`` allows (less ``PEAK_SLACK``)."""
    for case in cases:
        m = case.measurement
        bound = peak_bound_s(case, base)
        if m.measured_s < (1.0 - PEAK_SLACK) * bound:
            what = (
                f"a prefill of {m.tokens:,.0f} tokens"
                if m.phase == "prefill"
                else f"a decode step of batch {m.batch} at {m.tokens:,.0f} tokens of context"
            )
            message = (
                f"{what} measured {m.measured_s * 1e3:.4g} ms, faster than {m.gpus} x {hardware} can run it "
                f"even with every FLOP and byte at the datasheet peak and no overhead ({bound * 1e3:.4g} ms): a "
                "prefix-cache hit, another unit, another model than --model or more GPUs than --gpus?"
            )
            file, run = origin[m.id]  # the run's line (JSONL), else 1
            raise InputError(Problem(file=file, line=run, message=message))


def _squeezed(name: str) -> str:
    return "".join(c for c in name.lower() if c.isalnum())


def model_notes(files: Sequence[BenchFile], key: str, name: str) -> tuple[str, ...]:
    """A note for each model name a file records that is not the card's (``key`` or ``name``, compared in lower
    case without punctuation, either inside the other: a path such as ``models--MiniMaxAI--MiniMax-M2.5/...``
    names MiniMax-M2.5), and one where the files record different models."""
    mine = {_squeezed(key), _squeezed(name)} - {""}
    notes = []
    seen: dict[str, str] = {}
    for bench in files:
        for recorded in bench.models:
            squeezed = _squeezed(recorded)
            seen.setdefault(squeezed, recorded)
            if squeezed and not any(m in squeezed or squeezed in m for m in mine):
                notes.append(
                    f"{bench.file} records the model '{recorded}', not --model {key} ({name}): its times are "
                    f"priced with {key}'s architecture; check the two are one model, or give the card of the one "
                    "timed (prfaas-plan model import)"
                )
    if len(seen) > 1:
        listed = ", ".join(f"'{v}'" for v in seen.values())
        notes.append(f"the files record {len(seen)} different models ({listed}); one calibration fits one model")
    return tuple(notes)


def _given_twice(first: str, second: str, how: str) -> InputError:
    which = f"{first} is given twice" if first == second else f"{first} and {second} {how}"
    message = f"{which}: its measurements would count twice and narrow the error band; give it once"
    return InputError(Problem(field="FILES", message=message))


def calibrate_files(
    paths: Sequence[str | Path],
    *,
    model: str,
    hardware: str,
    gpus: int,
    engine: str,
    weights_dtype: str | None = None,
    kv_dtype: str | None = None,
    coverage: float = DEFAULT_COVERAGE,
    max_prefill_occupancy: float = MAX_PREFILL_OCCUPANCY,
) -> Calibration:
    """Read ``paths``, fit ``engine``'s terms on what they measured of ``model`` on ``gpus`` x ``hardware`` and
    cross-validate (module docstring). InputError naming the file, key or flag for anything unusable."""
    files = _read_files(paths, max_prefill_occupancy)
    card = load_named_model(model, "--model")
    profile = load_named_hardware(hardware, "--hardware")
    base = load_named_engine(engine, "--engine")
    if card.architecture is None:
        raise InputError(Problem(field="--model", message=f"the model card '{card.key}' has no architecture to price"))
    why = missing_peak(card.architecture, profile.accelerator)
    if why is not None:
        raise InputError(Problem(field="--hardware", message=why))
    arch = with_dtypes(card.architecture, weights_dtype, kv_dtype)
    instance = Instance(accelerator=profile.accelerator, gpus=gpus)
    generation = generation_of(profile.accelerator.key)
    cases: list[CorpusCase] = []
    origin: dict[str, tuple[str, int]] = {}  # measurement id -> (its file, its run's line)
    total = sum(len(b.measurements) for b in files)  # at most MAX_MEASUREMENTS (_read_files)
    one_out = total <= MAX_LEAVE_ONE_OUT
    held_out_by = "leave-one-out" if one_out else f"{FOLDS}-fold cross-validation (measurement i in fold i mod {FOLDS})"
    for bench, label in zip(files, _labels([b.file for b in files]), strict=True):
        for k, m in enumerate(bench.measurements, start=1):
            ident = f"{label}#{m.run}-{m.phase}-{k}"
            measurement = CorpusMeasurement(
                id=ident,
                # The fold: each measurement its own (cross-validation leaves one out at a time), or FOLDS folds
                source=ident if one_out else f"fold-{len(cases) % FOLDS + 1}",
                engine=base.key,
                engine_version="unknown",
                model=card.key,
                hardware=profile.accelerator.key,
                gpus=gpus,
                tensor_parallel=gpus,
                expert_parallel=1,
                weights_dtype=arch.dtypes.weights,
                kv_dtype=arch.dtypes.kv_cache,
                cuda_graphs=True,
                phase=m.phase,
                batch=m.batch,
                tokens=m.tokens,
                measured_s=m.measured_s,
                metric=m.statistic,
                derivation=m.assumption,
                includes_request_overhead=m.includes_request_overhead,
            )
            cases.append(CorpusCase(measurement=measurement, arch=arch, instance=instance, generation=generation))
            origin[ident] = (bench.file, m.run)
    if not cases:
        reasons = "; ".join(f"{b.file}: {', '.join(b.skipped) or 'nothing timed'}" for b in files)
        raise InputError(Problem(message=f"no measurement usable for a calibration ({reasons})"))
    _refuse_faster_than_peak(cases, origin, base, profile.accelerator.key)
    fit, held = cross_validate_engine(cases, base)
    by_id = {p.id: p for p in held}
    points = []
    for case in cases:
        cm = case.measurement
        h = by_id[cm.id]
        points.append(
            CalibrationPoint(
                id=cm.id,
                file=origin[cm.id][0],
                run=origin[cm.id][1],
                phase=cm.phase,
                batch=cm.batch,
                tokens=cm.tokens,
                measured_s=cm.measured_s,
                statistic=cm.metric,
                assumption=cm.derivation,
                fitted_s=h.in_sample_s,
                held_out_s=h.held_out_s,
            )
        )
    measured = (model_kind(arch), card.key, generation)
    bands = {phase: _band(points, phase, coverage, base, held_out_by, measured) for phase in ("prefill", "decode")}
    return Calibration(
        base=base,
        engine=fit.apply(base),
        fit=fit,
        files=tuple(files),
        points=tuple(points),
        model=card.key,
        hardware=profile.accelerator.key,
        gpus=gpus,
        generation=generation,
        weights_dtype=arch.dtypes.weights,
        kv_dtype=arch.dtypes.kv_cache,
        coverage=coverage,
        bands=bands,
        assumptions=ASSUMPTIONS,
        notes=model_notes(files, card.key, card.name),
    )
