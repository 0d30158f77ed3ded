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
    from prfaas_plan.studies.uncertainty import banded_scenario, contexts_outside_band, prompts_outside_band

    banded_spec = banded_scenario(load_scenario(QWEN))
    for role in ("prfaas", "local"):  # the traffic outruns the bands' measurements: the JSON says so
        note = prompts_outside_band(banded_spec, role)
        assert note and band["bands"][role]["prompts_outside_band"] == note
    assert band["bands"]["local"]["contexts_outside_band"] == contexts_outside_band(banded_spec) != ""
    done = run_cli("size", "--no-verify", "--json")  # the paper's measured pools: no band
    assert done.returncode == 0 and json.loads(done.stdout)["error_band"] is None


@pytest.mark.validation
def test_matrix_names_every_pool_whose_band_the_traffic_outruns() -> None:
    """The matrix's error band lists, once per kind and share, every cell pool whose band measurements the
    traffic's prompts (prefill) or decode contexts (local pools) outrun, and no other."""
    from prfaas_plan.studies.matrix_inputs import matrix_cells
    from prfaas_plan.studies.uncertainty import banded_scenario, context_share_outside, prompt_share_outside

    done = run_cli("matrix", "qwen3.5-capacity", "--prefill", "h200,b200", "--local", "h20,h100", "--json")
    assert done.returncode == 0, done.stderr
    notes = json.loads(done.stdout)["error_band"]["outside_band"]
    spec = load_scenario(QWEN)
    expected: dict[tuple[str, str], set[str]] = {}
    for cell in matrix_cells(spec, ["h200", "b200"], ["h20", "h100"]):
        if cell.scenario is None:
            continue
        b = banded_scenario(cell.scenario)
        for kind, pool, found in (
            ("prompts", f"{cell.prefill} PrfaaS", prompt_share_outside(b, "prfaas")),
            ("prompts", f"{cell.local} local", prompt_share_outside(b, "local")),
            ("contexts", f"{cell.local} local", context_share_outside(b)),
        ):
            if found is not None:
                expected.setdefault((kind, f"{found[1]:.0%}"), set()).add(pool)
    assert len(notes) == len(expected) > 0
    for (kind, share), pools in expected.items():
        word = "prompts are longer" if kind == "prompts" else "decode at contexts"
        (note,) = [n for n in notes if n.startswith(share) and word in n]
        assert all(f"{pool}," in note or f"{pool} pools'" in note for pool in pools), (note, pools)


def test_a_pool_whose_band_holds_too_few_points_of_its_model_kind_or_generation_is_named() -> None:
    """`size`, `review` and `matrix` name a pool whose band holds fewer than MIN_POINTS_OF_A_KIND measurements of
    the scenario's kind of model (here a mixture of experts) or of the pool's GPU generation, per phase it
    serves (a PrfaaS pool prefills; the local pool prefills and decodes), and say nothing where it holds
    enough (the shipped SGLang band on Hopper for Qwen3.5)."""
    from dataclasses import replace

    from prfaas_plan.report.uncertainty import bands_to_dict
    from prfaas_plan.spec.uncertainty import MIN_POINTS_OF_A_KIND
    from prfaas_plan.studies.uncertainty import pool_outside_band

    scenario = load_scenario(REPO / "workloads" / "qwen3.5-capacity.yaml")
    assert scenario.prfaas.time_band is not None and scenario.local.time_band is not None
    assert pool_outside_band(scenario, "prfaas") == "" and pool_outside_band(scenario, "local") == ""
    assert "pool_outside_band" not in bands_to_dict(scenario)["prfaas"]
    band = scenario.prfaas.time_band
    few = MIN_POINTS_OF_A_KIND - 1
    dense_only = replace(
        band, prefill=replace(band.prefill, kinds=(("dense", "a", 9), ("moe", "b", few)), generations=(("hopper", 11),))
    )
    odd = replace(
        scenario,
        prfaas=replace(scenario.prfaas, time_band=dense_only),
        local=replace(
            scenario.local, time_band=replace(band, decode=replace(band.decode, generations=(("blackwell", 9),)))
        ),
    )
    prfaas_note, local_note = pool_outside_band(odd, "prfaas"), pool_outside_band(odd, "local")
    assert prfaas_note.startswith("the prfaas pool's prefill of a mixture-of-experts model is outside")
    assert f"mixture-of-experts models: {few} of its {9 + few} points" in prfaas_note
    assert local_note.startswith("the local pool's decode on hopper GPUs is outside")
    assert "hopper GPUs: none of its 9 points (others: blackwell 9)" in local_note
    doc = bands_to_dict(odd)
    assert doc["prfaas"]["pool_outside_band"] == prfaas_note and doc["local"]["pool_outside_band"] == local_note
