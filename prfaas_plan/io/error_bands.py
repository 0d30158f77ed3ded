"""Error bands of the pricings (``hardware_profiles/serving/error_bands.yaml``, written by
``tests/benchmarks/error_bands.py`` from the corpus's cross-validation) and of calibrated engine profiles (their
``calibration.error_band`` section, written by ``prfaas-plan calibrate``): what ``spec.uncertainty.TimeBand`` a
roofline or calibrated pool carries.

- a built-in engine (``sglang``, ``vllm``, ``trtllm``): its leave-one-source-out cross-validation per phase;
- no engine (the serving defaults): the defaults' error on every corpus point (none of them fitted);
- an engine profile's path: its calibration's band when it has one; else the band of the built-in engine its
  ``engine.key`` names, where it prices as that built-in (every term and efficiency equal: a copy); else (a
  hand-written or hand-edited profile nobody cross-validated) the widest built-in band per phase, named as
  borrowed.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from prfaas_plan.errors import InputError, Problem
from prfaas_plan.io.engine_profile import engine_path, engines_dir
from prfaas_plan.io.paths import builtin_root, display_path
from prfaas_plan.io.yamlsrc import Checker, Document, Section, load_yaml
from prfaas_plan.spec.uncertainty import KIND_WORDS, PhaseBand, TimeBand, span_words

BANDS_FILE = ("hardware_profiles", "serving", "error_bands.yaml")
#: The key of the serving defaults' band (a pool with no ``engine:``).
DEFAULTS = "defaults"
PHASES = ("prefill", "decode")
#: A phase band's optional keys: the range its measurements spanned, and what they were of.
PHASE_OPTIONAL = ("tokens", "batch", "kinds", "generations")
#: Largest band factor a file may state (a factor of 1,000 is already no information).
MAX_FACTOR = 1e3


def _phase(sec: Section, phase: str) -> PhaseBand | None:
    """One phase's band; its basis says the range its measurements spanned where the file gives it."""
    factor = sec.number("factor", ge=1.0, le=MAX_FACTOR)
    points = sec.number("points", ge=0, le=1e9, integer=True)
    basis = sec.string("basis")
    tokens = _span(sec, "tokens")
    batch = _span(sec, "batch")
    if factor is None or points is None or basis is None:
        return None
    kinds = _models(sec)
    generations = _counts(sec, "generations")
    for name, counted in (("kinds", sum(n for _, _, n in kinds)), ("generations", sum(n for _, n in generations))):
        if counted and counted != points:
            sec.checker.report((*sec.path, name), f"counts {counted} measurements, but points is {points}")
    if tokens is not None:
        basis += f", on {span_words(phase, tokens)}"
    if batch is not None:
        basis += f" and batches of {batch[0]:,.0f}-{batch[1]:,.0f}"
    return PhaseBand(
        factor=float(factor),
        points=int(points),
        basis=basis,
        tokens=tokens,
        batch=batch,
        kinds=kinds,
        generations=generations,
    )


def _counts(sec: Section, key: str) -> tuple[tuple[str, int], ...]:
    """An optional map of names to how many of the band's measurements each holds (GPU generations); () when
    absent."""
    if not sec.has(key):
        return ()
    raw = sec.raw(key)
    if not isinstance(raw, dict) or not raw or len(raw) > 64 or not all(_is_count(k, v) for k, v in raw.items()):
        sec.checker.report((*sec.path, key), "expected a map of names to counts (whole numbers >= 0)")
        return ()
    return tuple((str(k), int(v)) for k, v in raw.items())


def _models(sec: Section) -> tuple[tuple[str, str, int], ...]:
    """The optional ``kinds``: per model kind (``spec.uncertainty.KIND_WORDS``), a map of models to how many of
    the band's measurements were of each; () when absent."""
    if not sec.has("kinds"):
        return ()
    raw = sec.raw("kinds")
    if (
        not isinstance(raw, dict)
        or not raw
        or not all(k in KIND_WORDS for k in raw)
        or not all(
            isinstance(v, dict) and v and len(v) <= 1000 and all(_is_count(m, n) for m, n in v.items())
            for v in raw.values()
        )
    ):
        kinds = ", ".join(KIND_WORDS)
        sec.checker.report((*sec.path, "kinds"), f"expected {kinds}, each a map of models to counts (whole numbers)")
        return ()
    return tuple((str(k), str(m), int(n)) for k, v in raw.items() for m, n in v.items())


def _is_count(name: object, value: object) -> bool:
    return (
        isinstance(name, str)
        and 0 < len(name) <= 64
        and isinstance(value, int)
        and not isinstance(value, bool)
        and 0 <= value < 1e9
    )


def _span(sec: Section, key: str) -> tuple[float, float] | None:
    """An optional ``[low, high]`` of positive numbers (the range a band's measurements spanned)."""
    if not sec.has(key):
        return None
    raw = sec.raw(key)
    if (
        not isinstance(raw, list)
        or len(raw) != 2
        or not all(isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < 1e9 for v in raw)
        or raw[0] > raw[1]
    ):
        sec.checker.report((*sec.path, key), "expected [low, high]: two positive numbers, low <= high")
        return None
    return float(raw[0]), float(raw[1])


@cache
def load_error_bands(path: Path | None = None) -> tuple[float, str, dict[str, dict[str, PhaseBand]]]:
    """(coverage, source, key -> phase -> band) of the built-in pricings."""
    path = path or builtin_root().joinpath(*BANDS_FILE)
    doc = load_yaml(path, display_path(path))
    checker = Checker(doc)
    root = checker.root(required=("source", "coverage", "bands"))
    source = root.string("source")
    coverage = root.number("coverage", gt=0, le=0.999)
    keys = tuple(str(k) for k in (root.raw("bands") or {}))
    table = root.sub("bands", required=(DEFAULTS,), optional=keys)
    out: dict[str, dict[str, PhaseBand]] = {}
    for key in keys:
        phases = table.sub(key, required=PHASES)
        out[key] = {}
        for phase in PHASES:
            sec = phases.sub(
                phase,
                required=("factor", "points", "basis"),
                optional=("sources", "median_factor", "median_ratio", *PHASE_OPTIONAL),
            )
            band = _phase(sec, phase)
            if band is not None:
                out[key][phase] = band
    checker.raise_if_any()
    assert coverage is not None and source is not None
    return float(coverage), source, out


def engine_band(key: str, phase: str) -> PhaseBand:
    """The band of built-in pricing ``key`` (an engine, or ``defaults``) in ``phase``; a key without one: the
    widest built-in engine band of that phase."""
    _, _, table = load_error_bands()
    if key in table:
        return table[key][phase]
    engines = [(k, b[phase]) for k, b in table.items() if k != DEFAULTS]
    widest_key, widest = max(engines, key=lambda kb: kb[1].factor)
    return PhaseBand(
        factor=widest.factor,
        points=widest.points,
        basis=f"no cross-validation of '{key}': the widest built-in engine band ({widest_key}: {widest.basis})",
        tokens=widest.tokens,
        batch=widest.batch,
        kinds=widest.kinds,
        generations=widest.generations,
        borrowed_from=widest_key,
    )


def builtin_band(key: str) -> TimeBand:
    """The time band of built-in pricing ``key`` (``engine_band`` per phase)."""
    coverage, source, _ = load_error_bands()
    return TimeBand(
        prefill=engine_band(key, "prefill"), decode=engine_band(key, "decode"), coverage=coverage, source=source
    )


def pool_band(engine: str | None, base: Path) -> TimeBand:
    """The band of a roofline or calibrated pool whose ``engine:`` is ``engine`` (None: the serving defaults; a
    profile's path is looked up next to the scenario in ``base`` first, as the scenario loader does)."""
    if engine is None:
        return builtin_band(DEFAULTS)
    local = base / engine
    path = local if engine.endswith((".yaml", ".yml")) and local.is_file() else engine_path(engine)
    if path.parent.resolve() == engines_dir().resolve():
        return builtin_band(path.stem)
    return profile_band(path)


#: EngineProfile fields that say where a profile came from, not how it prices.
_PROVENANCE = ("key", "name", "sources", "priors", "fitted", "fitted_on", "file")


def _terms_apart(doc: Document, key: str) -> list[str]:
    """The pricing fields (terms, GEMM table, scales) in which the profile parsed as ``doc`` differs from built-in
    engine ``key``'s (none where it prices as the built-in)."""
    from dataclasses import fields

    from prfaas_plan.io.engine_profile import engine_from_document, load_named_engine

    mine, builtin = engine_from_document(doc), load_named_engine(key)
    names = [f.name for f in fields(mine) if f.name not in _PROVENANCE]
    return [n for n in names if getattr(mine, n) != getattr(builtin, n)]


def profile_band(path: Path) -> TimeBand:
    """The band of the engine profile at ``path``: its calibration's, else ``builtin_band`` of its
    ``engine.key`` (module docstring). InputError naming the file and field for a malformed band."""
    doc = load_yaml(path, display_path(path))
    checker = Checker(doc)
    data = doc.data if isinstance(doc.data, dict) else {}
    calibration = data.get("calibration")
    if not isinstance(calibration, dict) or "error_band" not in calibration:
        head = data.get("engine")
        key = str(head.get("key")) if isinstance(head, dict) else path.stem
        _, _, table = load_error_bands()
        if key in table and key != DEFAULTS:
            differ = _terms_apart(doc, key)
            if differ:  # a copy of a built-in with terms edited: its cross-validation is not this profile's
                verb = "differs" if len(differ) == 1 else "differ"
                shown = ", ".join(differ[:3]) + (f" and {len(differ) - 3} more" if len(differ) > 3 else "")
                return builtin_band(f"{display_path(path)}, whose {shown} {verb} from built-in {key}'s")
        return builtin_band(key)
    root = checker.root(optional=tuple(str(k) for k in data))
    band = root.sub("calibration", optional=tuple(str(k) for k in calibration)).sub(
        "error_band", required=("coverage", "source", *PHASES)
    )
    coverage = band.number("coverage", gt=0, le=0.999)
    source = band.string("source")
    phases = {
        p: _phase(band.sub(p, required=("factor", "points", "basis"), optional=PHASE_OPTIONAL), p) for p in PHASES
    }
    checker.raise_if_any()
    if coverage is None or source is None or phases["prefill"] is None or phases["decode"] is None:
        raise InputError(Problem(file=doc.file, field="calibration.error_band", message="incomplete"))
    return TimeBand(prefill=phases["prefill"], decode=phases["decode"], coverage=float(coverage), source=source)
