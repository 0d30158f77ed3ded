"""The attention context curve and the MoE load-imbalance model: their laws, limits and published sources."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.io.hardware import load_serving_defaults
from prfaas_plan.physics.moe_load import busiest_load, fit_skew, imbalance_factor
from prfaas_plan.physics.ops import causal_pairs, forward_ops
from prfaas_plan.physics.roofline import (
    ATTENTION_OPS,
    Instance,
    attention_penalty,
    fit_half_point,
    roofline_time,
)
from prfaas_plan.spec.hardware import Accelerator, RooflineParams
from tests.conftest import examples
from tests.strategies_models import one_of_each

DEFAULTS = Path(__file__).resolve().parents[2] / "hardware_profiles" / "serving" / "defaults.yaml"
ACCELERATOR = Accelerator(
    key="x",
    name="x",
    memory_bytes=1e11,
    hbm_bandwidth_bytes_per_s=2e10,
    dense_flop_per_s={"bf16": 1e11},
    scale_up_bandwidth_bytes_per_s=1e11,
    source="test figures",
)


def test_default_half_context_is_the_fit_of_its_published_points() -> None:
    """Refitting the FlashAttention-3 points in the defaults file gives its attention_half_context_tokens
    (to the file's whole-token precision), with every point within 4 % of the fitted curve."""
    defaults = load_serving_defaults(DEFAULTS)
    lengths = np.asarray(defaults.attention_sequence_tokens)
    rates = np.asarray(defaults.attention_flop_per_s)
    contexts = (lengths + 1) / 2  # causal: keys per query, averaged over the sequence
    peak, half = fit_half_point(contexts, rates)
    assert half == pytest.approx(defaults.params.attention_half_context_tokens, abs=0.5)
    assert np.all(np.abs(peak * contexts / (contexts + half) / rates - 1) < 0.04)


@settings(max_examples=examples(30), deadline=None)
@given(st.floats(1e9, 1e15), st.floats(0.0, 5000.0))
def test_fit_recovers_a_saturating_curve(peak: float, half: float) -> None:
    """Rates generated as peak · x / (x + x_half) are fitted back to (peak, x_half)."""
    x = np.array([16.0, 64.0, 256.0, 1024.0, 4096.0])
    fitted_peak, fitted_half = fit_half_point(x, peak * x / (x + half))
    assert fitted_peak == pytest.approx(peak, rel=1e-6)
    assert fitted_half == pytest.approx(half, rel=1e-6, abs=1e-6)


@settings(max_examples=examples(30), deadline=None)
@given(st.floats(1.0, 1e6), st.floats(1.0, 1e6), st.floats(0.0, 1e4))
def test_attention_penalty_falls_with_context_to_one(x: float, y: float, half: float) -> None:
    """1 + x_half/x: never below 1, never rising with context, 1 without a curve or without a context."""
    low, high = sorted((x, y))
    assert float(attention_penalty(low, half)) >= float(attention_penalty(high, half)) >= 1.0
    assert float(attention_penalty(low, 0.0)) == 1.0
    assert float(attention_penalty(math.inf, half)) == 1.0


@settings(max_examples=examples(30), deadline=None)
@given(st.integers(0, 4096), st.integers(1, 4096), st.floats(1.0, 2000.0))
def test_the_curve_at_the_mean_context_is_the_sum_over_queries(cached: int, new: int, half: float) -> None:
    """A causal prefill's per-query costs add up exactly to the factor at its mean keys per query: query i
    sees c + i keys, and Σ_i (c + i)(1 + h/(c + i)) = pairs · (1 + h · l / pairs)."""
    per_query = np.arange(cached + 1, cached + new + 1, dtype=np.float64)
    pairs = float(causal_pairs(cached, new))
    exact = float(np.sum(per_query * (1 + half / per_query)))
    assert exact == pytest.approx(pairs * float(attention_penalty(pairs / new, half)), rel=1e-12)


@settings(max_examples=examples(20), deadline=None)
@given(st.floats(0.0, 4000.0), st.integers(1, 64))
def test_the_context_curve_slows_only_attention_cores(half: float, new: int) -> None:
    """A positive x_half never makes a pass faster; only the softmax attention cores change."""
    arch = one_of_each("bf16")
    instance = Instance(accelerator=ACCELERATOR, gpus=1)
    flat = RooflineParams(attention_half_context_tokens=0.0).kernel_only
    curved = replace(flat, attention_half_context_tokens=half)
    ops = forward_ops(arch, cached=8, new=new)
    tokens = np.asarray(float(new))
    for op in ops:
        plain = float(roofline_time([op], arch, instance, flat, tokens).compute_bound_s)
        slow = float(roofline_time([op], arch, instance, curved, tokens).compute_bound_s)
        if op.name in ATTENTION_OPS and op.name != "linear.recurrence":
            assert slow >= plain
        else:
            assert slow == plain, op.name


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(0, 20_000), st.integers(2, 256), st.integers(1, 16), st.floats(0.0, 3.0))
def test_the_busiest_expert_carries_at_least_the_mean(tokens: int, experts: int, active: int, skew: float) -> None:
    """E[max load] >= the mean load T·k/E, and never above T (an expert takes a token at most once)."""
    k = min(active, experts)
    load = busiest_load(tokens, experts, active, skew=skew)
    assert tokens * k / experts * (1 - 1e-9) <= load <= tokens * (1 + 1e-9)


def test_limits_of_the_load_model() -> None:
    """One expert, or one group: the busiest is the mean. One token: exactly 1. Every expert active: T."""
    assert busiest_load(500, 1, 1) == 500
    assert busiest_load(500, 64, 8, groups=1) == 500 * 8
    assert busiest_load(1, 64, 8) == 1.0
    assert busiest_load(300, 8, 8) == 300
    assert float(imbalance_factor(0.0, 64, 8)) == 1.0


def test_the_spread_shrinks_as_the_batch_grows_and_skew_adds_to_it() -> None:
    """The imbalance factor falls towards 1 + skew as tokens grow; skew never lowers it."""
    tokens = np.geomspace(8, 4e6, 25)
    factor = imbalance_factor(tokens, 256, 8, groups=8)
    assert np.all(np.diff(factor) <= 1e-9) and factor[-1] < 1.01
    skewed = imbalance_factor(tokens, 256, 8, skew=0.3)
    assert np.all(skewed >= imbalance_factor(tokens, 256, 8) - 1e-9)
    assert skewed[-1] == pytest.approx(1.3, rel=0.02)


@pytest.mark.parametrize(
    ("tokens", "experts", "active", "groups"),
    [(8, 64, 4, None), (64, 8, 2, None), (256, 8, 2, None), (512, 64, 8, None), (512, 64, 8, 8)],
)
def test_the_model_against_simulated_uniform_routing(
    tokens: int, experts: int, active: int, groups: int | None
) -> None:
    """400 simulated batches of uniform top-k routing: the model's busiest load is within 3 % of their mean
    plus four standard errors (the independent form is a lower bound per expert, slightly above per group)."""
    rng = np.random.default_rng(7)
    busiest = []
    for _ in range(400):
        chosen = np.argsort(rng.random((tokens, experts)), axis=1)[:, :active]
        loads = np.bincount(chosen.ravel(), minlength=experts)
        busiest.append((loads.reshape(groups, -1).sum(axis=1) if groups else loads).max())
    mean, se = float(np.mean(busiest)), float(np.std(busiest) / math.sqrt(len(busiest)))
    assert abs(busiest_load(tokens, experts, active, groups) - mean) <= 0.03 * mean + 4 * se


@settings(max_examples=examples(15), deadline=None)
@given(st.integers(64, 4096), st.sampled_from([8, 64, 256]), st.floats(0.0, 2.0))
def test_fit_skew_inverts_the_model(tokens: int, experts: int, skew: float) -> None:
    """fit_skew(busiest_load(skew)) gives the skew back (where the skew shows above the batch's spread)."""
    observed = busiest_load(tokens, experts, 2, skew=skew)
    assert busiest_load(tokens, experts, 2, skew=fit_skew(tokens, experts, 2, observed)) == pytest.approx(
        observed, rel=1e-6
    )


def test_expert_parallel_waits_for_the_busiest_gpu() -> None:
    """Expert parallelism slows the routed experts by the busiest GPU's load over the mean; tensor
    parallelism (the default) and one GPU leave the pass as it was."""
    arch = one_of_each("bf16")
    params = RooflineParams().kernel_only
    ep = replace(params, expert_parallel=True)
    ops = [op for op in forward_ops(arch, cached=0, new=np.array([4.0, 64.0, 4096.0])) if op.routing is not None]
    tokens = np.array([4.0, 64.0, 4096.0])
    for gpus in (1, 4):
        instance = Instance(accelerator=ACCELERATOR, gpus=gpus)
        tp = roofline_time(ops, arch, instance, params, tokens).compute_bound_s
        waited = roofline_time(ops, arch, instance, ep, tokens).compute_bound_s
        if gpus == 1:
            assert np.array_equal(tp, waited)
        else:
            assert np.all(waited >= tp) and waited[0] > tp[0]


def test_a_measured_weight_read_above_the_reference_rate_round_trips(tmp_path: Path) -> None:
    """`validate kernel --profile-out` may measure a weight-read efficiency above 1 (1.04 and 1.29 seen on two
    machines: cache-resident weights); what it writes loads back as written. Beyond the
    documented bound (io.hardware.MAX_MEASURED_MEMORY_EFFICIENCY) the loader refuses it with the field named."""
    from prfaas_plan.errors import InputError
    from prfaas_plan.io.hardware import MAX_MEASURED_MEMORY_EFFICIENCY, load_hardware
    from prfaas_plan.report.profile import write_accelerator_profile
    from prfaas_plan.spec.hardware import KernelShapes

    # 1.04: the machine issue 20 names; 1.29: the CI machine, whose profile the earlier bound of 1.25 refused.
    for measured in (1.04, 1.29):
        shapes = KernelShapes(gemm_half_rows=4.0, memory_efficiency=measured, source="measured")
        path = write_accelerator_profile(ACCELERATOR, tmp_path / "fast.yaml", "", shapes)
        assert load_hardware(path).kernel_shapes == shapes
    too_fast = replace(shapes, memory_efficiency=MAX_MEASURED_MEMORY_EFFICIENCY * 1.01)
    with pytest.raises(InputError, match=r"kernel_shapes\.memory_efficiency.*must be <="):
        load_hardware(write_accelerator_profile(ACCELERATOR, tmp_path / "bad.yaml", "", too_fast))


def _h200_with_shapes(folder: Path) -> Path:
    """The shipped H200 file with measured kernel shapes added (named h200.yaml: its generation is found by name)."""
    from tests.conftest import REPO

    folder.mkdir(parents=True, exist_ok=True)
    text = (REPO / "hardware_profiles" / "h200.yaml").read_text()
    shapes = (
        "kernel_shapes: {gemm_half_rows: 2000, attention_half_context_tokens: 5000, moe_load_skew: 0.5, "
        "memory_efficiency: 0.4, source: test}\n"
    )
    path = folder / "h200.yaml"
    path.write_text(text.rstrip("\n") + "\n" + shapes)
    return path


def test_kv_prices_a_hardware_files_kernel_shapes_as_a_scenario_does(tmp_path: Path) -> None:
    """`kv` on a hardware file with measured kernel shapes prices them (it ignored them while a scenario on the
    same file applied them), names them in its source, and gives the prefill time a scenario's pool on that file
    is priced with."""
    import json

    from prfaas_plan.io.names import pool_for
    from prfaas_plan.io.scenario import load_scenario
    from prfaas_plan.physics.pools import pool_costs
    from tests.conftest import REPO, run_cli

    shaped = _h200_with_shapes(tmp_path / "ks")
    args = ("kv", "--model", "llama-3.1-70b", "--length", "1000", "--json", "--engine", "sglang")
    plain = json.loads(run_cli(*args, "--hardware", "h200").stdout)["rows"][0]
    measured = run_cli(*args, "--hardware", str(shaped))
    assert measured.returncode == 0, measured.stderr
    row = json.loads(measured.stdout)["rows"][0]
    assert row["prefill_s"] > 1.2 * plain["prefill_s"]  # GEMMs at half rate below 2,000 rows
    assert "kernel shapes from the hardware profile (test)" in row["source"] and "e_m 0.40" in row["source"]
    pool, _ = pool_for("llama-3.1-70b", str(shaped), 8, "roofline")
    assert pool.roofline.memory_efficiency == 0.4 and pool.roofline.gemm_half_rows == 2000
    text = (REPO / "workloads" / "qwen3-next-b200-h100.yaml").read_text()  # 8-GPU roofline pools, SGLang's terms
    for old, edited in (
        ("    hardware: h100\n", f"    hardware: {shaped}\n"),
        ("  card: qwen3-next-80b-a3b\n", "  card: llama-3.1-70b\n"),
    ):
        assert text.count(old) == 1
        text = text.replace(old, edited)
    path = tmp_path / "s.yaml"
    path.write_text(text)
    spec = load_scenario(path)
    local = pool_costs(spec.local, spec.model, context_tokens=0.0, tpot_s=1.0, with_decode=False)
    assert float(local.prefill(np.array([1000.0]))[0]) == pytest.approx(row["prefill_s"], rel=2e-3)


def test_matrix_cells_take_their_own_hardwares_kernel_shapes(tmp_path: Path) -> None:
    """A hardware matrix prices each cell with its own hardware file's measured kernel shapes and the serving
    defaults' where it has none: the template hardware's measurements do not follow it to other accelerators."""
    from prfaas_plan.io.scenario import load_scenario
    from prfaas_plan.studies.matrix_inputs import matrix_cells
    from tests.conftest import REPO

    shaped = _h200_with_shapes(tmp_path / "ks")
    text = (REPO / "workloads" / "qwen3-next-b200-h100.yaml").read_text()
    for old in ("    hardware: b200\n", "    hardware: h100\n"):
        assert text.count(old) == 1
        text = text.replace(old, f"    hardware: {shaped}\n")
    path = tmp_path / "s.yaml"
    path.write_text(text)
    spec = load_scenario(path)
    assert spec.local.roofline.gemm_half_rows == 2000  # the template's own file applies
    defaults = RooflineParams()
    for cell in matrix_cells(spec, ["h100"], ["h100", str(shaped)]):
        assert cell.scenario is not None
        local = cell.scenario.local.roofline
        if cell.scenario.local.hardware_key == "h100":
            assert (local.gemm_half_rows, local.memory_efficiency) == (
                defaults.gemm_half_rows,
                defaults.memory_efficiency,
            )
            assert "kernel shapes" not in local.source
        else:
            assert (local.gemm_half_rows, local.memory_efficiency) == (2000, 0.4)
            assert "kernel shapes from the hardware profile (test)" in local.source


def test_matrix_cells_keep_what_the_pools_roofline_section_set(tmp_path: Path) -> None:
    """A value the template pool's own `roofline:` section set is kept on every cell (the loader keeps it over a
    file's kernel shapes too); the fields it did not set follow each cell's hardware."""
    from prfaas_plan.io.scenario import load_scenario
    from prfaas_plan.studies.matrix_inputs import matrix_cells
    from tests.conftest import REPO

    shaped = _h200_with_shapes(tmp_path / "ks")
    text = (REPO / "workloads" / "qwen3-next-b200-h100.yaml").read_text()
    old = "    hardware: h100\n    method: roofline\n"
    assert text.count(old) == 1
    path = tmp_path / "s.yaml"
    path.write_text(
        text.replace(old, f"    hardware: {shaped}\n    method: roofline\n    roofline: {{memory_efficiency: 0.5}}\n")
    )
    spec = load_scenario(path)
    assert spec.local.roofline_set == ("memory_efficiency",) and spec.local.roofline.memory_efficiency == 0.5
    halves = {}
    for cell in matrix_cells(spec, ["h100"], ["h100", str(shaped)]):
        assert cell.scenario is not None
        local = cell.scenario.local.roofline
        assert local.memory_efficiency == 0.5, cell.scenario.local.hardware_key
        halves[cell.scenario.local.hardware_key] = local.gemm_half_rows
    assert halves == {"h100": RooflineParams().gemm_half_rows, "h200": 2000}
