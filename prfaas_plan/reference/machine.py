"""This machine's measured rates, the "accelerator" the reference kernel's timings are predicted on.

The machine is characterised by five measured figures, each the best of several runs (``best_time_s``) under
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
  per-call cost, the analogue of a GPU's kernel-launch latency;
- weight-read rate (``weight_reads``): how fast the kernel reads the timed card's weights where a
  pass is memory-bound, i.e. one-row products (a decode step of one sequence) against each of the card's
  weight matrices in turn, in the kernel's orientation (``x @ W``; the LM head ``W @ x``), bytes read over
  the time less one launch per product. The matrices are a few MiB each and together outgrow the last-level
  cache, as in a pass, and the BLAS's matrix-vector kernel streams each one from DRAM at well under the
  dot product's rate (on the 2-core EPYC VMs, OpenBLAS 0.3.31: a cold 1-3 MiB float32 matrix at 13-22 GB/s, a
  128 MiB one at 21-27 GB/s, the dot product at 29-32 GB/s; the small card's weights at about 0.55 of the
  dot product's rate). The prediction prices memory traffic at this rate, as ``memory_efficiency`` = the
  weight-read rate / the dot product's rate (above 1 where a card's weights fit in the cache and are read
  from it).

and one shape curve (``RooflineParams.gemm_half_rows``): float32 GEMMs of m = 2 ... 256 rows against each of
the timed card's ``x @ W`` weight matrices in turn (against a square ``shape_width`` weight when no card is
given), each sweep timed less one launch overhead per product, fitted by least squares to
t(m) = 2·m·k·n / F · (1 + m_half / m) with F the large GEMM's rate: m_half is the row count at which a product
runs at half of F. On this BLAS the excess is a fixed cost per call proportional to the weight's size (it
packs the weight panel for every call, which few rows cannot amortise). A single row (m = 1) takes the
matrix-vector path, which packs nothing and runs at the memory roofline, so the curve starts at two rows.
The card's matrices are swept, not one weight timed again and again, because a pass reads each weight once,
after the rest of the card has passed through the cache: one weight reused stays in the core's L2 and runs
its few-row products at up to twice the rate they reach in a pass. On a 2-core VM of a 300 MiB-L3 Xeon
(OpenBLAS, 2 MiB L2 per core), a 32-row product against a 512 x 1024 weight ran at 0.68 of F alone and 0.35 of
F inside a 32-token prefill. Over five alternating runs the median prediction / measurement went from 0.82
(one 1024^2 weight; worst cases, a 32-token prefill and a 16-sequence decode step, 0.59-0.74) to 0.87 (the
card's matrices; the same cases 0.60-0.84): within the spread between runs on that machine (0.60-0.96), so
the mechanism above, not those medians, is the reason for the change. It costs time: a round of the curve
takes 1.3 s for the small card (0.4 s with one weight) and 6.1 s for the large one, three rounds a run.
Each sweep's time less its launches is floored at half the sweep, as the weight reads are.

and the attention core's context curve (``RooflineParams.attention_efficiency`` and
``attention_half_context_tokens``): the products the reference kernel's attention core runs for each query
(queries of one key-value group, kv_heads x group x head_dim of the timed card's first full or
sliding-window attention layer, ``attention_core_shape``: the group is the products' row count, so on a CPU
BLAS it sets their rate as rows set a GEMM's; against the keys and then the values of x positions, in the
kernel's own strided cache layout), for x = 16 ... 1024, each timed less its counted
launches (priced apart by the timing harness) and fitted to rate(x) = e_a · F · x / (x + x_half)
(``physics.roofline.fit_half_point``); contexts whose time is mostly launches are left out of the fit. A
query's products are a few rows deep and read keys and values through the cache's strided layout, so e_a is
well below one on a CPU BLAS; x_half is the per-query cost beyond the launches that short contexts cannot
amortise (softmax is element-wise work, priced apart). Where the rate does not rise with x (on a CPU it can
fall, once keys and values outgrow the cache), the fit is flat: x_half = 0 and e_a the rate at the fitted
contexts.

The routed experts' load (``measure_routing``): batches of random activations through a card's MoE layers (the
kernel's own MoE block and routing), the busiest expert's tokens in every layer call against
``physics.moe_load.busiest_load`` under uniform routing, and the skew that makes the model match
(``physics.moe_load.fit_skew``). Random router weights are not a trained router: their rows differ in norm, so
some experts win more often, and the fitted skew says by how much.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.physics.moe_load import busiest_load, fit_skew
from prfaas_plan.physics.roofline import fit_half_point
from prfaas_plan.reference.attention import softmax
from prfaas_plan.reference.checks import with_all_storage
from prfaas_plan.reference.conditions import best_time_s, clock_for, steady
from prfaas_plan.reference.counter import Counter, Tally
from prfaas_plan.reference.kernel import decode, moe_block, prefill, rmsnorm, silu_gate
from prfaas_plan.reference.model import Weight, attention_shapes, build_model, ffn_shapes
from prfaas_plan.reference.shrink import ShrinkTarget, shrink_architecture
from prfaas_plan.reference.storage import Codec
from prfaas_plan.spec.hardware import Accelerator, KernelShapes
from prfaas_plan.spec.model import Architecture


@frozen
class MachinePeaks:
    """This machine's measured rates (module docstring)."""

    matmul_flop_per_s: float
    memory_bytes_per_s: float
    copy_bytes_per_s: float
    elementwise_flop_per_s: float
    launch_overhead_s: float
    gemm_half_rows: float = 0.0  # the small-M shape curve (module docstring)
    attention_efficiency: float = 1.0  # the attention core's long-context rate over the matmul rate
    attention_half_context_tokens: float = 0.0  # the attention core's context curve (module docstring)
    weight_read_bytes_per_s: float = 0.0  # one-row products over the timed card's weights; 0: not measured
    steady: bool  # BLAS on one thread and freed memory retained while measuring (``steady``)
    source: str

    @property
    def memory_efficiency(self) -> float:
        """The weight-read rate over the dot product's read rate: ``RooflineParams.memory_efficiency`` for the
        timed passes (1 where the weight-read rate was not measured)."""
        if self.weight_read_bytes_per_s <= 0:
            return 1.0
        return self.weight_read_bytes_per_s / self.memory_bytes_per_s


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
    rng: np.random.Generator,
    rate: float,
    launch_s: float,
    repeats: int,
    clock: Callable[[], float],
    width: int,
    weights: list[NDArray[np.float32]] | None = None,
) -> float:
    """Time m-row float32 GEMMs for m in ``SHAPE_ROWS`` (each sweep less one launch per product) and fit their
    half-rate row count against ``rate``: against each of ``weights`` in turn (the timed card's matrices, as
    cold in the cache as in a pass), or against one (width x width) weight when None."""
    mats = weights if weights else [rng.standard_normal((width, width)).astype(np.float32)]
    seconds, flops = [], []
    for m in SHAPE_ROWS:
        xs = {k: rng.standard_normal((m, k)).astype(np.float32) for k in {w.shape[0] for w in mats}}

        def products(xs: dict[int, NDArray[np.float32]] = xs) -> None:
            for w in mats:
                xs[w.shape[0]] @ w

        t = best_time_s(products, repeats, clock=clock, budget_s=0.05)
        seconds.append(max(t - len(mats) * launch_s, t / 2))
        flops.append(sum(2.0 * m * w.shape[0] * w.shape[1] for w in mats))
    return fit_half_rows(SHAPE_ROWS, seconds, flops, rate)


#: Keys per query of the attention cores timed for the context curve, the queries timed at each, and the core's
#: (kv_heads, group, head_dim) where the timed card has no full or sliding-window attention layer.
ATTENTION_CONTEXTS = (16, 32, 64, 128, 256, 512, 1024)
ATTENTION_QUERIES = 16
DEFAULT_ATTENTION_SHAPE = (2, 4, 64)


def attention_core_shape(arch: Architecture | None) -> tuple[int, int, int]:
    """(kv_heads, query heads per kv head, head_dim) of ``arch``'s first full or sliding-window attention layer,
    the shape of the kernel's per-query products; ``DEFAULT_ATTENTION_SHAPE`` when it has none (or no card)."""
    for group in () if arch is None else arch.layers:
        att = group.attention
        if att.kind in ("gqa", "swa"):
            return att.kv_heads, att.heads // att.kv_heads, att.head_dim
    return DEFAULT_ATTENTION_SHAPE


def measure_attention_curve(
    rng: np.random.Generator,
    rate: float,
    launch_s: float,
    repeats: int,
    clock: Callable[[], float],
    shape: tuple[int, int, int] = DEFAULT_ATTENTION_SHAPE,
) -> tuple[float, float]:
    """(e_a, x_half) of the reference attention core's products, ``shape`` = (kv_heads, group, head_dim), at
    ``ATTENTION_CONTEXTS`` keys per query, each timed less two stacked products' launches per query, against
    the matmul ``rate`` (module docstring)."""
    (kvh, group, dim), queries = shape, ATTENTION_QUERIES
    longest = ATTENTION_CONTEXTS[-1]
    # The kernel's layout: keys and values concatenated token-major, then viewed head-major without a copy.
    k_rows = rng.standard_normal((longest, kvh, dim)).astype(np.float32)
    v_rows = rng.standard_normal((longest, kvh, dim)).astype(np.float32)
    keys, values = k_rows.transpose(1, 2, 0), v_rows.transpose(1, 0, 2)
    q = rng.standard_normal((queries, kvh, group, dim)).astype(np.float32)
    contexts, rates = [], []
    for x in ATTENTION_CONTEXTS:

        def core(x: int = x) -> None:
            for i in range(queries):
                np.matmul(np.matmul(q[i], keys[:, :, :x]), values[:, :x])

        t = best_time_s(core, repeats, clock=clock, budget_s=0.05)
        products_s = t - queries * 2 * kvh * launch_s
        # A context whose time is mostly launches says nothing about the products' rate (their remainder is
        # within the launch cost's own spread): only those where the products take at least half are fitted.
        if products_s >= t / 2:
            contexts.append(float(x))
            rates.append(queries * 2.0 * kvh * group * 2 * dim * x / products_s)
    if not rates:
        return 1.0, 0.0
    if len(rates) == 1:
        return min(1.0, rates[0] / rate), 0.0
    peak, half = fit_half_point(np.asarray(contexts), np.asarray(rates))
    return min(1.0, peak / rate), half


def _weight_matrices(arch: Architecture) -> list[tuple[str, NDArray[np.float32]]]:
    """Every weight matrix ``arch``'s forward pass multiplies by (float32, stored as the kernel stores them), in
    layer order, each with how the kernel multiplies by it: ``x @ W``, ``x @ W.T`` (router) or ``W @ x``."""
    h, mats = arch.hidden_size, []
    for group in arch.layers:
        shapes = attention_shapes(group.attention, h) | ffn_shapes(group.ffn, h)
        for _ in range(group.count):
            for name, shape in shapes.items():
                if name == "conv":  # the short convolution is element-wise work, not a product
                    continue
                copies = group.ffn.experts if name.startswith("expert_") else 1
                how = "x @ W.T" if name == "router" else "x @ W"
                mats += [(how, np.ones(shape, np.float32)) for _ in range(copies)]
    mats.append(("W @ x", np.ones((arch.vocab_size, h), np.float32)))  # the LM head (``kernel.forward``)
    return mats


def weight_reads(
    arch: Architecture, mats: list[tuple[str, NDArray[np.float32]]]
) -> tuple[Callable[[], None], float, int]:
    """One-row products against each of ``arch``'s weight matrices in turn (``mats``: ``_weight_matrices``), in
    the kernel's orientation (module docstring): the products to time, the bytes they read and their count (one
    launch each)."""
    rows = {n: np.ones((1, n), np.float32) for _, w in mats for n in w.shape}
    column = np.ones((arch.hidden_size, 1), np.float32)

    def reads() -> None:
        for how, w in mats:
            if how == "x @ W":
                rows[w.shape[0]] @ w
            elif how == "x @ W.T":
                rows[w.shape[1]] @ w.T
            else:
                w @ column

    return reads, float(sum(w.nbytes for _, w in mats)), len(mats)


@frozen
class RoutingStudy:
    """The reference kernel's routed-expert loads against ``physics.moe_load`` (module docstring)."""

    tokens: int  # per prefill
    experts: int
    active: int
    layer_passes: int  # MoE layer calls observed
    observed_busiest: float  # mean over layer calls of the busiest expert's tokens
    uniform_busiest: float  # physics.moe_load.busiest_load with no skew
    skew: float  # fitted: busiest_load(skew) == observed_busiest


def measure_routing(
    arch: Architecture, rng: np.random.Generator, tokens: int = 256, passes: int = 8
) -> RoutingStudy | None:
    """Route ``passes`` batches of ``tokens`` random unit-RMS activations (what the router sees after the
    layer's RMSNorm) through each routed layer of ``arch`` (random weights, fp32) with the kernel's own MoE
    block, and compare the busiest expert per layer call with the model; None when no layer routes. Every
    routed layer of one card has the same expert count and top-k."""
    model = build_model(with_all_storage(arch, "fp32"), rng, compute=np.float32)
    routed = [layer for layer in model.layers if layer.ffn.kind == "moe"]
    if not routed:
        return None
    ffn = routed[0].ffn
    counter = Counter()
    with steady():  # one BLAS thread: many threads on a shared machine make these products several times slower
        for _ in range(passes):
            for layer in routed:
                moe_block(rng.standard_normal((tokens, arch.hidden_size)).astype(np.float32), layer, counter)
    loads = [load for op in counter.ops() if op.name == "moe.experts" for load in op.expert_loads]
    observed = float(np.mean([max(load) for load in loads]))
    return RoutingStudy(
        tokens=tokens,
        experts=ffn.experts,
        active=ffn.active_experts,
        layer_passes=len(loads),
        observed_busiest=observed,
        uniform_busiest=busiest_load(tokens, ffn.experts, ffn.active_experts),
        skew=fit_skew(tokens, ffn.experts, ffn.active_experts, observed),
    )


def measure_peaks(
    base: Architecture,
    rng: np.random.Generator,
    *,
    gemm_size: int = 2048,
    stream_mib: int = 128,
    repeats: int = 2,
    rounds: int = 3,
    shape_width: int = 1024,
    timed: Architecture | None = None,
) -> MachinePeaks:
    """Measure this machine's float32 GEMM rate, read bandwidth, element-wise rate and launch overhead, each
    the best of ``rounds`` x ``repeats`` runs, and its shape curves (module docstring). ``timed`` is the card
    whose passes will be timed (all storage fp32): its weights give the weight-read rate (not measured when
    None) and its attention layers the attention core's shape."""
    a = rng.standard_normal((gemm_size, gemm_size)).astype(np.float32)
    b = rng.standard_normal((gemm_size, gemm_size)).astype(np.float32)
    n = stream_mib * 2**20 // 4 // 2
    x, y = np.ones(n, dtype=np.float32), np.ones(n, dtype=np.float32)
    gemm_s = read_s = copy_s = overhead = weight_s = math.inf
    elementwise = 0.0
    mats = [] if timed is None else _weight_matrices(timed)
    reads, read_bytes, products = weight_reads(timed, mats) if timed is not None else (None, 0.0, 0)
    # The shape curve's weights: the card's own matrices multiplied as x @ W (module docstring).
    card = [w for how, w in mats if how == "x @ W"] or None
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
            if reads is not None:
                weight_s = min(weight_s, best_time_s(reads, repeats, clock=clock, budget_s=0.1))
        rate = 2.0 * gemm_size**3 / gemm_s
        half_rows = min(
            measure_gemm_half_rows(rng, rate, overhead, repeats, clock, shape_width, card) for _ in range(rounds)
        )
        # The round whose long-context rate is best (the least disturbed by other processes) gives the curve.
        attention, half_context = max(
            (
                measure_attention_curve(rng, rate, overhead, repeats, clock, attention_core_shape(timed))
                for _ in range(rounds)
            ),
            key=lambda c: c[0],
        )
        # Less one launch per product (launches are priced apart), never below half the time.
        weight_read = 0.0 if reads is None else read_bytes / max(weight_s - products * overhead, weight_s / 2)
    return MachinePeaks(
        matmul_flop_per_s=2.0 * gemm_size**3 / gemm_s,
        memory_bytes_per_s=2 * x.nbytes / read_s,
        copy_bytes_per_s=2 * x.nbytes / copy_s,
        elementwise_flop_per_s=elementwise,
        launch_overhead_s=overhead,
        gemm_half_rows=half_rows,
        attention_efficiency=attention,
        attention_half_context_tokens=half_context,
        weight_read_bytes_per_s=weight_read,
        steady=steady_machine,
        source=(
            f"measured by prfaas-plan validate kernel: best of {rounds * repeats} float32 GEMMs {gemm_size}^3 (numpy "
            f"matmul), float32 dot of 2 x {stream_mib // 2} MiB (bytes read), copy of {stream_mib // 2} MiB "
            f"(read + write, reported only); GEMMs of {SHAPE_ROWS[0]}-{SHAPE_ROWS[-1]} rows "
            + (f"x {shape_width}^2" if card is None else "against each of the timed card's matrices")
            + " for the shape curve; "
            f"attention-core products at {ATTENTION_CONTEXTS[0]}-{ATTENTION_CONTEXTS[-1]} keys "
            f"per query (kv_heads, group, head_dim = {attention_core_shape(timed)}) for the context curve"
            + ("" if timed is None else "; one-row products over the timed card's weight matrices (weight reads)")
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


def machine_kernel_shapes(peaks: MachinePeaks, routing: RoutingStudy | None = None) -> KernelShapes:
    """This machine's measured shape curves, as a hardware profile carries them (the MoE skew from
    ``routing``, the reference kernel's own routing, when a routed card was measured)."""
    skew = (
        ""
        if routing is None
        else (
            f"; MoE skew from {routing.layer_passes} routed layer calls of {routing.tokens} tokens "
            f"(top-{routing.active} of {routing.experts} experts, random router weights)"
        )
    )
    return KernelShapes(
        gemm_half_rows=peaks.gemm_half_rows,
        attention_half_context_tokens=peaks.attention_half_context_tokens,
        moe_load_skew=0.0 if routing is None else routing.skew,
        memory_efficiency=peaks.memory_efficiency,
        source=f"measured by prfaas-plan validate kernel: float32 GEMMs of {SHAPE_ROWS[0]}-{SHAPE_ROWS[-1]} rows "
        f"against the large GEMM's rate; attention-core products at {ATTENTION_CONTEXTS[0]}-"
        f"{ATTENTION_CONTEXTS[-1]} keys per query; one-row products reading the timed card's weights against "
        f"the dot product's rate (reference.machine){skew}",
    )
