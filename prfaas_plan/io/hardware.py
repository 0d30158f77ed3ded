"""Hardware profiles (``hardware_profiles/*.yaml``): an accelerator's datasheet and its measured or derived
(model, instance) profiles, validated into ``spec.hardware`` objects with every problem named by file, line
and field."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from prfaas_plan.io.limits import (
    MAX_DECODE_BATCH,
    MAX_DENSE_TFLOPS,
    MAX_GPUS_PER_INSTANCE,
    MAX_HBM_TB_PER_S,
    MAX_KV_MIB,
    MAX_LINK_GB_PER_S,
    MAX_MEMORY_GB,
    MAX_MOE_LOAD_SKEW,
    MAX_PRICE_USD_PER_HOUR,
    MAX_STEP_S,
    MAX_TDP_W,
    MAX_TOKENS,
    MIN_DENSE_TFLOPS,
    MIN_HBM_TB_PER_S,
    MIN_KV_MIB,
    MIN_LINK_GBIT_PER_S,
    MIN_MEMORY_GB,
    MIN_STEP_S,
    MIN_TOKENS,
)
from prfaas_plan.io.paths import display_path
from prfaas_plan.io.yamlsrc import Checker, KeyPath, Section, load_yaml
from prfaas_plan.spec.hardware import (
    Accelerator,
    DecodeProfile,
    HardwareProfile,
    InstanceProfile,
    ProfilePoints,
    Provenance,
    RooflineParams,
)
from prfaas_plan.units import GB, GBIT_PER_S, MIB, TB, TFLOP_PER_S

if TYPE_CHECKING:  # annotations only (engines and serving defaults load where they are read)
    from prfaas_plan.spec.engine import ServingDefaults, ServingPoints

PROVENANCES = ("measured", "derived", "assumed")
#: The largest weight-read memory efficiency a profile's ``kernel_shapes`` may record: a sanity bound, not a
#: physical law. It is a measured rate over a reference rate (the datasheet HBM figure on a GPU, the timed dot
#: product's read rate on the reference machine), and a measured read can beat that reference: the datasheet
#: figure is rounded, and weights that fit in a cache are read from it. ``validate kernel`` (numpy, on a CPU)
#: measured 1.04 on the machine issue 20 names, 0.76-0.93 on a 2-core VM of a 300 MiB-L3 Xeon and 1.29 on the CI
#: machine, whose profile an earlier bound of 1.25 refused. A figure four times the reference is taken for a
#: disturbed measurement and refused; it also admits a hand-written GPU profile claiming more than its HBM
#: delivers, which no measurement here supports.
MAX_MEASURED_MEMORY_EFFICIENCY = 4.0


# --------------------------------------------------------------------------------------------- hardware


def _points(
    sec: Section, value_key: str, scale: float, limit: float, low: float
) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    lengths: list[float] = []
    values: list[float] = []
    ok = True
    for path, item in sec.items("points"):
        point = Section(sec.checker, path, item, required=("length_tokens", value_key))
        length = point.number("length_tokens", gt=0, ge=MIN_TOKENS, le=MAX_TOKENS)
        value = point.number(value_key, gt=0, ge=low, le=limit)
        if length is None or value is None:
            ok = False
            continue
        lengths.append(length)
        values.append(value * scale)
    if not ok or not lengths:
        return None
    if len(set(lengths)) != len(lengths):
        sec.checker.report((*sec.path, "points"), "length_tokens values must be distinct")
        return None
    return tuple(lengths), tuple(values)


def _profile_points(sec: Section, value_key: str, scale: float, limit: float, low: float) -> ProfilePoints | None:
    provenance = sec.string("provenance", choices=PROVENANCES)
    source = sec.string("source")
    degree = sec.number("fit_degree", ge=0, le=4, integer=True)
    pts = _points(sec, value_key, scale, limit, low)
    if None in (provenance, source, degree, pts):
        return None
    assert pts is not None and degree is not None
    if len(pts[0]) < degree + 1:
        sec.checker.report(
            (*sec.path, "points"),
            f"{len(pts[0])} points cannot determine a degree-{int(degree)} fit; give at least {int(degree) + 1}",
        )
        return None
    prov: Provenance = provenance  # type: ignore[assignment]
    return ProfilePoints(
        lengths_tokens=pts[0], values=pts[1], fit_degree=int(degree), provenance=prov, source=str(source)
    )


_POINTS_KEYS = ("provenance", "source", "fit_degree", "points")


def _instance_profile(checker: Checker, path: KeyPath, raw: Any) -> InstanceProfile | None:
    sec = Section(
        checker,
        path,
        raw,
        required=("model", "gpus_per_instance", "prefill"),
        optional=("engine", "kv_cache", "decode"),
    )
    model = sec.string("model")
    gpus = sec.number("gpus_per_instance", ge=1, le=MAX_GPUS_PER_INSTANCE, integer=True)
    engine = sec.string("engine", default="unspecified")
    prefill = _profile_points(sec.sub("prefill", required=_POINTS_KEYS), "latency_s", 1.0, MAX_STEP_S, MIN_STEP_S)
    kv = None
    if sec.has("kv_cache"):
        kv = _profile_points(sec.sub("kv_cache", required=_POINTS_KEYS), "size_mib", MIB, MAX_KV_MIB, MIN_KV_MIB)
    decode = None
    if sec.has("decode"):
        d = sec.sub("decode", required=("provenance", "source", "max_batch", "step_time_s"))
        batch = d.number("max_batch", ge=1, le=MAX_DECODE_BATCH, integer=True)
        step = d.number("step_time_s", gt=0, ge=MIN_STEP_S, le=MAX_STEP_S)
        prov = d.string("provenance", choices=PROVENANCES)
        src = d.string("source")
        if None not in (batch, step, prov, src):
            assert batch is not None and step is not None
            decode = DecodeProfile(max_batch=int(batch), step_time_s=step, provenance=prov, source=str(src))  # type: ignore[arg-type]
    if model is None or gpus is None or prefill is None or engine is None:
        return None
    return InstanceProfile(
        model=model, gpus_per_instance=int(gpus), engine=engine, prefill=prefill, kv_cache=kv, decode=decode
    )


_HARDWARE_KEYS = (
    "scale_up_bandwidth_gb_per_s",
    "scale_out_gbit_per_s",
    "scale_up_gpus",
    "tdp_w",
    "price_usd_per_gpu_hour",
)


def load_hardware(path: Path) -> HardwareProfile:
    """Read one ``hardware_profiles/*.yaml``: the accelerator's datasheet and its (model, instance) profiles."""
    doc = load_yaml(path, display_path(path))
    checker = Checker(doc)
    root = checker.root(required=("hardware",), optional=("profiles", "kernel_shapes"))
    hw = root.sub(
        "hardware",
        required=("name", "memory_gb", "hbm_bandwidth_tb_per_s", "dense_tflops", "confidence", "source"),
        optional=_HARDWARE_KEYS,
    )
    flops = hw.sub("dense_tflops", optional=("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"))
    dense = {}
    for key in flops.data if not flops.dead else ():
        value = flops.number(str(key), gt=0, ge=MIN_DENSE_TFLOPS, le=MAX_DENSE_TFLOPS)
        if value is not None:
            dense[str(key)] = value * TFLOP_PER_S
    if not flops.dead and not flops.data:
        checker.report(flops.path, "give at least one dtype's dense TFLOP/s")
    name = hw.string("name")
    memory = hw.number("memory_gb", gt=0, ge=MIN_MEMORY_GB, le=MAX_MEMORY_GB)
    bandwidth = hw.number("hbm_bandwidth_tb_per_s", gt=0, ge=MIN_HBM_TB_PER_S, le=MAX_HBM_TB_PER_S)
    scale_up = hw.number("scale_up_bandwidth_gb_per_s", gt=0, ge=MIN_LINK_GBIT_PER_S, le=MAX_LINK_GB_PER_S)
    scale_out = hw.number("scale_out_gbit_per_s", gt=0, ge=MIN_LINK_GBIT_PER_S, le=MAX_LINK_GB_PER_S)
    domain = hw.number("scale_up_gpus", ge=1, le=MAX_GPUS_PER_INSTANCE, integer=True)
    tdp = hw.number("tdp_w", gt=0, le=MAX_TDP_W)
    price = hw.number("price_usd_per_gpu_hour", gt=0, le=MAX_PRICE_USD_PER_HOUR)
    confidence = hw.string("confidence", choices=("high", "medium", "low"))
    source = hw.string("source")
    profiles = []
    for item_path, item in root.items("profiles") if root.has("profiles") else []:
        profile = _instance_profile(checker, item_path, item)
        if profile is not None:
            profiles.append(profile)
    shapes = None
    if root.has("kernel_shapes"):
        sec = root.sub(
            "kernel_shapes",
            required=("gemm_half_rows", "source"),
            optional=("attention_half_context_tokens", "moe_load_skew", "memory_efficiency"),
        )
        half_rows = sec.number("gemm_half_rows", ge=0, le=MAX_TOKENS)
        half_context = sec.number("attention_half_context_tokens", ge=0, le=MAX_TOKENS, default=0.0)
        skew = sec.number("moe_load_skew", ge=0, le=MAX_MOE_LOAD_SKEW, default=0.0)
        memory_efficiency = (
            sec.number("memory_efficiency", gt=0, le=MAX_MEASURED_MEMORY_EFFICIENCY)
            if sec.has("memory_efficiency")
            else None
        )
        shapes_source = sec.string("source")
        if None not in (half_rows, half_context, skew, shapes_source):
            from prfaas_plan.spec.kernel_shapes import KernelShapes

            shapes = KernelShapes(
                gemm_half_rows=float(half_rows or 0.0),
                attention_half_context_tokens=float(half_context or 0.0),
                moe_load_skew=float(skew or 0.0),
                memory_efficiency=None if memory_efficiency is None else float(memory_efficiency),
                source=str(shapes_source),
            )
    checker.raise_if_any()
    assert name is not None and memory is not None and bandwidth is not None
    accelerator = Accelerator(
        key=path.stem,
        name=name,
        memory_bytes=memory * GB,
        hbm_bandwidth_bytes_per_s=bandwidth * TB,
        dense_flop_per_s=dense,
        scale_up_bandwidth_bytes_per_s=None if scale_up is None else scale_up * GB,
        scale_out_bandwidth_bytes_per_s=None if scale_out is None else scale_out * GBIT_PER_S,
        scale_up_gpus=None if domain is None else int(domain),
        tdp_w=tdp,
        price_usd_per_gpu_hour=price,
        confidence=str(confidence),
        source=str(source),
    )
    return HardwareProfile(accelerator=accelerator, profiles=tuple(profiles), file=doc.file, kernel_shapes=shapes)


# --------------------------------------------------------------------------------------------- serving defaults

_SERVING_QUANTITIES = {"latency_s": ("latency_s", 1.0), "kv_throughput_gbit_per_s": ("kv_bytes_per_s", GBIT_PER_S)}


def _serving_points(checker: Checker, path: KeyPath, raw: Any) -> ServingPoints | None:
    from prfaas_plan.spec.engine import ServingPoints

    sec = Section(
        checker,
        path,
        raw,
        required=("model", "hardware", "gpus_per_instance", "engine", "source"),
        optional=tuple(_SERVING_QUANTITIES),
    )
    given = [key for key in _SERVING_QUANTITIES if sec.has(key)]
    if len(given) != 1:
        checker.report(path, f"give exactly one of {', '.join(_SERVING_QUANTITIES)}")
        return None
    quantity, scale = _SERVING_QUANTITIES[given[0]]
    lengths: list[float] = []
    values: list[float] = []
    for point_path, item in sec.items(given[0]):
        point = Section(checker, point_path, item, required=("length_tokens", "value"))
        length = point.number("length_tokens", ge=MIN_TOKENS, le=MAX_TOKENS)
        value = point.number("value", gt=0)
        if length is not None and value is not None:
            lengths.append(length)
            values.append(value * scale)
    model, hardware, engine, source = (sec.string(k) for k in ("model", "hardware", "engine", "source"))
    gpus = sec.number("gpus_per_instance", ge=1, le=MAX_GPUS_PER_INSTANCE, integer=True)
    if None in (model, hardware, engine, source, gpus) or not lengths:
        return None
    return ServingPoints(
        model=str(model),
        hardware=str(hardware),
        gpus_per_instance=int(gpus or 1),
        engine=str(engine),
        quantity=quantity,  # type: ignore[arg-type]
        lengths_tokens=tuple(lengths),
        values=tuple(values),
        source=str(source),
    )


def load_serving_defaults(path: Path) -> ServingDefaults:
    """Read ``hardware_profiles/serving/defaults.yaml``: the fitted serving parameters, their priors and the
    observations they were fitted to; every problem is reported with file, line and field."""
    from prfaas_plan.spec.engine import ServingDefaults

    doc = load_yaml(path, display_path(path))
    checker = Checker(doc)
    root = checker.root(required=("serving", "observations"))
    serving = root.sub("serving", required=("source", "fitted", "priors", "kernel_shapes"))
    fitted = serving.sub(
        "fitted",
        required=("compute_efficiency", "attention_efficiency", "request_overhead_s", "layer_overhead_ms"),
    )
    priors = serving.sub(
        "priors", required=("memory_efficiency", "communication_efficiency", "prefill_chunk_tokens", "source")
    )
    efficiencies = {
        key: section.number(key, gt=0, le=1)
        for section, key in (
            (fitted, "compute_efficiency"),
            (fitted, "attention_efficiency"),
            (priors, "memory_efficiency"),
            (priors, "communication_efficiency"),
        )
    }
    overhead = fitted.number("request_overhead_s", ge=0, le=MAX_STEP_S)
    layer_ms = fitted.number("layer_overhead_ms", ge=0, le=1000 * MAX_STEP_S)
    chunk = priors.number("prefill_chunk_tokens", ge=1, le=MAX_TOKENS, integer=True)
    serving.string("source")
    priors.string("source")
    shapes = serving.sub(
        "kernel_shapes",
        required=("attention_half_context_tokens", "moe_load_skew", "expert_parallel", "source", "attention_points"),
    )
    half_context = shapes.number("attention_half_context_tokens", ge=0, le=MAX_TOKENS)
    skew = shapes.number("moe_load_skew", ge=0, le=MAX_MOE_LOAD_SKEW)
    expert_parallel = shapes.boolean("expert_parallel", default=False)
    shapes.string("source")
    curve: list[tuple[float, float]] = []
    for point_path, item in shapes.items("attention_points"):
        point = Section(checker, point_path, item, required=("sequence_tokens", "tflop_per_s"))
        length = point.number("sequence_tokens", ge=MIN_TOKENS, le=MAX_TOKENS)
        rate = point.number("tflop_per_s", gt=0, ge=MIN_DENSE_TFLOPS, le=MAX_DENSE_TFLOPS)
        if length is not None and rate is not None:
            curve.append((length, rate * TFLOP_PER_S))
    observations = [_serving_points(checker, p, item) for p, item in root.items("observations")]
    checker.raise_if_any()
    assert overhead is not None and layer_ms is not None and chunk is not None
    assert half_context is not None and skew is not None and expert_parallel is not None
    return ServingDefaults(
        params=RooflineParams(
            overhead_s=overhead,
            layer_overhead_s=layer_ms / 1000,
            prefill_chunk_tokens=float(chunk),
            attention_half_context_tokens=half_context,
            moe_load_skew=skew,
            expert_parallel=expert_parallel,
            source=f"serving defaults fitted to published prefill latencies ({display_path(path)})",
            **_efficiency_kwargs(efficiencies),
        ),
        observations=tuple(o for o in observations if o is not None),
        file=display_path(path),
        attention_sequence_tokens=tuple(length for length, _ in curve),
        attention_flop_per_s=tuple(rate for _, rate in curve),
    )


def _efficiency_kwargs(efficiencies: dict[str, float | None]) -> dict[str, Any]:
    """The checked efficiencies as ``RooflineParams`` keyword arguments (the unchecked ones left to defaults)."""
    return {k: float(v) for k, v in efficiencies.items() if v is not None}
