"""``prfaas-plan kv``: KV size, prefill time and KV throughput per length (the paper's Table 3 layout)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

import typer

from prfaas_plan.cli.common import check_finite, emit, handled
from prfaas_plan.io.limits import MAX_STEP_S
from prfaas_plan.spec.hardware import RooflineParams

if TYPE_CHECKING:
    from prfaas_plan.spec.scenario import ModelCard, Pool

_DEFAULT_LENGTHS = [1_000, 8_000, 32_000, 128_000]
_DEFAULTS = RooflineParams()


def kv(
    model: Annotated[str, typer.Option("--model", help="Model card name (workloads/models/NAME.yaml) or path.")],
    hardware: Annotated[str, typer.Option("--hardware", help="Hardware profile name or path.")],
    gpus: Annotated[
        int, typer.Option("--gpus", help="GPUs per instance (at most 1,024: a rack-scale domain).", min=1, max=1024)
    ] = 8,
    length: Annotated[
        list[int] | None,
        typer.Option(
            "--length",
            help="Uncached input length in tokens (repeatable; at most 10,000,000, about the longest context "
            "window of current models).",
            min=1,
            max=10_000_000,
        ),
    ] = None,
    method: Annotated[
        str,
        typer.Option("--method", help="roofline (datasheet), calibrated (fitted to measured points) or measured."),
    ] = "roofline",
    compute_efficiency: Annotated[
        float | None,
        typer.Option(
            "--compute-efficiency",
            help="Roofline GEMM e_c, every GEMM's in every dtype, the routed experts' too (default: the engine's "
            "figures for the accelerator's generation, its experts at its factor of them; "
            f"{_DEFAULTS.compute_efficiency:g} with --engine paper-fit).",
            min=1e-6,
            max=1.0,
        ),
    ] = None,
    memory_efficiency: Annotated[
        float | None,
        typer.Option(
            "--memory-efficiency", help=f"Roofline e_m (default {_DEFAULTS.memory_efficiency:g}).", min=1e-6, max=1.0
        ),
    ] = None,
    overhead_s: Annotated[
        float | None,
        typer.Option(
            "--overhead-s",
            help="Serving overhead per prefill request, s (default: the engine's; "
            f"{_DEFAULTS.overhead_s:g} with --engine paper-fit).",
            min=0.0,
            max=MAX_STEP_S,  # as an engine profile's per-request cost
        ),
    ] = None,
    kernel_only: Annotated[
        bool,
        typer.Option("--kernel-only", help="Price the kernels alone: no per-request or per-layer serving overhead."),
    ] = False,
    engine: Annotated[
        str | None,
        typer.Option(
            "--engine",
            help="Serving engine whose profile prices the roofline: sglang (the default), vllm, trtllm (built-in, "
            "fitted on the public corpus), a profile's YAML path, or paper-fit (the serving defaults fitted to "
            "the paper's Tables 3 and 5 alone).",
        ),
    ] = None,
    weights_dtype: Annotated[
        str | None,
        typer.Option(
            "--weights-dtype",
            help="Serve the weights in this dtype (bf16, fp8, fp4, int4, ...): every matrix, routed experts "
            "included, but the embeddings, which stay as the card stores them.",
        ),
    ] = None,
    kv_dtype: Annotated[str | None, typer.Option("--kv-dtype", help="Store the KV cache in this dtype.")] = None,
    decode_batch: Annotated[
        int | None,
        typer.Option("--decode-batch", help="Also price one decode step of this many sequences.", min=1, max=65_536),
    ] = None,
    context: Annotated[
        int,
        typer.Option("--context", help="Context tokens of each sequence in the decode step.", min=1, max=10_000_000),
    ] = 8_000,
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """S_kv, T_prefill and Φ_kv = S_kv / T_prefill of one instance at each length.

    Example: prfaas-plan kv --model minimax-m2.5 --hardware h200 --length 32000 --length 128000

    T_prefill is serving time: kernels plus what the serving engine adds (--engine, SGLang's profile unless
    another is named; hardware_profiles/serving/engines/); --kernel-only drops the overheads. Φ_kv divides S_kv
    by T_prefill plus the engine's KV handoff (a disaggregated prefill instance's wait until its KV is handed
    off; not in the planner's prefill curves). The roofline
    options override the engine's figures, e.g. --compute-efficiency 0.3 --overhead-s 0.4.
    """
    from prfaas_plan.errors import InputError, Problem
    from prfaas_plan.io.names import pool_for
    from prfaas_plan.physics.table3 import kv_rows
    from prfaas_plan.report.plans import kv_rows_to_dict

    with handled():
        calibrated = method == "calibrated"
        overrides = _overrides(compute_efficiency, memory_efficiency, overhead_s, kernel_only and not calibrated)
        for flag, key in (("--compute-efficiency", "compute_efficiency"), ("--overhead-s", "overhead_s")):
            if calibrated and key in overrides:
                raise InputError(Problem(field=flag, message="is what --method calibrated fits; leave it out"))
        pool, card = pool_for(
            model,
            hardware,
            gpus,
            method,
            overrides,
            {"model": "--model", "hardware": "--hardware", "method": "--method"},
        )
        pool, card, engine_label, engine_key = _served(
            pool, card, engine, weights_dtype, kv_dtype, kernel_only and not calibrated, decode_batch, overrides
        )
        banded = pool  # a calibrated pool's error band is its calibration's (``_add_domain``)
        if calibrated:
            pool = _fitted(pool, card, kernel_only)
        lengths = tuple(float(v) for v in (length or _DEFAULT_LENGTHS))
        rows = kv_rows(pool, card, lengths)
        payload = kv_rows_to_dict(card.key, pool.hardware_key, rows)
        payload["engine"] = engine_label
        runs = _Runs()
        if pool.method != "measured":
            _add_splits(payload, pool, card, lengths, decode_batch, float(context))
            _add_domain(payload, engine, banded, card)
            runs = _add_runs(payload, pool, card, engine_key)
    if json_output:
        emit(payload)
        return
    from prfaas_plan.cli.render import console, kv_table

    out = console()
    out.print(kv_table(payload))
    out.print(f"source: {rows[0].source}", style="dim")
    if "decode" in payload:
        d = payload["decode"]
        out.print(
            f"decode step: batch {d['batch']} at {d['context_tokens']:,.0f} tokens: {d['step_s'] * 1e3:.2f} ms "
            f"(compute {d['compute_s'] * 1e3:.2f}, memory {d['memory_s'] * 1e3:.2f}, communication "
            f"{d['communication_s'] * 1e3:.2f}, engine overhead {d['overhead_s'] * 1e3:.2f} ms)"
        )
    if "band_borrowed" in payload:
        out.print(f"note: {payload['band_borrowed']}", style="yellow")
    for note in dict.fromkeys(
        part["outside_band"] for part in (*payload["rows"], payload.get("decode", {})) if "outside_band" in part
    ):
        out.print(f"note: {note}", style="yellow")
    for where, note in runs.printed():
        out.print(f"note: {where}: {note}", style="bold red")


_PARTS = ("compute_s", "memory_s", "communication_s", "overhead_s")


@dataclass
class _Runs:
    """Why the configuration priced cannot run (``_add_runs``): for every row and the decode step (``common``),
    for one row (``rows``, by length) or for the decode step (``decode``); and where it runs outside what the
    model covers (``not_modelled``)."""

    common: list[str] = field(default_factory=list)
    rows: dict[float, str] = field(default_factory=dict)
    decode: str | None = None
    #: What runs but the model does not cover, for every row and the decode step (``not_modelled``).
    not_modelled: list[str] = field(default_factory=list)

    def printed(self) -> list[tuple[str, str]]:
        """(where, why) for the table output's note lines."""
        out = [("not modelled", why) for why in self.not_modelled]
        out += [("does not run", why) for why in self.common]
        out += [(f"does not run at {length:,.0f} tokens", why) for length, why in self.rows.items()]
        if self.decode is not None:
            out.append(("decode step does not run", self.decode))
        return out


def _overrides(
    compute_efficiency: float | None, memory_efficiency: float | None, overhead_s: float | None, zero: bool
) -> dict[str, float]:
    """The roofline options given (checked finite), the per-request overhead zeroed where ``zero`` (--kernel-only on
    a roofline pool, so that an --overhead-s beside it adds nothing; ``_served`` drops every other serving overhead
    with ``RooflineParams.kernel_only``; a calibrated pool is made kernel-only after its fit, ``_fitted``, since
    zeroed before, the fit would put the overhead back into its per-request term)."""
    check_finite(
        {
            "--compute-efficiency": compute_efficiency,
            "--memory-efficiency": memory_efficiency,
            "--overhead-s": overhead_s,
        }
    )
    return {
        key: value
        for key, value in (
            ("compute_efficiency", compute_efficiency),
            ("memory_efficiency", memory_efficiency),
            ("overhead_s", 0.0 if zero else overhead_s),
        )
        if value is not None
    }


def _served(
    pool: Pool,
    card: ModelCard,
    engine: str | None,
    weights_dtype: str | None,
    kv_dtype: str | None,
    kernel_only: bool,
    decode_batch: int | None,
    overrides: dict[str, float],
) -> tuple[Pool, ModelCard, str, str | None]:
    """The pool priced by ``engine`` (``io.engine_profile.engine_choice``: the default engine when None) on its
    accelerator's generation, the roofline options' ``overrides`` over the engine's figures, and the card served
    in the given dtypes; the engine's label, and its profile's key (None for measured points or paper-fit). Bad
    combinations are InputErrors naming the flag."""
    from dataclasses import replace

    from prfaas_plan.errors import InputError, Problem
    from prfaas_plan.io.engine_profile import engine_choice, generation_of, load_named_engine
    from prfaas_plan.physics.engine import engine_params, with_dtypes
    from prfaas_plan.spec.model import DTYPE_BYTES

    for flag, value in (("--engine", engine), ("--weights-dtype", weights_dtype), ("--kv-dtype", kv_dtype)):
        if value is not None and pool.method == "measured":
            raise InputError(Problem(field=flag, message="prices a roofline or calibrated pool, not measured points"))
    if decode_batch is not None and pool.method == "measured":
        raise InputError(Problem(field="--decode-batch", message="needs --method roofline or calibrated"))
    for flag, value in (("--weights-dtype", weights_dtype), ("--kv-dtype", kv_dtype)):
        if value is not None and value not in DTYPE_BYTES:
            known = ", ".join(DTYPE_BYTES)
            raise InputError(Problem(field=flag, message=f"unknown dtype '{value}'; known: {known}"))
    if (weights_dtype or kv_dtype) and card.architecture is not None:
        arch = with_dtypes(card.architecture, weights_dtype, kv_dtype)
        card = replace(card, architecture=arch)
    if pool.method == "measured":
        return pool, card, "measured points", None
    chosen = engine_choice(engine)
    if chosen is None:
        if kernel_only:
            pool = replace(pool, roofline=pool.roofline.kernel_only)
        return (
            pool,
            card,
            "paper-fit: serving defaults (SGLang and vLLM on 8xH200, fitted to the paper's Tables 3, 5)",
            None,
        )
    profile = load_named_engine(chosen, "--engine")
    generation = generation_of(pool.hardware_key)
    params = engine_params(profile, generation, base=pool.roofline)
    if kernel_only:
        params = params.kernel_only
    if overrides:  # the options set over the engine's figures (compute_efficiency: every GEMM at the rate given)
        note = f"{params.source}; command-line overrides"
        fields: dict[str, Any] = dict(overrides)  # float fields only (the options that set them)
        if "compute_efficiency" in fields:
            params = params.one_gemm_rate(fields.pop("compute_efficiency"))
        params = replace(params, source=note, **fields)
    label = f"{profile.name} ({profile.file}) on {generation}"
    return replace(pool, roofline=params), card, label, profile.key


def _fitted(pool: Pool, card: ModelCard, kernel_only: bool) -> Pool:
    """A calibrated pool as the roofline pool of its fitted parameters (kernel-only after the fit where asked), so
    that the rows, their splits and the decode step are all priced with what the calibration fitted."""
    from dataclasses import replace

    from prfaas_plan.physics.pools import calibrated_params

    assert pool.calibration is not None and pool.calibration_accelerator is not None  # pool_for's calibrated pool
    assert card.architecture is not None  # pool_for refuses a calibrated pool of a card without one
    fitted = calibrated_params(pool, card.architecture)
    source = (
        f"calibrated on {pool.calibration_accelerator.key} {pool.calibration.prefill.provenance} points "
        f"over {pool.roofline.source}"
    )
    params = replace(
        fitted.kernel_only if kernel_only else fitted, source=source + (", kernel only" if kernel_only else "")
    )
    return replace(pool, method="roofline", roofline=params, calibration=None, calibration_accelerator=None)


def _add_domain(payload: dict[str, Any], engine: str | None, pool: Pool, card: ModelCard) -> None:
    """Where a row's prompt (or the decode step's context or batch) lies outside the range of the measurements
    behind the pricing's error band (a calibrated pool's prefill: its calibration points), or the band holds too
    few of the model's kind or the GPU's generation (``PhaseBand.beyond``), say so on that row (``outside_band``):
    the band does not cover it."""
    from pathlib import Path

    from prfaas_plan.io.engine_profile import engine_choice, generation_of
    from prfaas_plan.io.error_bands import pool_band
    from prfaas_plan.spec.uncertainty import model_kind
    from prfaas_plan.studies.uncertainty import calibrated_band

    band = pool_band(engine_choice(engine), Path.cwd())
    if pool.method == "calibrated":
        band = calibrated_band(pool, card, band)
    if band.prefill.borrowed_from:  # a profile nobody cross-validated: its times are not checked on anything
        payload["band_borrowed"] = (
            f"the engine profile's times were never cross-validated: its error band is borrowed ({band.prefill.basis})"
        )
    kind = "" if card.architecture is None else model_kind(card.architecture)
    generation = generation_of(pool.hardware_key)
    for row in payload["rows"]:
        note = band.prefill.beyond("prefill", row["length_tokens"], kind=kind, model=card.key, generation=generation)
        if note:
            row["outside_band"] = note
    if "decode" in payload:
        d = payload["decode"]
        note = band.decode.beyond(
            "decode", d["context_tokens"], d["batch"], kind=kind, model=card.key, generation=generation
        )
        if note:
            d["outside_band"] = note


def _add_splits(
    payload: dict[str, Any],
    pool: Pool,
    card: ModelCard,
    lengths: tuple[float, ...],
    decode_batch: int | None,
    context_tokens: float,
) -> None:
    """Each row's batch-1 prefill split (compute, memory, communication, engine overhead), and the decode step
    when asked."""
    from prfaas_plan.physics.engine import decode_split, prefill_splits
    from prfaas_plan.physics.roofline import Instance

    arch = card.architecture
    assert arch is not None  # roofline and calibrated pools have an architecture (the loader checks)
    instance = Instance(accelerator=pool.accelerator, gpus=pool.gpus_per_instance)
    for row, split in zip(payload["rows"], prefill_splits(arch, instance, pool.roofline, lengths), strict=True):
        row["prefill_split"] = {part: getattr(split, part) for part in _PARTS}
    if decode_batch is not None:
        step = decode_split(arch, instance, pool.roofline, decode_batch, context_tokens)
        payload["decode"] = {
            "batch": decode_batch,
            "context_tokens": context_tokens,
            "step_s": step.total_s,
            **{part: getattr(step, part) for part in _PARTS},
        }


#: How kv is asked for a lower weight dtype (``MemoryFit.describe``).
_DTYPE_HINT = "(--weights-dtype)"


#: Engines that do not run on a generation of accelerator (``io.engine_profile.generation_of``), by the engine
#: profile's key: why not.
_ENGINE_NOT_ON = {"trtllm": {"cdna3": "TensorRT-LLM runs on NVIDIA GPUs only, and {hardware} is an AMD CDNA 3 part"}}


def _add_runs(payload: dict[str, Any], pool: Pool, card: ModelCard, engine_key: str | None) -> _Runs:
    """Where the configuration priced cannot run, say so on each row and the decode step it concerns
    (``does_not_run``, one sentence; absent where it runs): the numbers stay, kv being a what-if calculator, but a
    confident number for a machine that cannot hold the model is the worst thing it can print. Memory is the
    planner's check (``physics.fit.memory_fit``: weights plus one request's KV/state against g x HBM x the usable
    fraction) at each row's length; at the decode step, the weights plus the batch's KV/state at its context,
    with the largest batch that would fit (``physics.decode.decode_capacity``'s memory limit). Tensor parallelism
    the model's attention heads do not allow (``physics.fit.tensor_parallel_problem``) concerns every row. More GPUs
    than a profile without scale-out models (``physics.fit.scale_up_problem``: the PCIe cards) run, but outside the
    model: every row and the decode step say so (``not_modelled``). So does an engine the accelerator cannot run
    (``_ENGINE_NOT_ON``: TensorRT-LLM on AMD parts)."""
    from prfaas_plan.io.engine_profile import generation_of
    from prfaas_plan.physics.fit import memory_fit, scale_up_problem, tensor_parallel_problem

    arch = card.architecture
    assert arch is not None  # roofline and calibrated pools have an architecture (the loader checks)
    gpus, where = pool.gpus_per_instance, f"{pool.gpus_per_instance} x {pool.hardware_key}"
    runs = _Runs()
    elsewhere = _ENGINE_NOT_ON.get(engine_key or "", {}).get(generation_of(pool.hardware_key))
    if elsewhere:
        runs.common.append(elsewhere.format(hardware=pool.hardware_key))
    split = tensor_parallel_problem(arch, gpus)
    if split:
        runs.common.append(
            f"{split}: vLLM and SGLang refuse such a tensor-parallel size; the time here divides attention and "
            f"the GEMMs by {gpus} all the same"
        )
    link = scale_up_problem(pool.accelerator, gpus)
    if link:
        runs.not_modelled.append(link)
    for row in payload["rows"]:
        fit = memory_fit(arch, pool.accelerator, gpus, row["length_tokens"])
        if not fit.fits:
            runs.rows[row["length_tokens"]] = f"{where}: {fit.describe(_DTYPE_HINT)}"
        _say(row, "does_not_run", [*runs.common, *filter(None, [runs.rows.get(row["length_tokens"])])])
        _say(row, "not_modelled", runs.not_modelled)
    if "decode" in payload:
        runs.decode = _decode_memory(payload["decode"], pool, card, where)
        _say(payload["decode"], "does_not_run", [*runs.common, *filter(None, [runs.decode])])
        _say(payload["decode"], "not_modelled", runs.not_modelled)
    return runs


def _say(part: dict[str, Any], key: str, why: list[str]) -> None:
    """Set ``part[key]`` to the reasons, joined; leave it absent where there are none."""
    if why:
        part[key] = "; ".join(why)


def _decode_memory(decode: dict[str, Any], pool: Pool, card: ModelCard, where: str) -> str | None:
    """Why the decode step's batch cannot be held (its weights, or their KV/state at its context beside the
    weights), with the largest batch that fits; None when it can."""
    from prfaas_plan.physics.decode import memory_batch_limit
    from prfaas_plan.physics.fit import memory_fit
    from prfaas_plan.physics.roofline import Instance

    arch = card.architecture
    assert arch is not None
    batch, context = int(decode["batch"]), float(decode["context_tokens"])
    one = memory_fit(arch, pool.accelerator, pool.gpus_per_instance, context)
    if not one.fits:
        none = f"not one sequence of {context:,.0f} tokens fits, so no batch of {batch:,}"
        return f"{where}: {one.describe(_DTYPE_HINT)}; {none}"
    largest = memory_batch_limit(arch, Instance(accelerator=pool.accelerator, gpus=pool.gpus_per_instance), context)
    if batch <= largest:
        return None
    need = one.weights_bytes + batch * one.request_bytes
    gb = 1e9
    return (
        f"{where}: weights {one.weights_bytes / gb:,.0f} GB + the batch's cache {batch:,} x "
        f"{one.request_bytes / gb:,.2f} GB exceed the {one.gpus} GPUs' usable {one.usable_bytes / gb:,.0f} GB by "
        f"{(need - one.usable_bytes) / gb:,.0f} GB; the largest batch that fits at {context:,.0f} tokens is {largest:,}"
    )
