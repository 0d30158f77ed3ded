"""The capacity answers at the edges of the pools' error bands: ``size`` (``optimize.uncertainty``) and the
hardware ``matrix`` (every cell's verdict, PrfaaS-PD or homogeneous PD cheapest, at both edges).

Bands come with the pools (``io.error_bands``); a pool the matrix derives from a measured template (roofline or
calibrated on another accelerator, priced by the serving defaults) gets the defaults' band, and a calibrated
pool's prefill band is the largest leave-one-out error of its calibration when that is wider than nothing
(``physics.fits.pool_fit_reports``), its decode band its pricing's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import replace

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InfeasibleError
from prfaas_plan.io.error_bands import DEFAULTS, builtin_band
from prfaas_plan.optimize.cost import unit_prices
from prfaas_plan.optimize.matrix import CellInput, HardwareMatrix, hardware_matrix
from prfaas_plan.optimize.uncertainty import EDGES, at_edge, band_of
from prfaas_plan.physics.fits import pool_fit_reports
from prfaas_plan.spec.cost import Target
from prfaas_plan.spec.scenario import ModelCard, Pool, Scenario
from prfaas_plan.spec.uncertainty import OUTSIDE_SHARE_NOTED, PhaseBand, TimeBand, model_kind, span_words
from prfaas_plan.studies.matrix_inputs import matrix_cells
from prfaas_plan.throughput import stage_model


def with_band(pool: Pool, scenario: Scenario, role: str) -> Pool:
    """``pool`` with the band it is sized at the edges of (module docstring); measured pools unchanged."""
    if pool.method == "measured":
        return pool
    band = pool.time_band or builtin_band(DEFAULTS)
    if pool.method == "calibrated":
        band = calibrated_band(pool, scenario.model, band, role)
    return replace(pool, time_band=band)


def calibrated_band(pool: Pool, card: ModelCard, band: TimeBand, role: str = "prfaas") -> TimeBand:
    """``band`` with a calibrated pool's prefill band in place: the largest leave-one-out error of its
    calibration, on the calibration points' range of prompts (unchanged where the calibration has no
    leave-one-out)."""
    reports = pool_fit_reports(pool, card, role)
    errors = [abs(math.log(h / g)) for r in reports for h, g in zip(r.leave_one_out, r.given, strict=True)]
    lengths = [x for r in reports if r.leave_one_out for x in r.lengths_tokens]
    if not errors:
        return band
    span = (min(lengths), max(lengths))
    return replace(
        band,
        prefill=PhaseBand(
            factor=math.exp(max(errors)),
            points=len(errors),
            basis="the largest leave-one-out error of the pool's prefill calibration, on "
            + span_words("prefill", span),
            tokens=span,
        ),
    )


def banded_scenario(scenario: Scenario) -> Scenario:
    """``scenario`` with both pools' bands in place (``with_band``)."""
    return replace(
        scenario,
        prfaas=with_band(scenario.prfaas, scenario, "prfaas"),
        local=with_band(scenario.local, scenario, "local"),
    )


def _edge_inputs(spec: Scenario, prefill: Sequence[str], local: Sequence[str], edge: str) -> list[CellInput]:
    """The matrix's cells (``studies.matrix_inputs``) with every cell's pools at ``edge`` of their bands."""
    inputs = []
    for cell in matrix_cells(spec, list(prefill), list(local)):
        model, prices, reason = None, None, cell.reason
        if cell.scenario is not None:
            moved = at_edge(banded_scenario(cell.scenario), edge)
            try:
                model = stage_model(moved)
            except InfeasibleError as exc:
                reason = "; ".join(exc.reasons)
            prices = unit_prices(moved)
            if reason is None and not prices.complete:
                reason = "no price"
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


@frozen
class CellVerdict:
    """One cell's verdict (``prfaas-pd``, ``homogeneous-pd`` or ``none``) and its two costs (USD/h), nominal and
    at each edge; ``holds`` when the verdict is the same at both edges as nominal."""

    prefill: str
    local: str
    verdicts: dict[str, str]
    prfaas_usd_per_hour: dict[str, float | None]
    homogeneous_usd_per_hour: dict[str, float | None]

    @property
    def holds(self) -> bool:
        return len(set(self.verdicts.values())) == 1


def prompt_share_outside(scenario: Scenario, role: str) -> tuple[float, float] | None:
    """(longest prompt the ``role`` pool's prefill band was measured on, share of the traffic's prompts longer),
    where that share is noted (``OUTSIDE_SHARE_NOTED``); None otherwise, or where the band states no range."""
    band = band_of(scenario.prfaas if role == "prfaas" else scenario.local)
    if band is None or band.prefill.tokens is None:
        return None
    longest = band.prefill.tokens[1]
    share = float(scenario.traffic.input_length.sf(longest))
    return (longest, share) if share >= OUTSIDE_SHARE_NOTED else None


def context_share_outside(scenario: Scenario) -> tuple[float, float] | None:
    """(longest context the local pool's decode band was measured on, share of the requests decoding at longer
    mean contexts: the prompt plus half the mean output), where noted; None otherwise. Only the local pool
    decodes."""
    band = band_of(scenario.local)
    if band is None or band.decode.tokens is None:
        return None
    longest = band.decode.tokens[1]
    half_output = scenario.traffic.output_length.mean_tokens / 2
    share = float(scenario.traffic.input_length.sf(max(longest - half_output, 0.0)))
    return (longest, share) if share >= OUTSIDE_SHARE_NOTED else None


def prompts_sentence(longest: float, share: float, pools: str) -> str:
    """The note for prompts past ``pools``' prefill bands (``prompt_share_outside``)."""
    return (
        f"{share:.0%} of the traffic's prompts are longer than any ({longest:,.0f} tokens) the {pools} prefill "
        "band was measured on: those of them a pool prefills (which, the routing threshold decides) are priced "
        "outside the band"
    )


def contexts_sentence(longest: float, share: float, pools: str) -> str:
    """The note for decode contexts past ``pools``' decode bands (``context_share_outside``)."""
    return (
        f"{share:.0%} of the requests decode at contexts longer than any ({longest:,.0f} tokens) the {pools} decode "
        "band was measured on: their decode steps are priced outside the band"
    )


def prompts_outside_band(scenario: Scenario, role: str) -> str:
    """The sentence when a noted share of the scenario's prompts is longer than any prompt the ``role`` pool's
    prefill band was measured on (the share is the traffic's: which of them the pool prefills, the routing
    threshold decides); "" otherwise."""
    found = prompt_share_outside(scenario, role)
    return "" if found is None else prompts_sentence(*found, f"{role} pool's")


def pool_outside_band(scenario: Scenario, role: str) -> str:
    """The sentence when the ``role`` pool's band holds too few measurements (``spec.uncertainty.
    MIN_POINTS_OF_A_KIND``) of the scenario's kind of model or of the pool's GPU generation, in a phase the
    pool serves (a PrfaaS pool prefills; a local pool prefills and decodes); "" otherwise."""
    return "; ".join(f"the {role} pool's {note}" for note in pool_notes(scenario, role))


def pool_notes(scenario: Scenario, role: str) -> list[str]:
    """``PhaseBand.beyond``'s sentences for the ``role`` pool's model kind and GPU generation, per phase it
    serves (``pool_outside_band``)."""
    from prfaas_plan.io.engine_profile import generation_of

    pool = scenario.prfaas if role == "prfaas" else scenario.local
    band = band_of(pool)
    arch = scenario.model.architecture
    if band is None or arch is None:
        return []
    kind, generation = model_kind(arch), generation_of(pool.hardware_key)
    phases = ("prefill",) if role == "prfaas" else ("prefill", "decode")
    found = [
        getattr(band, p).beyond(p, None, kind=kind, model=scenario.model.key, generation=generation) for p in phases
    ]
    return [note for note in found if note]


def contexts_outside_band(scenario: Scenario) -> str:
    """The sentence when a noted share of the requests decode at contexts longer than any the local pool's decode
    band was measured on; "" otherwise."""
    found = context_share_outside(scenario)
    return "" if found is None else contexts_sentence(*found, "local pool's")


@frozen
class MatrixBand:
    """The matrix at both edges, every cell's verdicts, the bands used per cell and the wall time."""

    edges: dict[str, HardwareMatrix | None]
    reasons: dict[str, str]
    cells: tuple[CellVerdict, ...]
    bands: dict[str, dict[str, float]]
    wall_s: float
    #: Where the traffic outruns the cell pools' band measurements (``prompts_sentence``, ``contexts_sentence``):
    #: one sentence per kind (prompts, decode contexts), longest measured and share, naming the pools.
    notes: tuple[str, ...] = ()


def _costs(matrix: HardwareMatrix | None) -> dict[tuple[str, str], tuple[float | None, float | None]]:
    if matrix is None:
        return {}
    homogeneous: dict[str, float] = {}
    for r in matrix.cells:
        if r.sizing is not None and r.sizing.homogeneous_pd is not None:
            homogeneous.setdefault(r.local, r.sizing.homogeneous_pd.usd_per_hour)
    out = {}
    for r in matrix.cells:
        prfaas = None if r.sizing is None or r.sizing.prfaas_pd is None else r.sizing.prfaas_pd.usd_per_hour
        out[(r.prefill, r.local)] = (prfaas, homogeneous.get(r.local))
    return out


def _verdict(prfaas: float | None, homogeneous: float | None) -> str:
    if prfaas is None and homogeneous is None:
        return "none"
    if homogeneous is None or (prfaas is not None and prfaas <= homogeneous):
        return "prfaas-pd"
    return "homogeneous-pd"


def matrix_band(
    spec: Scenario,
    prefill: Sequence[str],
    local: Sequence[str],
    target: Target,
    nominal: HardwareMatrix,
    *,
    decode_service_scv: float = 0.0,
    workers: int = 1,
) -> MatrixBand:
    """Size the matrix at both edges and compare every cell's verdict with the nominal one."""
    start = time.perf_counter()
    edges: dict[str, HardwareMatrix | None] = {}
    reasons: dict[str, str] = {}
    for edge in EDGES:
        try:
            edges[edge] = hardware_matrix(
                _edge_inputs(spec, prefill, local, edge),
                target,
                decode_service_scv=decode_service_scv,
                workers=workers,
            )
        except InfeasibleError as exc:
            edges[edge] = None
            reasons[edge] = "; ".join(exc.reasons)
    costs = {"nominal": _costs(nominal), **{e: _costs(m) for e, m in edges.items()}}
    cells = []
    bands: dict[str, dict[str, float]] = {}
    # (kind, longest measured, share) -> the pools it holds for (a dict as an ordered set)
    notes: dict[tuple[str, int, float], dict[str, None]] = {}
    # note -> the pools whose band holds too few points of the model's kind or the GPU's generation
    population: dict[str, dict[str, None]] = {}
    for cell in matrix_cells(spec, list(prefill), list(local)):
        key = (cell.prefill, cell.local)
        if cell.scenario is not None:
            b = banded_scenario(cell.scenario)
            for role, pool, name in (("prefill", b.prfaas, cell.prefill), ("local", b.local, cell.local)):
                band = pool.time_band if pool.method != "measured" else None
                bands[f"{role}:{name}"] = (
                    {"prefill": band.prefill.factor, "decode": band.decode.factor} if band is not None else {}
                )
            for kind, role, name, found in (
                ("prompts", "PrfaaS", cell.prefill, prompt_share_outside(b, "prfaas")),
                ("prompts", "local", cell.local, prompt_share_outside(b, "local")),
                ("contexts", "local", cell.local, context_share_outside(b)),
            ):
                if found is not None:
                    pools = notes.setdefault((kind, round(found[0]), round(found[1], 2)), {})
                    pools[f"{name} {role}"] = None
            for role, name in (("prfaas", cell.prefill), ("local", cell.local)):
                for note in pool_notes(b, role):
                    population.setdefault(note, {})[f"{name} {'PrfaaS' if role == 'prfaas' else 'local'}"] = None
        per = {name: costs[name].get(key, (None, None)) for name in costs}
        cells.append(
            CellVerdict(
                prefill=cell.prefill,
                local=cell.local,
                verdicts={name: _verdict(*c) for name, c in per.items()},
                prfaas_usd_per_hour={name: c[0] for name, c in per.items()},
                homogeneous_usd_per_hour={name: c[1] for name, c in per.items()},
            )
        )
    return MatrixBand(
        edges=edges,
        reasons=reasons,
        cells=tuple(cells),
        bands=bands,
        wall_s=time.perf_counter() - start,
        notes=tuple(
            (prompts_sentence if kind == "prompts" else contexts_sentence)(longest, share, ", ".join(pools) + " pools'")
            for (kind, longest, share), pools in notes.items()
        )
        + tuple(f"{', '.join(pools)} pools: {note}" for note, pools in population.items()),
    )
