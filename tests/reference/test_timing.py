"""The timing harness's arithmetic and plumbing (never its wall times: those are figures, in the benchmark)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from prfaas_plan.io.hardware import load_hardware
from prfaas_plan.physics.memory import parameter_count
from prfaas_plan.reference import conditions, machine, timing
from prfaas_plan.reference.model import build_model, check_reference_size
from prfaas_plan.reference.shrink import shrink_architecture
from prfaas_plan.report.profile import write_accelerator_profile
from prfaas_plan.spec.hardware import Accelerator
from tests.conftest import REPO
from tests.strategies_models import one_of_each

PEAKS = machine.MachinePeaks(
    matmul_flop_per_s=5e10,
    memory_bytes_per_s=2e10,
    copy_bytes_per_s=2e10,
    elementwise_flop_per_s=1e9,
    launch_overhead_s=5e-6,
    steady=True,
    source="test figures",
)


def _qwen3_next():  # type: ignore[no-untyped-def]
    from prfaas_plan.io.models import load_model_card

    arch = load_model_card(REPO / "workloads" / "models" / "qwen3-next-80b-a3b.yaml").architecture
    assert arch is not None
    return arch


def _openblas_threads() -> int | None:
    """OpenBLAS's thread count as its own getter reports it (None where no OpenBLAS is loaded)."""
    import ctypes
    import re
    from pathlib import Path

    maps = Path("/proc/self/maps").read_text() if Path("/proc/self/maps").exists() else ""
    for path in sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", maps))):
        lib = ctypes.CDLL(path)
        for name in conditions._BLAS_SETTERS:
            getter = name.replace("set", "get")
            if hasattr(lib, name) and hasattr(lib, getter):
                return int(getattr(lib, getter)())
    return None


def test_blas_threads_pins_one_thread_and_restores_the_count() -> None:
    """Where OpenBLAS is loaded the block runs it on exactly one thread (its own getter says so) and the
    previous count is back afterwards; where it is not, the context says it could not pin. A product inside
    the block is still right."""
    a = np.arange(12.0).reshape(3, 4)
    before = _openblas_threads()
    with conditions.blas_threads(1) as pinned:
        inside = _openblas_threads()
        assert np.array_equal(a @ a.T, np.einsum("ij,kj->ik", a, a))
    if pinned:
        assert inside == 1 and _openblas_threads() == before
    else:
        assert before is None


def test_prediction_is_the_roofline_plus_launch_overhead() -> None:
    """predict() adds the launch overhead to the roofline time once, as the per-pass overhead."""
    acc = machine.machine_accelerator(PEAKS, 1e10)
    case = timing.TimingCase(name="p", cached=3, new=4)
    bare, _ = timing.predict(one_of_each("fp32"), case, acc, 0.0)
    loaded, priced = timing.predict(one_of_each("fp32"), case, acc, 0.25)
    assert loaded == pytest.approx(bare + 0.25, rel=1e-12)
    assert float(priced.compute_bound_s) > 0 and float(priced.memory_bound_s) > 0


def test_memory_efficiency_scales_only_the_memory_bound_sum() -> None:
    """Pricing memory at e_m of the bandwidth divides the roofline's memory sum by e_m and leaves its compute
    sum alone; peaks without a measured weight-read rate price memory at the bandwidth itself."""
    acc = machine.machine_accelerator(PEAKS, 1e10)
    case = timing.TimingCase(name="d", cached=8, new=1, batch=2, decode=True)
    _, full = timing.predict(one_of_each("fp32"), case, acc, 0.0)
    _, half = timing.predict(one_of_each("fp32"), case, acc, 0.0, memory_efficiency=0.5)
    assert float(half.memory_bound_s) == pytest.approx(2 * float(full.memory_bound_s), rel=1e-12)
    assert float(half.compute_bound_s) == pytest.approx(float(full.compute_bound_s), rel=1e-12)
    assert PEAKS.memory_efficiency == 1.0
    measured = dataclasses.replace(PEAKS, weight_read_bytes_per_s=5e9)
    assert measured.memory_efficiency == pytest.approx(5e9 / PEAKS.memory_bytes_per_s)


def test_weight_reads_cover_every_matrix_the_pass_multiplies_by() -> None:
    """The weight-read measurement reads each weight matrix of the card once: the reference model's stored
    matrices (projections, router, shared and routed experts, LM head), less the convolution taps (element-wise
    work), in bytes."""
    arch = one_of_each("fp32")
    model = build_model(arch, np.random.default_rng(0), compute=np.float32)
    stored = model.lm_head.stored.nbytes + sum(
        w.stored.nbytes
        for layer in model.layers
        for w in [
            *(m for name, m in layer.mats.items() if name != "conv"),
            *(e for pair in layer.experts for e in pair),
        ]
    )
    assert sum(w.nbytes for _, w in machine._weight_matrices(arch)) == stored


def test_attention_core_shape_is_the_timed_cards() -> None:
    """The context curve is timed at the card's own per-query products: kv heads, query heads per kv head and
    head dim of its first full-attention layer, the default shape for a card with none."""
    arch = timing.timing_architecture(_qwen3_next(), "small")
    att = next(g.attention for g in arch.layers if g.attention.kind in ("gqa", "swa"))
    assert machine.attention_core_shape(arch) == (att.kv_heads, att.heads // att.kv_heads, att.head_dim)
    assert machine.attention_core_shape(None) == machine.DEFAULT_ATTENTION_SHAPE


def test_time_case_reports_consistent_figures() -> None:
    """A timed case's prediction is its roofline part + launches x overhead + element-wise time; ratio =
    predicted / measured."""
    rng = np.random.default_rng(0)
    model = build_model(one_of_each("fp32"), rng, compute=np.float32)
    acc = machine.machine_accelerator(PEAKS, 1e10)
    for case in (
        timing.TimingCase(name="p", cached=2, new=3),
        timing.TimingCase(name="d", cached=2, new=1, batch=2, decode=True),
    ):
        result = timing.time_case(model, case, acc, PEAKS, rng, repeats=1)
        assert result.launches > 0 and result.measured_s > 0
        assert result.launch_s == pytest.approx(result.launches * PEAKS.launch_overhead_s)
        assert result.predicted_s == pytest.approx(result.roofline_s + result.launch_s + result.elementwise_s)
        assert result.ratio == pytest.approx(result.predicted_s / result.measured_s)


def test_median_abs_log_ratio() -> None:
    """The median of |ln(predicted/measured)| over cases; the worst case is the largest."""
    results = [
        timing.TimingResult(
            case=str(r),
            predicted_s=r,
            measured_s=1.0,
            roofline_s=r,
            launch_s=0.0,
            elementwise_s=0.0,
            launches=1,
            bound="memory",
        )
        for r in (0.5, 1.0, 3.0)
    ]
    study = timing.TimingStudy(arch=one_of_each(), peaks=PEAKS, results=tuple(results))
    assert study.median_abs_log_ratio == pytest.approx(math.log(2.0))
    assert study.worst.case == "3.0"


@pytest.mark.parametrize("size", timing.SIZES)
def test_timed_cards_fit_the_reference_limit(size: str) -> None:
    """Each size's timed card (Qwen3-Next shrunk to its caps, fp32) is within the size guard and grows with size."""
    arch = timing.timing_architecture(_qwen3_next(), size)
    check_reference_size(arch)
    assert arch.dtypes.weights == arch.dtypes.kv_cache == "fp32"
    assert timing.timing_cases(size)
    assert parameter_count(arch) > parameter_count(shrink_architecture(_qwen3_next()))


def test_measured_profile_round_trips_through_the_yaml_loader(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The measured accelerator, written as a profile and read back by load_hardware, is the same accelerator."""
    acc = machine.machine_accelerator(PEAKS, 2.5e10)
    path = write_accelerator_profile(acc, tmp_path / "deep" / "this-machine.yaml", comment="measured\nhere")
    loaded: Accelerator = load_hardware(path).accelerator
    assert loaded.hbm_bandwidth_bytes_per_s == pytest.approx(acc.hbm_bandwidth_bytes_per_s, rel=1e-12)
    assert dict(loaded.dense_flop_per_s) == pytest.approx(dict(acc.dense_flop_per_s), rel=1e-12)
    assert loaded.memory_bytes == pytest.approx(acc.memory_bytes, rel=1e-12)
    assert (loaded.name, loaded.source, loaded.confidence) == (acc.name, acc.source, acc.confidence)
    text = path.read_text()
    assert text.startswith("# Accelerator profile written by prfaas-plan") and "\n# measured\n# here\n" in text
    assert [p.name for p in path.parent.iterdir()] == ["this-machine.yaml"]  # no temp file left behind


def test_launch_overhead_is_positive_and_small() -> None:
    """The per-launch overhead of the tiny card is positive and under a millisecond."""
    overhead = machine.measure_launch_overhead(_qwen3_next(), np.random.default_rng(0), repeats=1)
    assert 0 < overhead < 1e-3


@pytest.mark.parametrize("decode", [False, True])
def test_gpu_script_runs_the_products_physics_prices(decode: bool) -> None:
    """The GPU script's products add up to the matmul FLOPs physics.ops prices for the same operations (a card
    without MoE, whose expert rows the script spreads evenly), and its prediction is positive."""
    from prfaas_plan.physics.ops import forward_ops
    from prfaas_plan.reference import gpu_timing

    arch = one_of_each("bf16")
    dense = type(arch)(
        hidden_size=arch.hidden_size,
        vocab_size=arch.vocab_size,
        dtypes=arch.dtypes,
        layers=tuple(g for g in arch.layers if g.ffn.kind == "dense"),
    )
    case = timing.TimingCase(name="c", cached=6, new=1 if decode else 5, batch=3 if decode else 1, decode=decode)
    shapes = gpu_timing.products(dense, case)
    names = {p[0] for p in shapes}
    ops = forward_ops(dense, cached=case.cached, new=case.new, batch=case.batch, decode=decode)
    priced = sum(float(op.matmul_flops) for op in ops if op.name in names)
    assert sum(2 * b * m * k * n for _, b, m, k, n in shapes) == priced
    assert gpu_timing.predicted_s(dense, case, machine.machine_accelerator(PEAKS, 1e10)) > 0
