"""Time the reference kernel on this machine and predict the same passes with ``physics.roofline``.

A pass is predicted as ``roofline_time`` (``Instance`` of this machine as one "accelerator",
``reference.machine``, compute efficiencies 1.0 because its peaks are already achieved rates, memory traffic
at the rate the kernel's one-row products read the timed card's weights, ``MachinePeaks.memory_efficiency``
of the dot product's rate: a decode step's weight reads go through the BLAS's matrix-vector kernel, which
streams at about half the dot product's rate here) with, as the per-pass ``overhead_s`` of
``RooflineParams``, launches x launch overhead + element-wise FLOPs / element-wise rate. Timed cards store
everything in fp32, as numpy reads them; activations stay priced at the contract's 2 bytes, although numpy
moves 4. Passes are timed under steady conditions (``reference.conditions``).

Products with few rows (MoE experts that get few tokens, decode batches) run far below the large GEMM's
rate, because the BLAS packs the weight panel before multiplying and its small-m kernels are inefficient:
the prediction prices them on the machine's measured shape curve (``MachinePeaks.gemm_half_rows``), and the
attention cores on its measured context curve (``attention_efficiency``, ``attention_half_context_tokens``;
MoE experts run one after another here, so their load spread does not change the time). Where it
still departs from the measured time: per-token loops (attention, recurrence) cost more per call than the
tiny card's calls, and numpy's temporaries add memory traffic the contract does not price.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.physics.ops import forward_ops
from prfaas_plan.physics.roofline import Instance, RooflineTime, roofline_time
from prfaas_plan.reference.cache import Cache
from prfaas_plan.reference.checks import with_all_storage
from prfaas_plan.reference.conditions import best_time_s, clock_for, steady
from prfaas_plan.reference.counter import Counter
from prfaas_plan.reference.kernel import decode, prefill
from prfaas_plan.reference.machine import MachinePeaks
from prfaas_plan.reference.model import ReferenceModel, build_model
from prfaas_plan.reference.shrink import ShrinkTarget, shrink_architecture
from prfaas_plan.spec.hardware import Accelerator, RooflineParams
from prfaas_plan.spec.model import Architecture

SIZES = ("small", "medium", "large")
TIMING_BUDGET_S = 1.0  # per case: passes are repeated until this much was timed, for a steadier best


@frozen
class TimingCase:
    """One pass to time: prefill of ``new`` tokens after ``cached`` (batch 1), or a decode step of
    ``batch`` sequences each with ``cached`` tokens."""

    name: str
    cached: int
    new: int
    batch: int = 1
    decode: bool = False


@frozen
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
    arch: Architecture,
    case: TimingCase,
    accelerator: Accelerator,
    launch_s: float,
    gemm_half_rows: float = 0.0,
    attention: tuple[float, float] = (1.0, 0.0),
    memory_efficiency: float = 1.0,
) -> tuple[float, RooflineTime]:
    """Roofline time of ``case`` (GEMMs at efficiency 1.0 on the measured small-M curve ``gemm_half_rows``,
    attention cores on the measured context curve ``attention`` = (e_a, x_half), memory traffic at the
    measured weight-read rate's fraction ``memory_efficiency`` of the accelerator's bandwidth, ``launch_s`` of
    launch overhead as the per-pass overhead): the predicted seconds and the priced pass."""
    ops = forward_ops(arch, cached=case.cached, new=case.new, batch=case.batch, decode=case.decode)
    params = RooflineParams(
        compute_efficiency=1.0,
        attention_efficiency=attention[0],
        attention_half_context_tokens=attention[1],
        memory_efficiency=memory_efficiency,
        layer_overhead_s=0.0,
        gemm_half_rows=gemm_half_rows,
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
    curve = (peaks.attention_efficiency, peaks.attention_half_context_tokens)
    predicted, priced = predict(
        arch, case, accelerator, launch_s + elementwise_s, peaks.gemm_half_rows, curve, peaks.memory_efficiency
    )
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


@frozen
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
    def median_ratio(self) -> float:
        """median over the cases of predicted / measured."""
        return float(np.median([r.ratio for r in self.results]))

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
