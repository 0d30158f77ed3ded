"""The scenarios of a hardware matrix: the scenario's model and traffic on every (prefill hardware, local
hardware) pair, each pool costed by the best evidence available for it.

Per pool, in order of preference:
1. ``measured``: the hardware file has a profile for the model on the scenario's GPUs per instance with what
   the role needs (the PrfaaS pool: prefill and KV points; the local pool: prefill and decode);
2. ``calibrated``: the roofline with efficiencies fitted to the model's measured prefill points on some
   built-in hardware file (the same accelerator's when it has them, else the first that does);
3. ``roofline``: the roofline alone, when no measured points exist for the model.

Roofline and calibrated cells are priced with the scenario's engine on each accelerator's generation; a scenario
whose pools are measured names none, so its cells take the default engine (``io.engine_profile.DEFAULT_ENGINE``)
and that engine's error band.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InfeasibleError, InputError, Problem
from prfaas_plan.io.engine_profile import DEFAULT_ENGINE, generation_of, load_named_engine
from prfaas_plan.io.error_bands import builtin_band
from prfaas_plan.io.hardware import load_hardware
from prfaas_plan.io.names import load_named_hardware
from prfaas_plan.io.paths import builtin_root
from prfaas_plan.optimize.cost import UnitPrices, unit_prices
from prfaas_plan.optimize.matrix import CellInput
from prfaas_plan.optimize.shapes import PoolShapes, chooses_shapes, pool_shapes, variants
from prfaas_plan.physics.engine import engine_params
from prfaas_plan.physics.roofline import missing_peak
from prfaas_plan.spec.engine import EngineProfile
from prfaas_plan.spec.hardware import HardwareProfile, InstanceProfile, RooflineParams
from prfaas_plan.spec.scenario import Pool, Scenario
from prfaas_plan.throughput import StageModel, stage_model

#: At most this many hardware names per axis of the matrix.
MAX_AXIS = 16


@frozen
class MatrixCell:
    """One (prefill, local) pair: its scenario, or why none could be built; and each pool's provenance."""

    prefill: str
    local: str
    scenario: Scenario | None
    reason: str | None
    prefill_provenance: str
    local_provenance: str


def _measured_sources(model: str) -> list[tuple[HardwareProfile, InstanceProfile]]:
    """Built-in hardware files with measured prefill points for ``model``."""
    found = []
    for path in sorted((builtin_root() / "hardware_profiles").glob("*.yaml")):
        try:
            hw = load_hardware(path)
        except InputError:
            continue
        for profile in hw.profiles:
            if profile.model == model and profile.prefill.provenance == "measured":
                found.append((hw, profile))
    return found


def _cell_roofline(template: Pool, hw: HardwareProfile) -> RooflineParams:
    """The template pool's roofline with the per-accelerator curves (``spec.kernel_shapes.SHAPE_FIELDS``: small-M
    and context curves, MoE skew, memory efficiency) of the cell's own hardware file where it measured them, else
    the serving defaults': the template hardware's measurements describe that part only. A value the pool's own
    ``roofline:`` section set (``Pool.roofline_set``) is kept on every cell, as the loader keeps it over a file's
    kernel shapes."""
    from prfaas_plan.spec.kernel_shapes import SHAPE_FIELDS

    params, kept = template.roofline, set(template.roofline_set)
    defaults = RooflineParams()
    source = params.source.replace(params.kernel_shapes_note, "") if params.kernel_shapes_note else params.source
    cell = replace(
        params,
        source=source,
        kernel_shapes_source="",
        **{f: getattr(defaults, f) for f in SHAPE_FIELDS if f not in kept},
    )
    if hw.kernel_shapes is None:
        return cell
    cell = cell.with_kernel_shapes(hw.kernel_shapes)
    return replace(cell, **{f: getattr(params, f) for f in SHAPE_FIELDS if f in kept})


def _pool(
    spec: Scenario,
    key: str,
    role: str,
    sources: list[tuple[HardwareProfile, InstanceProfile]],
    default_engine: EngineProfile,
) -> tuple[Pool | None, str]:
    template = spec.prfaas if role == "prfaas" else spec.local
    hw = load_named_hardware(key)
    gpus = template.gpus_per_instance
    profile = hw.find(spec.model.key, gpus)
    needs = (profile is not None) and (profile.kv_cache is not None if role == "prfaas" else profile.decode is not None)
    base = replace(
        template,
        hardware_key=hw.accelerator.key,
        accelerator=hw.accelerator,
        profile=profile,
        roofline=_cell_roofline(template, hw),
    )
    how = "paper-fit serving defaults"
    engine = template.engine
    if engine is None and template.method == "measured":  # a measured template names no engine: the default's
        engine = default_engine
        base = replace(base, time_band=builtin_band(engine.key))
    if engine is not None:  # the engine's terms on this accelerator's generation, not the template's
        generation = generation_of(hw.accelerator.key)
        params = engine_params(
            engine, generation, expert_parallel=template.roofline.expert_parallel, base=base.roofline
        )
        # What the pool's own roofline: section set stays over the engine's terms on every cell, as the loader
        # keeps it over the engine on the template's (a compute efficiency set: every GEMM's rate, as there).
        kept: dict[str, Any] = {f: getattr(template.roofline, f) for f in template.roofline_set}
        if "compute_efficiency" in kept:
            params = params.one_gemm_rate(kept.pop("compute_efficiency"))
        base = replace(base, roofline=replace(params, **kept))
        how = f"engine {engine.key} on {generation}"
    if needs and profile is not None:
        return replace(base, method="measured", calibration=None, calibration_accelerator=None), (
            f"{profile.prefill.provenance} profile ({hw.accelerator.key})"
        )
    arch = spec.model.architecture
    if arch is None:
        return None, f"no profile for '{spec.model.key}' on {gpus} x {key} and the model card has no architecture"
    why = missing_peak(arch, hw.accelerator)
    if why is not None:
        return None, f"{key}: {why}"
    own = [s for s in sources if s[0].accelerator.key == hw.accelerator.key]
    candidates = own or sources
    if not candidates:
        return replace(base, method="roofline"), f"roofline ({how}: no measured points to calibrate)"
    src_hw, src_profile = candidates[0]
    return (
        replace(base, method="calibrated", calibration=src_profile, calibration_accelerator=src_hw.accelerator),
        f"roofline calibrated on {src_hw.accelerator.key} measured prefill",
    )


def matrix_cells(spec: Scenario, prefill: list[str], local: list[str]) -> list[MatrixCell]:
    """Every (prefill, local) pair of the named hardware, the scenario's instance sizes and link kept."""
    problems = [
        Problem(field=flag, message=f"at most {MAX_AXIS} hardware names, got {len(names)}")
        for flag, names in (("prefill", prefill), ("local", local))
        if len(names) > MAX_AXIS
    ]
    problems += [
        Problem(field=flag, message="needs at least one hardware name")
        for flag, names in (("prefill", prefill), ("local", local))
        if not names
    ]
    if problems:
        raise InputError(problems)
    sources = _measured_sources(spec.model.key)
    default_engine = load_named_engine(DEFAULT_ENGINE)  # read once for every cell that takes it
    prefill_pools = {k: _pool(spec, k, "prfaas", sources, default_engine) for k in dict.fromkeys(prefill)}
    local_pools = {k: _pool(spec, k, "local", sources, default_engine) for k in dict.fromkeys(local)}
    cells = []
    for p_key, (p_pool, p_prov) in prefill_pools.items():
        for l_key, (l_pool, l_prov) in local_pools.items():
            reason = None if p_pool is not None else p_prov
            if reason is None and l_pool is None:
                reason = l_prov
            scenario = None
            if p_pool is not None and l_pool is not None:
                scenario = replace(spec, prfaas=p_pool, local=l_pool)
            cells.append(
                MatrixCell(
                    prefill=p_key,
                    local=l_key,
                    scenario=scenario,
                    reason=reason,
                    prefill_provenance=p_prov,
                    local_provenance=l_prov,
                )
            )
    return cells


def matrix_inputs(scenario: Scenario, prefill: Sequence[str], local: Sequence[str]) -> list[CellInput]:
    """The hardware matrix's cells: each (prefill, local) pair's stage model and prices, or why it has none.
    Raises InputError naming ``prefill`` or ``local`` for an unknown hardware name."""
    inputs = []
    screens: dict[tuple[str, str], PoolShapes] = {}
    for cell in matrix_cells(scenario, list(prefill), list(local)):
        model, prices, reason = None, None, cell.reason
        if cell.scenario is not None and chooses_shapes(cell.scenario):
            inputs.append(_shaped_cell(cell, cell.scenario, screens))
            continue
        if cell.scenario is not None:
            try:
                model = stage_model(cell.scenario)
            except InfeasibleError as exc:
                reason = "; ".join(exc.reasons)
            prices = unit_prices(cell.scenario)
            if reason is None and not prices.complete:
                reason = "no price: " + "; ".join(v for v in prices.sources.values() if v.startswith("no price"))
        inputs.append(
            CellInput(
                prefill=cell.prefill,
                local=cell.local,
                model=model if reason is None else None,
                prices=prices,
                reason=reason,
                prefill_provenance=cell.prefill_provenance,
                local_provenance=cell.local_provenance,
            )
        )
    return inputs


def _shaped_cell(cell: MatrixCell, spec: Scenario, screens: dict[tuple[str, str], PoolShapes]) -> CellInput:
    """A cell whose pools choose their shapes: the screened shape pairs' stage models and prices
    (``optimize.shapes``), each pool's screen made once per hardware name."""
    for role, key in (("prfaas", cell.prefill), ("local", cell.local)):
        if (role, key) not in screens:
            screens[(role, key)] = pool_shapes(spec, role)
    reasons: list[str] = []
    found: list[tuple[str, StageModel, UnitPrices]] = []
    ruled: tuple[str, ...] = ()
    try:
        pairs, ruled = variants(spec, screens[("prfaas", cell.prefill)], screens[("local", cell.local)])
    except InfeasibleError as exc:
        pairs, reasons = (), list(exc.reasons)
    for pair in pairs:
        prices = unit_prices(pair.scenario)
        try:
            model = stage_model(pair.scenario)
        except InfeasibleError as exc:
            reasons.append(f"{pair.label}: " + "; ".join(exc.reasons))
            continue
        if not prices.complete:
            reasons.append("no price: " + "; ".join(v for v in prices.sources.values() if v.startswith("no price")))
            continue
        found.append((pair.label, model, prices))
    return CellInput(
        prefill=cell.prefill,
        local=cell.local,
        model=found[0][1] if found else None,
        prices=found[0][2] if found else None,
        reason=None if found else "; ".join(reasons) or "no shape carries a deployment",
        prefill_provenance=cell.prefill_provenance,
        local_provenance=cell.local_provenance,
        variants=tuple(found),
        ruled_out=ruled,
    )
