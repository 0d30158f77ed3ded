"""A matrix cell moved to another accelerator is priced with its engine's terms on that accelerator's generation
(the GEMM efficiency by generation and dtype, the CDNA 3 decode factor), not with the template pool's."""

from __future__ import annotations

from pathlib import Path

from prfaas_plan.io.engine_profile import load_generations, load_named_engine
from prfaas_plan.io.names import resolve_scenario_path
from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.physics.engine import engine_params
from prfaas_plan.studies.matrix_inputs import matrix_cells


def test_cells_take_the_engine_terms_of_their_own_generation() -> None:
    spec = load_scenario(resolve_scenario_path("qwen3.5-capacity"))
    assert spec.prfaas.engine is not None and spec.prfaas.engine.key == "sglang"
    generations = load_generations()
    engine = load_named_engine("sglang")
    cells = matrix_cells(spec, ["h200", "b200", "mi300x"], ["h20"])
    seen = set()
    for cell in cells:
        assert cell.scenario is not None, cell.reason
        pool = cell.scenario.prfaas
        generation = generations[cell.prefill]
        seen.add(generation)
        expected = engine_params(engine, generation, base=spec.prfaas.roofline)
        assert pool.roofline.compute_efficiency == expected.compute_efficiency, cell.prefill
        assert pool.roofline.dtype_compute_efficiency == expected.dtype_compute_efficiency, cell.prefill
        assert pool.roofline.decode_step_overhead_s == expected.decode_step_overhead_s, cell.prefill
        assert pool.roofline.decode_op_overhead_s == expected.decode_op_overhead_s, cell.prefill
        assert f"on {generation}" in cell.prefill_provenance, cell.prefill_provenance
    assert seen == {"hopper", "blackwell", "cdna3"}
    # The generations differ in what they are priced with (else the check above could not fail).
    b200, mi300x = (c.scenario.prfaas.roofline for c in cells[1:] if c.scenario is not None)
    h200 = spec.prfaas.roofline
    assert b200.dtype_compute_efficiency != h200.dtype_compute_efficiency  # FP8 GEMMs: 0.5 against 0.4 prior
    assert mi300x.decode_op_overhead_s != h200.decode_op_overhead_s  # the CDNA 3 factor on decode overheads


def test_cells_keep_what_the_pools_own_roofline_sets_over_the_engine(tmp_path: Path) -> None:
    """A pool that names an engine and sets its own compute efficiency and overhead keeps both on every matrix
    cell, as on its own hardware (the cells took the engine's figures instead)."""
    source = resolve_scenario_path("qwen3.5-capacity")
    text = source.read_text()
    marker = "    engine: sglang             # terms"
    assert text.count(marker) == 1
    own = "\n    roofline: {compute_efficiency: 0.2, overhead_s: 0.4}"
    edited = tmp_path / "own.yaml"
    edited.write_text(text.replace(marker, marker.split("#")[0].rstrip() + own + "  #"))
    spec = load_scenario(edited)
    assert spec.prfaas.roofline.compute_efficiency == 0.2 and spec.prfaas.roofline.overhead_s == 0.4
    for cell in matrix_cells(spec, ["h200", "b200", "mi300x"], ["h20"]):
        assert cell.scenario is not None, cell.reason
        params = cell.scenario.prfaas.roofline
        assert params.compute_efficiency == 0.2 and params.overhead_s == 0.4, cell.prefill
        assert params.dtype_compute_efficiency == () and params.expert_gemm_efficiency == 1.0, cell.prefill
