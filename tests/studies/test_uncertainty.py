"""Error bands on roofline and calibrated pools (``io.error_bands``, ``optimize.uncertainty``): where they come
from, how the edges scale a pool's times, and what ``size`` reports at the edges."""

from __future__ import annotations

import json

import numpy as np
import pytest

from prfaas_plan.io.error_bands import builtin_band, load_error_bands
from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.optimize.uncertainty import EDGES, at_edge, banded
from prfaas_plan.physics.pools import pool_costs
from prfaas_plan.throughput import stage_model
from tests.conftest import PAPER_SCENARIO, REPO, run_cli

QWEN = REPO / "workloads" / "qwen3.5-capacity.yaml"


def test_bands_file_covers_every_engine_and_the_defaults() -> None:
    coverage, _, table = load_error_bands()
    assert 0 < coverage < 1
    assert {"sglang", "vllm", "trtllm", "defaults"} <= set(table)
    assert all(b.factor >= 1 for phases in table.values() for b in phases.values())


def test_measured_pools_carry_no_band(paper_scenario: object) -> None:
    spec = load_scenario(PAPER_SCENARIO)
    assert spec.prfaas.method == "measured" and not banded(spec)
    assert at_edge(spec, "slow") == spec


def test_roofline_pool_gets_its_engine_band(tmp_path: object) -> None:
    spec = load_scenario(QWEN)
    assert spec.prfaas.time_band == builtin_band("sglang")  # the scenario names SGLang on both pools
    path = tmp_path / "q.yaml"  # type: ignore[operator]
    path.write_text(QWEN.read_text().replace("engine: sglang", "engine: trtllm"))
    assert load_scenario(path).local.time_band == builtin_band("trtllm")
    path.write_text("\n".join(line for line in QWEN.read_text().splitlines() if "engine: sglang" not in line))
    assert load_scenario(path).prfaas.time_band == builtin_band("sglang")  # no engine: the default engine's
    path.write_text(QWEN.read_text().replace("engine: sglang", "engine: paper-fit"))
    assert load_scenario(path).prfaas.time_band == builtin_band("defaults")  # the paper-fit serving defaults


def test_edges_scale_prefill_and_decode() -> None:
    """Slow edge: prefill curve x f_p exactly, decode step x f_d at a batch no larger and still within the TPOT;
    fast edge the other way."""
    spec = load_scenario(QWEN)
    tpot = 1 / spec.slo.decode_tokens_per_s
    context = spec.traffic.input_length.mean_tokens + spec.traffic.output_length.mean_tokens / 2
    band = spec.local.time_band
    assert band is not None
    nominal = pool_costs(spec.local, spec.model, context_tokens=context, tpot_s=tpot)
    lengths = np.array([1_000.0, 30_000.0, 100_000.0])
    for edge, sign in zip(EDGES, (1.0, -1.0), strict=True):
        moved = pool_costs(at_edge(spec, edge).local, spec.model, context_tokens=context, tpot_s=tpot)
        np.testing.assert_allclose(moved.prefill(lengths), nominal.prefill(lengths) * band.prefill.factor**sign)
        assert moved.decode_step_time_s is not None and moved.decode_step_time_s <= tpot * (1 + 1e-9)
        assert nominal.decode_max_batch is not None and moved.decode_max_batch is not None
        assert (moved.decode_max_batch <= nominal.decode_max_batch) == (edge == "slow")


def test_slower_edge_never_serves_more() -> None:
    """Decode capacity per instance: slow edge <= nominal <= fast edge (more time never speeds anything up)."""
    spec = load_scenario(QWEN)
    slow, nominal, fast = (
        stage_model(s).decode_req_per_s_per_instance for s in (at_edge(spec, "slow"), spec, at_edge(spec, "fast"))
    )
    assert slow <= nominal <= fast


def test_size_reports_both_edges() -> None:
    done = run_cli("size", "qwen3.5-capacity", "--no-verify", "--json")
    assert done.returncode == 0, done.stderr
    band = json.loads(done.stdout)["error_band"]
    assert set(band["edges"]) == set(EDGES)
    assert band["bands"]["prfaas"]["prefill_factor"] == pytest.approx(builtin_band("sglang").prefill.factor)
    fast = band["edges"]["fast"]
    assert fast["nominal_prfaas_pd_goodput_req_per_s"] >= json.loads(done.stdout)["sizing"]["target"]["rate_req_per_s"]
    done = run_cli("size", "--no-verify", "--json")  # the paper's measured pools: no band
    assert done.returncode == 0 and json.loads(done.stdout)["error_band"] is None
