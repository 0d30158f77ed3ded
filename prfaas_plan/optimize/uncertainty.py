"""What a sizing becomes at the edges of its pools' error bands (``spec.uncertainty.TimeBand``).

A roofline or calibrated pool carries the error its pricing showed when held out (``io.error_bands``): the true
prefill and decode-step times lie within [priced / f, priced x f] for the band's coverage of held-out points.
The *slow* edge multiplies every banded pool's prefill curve and decode step by its factor, the *fast* edge
divides by it (``Pool.prefill_time_scale``, ``decode_time_scale``; ``physics.pools`` applies them, re-finding
the decode batch that meets the TPOT). Measured pools keep their times (their error is the profile fit's).

At each edge the target is sized again (the deployment needed, or why none is) and the nominal answer's
deployments are re-scored (their goodput: below the target means the nominal answer no longer carries it; above,
the margin). A verdict (PrfaaS-PD or homogeneous PD cheapest) holds when it is the same at both edges.
"""

from __future__ import annotations

from dataclasses import replace

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InfeasibleError
from prfaas_plan.optimize.carrier import Carrier, Deployment
from prfaas_plan.optimize.cost import UnitPrices
from prfaas_plan.optimize.sizing import SIZING_RESOLUTION_TOKENS, Sizing, default_search_space, size
from prfaas_plan.spec.cost import Target
from prfaas_plan.spec.scenario import Pool, Scenario
from prfaas_plan.spec.uncertainty import TimeBand
from prfaas_plan.throughput import StageModel, stage_model

EDGES = ("slow", "fast")


def band_of(pool: Pool) -> TimeBand | None:
    """The band a pool is sized at the edges of: None for a measured pool."""
    return None if pool.method == "measured" else pool.time_band


def scaled_pool(pool: Pool, edge: str) -> Pool:
    """``pool`` at ``edge`` (``slow``: times x factor; ``fast``: / factor) of its band; unbanded: as it is."""
    band = band_of(pool)
    if band is None:
        return pool
    sign = 1.0 if edge == "slow" else -1.0
    return replace(pool, prefill_time_scale=band.prefill.factor**sign, decode_time_scale=band.decode.factor**sign)


def at_edge(scenario: Scenario, edge: str) -> Scenario:
    """``scenario`` with both pools at ``edge`` of their bands."""
    if edge not in EDGES:
        raise ValueError(f"edge must be one of {EDGES}, got {edge!r}")
    return replace(scenario, prfaas=scaled_pool(scenario.prfaas, edge), local=scaled_pool(scenario.local, edge))


def banded(scenario: Scenario) -> bool:
    """Whether either pool carries a band."""
    return band_of(scenario.prfaas) is not None or band_of(scenario.local) is not None


def verdict(sizing: Sizing | None) -> str:
    """``prfaas-pd`` or ``homogeneous-pd`` (the cheaper; PrfaaS-PD on a tie), or ``none`` (neither carries)."""
    if sizing is None or (sizing.prfaas_pd is None and sizing.homogeneous_pd is None):
        return "none"
    return "prfaas-pd" if sizing.cheapest is sizing.prfaas_pd else "homogeneous-pd"


@frozen
class EdgeSizing:
    """The target sized again at one edge, and the nominal deployments' goodput there (req/s; None where the
    nominal kind had no deployment or the edge has no stage model)."""

    edge: str
    prefill_factor: dict[str, float]
    decode_factor: dict[str, float]
    sizing: Sizing | None
    reason: str | None
    nominal_prfaas_goodput_req_per_s: float | None
    nominal_homogeneous_goodput_req_per_s: float | None

    @property
    def verdict(self) -> str:
        return verdict(self.sizing)


def _goodput(model: StageModel, target: Target, d: Deployment | None, scv: float) -> float | None:
    if d is None:
        return None
    carrier = Carrier(model, target, SIZING_RESOLUTION_TOKENS, scv)
    return carrier.rescored(d.n_prfaas, d.n_local, d.bandwidth_bytes_per_s).goodput_req_per_s


def size_edge(
    scenario: Scenario,
    prices: UnitPrices,
    target: Target,
    nominal: Sizing | None,
    edge: str,
    *,
    decode_service_scv: float = 0.0,
) -> EdgeSizing:
    """Size ``target`` at ``edge`` (default search space) and re-score ``nominal``'s deployments there."""
    moved = at_edge(scenario, edge)
    factors = {
        role: (pool.prefill_time_scale, pool.decode_time_scale)
        for role, pool in (("prfaas", moved.prfaas), ("local", moved.local))
    }
    try:
        model = stage_model(moved)
    except InfeasibleError as exc:
        return EdgeSizing(
            edge=edge,
            prefill_factor={k: v[0] for k, v in factors.items()},
            decode_factor={k: v[1] for k, v in factors.items()},
            sizing=None,
            reason="; ".join(exc.reasons),
            nominal_prfaas_goodput_req_per_s=None if nominal is None or nominal.prfaas_pd is None else 0.0,
            nominal_homogeneous_goodput_req_per_s=None if nominal is None or nominal.homogeneous_pd is None else 0.0,
        )
    space = default_search_space(model, prices, target)
    sizing = size(
        model,
        prices,
        target,
        bandwidths_bytes_per_s=space.bandwidths_bytes_per_s,
        max_prfaas=space.max_prfaas,
        max_local=space.max_local,
        decode_service_scv=decode_service_scv,
    )
    return EdgeSizing(
        edge=edge,
        prefill_factor={k: v[0] for k, v in factors.items()},
        decode_factor={k: v[1] for k, v in factors.items()},
        sizing=sizing,
        reason="; ".join(sizing.reasons) or None,
        nominal_prfaas_goodput_req_per_s=_goodput(
            model, target, None if nominal is None else nominal.prfaas_pd, decode_service_scv
        ),
        nominal_homogeneous_goodput_req_per_s=_goodput(
            model, target, None if nominal is None else nominal.homogeneous_pd, decode_service_scv
        ),
    )
