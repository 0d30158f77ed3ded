"""``prfaas-plan calibrate``: an engine profile fitted on the user's own serving benchmark results."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from prfaas_plan.cli.common import check_finite, emit, handled


def calibrate(
    files: Annotated[
        list[str],
        typer.Argument(
            help="Result files: vLLM serving benchmark JSON, SGLang bench_serving or bench_one_batch JSONL, "
            "AIPerf / GenAI-Perf profile export JSON or CSV (the format is detected).",
            show_default=False,
        ),
    ],
    model: Annotated[str, typer.Option("--model", help="Model card the benchmarks served (name or path).")],
    hardware: Annotated[str, typer.Option("--hardware", help="Hardware profile of the benchmarked GPUs.")],
    gpus: Annotated[int, typer.Option("--gpus", min=1, max=1024, help="GPUs of the benchmarked instance (TP).")] = 8,
    engine: Annotated[
        str, typer.Option("--engine", help="Base engine whose terms are refitted: sglang, vllm, trtllm or a path.")
    ] = "sglang",
    weights_dtype: Annotated[
        str | None, typer.Option("--weights-dtype", help="Dtype the weights were served in (default: the card's).")
    ] = None,
    kv_dtype: Annotated[str | None, typer.Option("--kv-dtype", help="KV-cache dtype (default: the card's).")] = None,
    coverage: Annotated[
        float,
        typer.Option("--coverage", min=0.5, max=0.99, help="Share of held-out errors the error band covers."),
    ] = 0.8,
    max_prefill_occupancy: Annotated[
        float,
        typer.Option(
            "--max-prefill-occupancy",
            min=0.0,
            max=1.0,
            help="Use a serving run's TTFT as a batch-1 prefill only when requests in their TTFT (Little's law) "
            "average at most this.",
        ),
    ] = 0.2,
    out: Annotated[str | None, typer.Option("--out", help="Write the calibrated engine profile (YAML) here.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace a profile this command wrote before.")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")] = False,
) -> None:
    """Fit an engine profile's terms (GEMM efficiency, per-request, per-chunk and per-step costs) to your own
    benchmark results, cross-validate it (leave one measurement out) and write it as a profile a scenario's pool
    can name (engine: profile.yaml), with every file's hash, what was read from it and the fit's residuals.

    Example: prfaas-plan calibrate run.json --model llama-3.1-70b --hardware h200 --gpus 4 --engine vllm --out my.yaml
    """
    from prfaas_plan.report.engine_calibration import calibration_section, write_calibration
    from prfaas_plan.studies.bench_calibration import calibrate_files

    with handled(json_output):
        check_finite({"--coverage": coverage, "--max-prefill-occupancy": max_prefill_occupancy})
        if out is not None:
            from prfaas_plan.report.engine_calibration import OWNER
            from prfaas_plan.report.files import check_file

            check_file(out, owner=OWNER, force=force)
        cal = calibrate_files(
            files,
            model=model,
            hardware=hardware,
            gpus=gpus,
            engine=engine,
            weights_dtype=weights_dtype,
            kv_dtype=kv_dtype,
            coverage=coverage,
            max_prefill_occupancy=max_prefill_occupancy,
        )
        written = str(write_calibration(cal, out, force=force)) if out is not None else None
        payload = {"profile": written, **calibration_section(cal)}
    if json_output:
        emit(payload)
        return
    _print(payload)


def _print(payload: dict[str, Any]) -> None:
    from prfaas_plan.cli.render import DataTable, console

    out = console()
    table = DataTable(
        title=f"Calibration of {payload['base_engine']['key']}: {payload['model']} on "
        f"{payload['gpus']} x {payload['hardware']} (predicted / measured)"
    )
    for column in ("measurement", "phase", "batch", "tokens", "measured ms", "fitted", "held out"):
        table.add_column(column, justify="left" if column in ("measurement", "phase") else "right")
    for m in payload["measurements"]:
        table.add_row(
            m["id"],
            m["phase"],
            str(m["batch"]),
            f"{m['tokens']:,.0f}",
            f"{m['measured_s'] * 1e3:.2f}",
            f"{m['fitted_ratio']:.2f}",
            f"{m['held_out_ratio']:.2f}",
        )
    out.print(table)
    out.print("Fitted: " + ", ".join(f"{k} {v:.4g}" for k, v in payload["fitted_values"].items()))
    band = payload["error_band"]
    for phase in ("prefill", "decode"):
        out.print(f"Error band, {phase}: x/÷ {band[phase]['factor']:.2f} ({band[phase]['basis']})")
    for f in payload["files"]:
        tag = " [synthetic]" if f["synthetic"] else ""
        out.print(
            f"{f['path']}{tag}: {f['format']}, sha256 {f['sha256'][:16]}…, {f['runs']} run(s), "
            f"{len(f['read'])} measurement(s) read"
        )
        for why in f["not_used"]:
            out.print(f"  not used: {why}")
    out.print("Assumptions: " + "; ".join(payload["assumptions"]))
    for note in payload["notes"]:
        out.print(f"note: {note}")
    for m in payload["measurements"]:
        out.print(f"  {m['id']}: {m['assumption']}")
    if payload["profile"]:
        out.print(f"Wrote {payload['profile']}")
