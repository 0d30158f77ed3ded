"""Engine profiles (``hardware_profiles/serving/engines/*.yaml``), the accelerator generations they price GEMM
efficiency by (``hardware_profiles/serving/generations.yaml``) and the public measurement corpus they are fitted
on (``hardware_profiles/serving/corpus/*.yaml``): loaders that name file, line and field of every problem. (The
writers that record a fit in a profile are the refit's own, in ``tests/benchmarks/corpus_cv.py``: ``io`` reads
only.)"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path

from prfaas_plan.errors import InputError, Problem
from prfaas_plan.io.limits import MAX_GPUS_PER_INSTANCE, MAX_STEP_S, MAX_TOKENS
from prfaas_plan.io.paths import builtin_root, display_path
from prfaas_plan.io.yamlsrc import Checker, Document, Section, load_yaml, suggest
from prfaas_plan.spec.engine import GENERATIONS, CorpusMeasurement, EngineProfile

ENGINES_DIR = ("hardware_profiles", "serving", "engines")
GENERATIONS_FILE = ("hardware_profiles", "serving", "generations.yaml")
CORPUS_FILE = ("hardware_profiles", "serving", "corpus", "public-measurements.yaml")
#: Public measurements found after the profiles were fitted: never fitted, an out-of-sample check (same schema).
HELD_OUT_FILE = ("hardware_profiles", "serving", "corpus", "held-out-measurements.yaml")

#: Every term of an engine profile: (name, lower bound, upper bound). Seconds unless named otherwise.
TERMS: tuple[tuple[str, float, float], ...] = (
    ("request_overhead_s", 0.0, MAX_STEP_S),
    ("prefill_layer_overhead_s", 0.0, 1.0),
    ("prefill_chunk_tokens", 1.0, MAX_TOKENS),
    ("decode_step_overhead_s", 0.0, 1.0),
    ("decode_layer_overhead_s", 0.0, 0.1),
    ("decode_step_overhead_eager_s", 0.0, 1.0),
    ("decode_layer_overhead_eager_s", 0.0, 0.1),
    ("all_reduce_latency_s", 0.0, 0.01),
    ("all_to_all_latency_s", 0.0, 0.01),
    ("attention_efficiency", 1e-3, 1.0),
    ("expert_gemm_half_rows", 0.0, 1e6),
)
#: Terms a profile may leave out (0 then): per matrix-multiply kernel per decode step, per MoE layer per prefill
#: chunk, the alpha of a collective across nodes, and a disaggregated prefill's wait per request until its KV is
#: handed off.
OPTIONAL_TERMS: tuple[tuple[str, float, float], ...] = (
    ("decode_op_overhead_s", 0.0, 0.01),
    ("prefill_moe_layer_overhead_s", 0.0, 1.0),
    ("inter_node_latency_s", 0.0, 0.01),
    ("kv_handoff_s", 0.0, MAX_STEP_S),
)
DTYPES = ("bf16", "fp8", "fp4")

#: The engine that prices a roofline or calibrated pool (and ``kv``) which names none: SGLang's profile, fitted
#: on the most public points of any engine (four GPU generations, dense and MoE models) and the engine of the
#: paper's Table 3.
DEFAULT_ENGINE = "sglang"
#: The name that selects the serving defaults fitted to the paper's own Tables 3 and 5
#: (``hardware_profiles/serving/defaults.yaml``, ``spec.hardware.RooflineParams()``) instead of an engine profile.
PAPER_FIT = "paper-fit"


def engines_dir() -> Path:
    """The built-in engine profiles' folder."""
    return builtin_root().joinpath(*ENGINES_DIR)


def builtin_engines() -> tuple[str, ...]:
    """Names of the built-in engine profiles (``sglang``, ``vllm``, ``trtllm``)."""
    return tuple(sorted(p.stem for p in engines_dir().glob("*.yaml")))


def engine_choice(name: str | None) -> str | None:
    """The engine a pool or ``kv`` is priced with: ``name``, ``DEFAULT_ENGINE`` when none is given, None for
    ``PAPER_FIT`` (the serving defaults)."""
    chosen = DEFAULT_ENGINE if name is None else name
    return None if chosen == PAPER_FIT else chosen


def engine_path(name: str, field: str = "engine") -> Path:
    """An engine given by built-in name or by the path of a YAML profile; an unknown name is an InputError on
    ``field``. A value is a path only when it holds a path separator or ends in .yaml/.yml: any other value is a
    built-in name, whatever the working directory holds (an ``sglang/`` checkout or a ``vllm`` file beside a
    run must not shadow the built-in profile)."""
    import os  # only this function needs it

    separators = tuple(s for s in (os.sep, os.altsep, "/") if s)
    if name.endswith((".yaml", ".yml")) or any(s in name for s in separators):
        return Path(name)
    if name == PAPER_FIT:
        names = ", ".join(builtin_engines())
        raise InputError(
            Problem(field=field, message=f"'{PAPER_FIT}' (the serving defaults) is not an engine profile; name {names}")
        )
    candidate = engines_dir() / f"{name}.yaml"
    if candidate.is_file():
        return candidate
    known = (*builtin_engines(), PAPER_FIT)
    here = f"; to use the file '{name}' here as a profile, write ./{name}" if os.path.lexists(name) else ""
    raise InputError(
        Problem(field=field, message=f"no engine named '{name}'{suggest(name, known)}; known: {', '.join(known)}{here}")
    )


def load_named_engine(name: str, field: str = "engine") -> EngineProfile:
    """A built-in engine profile by name, or a custom one by YAML path."""
    return load_engine_profile(engine_path(name, field))


def load_engine_profile(path: Path) -> EngineProfile:
    """Read one engine profile: every term a ``{value, source}`` pair (a fitted term also its ``prior``), the
    GEMM efficiency table by generation and dtype with its fitted ``scale`` (and ``scale_prior``), and what the
    fit used."""
    return engine_from_document(load_yaml(path, display_path(path)))


def engine_from_document(doc: Document) -> EngineProfile:
    """An engine profile from a parsed document (``load_engine_profile``)."""
    checker = Checker(doc)
    # ``calibration``: what ``prfaas-plan calibrate`` read and how well it fitted (io.error_bands reads its band).
    root = checker.root(
        required=("engine", "terms", "gemm_efficiency"), optional=("fit", "calibration", "overhead_scale")
    )
    head = root.sub("engine", required=("key", "name", "source"))
    key, name = head.string("key"), head.string("name")
    head.string("source")
    terms = root.sub("terms", required=tuple(t for t, _, _ in TERMS), optional=tuple(t for t, _, _ in OPTIONAL_TERMS))
    values: dict[str, float] = {}
    priors: list[tuple[str, float]] = []
    sources: list[tuple[str, str]] = []
    for term, low, high in (*TERMS, *(t for t in OPTIONAL_TERMS if terms.has(t[0]))):
        sec = terms.sub(term, required=("value", "source"), optional=("prior",))
        value = sec.number("value", ge=low, le=high, integer=term == "prefill_chunk_tokens")
        prior_value = sec.number("prior", ge=low, le=high) if sec.has("prior") else None
        if prior_value is not None:
            priors.append((term, prior_value))
        source = sec.string("source")
        if value is not None:
            values[term] = value
        if source is not None:
            sources.append((term, source))
    gemm = root.sub(
        "gemm_efficiency",
        required=("scale", "prior", "source"),
        optional=("scale_prior", "expert_scale", "expert_scale_prior"),
    )
    scale = gemm.number("scale", gt=0, le=10)
    scale_prior = gemm.number("scale_prior", gt=0, le=10) if gemm.has("scale_prior") else None
    if scale_prior is not None:
        priors.append(("gemm_efficiency_scale", scale_prior))
    expert_scale = gemm.number("expert_scale", gt=0, le=10) if gemm.has("expert_scale") else 1.0
    expert_prior = gemm.number("expert_scale_prior", gt=0, le=10) if gemm.has("expert_scale_prior") else None
    if expert_prior is not None:
        priors.append(("expert_gemm_scale", expert_prior))
    gemm_source = gemm.string("source")
    prior = gemm.sub("prior", required=("other",), optional=GENERATIONS)
    table: list[tuple[str, str, float]] = []
    for generation in GENERATIONS:
        if not prior.has(generation):
            continue
        row = prior.sub(generation, required=("bf16",), optional=DTYPES)
        for dtype in DTYPES:
            efficiency = row.number(dtype, gt=0, le=1) if row.has(dtype) else None
            if efficiency is not None:
                table.append((generation, dtype, efficiency))
    scales: list[tuple[str, float]] = []
    if root.has("overhead_scale"):
        sec = root.sub("overhead_scale", required=("source",), optional=GENERATIONS)
        source = sec.string("source")
        if source is not None:
            sources.append(("overhead_scale", source))
        for generation in GENERATIONS:
            if not sec.has(generation):
                continue
            row = sec.sub(generation, required=("value",), optional=("prior",))
            value = row.number("value", gt=0, le=20)
            if value is not None:
                scales.append((generation, value))
            prior_value = row.number("prior", gt=0, le=20) if row.has("prior") else None
            if prior_value is not None:
                priors.append((f"overhead_scale_{generation}", prior_value))
    fitted: tuple[str, ...] = ()
    fitted_on: tuple[str, ...] = ()
    if root.has("fit"):
        fit = root.sub("fit", required=("fitted", "fitted_on", "corpus", "source"))
        fit.string("corpus")
        fit.string("source")
        fitted = fit.strings("fitted")
        fitted_on = fit.strings("fitted_on")
        # A term of the profile's own (one refused above for its value is still a term: naming it is no second
        # error) or a scale; anything else names nothing.
        known = {
            "gemm_efficiency_scale",
            "expert_gemm_scale",
            *(t for t, _, _ in (*TERMS, *OPTIONAL_TERMS)),
            *(f"overhead_scale_{g}" for g in GENERATIONS),
        }
        unknown = [f for f in fitted if f not in known]
        if unknown:
            checker.report((*fit.path, "fitted"), f"names no term: {', '.join(unknown)}")
    checker.raise_if_any()
    assert key is not None and name is not None and gemm_source is not None
    return EngineProfile(
        key=key,
        name=name,
        gemm_efficiency=tuple(table),
        gemm_efficiency_scale=float(scale or 1.0),
        expert_gemm_scale=float(expert_scale or 1.0),
        overhead_scale=tuple(scales),
        sources=(*sources, ("gemm_efficiency", gemm_source)),
        priors=tuple(priors),
        fitted=fitted,
        fitted_on=fitted_on,
        file=doc.file,
        **values,
    )


def load_generations(path: Path | None = None) -> dict[str, str]:
    """Accelerator key -> generation (``hardware_profiles/serving/generations.yaml``; the built-in table is read
    once per process: every pool and every matrix cell asks for it)."""
    if path is None:
        return dict(_builtin_generations())
    return _read_generations(path)


def generation_of(hardware_key: str) -> str:
    """The generation of built-in accelerator ``hardware_key`` (``load_generations``), ``other`` where the table
    does not list it."""
    return _builtin_generations().get(hardware_key, "other")


@cache
def _builtin_generations() -> dict[str, str]:
    return _read_generations(builtin_root().joinpath(*GENERATIONS_FILE))


def _read_generations(path: Path) -> dict[str, str]:
    doc = load_yaml(path, display_path(path))
    checker = Checker(doc)
    root = checker.root(required=("generations", "source"))
    root.string("source")
    table = root.sub("generations", optional=tuple(str(k) for k in (root.raw("generations") or {})))
    out = {str(k): v for k in table.data if (v := table.string(str(k), choices=GENERATIONS)) is not None}
    checker.raise_if_any()
    return out


_MEASUREMENT_KEYS = (
    "id",
    "source",
    "engine",
    "engine_version",
    "model",
    "hardware",
    "gpus",
    "tensor_parallel",
    "weights_dtype",
    "kv_dtype",
    "cuda_graphs",
    "phase",
    "batch",
    "measured_s",
)
_MEASUREMENT_OPTIONAL = (
    "expert_parallel",
    "input_tokens",
    "context_tokens",
    "metric",
    "derivation",
    "note",
    "experts_dtype",
    "interleaved_prefill",
    "exclude_from_fit",
    "includes_request_overhead",
)


def load_corpus(path: Path | None = None) -> tuple[CorpusMeasurement, ...]:
    """The public measurement corpus: its ``sources`` (each with an ``id``) and ``measurements``; a prefill
    gives ``input_tokens``, a decode ``context_tokens``; every measurement names a listed source.
    ``cuda_graphs`` may be ``unknown`` (None), ``expert_parallel`` defaults to 1, a dtype may be ``unknown``."""
    path = path or builtin_root().joinpath(*CORPUS_FILE)
    doc = load_yaml(path, display_path(path))
    checker = Checker(doc)
    root = checker.root(required=("sources", "measurements"), optional=("source", "notes", "schema"))
    source_ids: set[str] = set()
    for _, item in root.items("sources"):
        if isinstance(item, Mapping) and isinstance(item.get("id"), str):
            source_ids.add(item["id"])
    out: list[CorpusMeasurement] = []
    seen: set[str] = set()
    for item_path, item in root.items("measurements"):
        sec = Section(checker, item_path, item, required=_MEASUREMENT_KEYS, optional=_MEASUREMENT_OPTIONAL)
        ident, source = sec.string("id"), sec.string("source")
        strings = {k: sec.string(k) for k in ("engine", "engine_version", "model", "hardware")}
        weights, kv = sec.string("weights_dtype"), sec.string("kv_dtype")
        gpus = sec.number("gpus", ge=1, le=MAX_GPUS_PER_INSTANCE, integer=True)
        tp = sec.number("tensor_parallel", ge=1, le=MAX_GPUS_PER_INSTANCE, integer=True)
        ep = sec.number("expert_parallel", ge=1, le=MAX_GPUS_PER_INSTANCE, integer=True, default=1)
        graphs: bool | None = None
        if sec.raw("cuda_graphs") != "unknown":
            graphs = sec.boolean("cuda_graphs", default=True)
            if graphs is None:
                continue
        phase = sec.string("phase", choices=("prefill", "decode"))
        batch = sec.number("batch", ge=1, le=1e6, integer=True)
        token_key = "input_tokens" if phase == "prefill" else "context_tokens"
        if phase is not None and not sec.has(token_key):
            checker.report(item_path, f"a {phase} measurement needs '{token_key}'")
        tokens = sec.number(token_key, ge=1, le=MAX_TOKENS)
        measured = sec.number("measured_s", gt=0, le=MAX_STEP_S)
        if source is not None and source_ids and source not in source_ids:
            checker.report((*item_path, "source"), f"'{source}' is not among the listed sources")
        if ident is not None and ident in seen:
            checker.report((*item_path, "id"), f"duplicate id '{ident}'")
        if ident is not None:
            seen.add(ident)
        experts = sec.string("experts_dtype") if sec.has("experts_dtype") else ""
        exclude = sec.string("exclude_from_fit") if sec.has("exclude_from_fit") else ""
        interleaved = _interleaved(checker, item_path, sec.raw("interleaved_prefill"), phase)
        fields = (ident, source, *strings.values(), weights, kv, gpus, tp, ep, phase, batch, tokens, measured)
        if any(v is None for v in (*fields, experts, exclude)) or interleaved is None:
            continue
        out.append(
            CorpusMeasurement(
                id=str(ident),
                source=str(source),
                engine=str(strings["engine"]),
                engine_version=str(strings["engine_version"]),
                model=str(strings["model"]),
                hardware=str(strings["hardware"]),
                gpus=int(gpus or 1),
                tensor_parallel=int(tp or 1),
                expert_parallel=int(ep or 1),
                weights_dtype=str(weights),
                kv_dtype=str(kv),
                cuda_graphs=graphs,
                phase="prefill" if phase == "prefill" else "decode",
                batch=int(batch or 1),
                tokens=float(tokens or 1),
                measured_s=float(measured or 0),
                metric=str(sec.raw("metric") or ""),
                derivation=str(sec.raw("derivation") or ""),
                experts_dtype=str(experts or ""),
                interleaved_input_tokens=interleaved[0] if interleaved else 0.0,
                interleaved_output_tokens=interleaved[1] if interleaved else 0.0,
                exclude_from_fit=str(exclude or ""),
                # false for an engine-only timing (SGLang's bench_one_batch): no per-request cost is charged
                includes_request_overhead=sec.boolean("includes_request_overhead", default=True) is not False,
            )
        )
    checker.raise_if_any()
    return tuple(out)


def _interleaved(
    checker: Checker, item_path: tuple[str | int, ...], raw: object, phase: str | None
) -> tuple[float, float] | None:
    """A decode measurement's ``interleaved_prefill: {input_tokens, output_tokens}`` (both > 0) as a pair;
    (0, 0) where absent; None (reported) when malformed or on a prefill measurement."""
    if raw is None:
        return (0.0, 0.0)
    where = (*item_path, "interleaved_prefill")
    if phase != "decode":
        checker.report(where, "only a decode measurement has interleaved prefills")
        return None
    if not isinstance(raw, Mapping) or set(raw) != {"input_tokens", "output_tokens"}:
        checker.report(where, "must be a mapping with exactly 'input_tokens' and 'output_tokens'")
        return None
    values = [raw["input_tokens"], raw["output_tokens"]]
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and 1 <= v <= MAX_TOKENS for v in values):
        checker.report(where, f"'input_tokens' and 'output_tokens' must be numbers in [1, {MAX_TOKENS:g}]")
        return None
    return (float(values[0]), float(values[1]))
