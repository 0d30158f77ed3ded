"""This machine's measured rates, the "accelerator" the reference kernel's timings are predicted on.

The machine is characterised by four measured figures, each the best of several runs (``best_time_s``) under
steady conditions (``reference.conditions``):

- matmul FLOP/s: a square float32 GEMM (``gemm_size``³, 2n³ FLOPs), the kernel's compute type when timed;
- memory bandwidth: a float32 dot product of two arrays far larger than the last-level cache (bytes read /
  time; a forward pass mostly reads: weights and cache). A copy's read+write rate is reported beside it;
- element-wise FLOP/s: the kernel's own element-wise primitives (norm, softmax, SiLU gate, state decay) on a
  cache-resident activation, FLOPs counted as the contract counts them. numpy runs them one pass per
  operation on one core, far below the matmul rate: they are compute, not hidden under memory traffic as the
  roofline assumes of element-wise work on a GPU;
- launch overhead: the fixed cost of one counted numpy call (``Counter.launches``), measured as the time of
  a tiny card's passes, whose FLOPs and bytes are negligible, divided by their launches: numpy's and Python's
  per-call cost, the analogue of a GPU's kernel-launch latency.

and one shape curve (``RooflineParams.gemm_half_rows``): float32 GEMMs of m = 2 ... 256 rows against a square
``shape_width`` weight, each timed less one launch overhead, fitted by least squares to
t(m) = 2·m·k·n / F · (1 + m_half / m) with F the large GEMM's rate: m_half is the row count at which a product
runs at half of F. On this BLAS the excess is a fixed cost per call proportional to the weight's size (it
packs the weight panel for every call, which few rows cannot amortise). A single row (m = 1) takes the
matrix-vector path, which packs nothing and runs at the memory roofline, so the curve starts at two rows.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from prfaas_plan.reference.attention import softmax
from prfaas_plan.reference.checks import with_all_storage
from prfaas_plan.reference.conditions import best_time_s, clock_for, steady
from prfaas_plan.reference.counter import Counter, Tally
from prfaas_plan.reference.kernel import decode, prefill, rmsnorm, silu_gate
from prfaas_plan.reference.model import Weight, build_model
from prfaas_plan.reference.shrink import ShrinkTarget, shrink_architecture
from prfaas_plan.reference.storage import Codec
from prfaas_plan.spec.hardware import Accelerator, KernelShapes
from prfaas_plan.spec.model import Architecture


@dataclass(frozen=True, slots=True, kw_only=True)
class MachinePeaks:
    """This machine's measured rates (module docstring)."""

    matmul_flop_per_s: float
    memory_bytes_per_s: float
    copy_bytes_per_s: float
    elementwise_flop_per_s: float
    launch_overhead_s: float
    gemm_half_rows: float = 0.0  # the small-M shape curve (module docstring)
    steady: bool  # BLAS on one thread and freed memory retained while measuring (``steady``)
    source: str


def _tiny_target() -> ShrinkTarget:
    return ShrinkTarget(
        hidden_size=8,
        vocab_size=16,
        max_heads=2,
        head_dim=2,
        latent_rank=2,
        rope_dim=2,
        window=4,
        ffn_multiple=1,
        max_experts=4,
        expert_intermediate=2,
    )


def measure_launch_overhead(
    base: Architecture, rng: np.random.Generator, repeats: int = 5, clock: Callable[[], float] = time.process_time
) -> float:
    """Seconds per counted launch: passes of ``base`` shrunk to widths of 2-8, whose work is negligible."""
    model = build_model(with_all_storage(shrink_architecture(base, _tiny_target()), "fp32"), rng, compute=np.float32)
    tokens = rng.integers(0, model.arch.vocab_size, size=32)
    counter = Counter()
    _, cache = prefill(model, tokens, counter=counter)
    decode(model, [cache], [1], counter=counter)

    def passes() -> None:
        _, c = prefill(model, tokens, counter=Counter())
        decode(model, [c], [1], counter=Counter())

    return best_time_s(passes, repeats, clock=clock, budget_s=0.15) / counter.launches


def measure_elementwise_rate(
    rng: np.random.Generator, repeats: int = 5, clock: Callable[[], float] = time.process_time
) -> float:
    """Counted element-wise FLOP/s of the kernel's own element-wise primitives (RMSNorm, softmax, SiLU gate,
    and the recurrent state's in-place decay, half of a hybrid model's element-wise FLOPs) on a 64 x 2048
    float32 activation (512 KiB, cache-resident as a pass's activations are)."""
    x = rng.standard_normal((64, 2048)).astype(np.float32)
    gain = Weight(stored=np.ones(2048, np.float32), value=np.ones(2048, np.float32), codec=Codec(dtype="fp32"))
    state, decay = x.reshape(8, 64, 256).copy(), np.full((8, 1, 1), 0.999, np.float32)

    def work(tally: Tally) -> None:
        rmsnorm(x, gain, tally)
        softmax(x, 1.0, tally)
        silu_gate(x, x, tally)
        state.__imul__(decay)
        tally.elementwise(state.size)

    counted = Tally()
    work(counted)
    return counted.ew / best_time_s(lambda: work(Tally()), repeats, clock=clock, budget_s=0.1)


#: Row counts of the small-M GEMMs timed for the shape curve.
SHAPE_ROWS = (2, 4, 8, 16, 32, 64, 128, 256)


def fit_half_rows(rows: tuple[int, ...], seconds: list[float], flops: list[float], rate: float) -> float:
    """m_half of t(m) = flops(m) / rate · (1 + m_half / m), least squares on the relative excess
    y = t·rate/flops - 1 = m_half / m (module docstring); never negative."""
    x = np.array([1.0 / m for m in rows])
    y = np.array([t * rate / f - 1.0 for t, f in zip(seconds, flops, strict=True)])
    return float(max(0.0, float(x @ y) / float(x @ x)))


def measure_gemm_half_rows(
    rng: np.random.Generator, rate: float, launch_s: float, repeats: int, clock: Callable[[], float], width: int
) -> float:
    """Time (m x width) @ (width x width) float32 GEMMs for m in ``SHAPE_ROWS`` (each less one launch) and fit
    their half-rate row count against ``rate``."""
    w = rng.standard_normal((width, width)).astype(np.float32)
    seconds, flops = [], []
    for m in SHAPE_ROWS:
        x = rng.standard_normal((m, width)).astype(np.float32)

        def product(x: NDArray[np.float32] = x) -> None:
            x @ w

        t = best_time_s(product, repeats, clock=clock, budget_s=0.05)
        seconds.append(max(t - launch_s, 1e-12))
        flops.append(2.0 * m * width * width)
    return fit_half_rows(SHAPE_ROWS, seconds, flops, rate)


def measure_peaks(
    base: Architecture,
    rng: np.random.Generator,
    *,
    gemm_size: int = 2048,
    stream_mib: int = 128,
    repeats: int = 2,
    rounds: int = 3,
    shape_width: int = 1024,
) -> MachinePeaks:
    """Measure this machine's float32 GEMM rate, read bandwidth, element-wise rate and launch overhead, each
    the best of ``rounds`` x ``repeats`` runs (module docstring)."""
    a = rng.standard_normal((gemm_size, gemm_size)).astype(np.float32)
    b = rng.standard_normal((gemm_size, gemm_size)).astype(np.float32)
    n = stream_mib * 2**20 // 4 // 2
    x, y = np.ones(n, dtype=np.float32), np.ones(n, dtype=np.float32)
    gemm_s = read_s = copy_s = overhead = math.inf
    elementwise = 0.0
    with steady() as steady_machine:
        clock = clock_for(steady_machine)
        # Rounds of every measurement, interleaved, so that each figure's best is drawn from the same stretch
        # of time as the others (other processes come and go on these shared machines).
        for _ in range(rounds):
            gemm_s = min(gemm_s, best_time_s(lambda: a @ b, repeats, clock=clock))
            read_s = min(read_s, best_time_s(lambda: np.dot(x, y), repeats, clock=clock))
            copy_s = min(copy_s, best_time_s(lambda: np.copyto(y, x), repeats, clock=clock))
            elementwise = max(elementwise, measure_elementwise_rate(rng, repeats, clock))
            overhead = min(overhead, measure_launch_overhead(base, rng, repeats, clock))
        rate = 2.0 * gemm_size**3 / gemm_s
        half_rows = min(measure_gemm_half_rows(rng, rate, overhead, repeats, clock, shape_width) for _ in range(rounds))
    return MachinePeaks(
        matmul_flop_per_s=2.0 * gemm_size**3 / gemm_s,
        memory_bytes_per_s=2 * x.nbytes / read_s,
        copy_bytes_per_s=2 * x.nbytes / copy_s,
        elementwise_flop_per_s=elementwise,
        launch_overhead_s=overhead,
        gemm_half_rows=half_rows,
        steady=steady_machine,
        source=(
            f"measured by prfaas-plan validate kernel: best of {rounds * repeats} float32 GEMMs {gemm_size}^3 (numpy "
            f"matmul), float32 dot of 2 x {stream_mib // 2} MiB (bytes read), copy of {stream_mib // 2} MiB "
            f"(read + write, reported only); GEMMs of {SHAPE_ROWS[0]}-{SHAPE_ROWS[-1]} rows x {shape_width}^2 "
            "for the shape curve"
        ),
    )


def physical_memory_bytes() -> float:
    """This machine's physical memory, bytes (POSIX sysconf)."""
    return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def machine_accelerator(peaks: MachinePeaks, memory_bytes: float) -> Accelerator:
    """This machine as an ``Accelerator``: one matmul rate for every dtype (numpy computes all in float32)."""
    return Accelerator(
        key="this-machine",
        name="this machine (numpy, measured)",
        memory_bytes=memory_bytes,
        hbm_bandwidth_bytes_per_s=peaks.memory_bytes_per_s,
        dense_flop_per_s={"fp32": peaks.matmul_flop_per_s, "bf16": peaks.matmul_flop_per_s},
        confidence="medium",
        source=peaks.source + ("; one BLAS thread, heap retained, CPU time" if peaks.steady else ""),
    )


def machine_kernel_shapes(peaks: MachinePeaks) -> KernelShapes:
    """This machine's measured shape curves, as a hardware profile carries them."""
    return KernelShapes(
        gemm_half_rows=peaks.gemm_half_rows,
        source=f"measured by prfaas-plan validate kernel: float32 GEMMs of {SHAPE_ROWS[0]}-{SHAPE_ROWS[-1]} rows "
        "against the large GEMM's rate (reference.machine)",
    )
