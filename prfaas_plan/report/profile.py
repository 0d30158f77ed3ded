"""Write an accelerator as a ``hardware_profiles/*.yaml`` file that ``io.hardware.load_hardware`` reads back.

The ``hardware:`` section (the datasheet part) is written, and a ``kernel_shapes:`` section when measured
shape curves are given, in the file's human scales (GB, TB/s, TFLOP/s); floats are written in full
(``repr``) so a write and a read give back the same numbers. The file is written to a temporary name beside
the target and renamed over it, so a reader never sees half a file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from prfaas_plan.spec.hardware import Accelerator, KernelShapes
from prfaas_plan.units import GB, GBIT_PER_S, TB, TFLOP_PER_S


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
    path.parent.mkdir(parents=True, exist_ok=True)
    header = "".join(f"# {line}\n" for line in comment.splitlines())
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
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
