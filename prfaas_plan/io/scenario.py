"""Stage two of reading scenarios: traffic, SLO, pools and link validated into frozen specs (hardware profiles
are read by ``io.hardware``, model cards by ``io.models``, the numeric ranges are in ``io.limits``).

Every problem in a file is collected and reported with its file, line and field; references between files
(a scenario naming a model card or a hardware profile) are resolved next to the scenario first, then in the
built-in directories that ship with the package.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prfaas_plan import lengths as dist
from prfaas_plan.errors import InputError
from prfaas_plan.io.cost import COST_KEYS, TARGET_KEYS, parse_cost, parse_target
from prfaas_plan.io.hardware import load_hardware
from prfaas_plan.io.limits import (
    MAX_ABS_MU,
    MAX_DECODE_TOKENS_PER_S,
    MAX_GPUS_PER_INSTANCE,
    MAX_INSTANCES,
    MAX_LINK_GBIT_PER_S,
    MAX_LOSS_RATE,
    MAX_MOE_LOAD_SKEW,
    MAX_RTT_MS,
    MAX_SIGMA,
    MAX_STEP_S,
    MAX_TCP_CONNECTIONS,
    MAX_TOKENS,
    MAX_TTFT_S,
    MAX_WINDOW_MIB,
    MIN_DECODE_TOKENS_PER_S,
    MIN_LINK_GBIT_PER_S,
    MIN_SIGMA,
    MIN_STEP_S,
    MIN_TOKENS,
    MIN_WINDOW_MIB,
)
from prfaas_plan.io.models import load_model_card
from prfaas_plan.io.names import HARDWARE_DIRS, MODEL_DIRS, resolve_reference, rising
from prfaas_plan.io.names import (
    load_named_hardware as load_named_hardware,
)
from prfaas_plan.io.names import (
    load_named_model as load_named_model,
)
from prfaas_plan.io.names import (
    pool_for as pool_for,
)
from prfaas_plan.io.names import (
    resolve_scenario_path as resolve_scenario_path,
)
from prfaas_plan.io.paths import display_path
from prfaas_plan.io.yamlsrc import Checker, Document, KeyPath, Section, load_yaml, suggest
from prfaas_plan.physics.curves import fit_profile, shape_problems
from prfaas_plan.spec.hardware import HardwareProfile, RooflineParams
from prfaas_plan.spec.model import DTYPE_BYTES, Dtypes
from prfaas_plan.spec.scenario import (
    POOL_METHODS,
    TRANSFER_MODES,
    Arrival,
    ArrivalKind,
    Link,
    ModelCard,
    Pool,
    Scenario,
    Slo,
    TcpPath,
    Traffic,
)
from prfaas_plan.spec.shape import InstanceShape
from prfaas_plan.units import GBIT_PER_S, MIB

if TYPE_CHECKING:  # annotations only (engines and serving defaults load where they are read)
    from prfaas_plan.spec.engine import EngineProfile
    from prfaas_plan.spec.kernel_shapes import KernelShapes

# --------------------------------------------------------------------------------------------- scenario


def _length_distribution(sec: Section, base: Path, *, role: str) -> dist.LengthDistribution | None:
    """Parse one length distribution; ``role`` is 'input' or 'output' (which trace column an empirical uses)."""
    kind = sec.string("distribution", choices=("lognormal", "fixed", "uniform", "empirical"))
    if kind is None:
        return None
    shapes = {
        "lognormal": ("mu", "sigma", "min_tokens", "max_tokens"),
        "fixed": ("tokens",),
        "uniform": ("min_tokens", "max_tokens"),
        "empirical": ("trace",),
    }
    optional = ("prefix_cache",) if kind == "empirical" and role == "input" else ()
    allowed = {"distribution", *shapes[kind], *optional}
    for key in sec.data:
        if key not in allowed:
            sec.checker.report(
                (*sec.path, str(key)),
                f"unknown key '{key}' for a {kind} distribution{suggest(str(key), allowed)}",
            )
    for key in shapes[kind]:
        if key not in sec.data:
            sec.checker.report(sec.path, f"missing required key '{key}' for a {kind} distribution")
    if kind == "fixed":
        tokens = sec.number("tokens", gt=0, ge=MIN_TOKENS, le=MAX_TOKENS)
        return None if tokens is None else dist.Fixed(tokens=tokens)
    if kind == "empirical":
        return _empirical(sec, base, role)
    low = sec.number("min_tokens", ge=0, le=MAX_TOKENS)
    high = sec.number("max_tokens", gt=0, ge=MIN_TOKENS, le=MAX_TOKENS)
    if low is not None and high is not None and not high > low:
        sec.checker.report((*sec.path, "max_tokens"), f"must be > min_tokens ({low:g}), got {high:g}")
        return None
    if kind == "uniform":
        return None if low is None or high is None else dist.Uniform(lower_tokens=low, upper_tokens=high)
    mu = sec.number("mu", ge=-MAX_ABS_MU, le=MAX_ABS_MU)
    sigma = sec.number("sigma", gt=0, ge=MIN_SIGMA, le=MAX_SIGMA)
    if low is not None and low <= 0:
        sec.checker.report((*sec.path, "min_tokens"), f"must be > 0 for a lognormal, got {low:g}")
        return None
    if None in (mu, sigma, low, high):
        return None
    assert mu is not None and sigma is not None and low is not None and high is not None
    return dist.TruncatedLogNormal(mu=mu, sigma=sigma, lower_tokens=low, upper_tokens=high)


def _empirical(sec: Section, base: Path, role: str) -> dist.LengthDistribution | None:
    from prfaas_plan.io.traces import read_trace  # only scenarios with traces pay for the reader

    trace_name = sec.string("trace")
    prefix_cache = sec.raw("prefix_cache")
    if prefix_cache is not None and not isinstance(prefix_cache, bool):
        sec.checker.report((*sec.path, "prefix_cache"), f"expected true or false, got {prefix_cache!r}")
        return None
    if trace_name is None:
        return None
    try:
        trace = read_trace(base / trace_name, prefix_cache=bool(prefix_cache))
    except InputError as exc:
        for problem in exc.problems:
            sec.checker.problems.append(problem)
        return None
    values = trace.uncached_tokens if role == "input" else trace.output_tokens
    if not values.any():  # every length 0: no prefill (the threshold search would answer -1) or no decode
        what = "uncached input tokens: nothing to prefill" if role == "input" else "output tokens: nothing to decode"
        sec.checker.report((*sec.path, "trace"), f"every request of {trace_name} has 0 {what}")
        return None
    return dist.Empirical(values=values)


# Where a name is looked up: next to the scenario first, then in the built-in directories.


_DTYPE_CLASSES = tuple(f.name for f in fields(Dtypes))


def _scenario_model(root: Section, base: Path) -> ModelCard | None:
    """``model: NAME`` or ``model: {card: NAME, dtypes: {weights: fp8, ...}}``: a model card by name, with
    its storage dtypes optionally overridden (so a scenario can try a lower weight dtype without copying the
    card)."""
    section, key, dtypes = root, "model", None
    if isinstance(root.raw("model"), dict):
        section = root.sub("model", required=("card",), optional=("dtypes",))
        key = "card"
        dtypes = section.sub("dtypes", optional=_DTYPE_CLASSES)
    path = resolve_reference(section, key, base, MODEL_DIRS, "model card")
    overrides = {}
    if dtypes is not None and not dtypes.dead:
        for cls in _DTYPE_CLASSES:
            value = dtypes.string(cls, choices=tuple(DTYPE_BYTES))
            if value is not None:
                overrides[cls] = value
    if path is None:
        return None
    try:
        card = load_model_card(path, display_path(path))
    except InputError as exc:
        root.checker.problems.extend(exc.problems)
        return None
    if overrides:
        if card.architecture is None:
            root.checker.report((*section.path, "dtypes"), f"model card '{card.key}' has no architecture to override")
            return None
        arch = replace(card.architecture, dtypes=replace(card.architecture.dtypes, **overrides))
        note = ", ".join(f"{k} {v}" for k, v in overrides.items())
        card = replace(card, architecture=arch, source=f"{card.source} (dtypes overridden by the scenario: {note})")
    return card


_POOL_KEYS = ("hardware", "gpus_per_instance", "instances")
_POOL_OPTIONAL = ("method", "calibrate_from", "roofline", "engine", "shape")
#: Keys of a named ``shape:`` (``spec.shape.InstanceShape``; its GPUs are the pool's ``gpus_per_instance``).
_SHAPE_KEYS = ("tensor_parallel", "expert_parallel", "attention_data_parallel")
#: Roofline fields a pool may override: efficiencies in (0, 1], overheads in s, the prefill chunk in tokens
#: and the small-GEMM half-rows (``spec.hardware.RooflineParams``).
_ROOFLINE_EFFICIENCIES = ("compute_efficiency", "attention_efficiency", "memory_efficiency", "communication_efficiency")
_ROOFLINE_SECONDS = ("overhead_s", "layer_overhead_s", "moe_layer_overhead_s", "decode_step_overhead_s")
#: Bounds of the chunk (a token to the longest context) and of the half-rows (rows of a GEMM).
_MAX_GEMM_HALF_ROWS = 1e6
_ROOFLINE_KEYS = (
    *_ROOFLINE_EFFICIENCIES,
    *_ROOFLINE_SECONDS,
    "prefill_chunk_tokens",
    "gemm_half_rows",
    "attention_half_context_tokens",
    "moe_load_skew",
    "expert_parallel",
    "source",
)


def _engine_name(sec: Section, method: str | None) -> str | None:
    """The engine a roofline or calibrated pool is priced with: its ``engine:``, else the default engine
    (``io.engine_profile.engine_choice``); None for a measured pool, for ``paper-fit`` (the serving defaults)
    and for a malformed value (reported)."""
    if method is None or method == "measured":
        return None
    from prfaas_plan.io.engine_profile import engine_choice

    if not sec.has("engine"):
        return engine_choice(None)
    name = sec.string("engine")
    return None if name is None else engine_choice(name)


def _engine_base(
    sec: Section, base: Path, hardware: HardwareProfile | None, name: str | None
) -> tuple[RooflineParams, EngineProfile] | None:
    """Engine ``name`` (a built-in engine's name or a profile's path, next to the scenario first; ``_engine_name``)
    priced on the pool's accelerator generation (``physics.engine``), with the profile; None without one (the
    serving defaults apply) or after reporting a problem."""
    if name is None or hardware is None:
        return None
    from prfaas_plan.io.engine_profile import engine_path, generation_of, load_engine_profile

    local = base / name
    try:
        path = local if name.endswith((".yaml", ".yml")) and local.is_file() else engine_path(name)
        profile = load_engine_profile(path)
    except InputError as exc:  # at the pool's engine: line, naming where in the profile the problem is
        for problem in exc.problems:
            inside = str(problem) if problem.file is not None else problem.message
            sec.checker.report((*sec.path, "engine"), inside)
        return None
    from prfaas_plan.physics.engine import engine_params

    generation = generation_of(hardware.accelerator.key)
    return engine_params(profile, generation), profile


#: The roofline fields a calibrated pool's fit sets (``physics.calibration``): a value given for them is refused.
CALIBRATION_FITS = ("compute_efficiency", "overhead_s")


def _roofline_params(sec: Section, shapes: KernelShapes | None, engine: RooflineParams | None = None) -> RooflineParams:
    """The pool's roofline: the serving defaults (or its engine's parameters), with the shape curves its
    hardware profile measured (``kernel_shapes``, as ``validate kernel --profile-out`` writes them) in place
    of the defaults' and any field the pool's ``roofline:`` section sets over both."""
    default = RooflineParams() if engine is None else engine
    if shapes is not None:
        default = default.with_kernel_shapes(shapes)
    if not sec.has("roofline"):
        return default
    r = sec.sub("roofline", optional=_ROOFLINE_KEYS)
    from prfaas_plan.io.engine_profile import DEFAULT_ENGINE, PAPER_FIT  # pools that override their roofline only

    # Where these fields' defaults come from (the schema's words): the engine's terms.
    from_engine = (
        f"the pool's engine's figure on its accelerator's generation (engine: absent = {DEFAULT_ENGINE}; "
        f"{PAPER_FIT} = hardware_profiles/serving/defaults.yaml)"
    )
    values: dict[str, float | None] = {
        key: r.number(key, gt=0, le=1, default=getattr(default, key), default_text=from_engine)
        for key in _ROOFLINE_EFFICIENCIES
    }
    for key in _ROOFLINE_SECONDS:
        values[key] = r.number(key, ge=0, le=MAX_STEP_S, default=getattr(default, key), default_text=from_engine)
    values["prefill_chunk_tokens"] = r.number(
        "prefill_chunk_tokens",
        ge=1,
        le=MAX_TOKENS,
        integer=True,
        default=default.prefill_chunk_tokens,
        default_text=from_engine,
    )
    values["gemm_half_rows"] = r.number("gemm_half_rows", ge=0, le=_MAX_GEMM_HALF_ROWS, default=default.gemm_half_rows)
    values["attention_half_context_tokens"] = r.number(
        "attention_half_context_tokens", ge=0, le=MAX_TOKENS, default=default.attention_half_context_tokens
    )
    values["moe_load_skew"] = r.number("moe_load_skew", ge=0, le=MAX_MOE_LOAD_SKEW, default=default.moe_load_skew)
    expert_parallel = r.boolean("expert_parallel", default=default.expert_parallel)
    # What the overrides sit on (the engine, a hardware file's kernel shapes) stays named before them.
    own = r.string("source", default="scenario roofline overrides") or "scenario roofline overrides"
    source = own if default == RooflineParams() else f"{default.source}; {own}"
    checked: dict[str, Any] = {k: v for k, v in values.items() if v is not None}
    if len(checked) < len(values) or expert_parallel is None:
        return default
    # A compute efficiency the pool sets is its GEMMs' rate in every dtype and for the routed experts too: the
    # engine's per-dtype figures (FP8 apart from BF16) and its experts' factor would otherwise override it for an
    # FP8 or FP4 model or slow its experts (as ``kv --compute-efficiency``).
    if r.has("compute_efficiency"):
        default = default.one_gemm_rate(checked.pop("compute_efficiency"))
    return replace(default, source=source, expert_parallel=expert_parallel, **checked)


def _load_hardware_at(sec: Section, key: str, base: Path) -> HardwareProfile | None:
    path = resolve_reference(sec, key, base, HARDWARE_DIRS, "hardware profile")
    if path is None:
        return None
    try:
        return load_hardware(path)
    except InputError as exc:
        sec.checker.problems.extend(exc.problems)
        return None


def _pool(sec: Section, base: Path, model: ModelCard | None, *, role: str) -> Pool | None:
    hardware = _load_hardware_at(sec, "hardware", base)
    gpus = sec.number("gpus_per_instance", ge=1, le=MAX_GPUS_PER_INSTANCE, integer=True)
    instances = sec.number("instances", ge=1, le=MAX_INSTANCES, integer=True)
    method = sec.string("method", choices=POOL_METHODS, default="measured")
    engine_name = _engine_name(sec, method)
    engine = _engine_base(sec, base, hardware, engine_name)
    # A profile refused above is reported there: its band is not looked up (that would report it again, unlocated).
    engine_ok = engine is not None or engine_name is None or hardware is None
    params = _roofline_params(
        sec, None if hardware is None else hardware.kernel_shapes, None if engine is None else engine[0]
    )
    if role == "local" and instances is not None and instances < 2:
        sec.checker.report(
            (*sec.path, "instances"),
            f"must be >= 2: the local pool needs at least one prefill and one decode instance, got {instances:g}",
        )
        return None
    if hardware is None or gpus is None or instances is None or model is None or method is None:
        return None
    profile = hardware.find(model.key, int(gpus))
    where = (*sec.path, "hardware")
    if method == "measured" and sec.has("engine"):
        sec.checker.report((*sec.path, "engine"), "prices a roofline or calibrated pool; use method: roofline")
        return None
    if method == "calibrated" and isinstance(sec.raw("roofline"), Mapping):
        fitted = [key for key in CALIBRATION_FITS if key in sec.raw("roofline")]
        for key in fitted:  # a value the fit replaces would be silently dropped
            sec.checker.report(
                (*sec.path, "roofline", key),
                "is what method: calibrated fits to the measured points; leave it out, or use method: roofline",
            )
        if fitted:
            return None
    if method != "measured" and model.architecture is None:
        sec.checker.report(
            (*sec.path, "method"), f"'{method}' needs the model card '{model.key}' to have an architecture"
        )
        return None
    if method != "measured" and model.architecture is not None:
        from prfaas_plan.physics.roofline import missing_peak  # roofline pools only (start-up time)

        why = missing_peak(model.architecture, hardware.accelerator)
        if why is not None:
            sec.checker.report(where, f"{hardware.file} {why}")
            return None
    calibration, calibration_accelerator = None, None
    if method == "calibrated":
        source: HardwareProfile | None = hardware
        if sec.has("calibrate_from"):
            source = _load_hardware_at(sec, "calibrate_from", base)
        if source is None:
            return None
        candidates = [p for p in source.profiles if p.model == model.key]
        if not candidates:
            sec.checker.report(
                (*sec.path, "calibrate_from" if sec.has("calibrate_from") else "method"),
                f"{source.file} has no measured prefill points for model '{model.key}' to calibrate against",
            )
            return None
        calibration, calibration_accelerator = candidates[0], source.accelerator
        if not rising(calibration.prefill):
            # A flat or falling curve cannot be fitted by a roofline that grows with length: the fit would sit
            # on its bounds (efficiency 1, overhead 0) and plan silently on a meaningless calibration.
            sec.checker.report(
                (*sec.path, "calibrate_from" if sec.has("calibrate_from") else "method"),
                f"{source.file}: the '{model.key}' prefill latencies must rise with length_tokens to calibrate "
                "against; they are flat or fall",
            )
            return None
    if method == "measured":
        if profile is None:
            have = ", ".join(f"{p.model} on {p.gpus_per_instance} GPUs" for p in hardware.profiles) or "none"
            sec.checker.report(
                where,
                f"{hardware.file} has no profile for model '{model.key}' on {int(gpus)} GPUs per instance "
                f"(it has: {have}); use method: roofline or calibrated to derive one",
            )
            return None
        if role == "prfaas" and profile.kv_cache is None:
            sec.checker.report(
                where, f"{hardware.file}: the '{model.key}' profile has no kv_cache points, needed for the PrfaaS pool"
            )
            return None
        if role == "local" and profile.decode is None:
            sec.checker.report(
                where, f"{hardware.file}: the '{model.key}' profile has no decode capacity, needed for the local pool"
            )
            return None
    time_band = None
    if method != "measured" and engine_ok:
        from prfaas_plan.io.error_bands import pool_band  # roofline pools only (start-up time of measured ones)

        try:
            time_band = pool_band(engine_name, base)
        except InputError as exc:
            sec.checker.problems.extend(exc.problems)
            return None
    shape, choose_shape = _pool_shape(sec, hardware, model, method, int(gpus), params.expert_parallel)
    if sec.has("shape") and shape is None and not choose_shape:
        return None
    return Pool(
        hardware_key=hardware.accelerator.key,
        accelerator=hardware.accelerator,
        gpus_per_instance=int(gpus),
        instances=int(instances),
        profile=profile,
        method=method,
        roofline=params,
        calibration=calibration,
        calibration_accelerator=calibration_accelerator,
        time_band=time_band,
        shape=shape,
        choose_shape=choose_shape,
        engine=None if engine is None else engine[1],
        roofline_set=_roofline_set(sec),
    )


def _roofline_set(sec: Section) -> tuple[str, ...]:
    """The fields the pool's ``roofline:`` section sets (``Pool.roofline_set``)."""
    given = sec.raw("roofline")
    return tuple(k for k in _ROOFLINE_KEYS if k != "source" and k in given) if isinstance(given, Mapping) else ()


def _pool_shape(
    sec: Section, hardware: HardwareProfile, model: ModelCard, method: str, gpus: int, expert_parallel: bool
) -> tuple[InstanceShape | None, bool]:
    """The pool's ``shape:``: ``auto`` (the planner chooses, ``optimize.shapes``) or the parallel degrees of
    its ``gpus_per_instance`` GPUs (``spec.shape.InstanceShape``), checked against the scale-up domain and
    the model's weights (``physics.shapes``). (None, False) without one, or after reporting a problem."""
    if not sec.has("shape"):
        return None, False
    where = (*sec.path, "shape")
    if method == "measured":
        sec.checker.report(
            where, "a measured pool keeps the shape it was measured on; use method: roofline or calibrated"
        )
        return None, False
    arch = model.architecture
    domain = hardware.accelerator.scale_up_gpus
    if domain is None:
        sec.checker.report(where, f"{hardware.file} gives no scale_up_gpus (the GPUs an instance may span)")
        return None, False
    if sec.raw("shape") == "auto":
        return None, True
    if not isinstance(sec.raw("shape"), dict):
        sec.checker.report(where, f"expected auto or a mapping of {', '.join(_SHAPE_KEYS)}, got {sec.raw('shape')!r}")
        return None, False
    sub = sec.sub("shape", optional=_SHAPE_KEYS)
    dp = sub.number("attention_data_parallel", ge=1, le=gpus, integer=True, default=1)
    tp = sub.number("tensor_parallel", ge=1, le=gpus, integer=True, default=gpus / (dp or 1))
    ep = sub.number("expert_parallel", ge=1, le=gpus, integer=True, default=gpus if expert_parallel else 1)
    if dp is None or tp is None or ep is None or arch is None:
        return None, False
    shape = InstanceShape(gpus=gpus, tensor_parallel=int(tp), expert_parallel=int(ep), attention_data_parallel=int(dp))
    from prfaas_plan.physics.shapes import has_experts, memory_problem

    problems = shape.problems()
    if gpus > domain:
        problems.append(f"{gpus} GPUs per instance exceed {hardware.accelerator.key}'s scale-up domain of {domain}")
    if (shape.expert_parallel > 1 or shape.attention_data_parallel > 1) and not has_experts(arch):
        problems.append(f"expert and attention data parallelism need routed experts; '{model.key}' has none")
    if not problems:
        why = memory_problem(model.name, arch, hardware.accelerator, shape)
        if why is not None:
            problems.append(why)
    for message in problems:
        sec.checker.report(where, message)
    return (None, False) if problems else (shape, False)


def _check_shapes(checker: Checker, pool: Pool, lengths: dist.LengthDistribution, pool_path: KeyPath) -> None:
    profile = pool.profile
    if pool.method != "measured" or profile is None:
        return
    curves = [("prefill", profile.prefill)] + ([("kv_cache", profile.kv_cache)] if profile.kv_cache else [])
    for name, points in curves:
        for message in shape_problems(fit_profile(points), lengths.lower_tokens, lengths.upper_tokens):
            checker.report(
                (*pool_path, "hardware"),
                f"{pool.hardware_key} profile '{profile.model}' {name}: {message} (within the input-length range "
                f"{lengths.lower_tokens:,.0f}-{lengths.upper_tokens:,.0f} tokens); adjust its points or fit_degree",
            )


#: Optional keys of traffic.arrival, each used by the processes named in ``_ARRIVAL_PARAMETERS``.
_ARRIVAL_KEYS = ("interarrival_scv", "on_fraction", "mean_cycle_s", "amplitude", "period_s", "batch_size_mean")
_ARRIVAL_PARAMETERS: dict[ArrivalKind, tuple[str, ...]] = {
    "poisson": (),
    "renewal": ("interarrival_scv",),
    "onoff": ("on_fraction", "mean_cycle_s"),
    "diurnal": ("amplitude", "period_s"),
}
#: The largest batch, cycle and period accepted (a batch of a million requests or a cycle of a year is a typo).
_MAX_BATCH_SIZE_MEAN = 1e4
_MAX_PERIOD_S = 1e8
#: The smallest cycle or period (a millisecond) and the smallest squared CV or on-fraction (one in a million):
#: below them the process is a Poisson one in all but overflow.
_MIN_PERIOD_S = 1e-3
_MIN_FRACTION = 1e-6


def _arrival(checker: Checker, arr: Section) -> Arrival:
    """traffic.arrival: the process and its parameters (``spec.scenario.Arrival``); every parameter that the
    process does not use is reported, so a typo'd process does not silently drop its settings."""
    process = arr.string("process", choices=tuple(_ARRIVAL_PARAMETERS))
    values = {
        "interarrival_scv": arr.number("interarrival_scv", gt=0, ge=_MIN_FRACTION, le=1e4, default=1.0),
        "on_fraction": arr.number("on_fraction", gt=0, ge=_MIN_FRACTION, le=1, default=1.0),
        "mean_cycle_s": arr.number("mean_cycle_s", gt=0, ge=_MIN_PERIOD_S, le=_MAX_PERIOD_S, default=60.0),
        "amplitude": arr.number("amplitude", ge=0, default=0.0),
        "period_s": arr.number("period_s", gt=0, ge=_MIN_PERIOD_S, le=_MAX_PERIOD_S, default=86_400.0),
        "batch_size_mean": arr.number("batch_size_mean", ge=1, le=_MAX_BATCH_SIZE_MEAN, default=1.0),
    }
    if values["amplitude"] is not None and not values["amplitude"] < 1:
        checker.report((*arr.path, "amplitude"), f"must be < 1 (the rate would reach 0), got {values['amplitude']:g}")
        values["amplitude"] = None
    checked = {k: v for k, v in values.items() if v is not None}
    if process is None or len(checked) < len(values):
        return Arrival()
    kind = next(k for k in _ARRIVAL_PARAMETERS if k == process)  # the Literal the checked string names
    used = {*_ARRIVAL_PARAMETERS[kind], "batch_size_mean"}
    for key in _ARRIVAL_KEYS:
        if arr.has(key) and key not in used:
            checker.report((*arr.path, key), f"does not apply to process {process!r} (it takes {sorted(used)})")
    return replace(Arrival(), process=kind, **checked)


#: Optional keys of deployment.link that say how it is built (``spec.scenario.TcpPath``, ``physics.tcp``).
_TCP_KEYS = ("rtt_ms", "connections", "window_mib", "connection_cap_gbit_per_s", "loss_rate")


def _tcp_path(checker: Checker, link: Section) -> TcpPath:
    """deployment.link's TCP shape: round trip, connections, window or per-connection cap, and loss, each
    optional with the nominal link's value as default (``TcpPath()``). A window and a cap together are refused:
    the task names one or the other, and both would leave the reader to guess which binds."""
    rtt_ms = link.number("rtt_ms", ge=0, le=MAX_RTT_MS, default=0.0)
    connections = link.number("connections", ge=1, le=MAX_TCP_CONNECTIONS, integer=True, default=1)
    window_mib = link.number("window_mib", gt=0, ge=MIN_WINDOW_MIB, le=MAX_WINDOW_MIB)
    cap = link.number("connection_cap_gbit_per_s", gt=0, ge=MIN_LINK_GBIT_PER_S, le=MAX_LINK_GBIT_PER_S)
    loss = link.number("loss_rate", ge=0, le=MAX_LOSS_RATE, default=0.0)
    if window_mib is not None and cap is not None:
        checker.report(
            (*link.path, "connection_cap_gbit_per_s"), "give window_mib or connection_cap_gbit_per_s, not both"
        )
        return TcpPath()
    if rtt_ms is None or connections is None or loss is None:
        return TcpPath()
    if window_mib is not None and rtt_ms == 0:
        checker.report((*link.path, "window_mib"), "bounds a connection only over a round trip: give rtt_ms > 0")
        return TcpPath()
    return TcpPath(
        rtt_s=rtt_ms / 1e3,
        connections=int(connections),
        window_bytes=None if window_mib is None else window_mib * MIB,
        connection_cap_bytes_per_s=None if cap is None else cap * GBIT_PER_S,
        loss_rate=loss,
    )


def load_scenario(path: Path) -> Scenario:
    """Read and validate a scenario with the model card and hardware profiles it names."""
    return scenario_from_document(load_yaml(path, display_path(path)), path.parent)


def scenario_from_document(doc: Document, base: Path) -> Scenario:
    """Validate a parsed scenario document; the files it names resolve against ``base`` first (a sweep edits
    a scenario's mapping in memory and validates each point through here)."""
    checker = Checker(doc)
    root = checker.root(
        required=("scenario", "model", "traffic", "slo", "deployment"), optional=("cost", "target", "dynamics")
    )
    meta = root.sub("scenario", required=("name",), optional=("description", "source"))
    name = meta.string("name")
    description = meta.string("description", default="")
    model = _scenario_model(root, base)
    traffic = root.sub("traffic", required=("input_length", "output_length"), optional=("arrival",))
    input_sec = traffic.sub(
        "input_length",
        required=("distribution",),
        optional=("mu", "sigma", "min_tokens", "max_tokens", "tokens", "trace", "prefix_cache"),
    )
    input_len = None if input_sec.dead else _length_distribution(input_sec, base, role="input")
    output_sec = traffic.sub(
        "output_length",
        required=("distribution",),
        optional=("mu", "sigma", "min_tokens", "max_tokens", "tokens", "trace"),
    )
    output_len = None if output_sec.dead else _length_distribution(output_sec, base, role="output")
    arrival = Arrival(process="poisson")
    if traffic.has("arrival"):
        arrival = _arrival(checker, traffic.sub("arrival", required=("process",), optional=_ARRIVAL_KEYS))
    slo_sec = root.sub(
        "slo",
        required=("decode_tokens_per_s",),
        optional=("ttft_p90_s", "ttft_includes_first_decode_step", "tpot_p90_ms"),
    )
    tokens_per_s = slo_sec.number("decode_tokens_per_s", gt=0, ge=MIN_DECODE_TOKENS_PER_S, le=MAX_DECODE_TOKENS_PER_S)
    ttft_p90 = slo_sec.number("ttft_p90_s", gt=0, ge=MIN_STEP_S, le=MAX_TTFT_S)
    first_step = slo_sec.boolean("ttft_includes_first_decode_step", default=False)
    tpot_p90_ms = slo_sec.number("tpot_p90_ms", gt=0, ge=MIN_STEP_S * 1e3, le=MAX_TTFT_S * 1e3)
    deployment = root.sub("deployment", required=("prfaas", "local", "link"))
    prfaas = _pool(deployment.sub("prfaas", required=_POOL_KEYS, optional=_POOL_OPTIONAL), base, model, role="prfaas")
    local_sec = deployment.sub("local", required=_POOL_KEYS, optional=(*_POOL_OPTIONAL, "kv_transfer_gbit_per_s"))
    local = _pool(local_sec, base, model, role="local")
    rdma = local_sec.number("kv_transfer_gbit_per_s", gt=0, ge=MIN_LINK_GBIT_PER_S, le=MAX_LINK_GBIT_PER_S)
    if local is not None and rdma is not None:
        local = replace(local, kv_transfer_bytes_per_s=rdma * GBIT_PER_S)
    link_sec = deployment.sub("link", required=("bandwidth_gbit_per_s",), optional=("transfer", *_TCP_KEYS))
    bandwidth = link_sec.number("bandwidth_gbit_per_s", gt=0, ge=MIN_LINK_GBIT_PER_S, le=MAX_LINK_GBIT_PER_S)
    transfer = link_sec.string("transfer", choices=TRANSFER_MODES, default="after_prefill")
    tcp = _tcp_path(checker, link_sec)
    if input_len is not None:
        for pool, key in ((prfaas, "prfaas"), (local, "local")):
            if pool is not None:
                _check_shapes(checker, pool, input_len, ("deployment", key))
    cost = parse_cost(root.sub("cost", optional=COST_KEYS))
    target = parse_target(root.sub("target", required=("rate_req_per_s",), optional=TARGET_KEYS), ttft_p90)
    dynamics = None
    if root.has("dynamics"):  # the dynamics reader and types load only for a scenario that has the section
        from prfaas_plan.io.dynamics import DYNAMICS_KEYS, parse_dynamics

        dynamics = parse_dynamics(root.sub("dynamics", optional=DYNAMICS_KEYS))
    checker.raise_if_any()
    # Every getter above records a problem when it returns None, so after raise_if_any nothing is None; the
    # checks below say so to the type checker and would name a loader bug rather than pass a None on.
    if (
        name is None
        or model is None
        or input_len is None
        or output_len is None
        or tokens_per_s is None
        or prfaas is None
        or local is None
        or bandwidth is None
    ):
        raise RuntimeError(f"{doc.file}: a field was neither read nor reported (a bug in the scenario loader)")
    return Scenario(
        name=name,
        description=description or "",
        file=doc.file,
        model=model,
        traffic=Traffic(input_length=input_len, output_length=output_len, arrival=arrival),
        slo=Slo(
            decode_tokens_per_s=tokens_per_s,
            ttft_p90_s=ttft_p90,
            ttft_includes_first_decode_step=bool(first_step),
            tpot_p90_s=None if tpot_p90_ms is None else tpot_p90_ms / 1e3,
        ),
        prfaas=prfaas,
        local=local,
        link=Link(
            bandwidth_bytes_per_s=bandwidth * GBIT_PER_S,
            transfer="layerwise" if transfer == "layerwise" else "after_prefill",
            tcp=tcp,
        ),
        cost=cost,
        target=target,
        dynamics=dynamics,
    )
