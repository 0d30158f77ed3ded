"""``prfaas-plan kv``: KV size, prefill time and KV throughput per length (the paper's Table 3 layout)."""

from __future__ import annotations

from typing import Annotated

import typer

from prfaas_plan.cli.common import check_finite, emit, handled
from prfaas_plan.spec.hardware import RooflineParams

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
            help=f"Roofline GEMM e_c (default {_DEFAULTS.compute_efficiency:g}, the serving defaults).",
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
            help=f"Serving overhead per prefill request, s (default {_DEFAULTS.overhead_s:g}).",
            min=0.0,
        ),
    ] = None,
    kernel_only: Annotated[
        bool,
        typer.Option("--kernel-only", help="Price the kernels alone: no per-request or per-layer serving overhead."),
    ] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """S_kv, T_prefill and Φ_kv = S_kv / T_prefill of one instance at each length.

    Example: prfaas-plan kv --model minimax-m2.5 --hardware h200 --length 32000 --length 128000

    T_prefill is serving time: kernels plus the serving overheads fitted to the paper's Tables 3 and 5
    (hardware_profiles/serving/defaults.yaml); --kernel-only drops the overheads. The roofline options
    override the defaults, e.g. --compute-efficiency 0.3 --overhead-s 0.4.
    """
    from prfaas_plan.io.names import pool_for
    from prfaas_plan.physics.table3 import kv_rows
    from prfaas_plan.report.plans import kv_rows_to_dict

    with handled():
        check_finite(
            {
                "--compute-efficiency": compute_efficiency,
                "--memory-efficiency": memory_efficiency,
                "--overhead-s": overhead_s,
            }
        )
        overrides = {
            key: value
            for key, value in (
                ("compute_efficiency", compute_efficiency),
                ("memory_efficiency", memory_efficiency),
                ("overhead_s", 0.0 if kernel_only else overhead_s),
                ("layer_overhead_s", 0.0 if kernel_only else None),
            )
            if value is not None
        }
        pool, card = pool_for(
            model,
            hardware,
            gpus,
            method,
            overrides,
            {"model": "--model", "hardware": "--hardware", "method": "--method"},
        )
        rows = kv_rows(pool, card, tuple(float(v) for v in (length or _DEFAULT_LENGTHS)))
        payload = kv_rows_to_dict(card.key, pool.hardware_key, rows)
    if json_output:
        emit(payload)
        return
    from prfaas_plan.cli.render import console, kv_table

    out = console()
    out.print(kv_table(payload))
    out.print(f"source: {rows[0].source}", style="dim")
