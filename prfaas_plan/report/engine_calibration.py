"""Write a calibrated engine profile (``studies.bench_calibration``) as YAML that ``io.engine_profile`` loads
back and a pool names (``engine: path``): the base engine's terms with the fitted ones replaced, the ``fit``
section, and a ``calibration`` section with its provenance (each file's path, SHA-256, format and what was read
from it), every measurement's residuals (in-sample and held out) and the error band per phase."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from prfaas_plan.io.engine_profile import OPTIONAL_TERMS, TERMS
from prfaas_plan.report.files import Owner, write_file
from prfaas_plan.studies.bench_calibration import FOLDS, MAX_LEAVE_ONE_OUT, Calibration

HEADER = "# Engine profile calibrated by prfaas-plan calibrate"
OWNER = Owner(what="an engine profile written by prfaas-plan calibrate", signatures=(HEADER.encode(),))
#: The loader's bound on the GEMM efficiency scale; a fit above it already prices every GEMM at efficiency 1.
MAX_SCALE = 10.0


def _number(value: float) -> float:
    return float(f"{float(value):.6g}")


def calibration_document(cal: Calibration) -> dict[str, Any]:
    """The profile as plain data (the layout of ``hardware_profiles/serving/engines/*.yaml`` plus
    ``calibration``)."""
    base, engine = cal.base, cal.engine
    sources = dict(base.sources)
    fitted = set(cal.fit.values)
    fit_source = (
        f"calibrated by prfaas-plan calibrate on {len(cal.points)} measurements of {cal.model} on {cal.gpus} x "
        f"{cal.hardware} (calibration.measurements), least squares on log(predicted / measured) with the base "
        f"engine {base.key}'s value as a weak prior (prfaas_plan/physics/corpus_fit.py)"
    )
    terms: dict[str, Any] = {}
    # Every term the loader reads, optional ones too: a term left out would load as 0 and price other than the
    # calibration was fitted with (the base engine's per-MoE-layer prefill cost, say).
    for term in (name for name, _, _ in (*TERMS, *OPTIONAL_TERMS)):
        value = getattr(engine, term)
        entry: dict[str, Any] = {"value": int(value) if term == "prefill_chunk_tokens" else _number(value)}
        if term in fitted:
            entry["prior"] = _number(getattr(base, term))
            entry["source"] = fit_source
        else:
            entry["source"] = f"base engine {base.key}: {sources.get(term, 'no source given')}"
        terms[term] = entry
    scale = engine.gemm_efficiency_scale
    table: dict[str, dict[str, float]] = {}
    for generation, dtype, efficiency in base.gemm_efficiency:
        table.setdefault(generation, {})[dtype] = efficiency
    scale_note = "" if scale <= MAX_SCALE else f" (fitted {scale:.4g}, written as {MAX_SCALE:g}: every GEMM at 1)"
    gemm = {
        "scale": _number(min(scale, MAX_SCALE)),
        "scale_prior": _number(base.gemm_efficiency_scale),
        # The routed experts' factor is not fitted by a calibration (one deployment's benchmarks of one model
        # cannot tell it from the dense rate): the base engine's, kept so the profile prices as it was fitted.
        "expert_scale": _number(engine.expert_gemm_scale),
        "expert_scale_prior": _number(base.expert_gemm_scale),
        "source": (fit_source if "gemm_efficiency_scale" in fitted else f"base engine {base.key}")
        + scale_note
        + f"; prior table of base engine {base.key}: {sources.get('gemm_efficiency', '')}",
        "prior": table,
    }
    document: dict[str, Any] = {
        "engine": {
            "key": f"{base.key}-calibrated",
            "name": f"{base.name} calibrated on {cal.gpus} x {cal.hardware} ({cal.model})",
            "source": f"prfaas-plan calibrate over {', '.join(b.file for b in cal.files)}; base engine {base.key} "
            f"({base.file})",
        },
        "terms": terms,
        "gemm_efficiency": gemm,
    }
    if engine.overhead_scale:  # the base engine's decode-overhead factors by generation, kept as they are
        scales: dict[str, Any] = {g: {"value": _number(v)} for g, v in engine.overhead_scale}
        scales["source"] = f"base engine {base.key}: {sources.get('overhead_scale', 'no source given')}"
        document["overhead_scale"] = scales
    document["fit"] = {
        "source": fit_source,
        "corpus": "calibration.measurements (the user's benchmark results)",
        "fitted": list(cal.fit.values),
        "fitted_on": list(cal.fit.fitted_on),
    }
    document["calibration"] = calibration_section(cal)
    return document


def calibration_section(cal: Calibration) -> dict[str, Any]:
    """Provenance, residuals and band of a calibration (also the ``--json`` payload's core)."""
    return {
        "tool": "prfaas-plan calibrate",
        "base_engine": {"key": cal.base.key, "file": cal.base.file},
        "model": cal.model,
        "hardware": cal.hardware,
        "gpus": cal.gpus,
        "generation": cal.generation,
        "weights_dtype": cal.weights_dtype,
        "kv_dtype": cal.kv_dtype,
        "assumptions": list(cal.assumptions),
        "notes": list(cal.notes),
        "fitted_values": {k: _number(v) for k, v in cal.fit.values.items()},
        "files": [
            {
                "path": b.file,
                "sha256": b.sha256,
                "format": b.format,
                "runs": b.runs,
                "synthetic": b.synthetic,
                "read": [p.id for p in cal.points if p.file == b.file],
                "not_used": list(b.skipped),
            }
            for b in cal.files
        ],
        "measurements": [
            {
                "id": p.id,
                "file": p.file,
                "run": p.run,
                "phase": p.phase,
                "batch": p.batch,
                "tokens": _number(p.tokens),
                "measured_s": _number(p.measured_s),
                "statistic": p.statistic,
                "assumption": p.assumption,
                "fitted_s": _number(p.fitted_s),
                "fitted_ratio": round(p.fitted_s / p.measured_s, 4),
                "held_out_s": _number(p.held_out_s),
                "held_out_ratio": round(p.held_out_s / p.measured_s, 4),
            }
            for p in cal.points
        ],
        "error_band": {
            "coverage": cal.coverage,
            "source": f"prfaas-plan calibrate: the {cal.coverage:.0%} quantile of |log(held-out / measured)| per "
            f"phase (leave-one-out; {FOLDS}-fold cross-validation beyond {MAX_LEAVE_ONE_OUT} measurements), or the "
            "base engine's cross-validated band where a phase has too few points",
            **{
                phase: {
                    "factor": round(band.factor, 4),
                    "points": band.points,
                    "basis": band.basis,
                    **({} if band.tokens is None else {"tokens": [_number(v) for v in band.tokens]}),
                    **({} if band.batch is None else {"batch": [_number(v) for v in band.batch]}),
                    **({} if not band.kinds else {"kinds": _kinds(band.kinds)}),
                    **({} if not band.generations else {"generations": dict(band.generations)}),
                }
                for phase, band in cal.bands.items()
            },
        },
    }


def _kinds(kinds: tuple[tuple[str, str, int], ...]) -> dict[str, dict[str, int]]:
    """A band's counts per model, by kind, as the error-bands file writes them."""
    out: dict[str, dict[str, int]] = {}
    for kind, model, n in kinds:
        out.setdefault(kind, {})[model] = n
    return out


def write_calibration(cal: Calibration, path: str | Path, *, force: bool = False) -> Path:
    """Write the calibrated profile to ``path`` (atomic, locked; an existing file is replaced only when it is
    this writer's own output and ``force`` is given, or empty)."""
    comment = (
        f"{HEADER} from {len(cal.files)} result file(s); the calibration section says what was read and how well\n"
        f"# it fitted. Name it from a scenario's pool: engine: {Path(path).name}\n"
    )
    text = comment + yaml.safe_dump(calibration_document(cal), sort_keys=False, width=110, allow_unicode=True)
    return write_file(path, text, owner=OWNER, force=force)
