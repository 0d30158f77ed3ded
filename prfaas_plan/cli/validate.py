"""``prfaas-plan validate kernel``: the physics against the reference kernel, and the roofline against its time."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from prfaas_plan.cli.common import check_output, emit, handled, profile_owner
from prfaas_plan.errors import InputError, Problem

if TYPE_CHECKING:
    from prfaas_plan.reference.checks import CountChecks
    from prfaas_plan.reference.machine import RoutingStudy
    from prfaas_plan.reference.timing import TimingStudy
    from prfaas_plan.spec.model import Architecture

validate_app = typer.Typer(
    no_args_is_help=True,
    help="Check the planner's physics against a real (small) forward pass.",
)

DEFAULT_MODEL = "qwen3-next-80b-a3b"


@validate_app.command("kernel")
def kernel(
    size: Annotated[
        str, typer.Option("--size", help="Timed card and passes: small (about 20 s), medium or large (minutes).")
    ] = "small",
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help=f"Model card (file or built-in name) to check and time; default: count checks on every built-in "
            f"card, shrunk, and {DEFAULT_MODEL} timed.",
        ),
    ] = None,
    shrink: Annotated[
        bool, typer.Option("--shrink", help="Shrink --model to reference size first (default: check it as is).")
    ] = False,
    profile_out: Annotated[
        Path | None,
        typer.Option("--profile-out", help="Write the measured accelerator profile here (default: a temp dir)."),
    ] = None,
    seed: Annotated[
        int, typer.Option("--seed", min=0, max=2**63 - 1, help="Seed of the random weights and tokens.")
    ] = 0,
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")] = False,
) -> None:
    """Count checks (FLOPs, bytes, cache size, cache sufficiency) of reference passes against the physics, then
    this machine's peaks written as an accelerator profile, and passes timed against their roofline prediction.

    Example: prfaas-plan validate kernel --json
    Example: prfaas-plan validate kernel --model deepseek-v3 --shrink --size medium
    """
    import numpy as np

    from prfaas_plan.io.hardware import MAX_MEASURED_MEMORY_EFFICIENCY, load_hardware
    from prfaas_plan.reference import checks, machine, timing
    from prfaas_plan.report.files import readable_path
    from prfaas_plan.report.profile import write_accelerator_profile

    with handled():
        if profile_out is not None:
            _check_profile_out(profile_out)
        cards, base = _cards(model, shrink, size)
        rng = np.random.default_rng(seed)
        verdicts = checks.merge_checks([(key, checks.run_count_checks(arch, rng)) for key, arch in cards])
        timed = timing.timing_architecture(base, size)
        peaks = machine.measure_peaks(base, rng, timed=timed)
        routing = machine.measure_routing(timed, rng)
        if peaks.memory_efficiency > MAX_MEASURED_MEMORY_EFFICIENCY:
            # Past the loader's sanity bound: the profile would be refused by its own loader; say why instead,
            # with the count checks' verdict, which needs no timing and was already run.
            counted = count_verdicts(verdicts).values()
            typer.echo(
                f"validate kernel: the timed card's weights read at {peaks.memory_efficiency:.2f} x the dot "
                f"product's rate, above the bound of {MAX_MEASURED_MEMORY_EFFICIENCY:g} this tool accepts: the "
                "measurement was likely disturbed; run again on a quieter machine (the count checks, which time "
                f"nothing: {sum(counted)} of {len(counted)} passed"
                + (f"; {'; '.join(verdicts.problems)}" if verdicts.problems else "")
                + ")",
                err=True,
            )
            raise typer.Exit(1)
        out = profile_out or Path(tempfile.mkdtemp(prefix="prfaas-plan-")) / "this-machine.yaml"
        note = "Measured by `prfaas-plan validate kernel`: achieved rates of numpy on this machine."
        written = write_accelerator_profile(
            machine.machine_accelerator(peaks, machine.physical_memory_bytes()),
            out,
            note,
            machine.machine_kernel_shapes(peaks, routing),
        )
        # Read back through the loader (under --table N the file is held until the command has printed).
        study = timing.run_timing(base, size, load_hardware(readable_path(written)).accelerator, peaks, rng)
    payload = kernel_payload(verdicts, study, written, [key for key, _ in cards], routing)
    failed = [name for name, ok in payload["count_checks"].items() if not ok]
    payload["passed"] = not failed and not payload["problems"]
    if json_output:
        emit(payload)
    else:
        _render(payload)
    if not payload["passed"]:
        # A check that can fail must be able to fail the command: exit 1 (the physics disagrees with the kernel).
        typer.echo(
            f"validate kernel: {len(failed)} count check(s) failed: {', '.join(failed) or 'see problems'}", err=True
        )
        raise typer.Exit(1)


@validate_app.command("gpu")
def gpu(
    hardware: Annotated[
        str, typer.Option("--hardware", help="Accelerator profile: a YAML file or a built-in name (e.g. h200).")
    ],
    size: Annotated[str, typer.Option("--size", help="Card and cases, as validate kernel: small, medium, large.")] = (
        "large"
    ),
    model: Annotated[str, typer.Option("--model", help="Model card (file or built-in name) to time.")] = DEFAULT_MODEL,
) -> None:
    """Time the reference cases' matrix products on this machine's CUDA device (torch, bf16, CUDA graphs) against
    the datasheet roofline of --hardware; prints one JSON object. Needs torch and a GPU (exit 1 without).

    Example: prfaas-plan validate gpu --hardware h200 --size large
    """
    from prfaas_plan.errors import InputError, Problem
    from prfaas_plan.io.names import load_named_hardware, load_named_model
    from prfaas_plan.reference.gpu_timing import gpu_timing_report
    from prfaas_plan.reference.timing import SIZES

    with handled():
        if size not in SIZES:
            raise InputError(Problem(field="--size", message=f"must be one of {', '.join(SIZES)}, got {size!r}"))
        accelerator = load_named_hardware(hardware, "--hardware").accelerator
        card = load_named_model(model, "--model")
        if card.architecture is None:
            raise InputError(Problem(field="--model", message=f"{card.key} has no architecture to time"))
        try:
            import torch
        except ImportError:
            torch = None
        if torch is None or not torch.cuda.is_available():
            reason = "torch is not installed" if torch is None else "no CUDA device is visible"
            typer.echo(f"validate gpu: {reason}: nothing to time on this machine", err=True)
            raise typer.Exit(1)
        report = gpu_timing_report(card.architecture, accelerator, size, torch)
    emit({"hardware": hardware, "model": card.key, **report})


def _check_profile_out(path: Path) -> None:
    """--profile-out must be writable before minutes of timing: the writer creates missing directories, so
    a path under one is checked at its nearest existing ancestor."""
    if path.parent.is_dir():
        check_output(os.fspath(path), "--profile-out", profile_owner())
        return
    ancestor = next((p for p in path.parents if p.exists()), None)
    if ancestor is None or not ancestor.is_dir() or not os.access(ancestor, os.W_OK) or not _can_make_dir(ancestor):
        raise InputError(Problem(field="--profile-out", message=f"{path}: cannot create its directory"))


def _can_make_dir(parent: Path) -> bool:
    """Whether a directory can be made in ``parent``, tried (and removed): permission bits do not tell, as
    under /proc, where even root cannot make one."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".prfaas-plan-probe-", dir=parent))
    except OSError:
        return False
    return True


def _cards(model: str | None, shrink: bool, size: str) -> tuple[list[tuple[str, Architecture]], Architecture]:
    """The cards to count-check (at reference size) and the one to time; InputError for anything unusable."""
    from prfaas_plan.errors import InputError, Problem
    from prfaas_plan.io.models import load_model_card
    from prfaas_plan.io.names import load_named_model
    from prfaas_plan.io.paths import builtin_root
    from prfaas_plan.physics.memory import parameter_count
    from prfaas_plan.reference.model import MAX_REFERENCE_PARAMETERS, check_reference_size
    from prfaas_plan.reference.shrink import shrink_architecture
    from prfaas_plan.reference.timing import SIZES, timing_architecture

    if size not in SIZES:
        raise InputError(Problem(field="--size", message=f"must be one of {', '.join(SIZES)}, got {size!r}"))
    if model is None:
        found = [load_model_card(p) for p in sorted((builtin_root() / "workloads" / "models").glob("*.yaml"))]
        named = [(card.key, card.architecture) for card in found if card.architecture is not None]
        cards = [(key, shrink_architecture(arch)) for key, arch in named]
        base = dict(named)[DEFAULT_MODEL]
    else:
        card = load_named_model(model, "--model")
        if card.architecture is None:
            raise InputError(Problem(field="--model", message=f"{card.key} has no architecture to run"))
        base = card.architecture
        cards = [(card.key, shrink_architecture(base) if shrink else base)]
    for _, arch in cards:
        check_reference_size(arch)
    timed = parameter_count(timing_architecture(base, size))
    if timed > MAX_REFERENCE_PARAMETERS:
        raise InputError(
            Problem(
                field="--size",
                message=f"the {size} timed card has {timed / 1e6:,.0f}M parameters, above the reference kernel's "
                f"limit of {MAX_REFERENCE_PARAMETERS / 1e6:,.0f}M; choose a smaller --size",
            )
        )
    return cards, base


def count_verdicts(verdicts: CountChecks) -> dict[str, bool]:
    """The count checks' verdicts by name, as ``--json`` and the disturbed-measurement message give them."""
    return {
        "flops_exact": verdicts.flops_exact,
        "kv_bytes_exact": verdicts.kv_bytes_exact,
        "cache_sufficient": verdicts.cache_sufficient,
        "bytes_exact": verdicts.bytes_exact,
    }


def kernel_payload(
    verdicts: CountChecks, study: TimingStudy, profile: Path, cards: list[str], routing: RoutingStudy | None = None
) -> dict[str, Any]:
    """The ``--json`` object: count-check verdicts, timing cases, median |ln ratio|, the measured shape curves
    (and the routed experts' load on the timed card, if it routes), and what backs them."""
    peaks = study.peaks
    return {
        "cards_checked": cards,
        "count_checks": count_verdicts(verdicts),
        "timing": [
            {
                "case": r.case,
                "predicted_s": r.predicted_s,
                "measured_s": r.measured_s,
                "ratio": r.ratio,
                "roofline_s": r.roofline_s,
                "launch_overhead_s": r.launch_s,
                "elementwise_s": r.elementwise_s,
                "launches": r.launches,
                "bound": r.bound,
            }
            for r in study.results
        ],
        "median_abs_log_ratio": study.median_abs_log_ratio,
        "median_ratio": study.median_ratio,
        "worst_case": study.worst.case,
        "machine": {
            "matmul_flop_per_s": peaks.matmul_flop_per_s,
            "memory_bytes_per_s": peaks.memory_bytes_per_s,
            "weight_read_bytes_per_s": peaks.weight_read_bytes_per_s,
            "memory_efficiency": peaks.memory_efficiency,
            "copy_bytes_per_s": peaks.copy_bytes_per_s,
            "elementwise_flop_per_s": peaks.elementwise_flop_per_s,
            "launch_overhead_s": peaks.launch_overhead_s,
            "gemm_half_rows": peaks.gemm_half_rows,
            "attention_efficiency": peaks.attention_efficiency,
            "attention_half_context_tokens": peaks.attention_half_context_tokens,
            "steady": peaks.steady,
            "profile": str(profile),
        },
        "moe_routing": None
        if routing is None
        else {
            "tokens": routing.tokens,
            "experts": routing.experts,
            "active_experts": routing.active,
            "layer_calls": routing.layer_passes,
            "observed_busiest_tokens": routing.observed_busiest,
            "uniform_model_busiest_tokens": routing.uniform_busiest,
            "mean_tokens": routing.tokens * routing.active / routing.experts,
            "moe_load_skew": routing.skew,
        },
        "contract_gaps": list(verdicts.contract_gaps),
        "problems": list(verdicts.problems),
    }


def _render(payload: dict[str, Any]) -> None:
    from prfaas_plan.cli.render import DataTable, console

    out = console()
    checks = DataTable(title=f"Count checks on {len(payload['cards_checked'])} card(s) at reference size")
    checks.add_column("check")
    checks.add_column("result")
    for name, ok in payload["count_checks"].items():
        checks.add_row(name, "[green]pass[/green]" if ok else "[red]FAIL[/red]")
    out.print(checks)
    for line in payload["problems"]:
        out.print(f"  {line}", style="red")
    for line in payload["contract_gaps"]:
        out.print(f"  contract gap (kept out of bytes_exact): {line}", style="dim")
    m = payload["machine"]
    timing = DataTable(
        title=(
            f"Reference kernel vs roofline: {m['matmul_flop_per_s'] / 1e9:.1f} GFLOP/s, "
            f"{m['memory_bytes_per_s'] / 1e9:.1f} GB/s (weights read at {m['memory_efficiency']:.2f} of that by "
            f"one-row products), {m['elementwise_flop_per_s'] / 1e9:.2f} element-wise "
            f"GFLOP/s, {m['launch_overhead_s'] * 1e6:.1f} µs per launch, GEMMs at half rate below "
            f"{m['gemm_half_rows']:.0f} rows, attention cores at {m['attention_efficiency']:.2f} of the GEMM rate "
            + (
                f"(half of that at {m['attention_half_context_tokens']:.0f} keys per query)"
                if m["attention_half_context_tokens"] > 0
                else "(no slowdown at short context measured)"
            )
        )
    )
    columns = ("case", "bound", "roofline ms", "launch ms", "elem ms", "predicted ms", "measured ms", "ratio")
    for column in columns:
        timing.add_column(column, justify="left" if column in ("case", "bound") else "right")
    for r in payload["timing"]:
        timing.add_row(
            r["case"],
            r["bound"],
            *(f"{r[key] * 1e3:.2f}" for key in ("roofline_s", "launch_overhead_s", "elementwise_s", "predicted_s")),
            f"{r['measured_s'] * 1e3:.2f}",
            f"{r['ratio']:.2f}",
        )
    out.print(timing)
    out.print(
        f"median predicted/measured = {payload['median_ratio']:.2f}; median |ln(predicted/measured)| = "
        f"{payload['median_abs_log_ratio']:.3f}; worst: {payload['worst_case']}. Predicted = roofline (measured "
        f"peaks, compute efficiencies 1.0, GEMMs on the measured small-M curve, memory at the weight-read rate) + "
        f"launches x launch cost + element-wise "
        f"FLOPs at the measured element-wise rate. Profile written to {m['profile']}.",
        style="dim",
    )
    r = payload["moe_routing"]
    if r is not None:
        out.print(
            f"MoE routing (top-{r['active_experts']} of {r['experts']} experts, {r['tokens']} tokens, "
            f"{r['layer_calls']} layer calls, random router weights): busiest expert "
            f"{r['observed_busiest_tokens']:.1f} tokens against {r['uniform_model_busiest_tokens']:.1f} for "
            "uniform routing (mean "
            f"{r['mean_tokens']:.1f}); fitted skew {r['moe_load_skew']:.3f}.",
            style="dim",
        )
