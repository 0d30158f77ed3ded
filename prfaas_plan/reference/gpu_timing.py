"""Time the products of the reference cases on a CUDA device and compare with the roofline on a datasheet.

    prfaas-plan validate gpu --hardware h200 [--size large]

For each case of ``validate kernel`` (the same card, Qwen3-Next shrunk to the size's caps, here all bf16),
every matrix product ``physics.ops`` prices (projections, FFNs, routed and shared experts, MLA's kv_b and
absorption products, the LM head) runs with torch in bf16 on the GPU, replayed from a CUDA graph so that
host launch cost is out, and timed with CUDA events. The prediction is ``roofline_time`` of the same
operations on the datasheet accelerator with every efficiency 1.0, so ``ratio`` = predicted / measured is the
fraction of the datasheet roofline the device achieves. Attention cores, the linear-attention recurrence and
element-wise work are left out of both sides: on a GPU they need fused kernels (FlashAttention, FLA) that a
short script does not bring. MoE tokens are spread evenly over the expected number of touched experts.

``gpu_timing_report`` returns {"device", "size", "timing": [{"case", "predicted_s", "measured_s", "ratio",
"products"}], "median_abs_log_ratio"}; the CLI command imports torch and passes it in.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from prfaas_plan.physics.ops import expected_experts_touched, forward_ops
from prfaas_plan.physics.roofline import Instance, roofline_time
from prfaas_plan.reference.checks import with_all_storage
from prfaas_plan.reference.timing import TimingCase, timing_architecture, timing_cases
from prfaas_plan.spec.hardware import Accelerator, RooflineParams
from prfaas_plan.spec.model import Architecture

Product = tuple[str, int, int, int, int]  # (operation, batch, m, k, n)


def products(arch: Architecture, case: TimingCase) -> list[Product]:
    """Every matrix product of ``case`` as physics.ops prices it: (operation, batch, m, k, n)."""
    tokens, h = case.batch * case.new, arch.hidden_size
    context = case.batch * (case.cached + case.new)
    out: list[Product] = []
    for group in arch.layers:
        att, ffn = group.attention, group.ffn
        layer: list[Product] = []
        if att.kind in ("gqa", "swa"):
            width = att.heads * att.head_dim + att.kv_heads * (att.head_dim + att.v_head_dim)
            layer += [
                (f"{att.kind}.qkv", 1, tokens, h, width),
                (f"{att.kind}.out", 1, tokens, att.heads * att.v_head_dim, h),
            ]
        elif att.kind == "mla":
            heads, nope, rope, dv, rank = (
                att.heads,
                att.qk_nope_head_dim,
                att.qk_rope_head_dim,
                att.v_head_dim,
                att.kv_lora_rank,
            )
            if att.q_lora_rank:
                layer += [
                    ("mla.q_a", 1, tokens, h, att.q_lora_rank),
                    ("mla.q_b", 1, tokens, att.q_lora_rank, heads * (nope + rope)),
                ]
            else:
                layer.append(("mla.q", 1, tokens, h, heads * (nope + rope)))
            layer.append(("mla.kv_a", 1, tokens, h, rank + rope))
            if case.decode:
                layer += [("mla.absorb_q", heads, tokens, nope, rank), ("mla.absorb_v", heads, tokens, rank, dv)]
            else:
                layer.append(("mla.kv_b", 1, context, rank, heads * (nope + dv)))
            layer.append(("mla.out", 1, tokens, heads * dv, h))
        else:
            width = 2 * att.key_heads * att.key_head_dim + 2 * att.heads * att.value_head_dim + 2 * att.heads
            layer += [
                ("linear.proj", 1, tokens, h, width),
                ("linear.out", 1, tokens, att.heads * att.value_head_dim, h),
            ]
        if ffn.kind == "dense":
            layer += [("ffn.dense", 1, tokens, h, 2 * ffn.intermediate), ("ffn.dense", 1, tokens, ffn.intermediate, h)]
        else:
            touched = max(1, round(float(expected_experts_touched(ffn.experts, ffn.active_experts, tokens))))
            rows = math.ceil(tokens * ffn.active_experts / touched)
            layer += [("moe.router", 1, tokens, h, ffn.experts)]
            layer += [("moe.experts", touched, rows, h, 2 * ffn.expert_intermediate)]
            layer += [("moe.experts", touched, rows, ffn.expert_intermediate, h)]
            if ffn.shared_experts:
                width = ffn.shared_experts * ffn.shared_intermediate
                layer += [("moe.shared", 1, tokens, h, 2 * width), ("moe.shared", 1, tokens, width, h)]
        out += layer * group.count
    out.append(("lm_head", 1, case.batch, h, arch.vocab_size))
    return out


def predicted_s(arch: Architecture, case: TimingCase, accelerator: Accelerator) -> float:
    """Roofline time (efficiencies 1.0) of the operations ``products`` runs."""
    names = {p[0] for p in products(arch, case)}
    ops = [
        op
        for op in forward_ops(arch, cached=case.cached, new=case.new, batch=case.batch, decode=case.decode)
        if op.name in names
    ]
    params = RooflineParams(
        compute_efficiency=1.0, attention_efficiency=1.0, memory_efficiency=1.0, source="datasheet peaks"
    ).kernel_only
    tokens = np.asarray(float(case.batch * case.new))
    return float(roofline_time(ops, arch, Instance(accelerator=accelerator, gpus=1), params, tokens).total_s)


def _measure_s(torch: Any, shapes: list[Product], replays: int = 20) -> float:
    """Seconds per replay of a CUDA graph running every product, each on its own weights (read from HBM)."""
    device, dtype = torch.device("cuda"), torch.bfloat16
    pairs = [
        (torch.randn(b, m, k, device=device, dtype=dtype), torch.randn(b, k, n, device=device, dtype=dtype))
        for _, b, m, k, n in shapes
    ]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for x, w in pairs:  # warm-up outside the graph (cuBLAS workspace, heuristics)
            torch.matmul(x, w)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = [torch.matmul(x, w) for x, w in pairs]
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = math.inf
    for _ in range(replays):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3)
    del outputs
    return best


def gpu_timing_report(card: Architecture, accelerator: Accelerator, size: str, torch: Any) -> dict[str, Any]:
    """Time every case of ``size`` on the CUDA device of ``torch`` (the module, imported by the caller) and set
    each beside the datasheet roofline of ``accelerator``: {"device", "size", "timing": [{"case",
    "predicted_s", "measured_s", "ratio", "products"}], "median_abs_log_ratio"}."""
    arch = with_all_storage(timing_architecture(card, size), "bf16")
    rows: list[dict[str, Any]] = []
    for case in timing_cases(size):
        shapes = products(arch, case)
        measured, predicted = _measure_s(torch, shapes), predicted_s(arch, case, accelerator)
        rows.append(
            {
                "case": case.name,
                "predicted_s": predicted,
                "measured_s": measured,
                "ratio": predicted / measured,
                "products": len(shapes),
            }
        )
    median = float(np.median([abs(math.log(r["ratio"])) for r in rows]))
    return {
        "device": torch.cuda.get_device_name(),
        "size": size,
        "timing": rows,
        "median_abs_log_ratio": median,
    }
