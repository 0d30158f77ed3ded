"""Write an accelerator as a ``hardware_profiles/*.yaml`` file that ``io.hardware.load_hardware`` reads back.

The ``hardware:`` section (the datasheet part) is written, and a ``kernel_shapes:`` section when measured
shape curves are given, in the file's human scales (GB, TB/s, TFLOP/s); floats are written in full
(``repr``) so a write and a read give back the same numbers. The file is written through
``report.files.write_file``: atomic, locked, and never over a file that is not one of these profiles.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from prfaas_plan.report.files import Owner, write_error, write_file
from prfaas_plan.spec.hardware import Accelerator, KernelShapes
from prfaas_plan.units import GB, GBIT_PER_S, TB, TFLOP_PER_S

#: The first line of every profile this writer makes; with the line earlier versions began with (the note of
#: ``validate kernel``), how it recognises its own files (an existing file is replaced only when it is one).
HEADER = "# Accelerator profile written by prfaas-plan (validate kernel --profile-out).\n"
OWNER = Owner(
    what="an accelerator profile written by prfaas-plan",
    signatures=(HEADER.encode(), b"# Measured by `prfaas-plan validate kernel`"),
)


def accelerator_document(accelerator: Accelerator) -> dict[str, Any]:
    """The ``{hardware: {...}}`` mapping of an accelerator profile file."""
    hw: dict[str, Any] = {
        "name": accelerator.name,
        "memory_gb": accelerator.memory_bytes / GB,
        "hbm_bandwidth_tb_per_s": accelerator.hbm_bandwidth_bytes_per_s / TB,
        "dense_tflops": {dtype: rate / TFLOP_PER_S for dtype, rate in accelerator.dense_flop_per_s.items()},
    }
    if accelerator.scale_up_bandwidth_bytes_per_s is not None:
        hw["scale_up_bandwidth_gb_per_s"] = accelerator.scale_up_bandwidth_bytes_per_s / GB
    if accelerator.scale_out_bandwidth_bytes_per_s is not None:
        hw["scale_out_gbit_per_s"] = accelerator.scale_out_bandwidth_bytes_per_s / GBIT_PER_S
    if accelerator.scale_up_gpus is not None:
        hw["scale_up_gpus"] = accelerator.scale_up_gpus
    if accelerator.tdp_w is not None:
        hw["tdp_w"] = accelerator.tdp_w
    if accelerator.price_usd_per_gpu_hour is not None:
        hw["price_usd_per_gpu_hour"] = accelerator.price_usd_per_gpu_hour
    hw["confidence"] = accelerator.confidence
    hw["source"] = accelerator.source
    return {"hardware": hw}


def write_accelerator_profile(
    accelerator: Accelerator, path: Path, comment: str = "", shapes: KernelShapes | None = None
) -> Path:
    """Write ``accelerator`` (and its measured kernel ``shapes``, if given) to ``path`` (parent directories
    created; temp file then rename); returns ``path``.

    ``comment`` lines go at the top of the file, each prefixed with ``# ``.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise write_error(path, error) from None
    header = HEADER + "".join(f"# {line}\n" for line in comment.splitlines())
    document = accelerator_document(accelerator)
    if shapes is not None:
        document["kernel_shapes"] = {
            "gemm_half_rows": shapes.gemm_half_rows,
            "attention_half_context_tokens": shapes.attention_half_context_tokens,
            "moe_load_skew": shapes.moe_load_skew,
            **({} if shapes.memory_efficiency is None else {"memory_efficiency": shapes.memory_efficiency}),
            "source": shapes.source,
        }
    text = header + yaml.safe_dump(document, sort_keys=False, width=100)
    write_file(path, text, owner=OWNER)
    return path
