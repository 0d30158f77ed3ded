"""JSON payloads of the capacity answers at the edges of the pools' error bands (``optimize.uncertainty``,
``studies.uncertainty``)."""

from __future__ import annotations

from typing import Any

from prfaas_plan.optimize.carrier import Deployment
from prfaas_plan.optimize.uncertainty import EdgeSizing, band_of
from prfaas_plan.spec.scenario import Scenario
from prfaas_plan.studies.uncertainty import (
    MatrixBand,
    contexts_outside_band,
    pool_outside_band,
    prompts_outside_band,
)
from prfaas_plan.units import GBIT_PER_S


def bands_to_dict(scenario: Scenario) -> dict[str, Any]:
    """Each pool's band (factor per phase, coverage, basis, and where the prompts outrun its measurements), or
    why it has none."""
    out: dict[str, Any] = {}
    for role, pool in (("prfaas", scenario.prfaas), ("local", scenario.local)):
        band = band_of(pool)
        if band is None:
            out[role] = {"band": None, "why": f"{pool.method} pool: its error is the profile fit's, not a band"}
            continue
        out[role] = {
            "coverage": band.coverage,
            "prefill_factor": band.prefill.factor,
            "decode_factor": band.decode.factor,
            "prefill_basis": band.prefill.basis,
            "decode_basis": band.decode.basis,
            "source": band.source,
        }
        outside = prompts_outside_band(scenario, role)
        if outside:
            out[role]["prompts_outside_band"] = outside
        contexts = contexts_outside_band(scenario) if role == "local" else ""
        if contexts:
            out[role]["contexts_outside_band"] = contexts
        population = pool_outside_band(scenario, role)
        if population:
            out[role]["pool_outside_band"] = population
    return out


def _deployment(d: Deployment | None) -> dict[str, Any] | None:
    if d is None:
        return None
    return {
        "n_prfaas": d.n_prfaas,
        "n_local": d.n_local,
        "bandwidth_gbit_per_s": d.bandwidth_bytes_per_s / GBIT_PER_S,
        "usd_per_hour": d.usd_per_hour,
        "goodput_req_per_s": d.goodput_req_per_s,
    }


def edges_to_dict(scenario: Scenario, nominal_verdict: str, edges: tuple[EdgeSizing, ...]) -> dict[str, Any]:
    """The sizing at each edge: the deployment needed, the nominal deployments' goodput there, the verdict."""
    return {
        "bands": bands_to_dict(scenario),
        "nominal_verdict": nominal_verdict,
        "verdict_holds": all(e.verdict == nominal_verdict for e in edges),
        "edges": {
            e.edge: {
                "prefill_time_scale": e.prefill_factor,
                "decode_time_scale": e.decode_factor,
                "verdict": e.verdict,
                "prfaas_pd": _deployment(None if e.sizing is None else e.sizing.prfaas_pd),
                "homogeneous_pd": _deployment(None if e.sizing is None else e.sizing.homogeneous_pd),
                "reason": e.reason,
                "nominal_prfaas_pd_goodput_req_per_s": e.nominal_prfaas_goodput_req_per_s,
                "nominal_homogeneous_pd_goodput_req_per_s": e.nominal_homogeneous_goodput_req_per_s,
            }
            for e in edges
        },
    }


def matrix_band_to_dict(band: MatrixBand) -> dict[str, Any]:
    """Every cell's verdict nominal and at both edges, whether it holds, the costs, the bands and wall time."""
    return {
        "wall_s": band.wall_s,
        "edge_reasons": band.reasons,
        "bands": band.bands,
        "outside_band": list(band.notes),
        "cells": [
            {
                "prefill": c.prefill,
                "local": c.local,
                "verdicts": c.verdicts,
                "holds": c.holds,
                "prfaas_pd_usd_per_hour": c.prfaas_usd_per_hour,
                "homogeneous_pd_usd_per_hour": c.homogeneous_usd_per_hour,
            }
            for c in band.cells
        ],
        "holding": sum(c.holds for c in band.cells),
        "flipping": sum(not c.holds for c in band.cells),
    }
