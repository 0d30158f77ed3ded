"""Time the reference kernel on this machine and predict the same passes with ``physics.roofline``.

The machine is characterised by four measured figures, each the best of several runs (the usual estimator
of a deterministic cost under noise from other processes):

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

A pass is predicted as ``roofline_time`` (``Instance`` of one such "accelerator", every efficiency 1.0
because the peaks are already achieved rates) with, as the per-pass ``overhead_s`` of ``RooflineParams``,
launches x launch overhead + element-wise FLOPs / element-wise rate. Timed cards store everything in fp32,
as numpy reads them; activations stay priced at the contract's 2 bytes, although numpy moves 4.

Where this departs from the measured time: products with few rows (2-32: MoE experts that get few tokens,
decode batches) run far below both peaks, because the BLAS packs the weight panel before multiplying (an
extra pass over the weights) and its small-m kernels are inefficient; per-token loops (attention,
recurrence) cost more per call than the tiny card's calls; numpy's temporaries add memory traffic the
contract does not price.

Measuring conditions (``steady``): BLAS pinned to one thread (on these shared 2-core machines a second BLAS
thread waits on whatever else runs and makes GEMM times swing by 5x; numpy's element-wise work is
single-threaded anyway), freed memory kept in the process (``retained_heap``), and time read on the process
CPU clock, which on an idle machine equals wall time and leaves out time other processes hold the core.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from prfaas_plan.physics.ops import forward_ops
from prfaas_plan.physics.roofline import Instance, RooflineTime, roofline_time
from prfaas_plan.reference.attention import softmax
from prfaas_plan.reference.cache import Cache
from prfaas_plan.reference.checks import with_all_storage
from prfaas_plan.reference.counter import Counter, Tally
from prfaas_plan.reference.kernel import decode, prefill, rmsnorm, silu_gate
from prfaas_plan.reference.model import ReferenceModel, Weight, build_model
from prfaas_plan.reference.shrink import ShrinkTarget, shrink_architecture
from prfaas_plan.reference.storage import Codec
from prfaas_plan.spec.hardware import Accelerator, RooflineParams
from prfaas_plan.spec.model import Architecture

SIZES = ("small", "medium", "large")
TIMING_BUDGET_S = 1.0  # per case: passes are repeated until this much was timed, for a steadier best
_BLAS_SETTERS = ("openblas_set_num_threads", "scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_")


@contextlib.contextmanager
def blas_threads(n: int) -> Iterator[bool]:
    """Limit OpenBLAS (as loaded by numpy) to ``n`` threads inside the block; yields whether it could.

    Best effort and Linux-only: finds the loaded OpenBLAS in /proc/self/maps and calls its
    ``*set_num_threads``; restores the previous count afterwards. Elsewhere it yields False and does nothing.
    """
    setter = getter = None
    with contextlib.suppress(OSError):
        for path in sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", Path("/proc/self/maps").read_text()))):
            lib = ctypes.CDLL(path)
            for name in _BLAS_SETTERS:
                if hasattr(lib, name) and hasattr(lib, name.replace("set", "get")):
                    setter, getter = getattr(lib, name), getattr(lib, name.replace("set", "get"))
                    break
    if setter is None or getter is None:
        yield False
        return
    previous = int(getter())
    setter(ctypes.c_int(n))
    try:
        yield True
    finally:
        setter(ctypes.c_int(previous))


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc mallopt parameters (malloc.h)
_GLIBC_DEFAULT_THRESHOLD = 128 * 1024


@contextlib.contextmanager
def retained_heap() -> Iterator[bool]:
    """Keep freed memory in the process inside the block (glibc ``mallopt``); yields whether it could.

    By default glibc hands blocks of 128 KiB and more back to the kernel when they are freed, so every numpy
    temporary of that size page-faults afresh: 40-90 µs for a 64-128 KiB array on these VMs, ten times the
    arithmetic. Serving engines keep a caching allocator for this reason; raising the trim and mmap thresholds
    does the same for numpy. glibc's defaults are set back afterwards.
    """
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        yield False
        return
    retained = mallopt(_M_TRIM_THRESHOLD, 1 << 30) == 1 and mallopt(_M_MMAP_THRESHOLD, 32 << 20) == 1
    try:
        yield retained
    finally:
        mallopt(_M_TRIM_THRESHOLD, _GLIBC_DEFAULT_THRESHOLD)
        mallopt(_M_MMAP_THRESHOLD, _GLIBC_DEFAULT_THRESHOLD)


@contextlib.contextmanager
def steady() -> Iterator[bool]:
    """One BLAS thread and a retained heap (``blas_threads``, ``retained_heap``); yields whether both held."""
    with blas_threads(1) as pinned, retained_heap() as retained:
        yield pinned and retained


def best_time_s(
    run: Callable[[], object],
    repeats: int,
    setup: Callable[[], object] | None = None,
    clock: Callable[[], float] = time.process_time,
    *,
    budget_s: float = 0.0,
    max_repeats: int = 50,
) -> float:
    """Shortest time of at least ``repeats`` runs on ``clock``, more (up to ``max_repeats``) while the runs so
    far took less than ``budget_s`` in all; ``setup`` runs untimed before each.

    The default clock is the process's CPU time: with BLAS on the calling thread (``blas_threads(1)``) it
    equals wall time on an idle machine, and leaves out the time other processes hold the core.
    """
    best, spent, done = math.inf, 0.0, 0
    while done < repeats or (spent < budget_s and done < max_repeats):
        if setup is not None:
            setup()
        start = clock()
        run()
        elapsed = clock() - start
        best, spent, done = min(best, elapsed), spent + elapsed, done + 1
    return best


@dataclass(frozen=True, slots=True, kw_only=True)
class MachinePeaks:
    """This machine's measured rates (module docstring)."""

    matmul_flop_per_s: float
    memory_bytes_per_s: float
    copy_bytes_per_s: float
    elementwise_flop_per_s: float
    launch_overhead_s: float
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


def clock_for(steady_machine: bool) -> Callable[[], float]:
    """CPU time when the machine is held steady (one BLAS thread on the calling thread), else wall time."""
    return time.process_time if steady_machine else time.perf_counter


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


def measure_peaks(
    base: Architecture,
    rng: np.random.Generator,
    *,
    gemm_size: int = 2048,
    stream_mib: int = 128,
    repeats: int = 2,
    rounds: int = 3,
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
    return MachinePeaks(
        matmul_flop_per_s=2.0 * gemm_size**3 / gemm_s,
        memory_bytes_per_s=2 * x.nbytes / read_s,
        copy_bytes_per_s=2 * x.nbytes / copy_s,
        elementwise_flop_per_s=elementwise,
        launch_overhead_s=overhead,
        steady=steady_machine,
        source=(
            f"measured by prfaas-plan validate kernel: best of {rounds * repeats} float32 GEMMs {gemm_size}^3 (numpy "
            f"matmul), float32 dot of 2 x {stream_mib // 2} MiB (bytes read), copy of {stream_mib // 2} MiB "
            "(read + write, reported only)"
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


@dataclass(frozen=True, slots=True, kw_only=True)
class TimingCase:
    """One pass to time: prefill of ``new`` tokens after ``cached`` (batch 1), or a decode step of
    ``batch`` sequences each with ``cached`` tokens."""

    name: str
    cached: int
    new: int
    batch: int = 1
    decode: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class TimingResult:
    """A timed case beside its prediction: roofline part + launches x launch overhead."""

    case: str
    predicted_s: float
    measured_s: float
    roofline_s: float
    launch_s: float
    elementwise_s: float
    launches: int
    bound: str  # "compute" or "memory": the larger of the roofline's two sums

    @property
    def ratio(self) -> float:
        """predicted / measured."""
        return self.predicted_s / self.measured_s


# Timed card sizes (each the built-in card shrunk to these caps, all storage fp32) and the passes timed.
_TARGETS = {
    "small": ShrinkTarget(
        hidden_size=512,
        vocab_size=8192,
        max_layers=4,
        max_heads=8,
        head_dim=64,
        latent_rank=128,
        rope_dim=32,
        window=64,
        ffn_multiple=3,
        max_experts=8,
        expert_intermediate=512,
    ),
    "medium": ShrinkTarget(
        hidden_size=1024,
        vocab_size=16384,
        max_layers=4,
        max_heads=16,
        head_dim=64,
        latent_rank=256,
        rope_dim=32,
        window=256,
        ffn_multiple=3,
        max_experts=8,
        expert_intermediate=1024,
    ),
    "large": ShrinkTarget(
        hidden_size=2048,
        vocab_size=16384,
        max_layers=4,
        max_heads=16,
        head_dim=128,
        latent_rank=512,
        rope_dim=64,
        window=512,
        ffn_multiple=3,
        max_experts=8,
        expert_intermediate=768,
    ),
}
_CASES = {
    "small": (
        TimingCase(name="prefill c=0 l=32", cached=0, new=32),
        TimingCase(name="prefill c=0 l=128", cached=0, new=128),
        TimingCase(name="prefill c=0 l=512", cached=0, new=512),
        TimingCase(name="prefill c=512 l=128", cached=512, new=128),
        TimingCase(name="decode c=512 b=1", cached=512, new=1, decode=True),
        TimingCase(name="decode c=128 b=16", cached=128, new=1, batch=16, decode=True),
    ),
    "medium": (
        TimingCase(name="prefill c=0 l=128", cached=0, new=128),
        TimingCase(name="prefill c=0 l=1024", cached=0, new=1024),
        TimingCase(name="prefill c=1024 l=256", cached=1024, new=256),
        TimingCase(name="decode c=1024 b=1", cached=1024, new=1, decode=True),
        TimingCase(name="decode c=256 b=32", cached=256, new=1, batch=32, decode=True),
    ),
    "large": (
        TimingCase(name="prefill c=0 l=256", cached=0, new=256),
        TimingCase(name="prefill c=0 l=2048", cached=0, new=2048),
        TimingCase(name="prefill c=2048 l=512", cached=2048, new=512),
        TimingCase(name="decode c=2048 b=1", cached=2048, new=1, decode=True),
        TimingCase(name="decode c=512 b=64", cached=512, new=1, batch=64, decode=True),
    ),
}


def timing_architecture(base: Architecture, size: str) -> Architecture:
    """The card timed at ``size``: ``base`` shrunk to that size's caps, all storage fp32."""
    return with_all_storage(shrink_architecture(base, _TARGETS[size]), "fp32")


def timing_cases(size: str) -> tuple[TimingCase, ...]:
    """The passes timed at ``size`` (prefills long and short, decode steps of one and many sequences)."""
    return _CASES[size]


def predict(
    arch: Architecture, case: TimingCase, accelerator: Accelerator, launch_s: float
) -> tuple[float, RooflineTime]:
    """Roofline time of ``case`` (efficiencies 1.0, ``launch_s`` of launch overhead as the per-pass overhead):
    the predicted seconds and the priced pass."""
    ops = forward_ops(arch, cached=case.cached, new=case.new, batch=case.batch, decode=case.decode)
    params = RooflineParams(
        compute_efficiency=1.0,
        memory_efficiency=1.0,
        overhead_s=launch_s,
        source="measured peaks (achieved rates) and launch overhead of this machine",
    )
    tokens = np.asarray(float(case.batch * case.new))
    priced = roofline_time(ops, arch, Instance(accelerator=accelerator, gpus=1), params, tokens)
    return float(priced.total_s), priced


def time_case(
    model: ReferenceModel,
    case: TimingCase,
    accelerator: Accelerator,
    peaks: MachinePeaks,
    rng: np.random.Generator,
    repeats: int = 3,
    clock: Callable[[], float] = time.process_time,
) -> TimingResult:
    """Time one case (best of ``repeats``; caches rebuilt untimed before each) and predict it."""
    arch = model.arch

    def draw(n: int) -> NDArray[np.int64]:
        return rng.integers(0, arch.vocab_size, size=n)

    bases = [prefill(model, draw(case.cached))[1] if case.cached else None for _ in range(case.batch)]
    new = draw(case.new)
    work: list[Cache | None] = []

    def setup() -> None:
        work[:] = [None if c is None else c.copy() for c in bases]

    def run() -> None:
        if case.decode:
            decode(model, [c for c in work if c is not None], [int(t) for t in draw(case.batch)])
        else:
            prefill(model, new, work[0])

    counter = Counter()
    setup()
    if case.decode:
        decode(model, [c for c in work if c is not None], [int(t) for t in draw(case.batch)], counter=counter)
    else:
        prefill(model, new, work[0], counter=counter)
    measured = best_time_s(run, repeats, setup, clock, budget_s=TIMING_BUDGET_S)
    launch_s = counter.launches * peaks.launch_overhead_s
    flops = sum(op.elementwise_flops + op.extra_elementwise_flops for op in counter.ops())
    elementwise_s = flops / peaks.elementwise_flop_per_s
    predicted, priced = predict(arch, case, accelerator, launch_s + elementwise_s)
    return TimingResult(
        case=case.name,
        predicted_s=predicted,
        measured_s=measured,
        roofline_s=predicted - launch_s - elementwise_s,
        launch_s=launch_s,
        elementwise_s=elementwise_s,
        launches=counter.launches,
        bound="compute" if float(priced.compute_bound_s) >= float(priced.memory_bound_s) else "memory",
    )


def median_abs_log_ratio(results: list[TimingResult]) -> float:
    """median over cases of |ln(predicted / measured)|."""
    return float(np.median([abs(math.log(r.ratio)) for r in results]))


@dataclass(frozen=True, slots=True, kw_only=True)
class TimingStudy:
    """A timing run: the card timed, the machine's peaks, and each case."""

    arch: Architecture
    peaks: MachinePeaks
    results: tuple[TimingResult, ...]

    @property
    def median_abs_log_ratio(self) -> float:
        """median |ln(predicted / measured)| over the cases."""
        return median_abs_log_ratio(list(self.results))

    @property
    def worst(self) -> TimingResult:
        """The case whose prediction is furthest from its measurement (in log ratio)."""
        return max(self.results, key=lambda r: abs(math.log(r.ratio)))


def run_timing(
    base: Architecture,
    size: str,
    accelerator: Accelerator,
    peaks: MachinePeaks,
    rng: np.random.Generator,
    repeats: int = 3,
) -> TimingStudy:
    """Build the timed card for ``size`` and time each of its cases against the roofline."""
    arch = timing_architecture(base, size)
    model = build_model(arch, rng, compute=np.float32)
    with steady() as steady_machine:
        clock = clock_for(steady_machine)
        results = tuple(time_case(model, case, accelerator, peaks, rng, repeats, clock) for case in timing_cases(size))
    return TimingStudy(arch=arch, peaks=peaks, results=results)
