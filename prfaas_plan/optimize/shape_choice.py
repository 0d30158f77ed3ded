"""The shape ``size`` and ``optimize`` choose for a scenario whose pools say ``shape: auto``, and the next-best.

Both price the shape pairs ``optimize.shapes.variants`` returns (the screen's best pair, then each choosing
pool moved to its runner-up), as ``matrix`` does, and keep the best by their own criterion:

- ``size`` (``for_target``): the pair whose cheapest PrfaaS-PD deployment carrying the target costs least
  (USD/h, ``optimize.sizing.size`` over the same search space the command uses);
- ``optimize`` (``for_throughput``): the pair whose throughput-optimal plan (the paper's Λ_max at the
  scenario's instance counts) carries the most per USD/h of the pools' GPUs (req/s per USD/h), or per GPU
  when a pool is unpriced. The instance counts are the scenario's, so a smaller shape is a smaller cluster:
  the figure per cost (or per GPU) is what makes the shapes comparable.

A pool that keeps its shape (no ``shape: auto``, or a measured pool) has one shape and no alternative.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InfeasibleError
from prfaas_plan.optimize.cost import unit_prices
from prfaas_plan.optimize.throughput_search import search
from prfaas_plan.throughput import stage_model

# Annotations only: the sizing search loads when ``for_target`` runs, the shape screen (``optimize.shapes``) when a
# pool chooses its shape (start-up time: a scenario whose pools keep their shapes loads neither).
if TYPE_CHECKING:
    from collections.abc import Sequence

    from prfaas_plan.optimize.shapes import ShapeVariant
    from prfaas_plan.spec.cost import Target
    from prfaas_plan.spec.scenario import Pool, Scenario
    from prfaas_plan.spec.shape import InstanceShape

#: The criteria, as the reports state them.
SIZE_CRITERION = "lowest PrfaaS-PD cost at the target (USD/h)"
THROUGHPUT_CRITERION = "highest Λ_max per USD/h of GPUs (req/s per USD/h)"
THROUGHPUT_CRITERION_UNPRICED = "highest Λ_max per GPU (req/s per GPU; a pool is unpriced)"


@frozen
class ScoredShape:
    """One shape pair and its figure under the criterion (None with ``reason`` when it has none)."""

    label: str
    prfaas_shape: InstanceShape
    local_shape: InstanceShape
    figure: float | None
    reason: str | None = None


@frozen
class ShapeChoice:
    """The shape pair chosen, the scenario in it, and every pair priced, best first.

    ``choosing``: the roles (``prfaas``, ``local``) that chose; empty when both pools keep their shapes (then
    ``scored`` holds the one pair, unscored). ``higher_is_better``: the criterion's direction."""

    scenario: Scenario
    criterion: str
    unit: str
    higher_is_better: bool
    choosing: tuple[str, ...]
    scored: tuple[ScoredShape, ...]
    ruled_out: tuple[str, ...]

    @property
    def chosen(self) -> ScoredShape:
        return self.scored[0]

    @property
    def next_best(self) -> ScoredShape | None:
        """The best other pair (None when only one was priced)."""
        return self.scored[1] if len(self.scored) > 1 else None

    def alternative(self, role: str) -> ScoredShape | None:
        """The best pair in which ``role``'s pool takes another shape than the chosen one (None: it keeps its
        shape, or no other shape was priced)."""
        attr = "prfaas_shape" if role == "prfaas" else "local_shape"
        mine = getattr(self.chosen, attr)
        return next((s for s in self.scored[1:] if getattr(s, attr) != mine), None)


def _fixed(scenario: Scenario, criterion: str, unit: str, higher: bool) -> ShapeChoice:
    p, l_ = scenario.prfaas.instance_shape, scenario.local.instance_shape
    only = ScoredShape(
        label=f"{p.gpus}g {p.label} / {l_.gpus}g {l_.label}", prfaas_shape=p, local_shape=l_, figure=None
    )
    return ShapeChoice(
        scenario=scenario,
        criterion=criterion,
        unit=unit,
        higher_is_better=higher,
        choosing=(),
        scored=(only,),
        ruled_out=(),
    )


def _choosing(scenario: Scenario) -> tuple[str, ...]:
    """The roles whose pools choose their shapes (``Pool.chooses_shape``)."""
    pools: tuple[tuple[str, Pool], ...] = (("prfaas", scenario.prfaas), ("local", scenario.local))
    return tuple(role for role, p in pools if p.chooses_shape)


def _rank(
    scenario: Scenario,
    scored: list[tuple[ScoredShape, ShapeVariant]],
    ruled_out: tuple[str, ...],
    *,
    criterion: str,
    unit: str,
    higher: bool,
) -> ShapeChoice:
    if not any(s.figure is not None for s, _ in scored):
        raise InfeasibleError(
            ["no instance shape carries a deployment", *(f"{s.label}: {s.reason}" for s, _ in scored), *ruled_out]
        )
    sign = -1.0 if higher else 1.0
    # Unscored pairs last, in the screen's order (``sorted`` is stable).
    scored.sort(key=lambda x: (x[0].figure is None, sign * x[0].figure if x[0].figure is not None else 0.0))
    return ShapeChoice(
        scenario=scored[0][1].scenario,
        criterion=criterion,
        unit=unit,
        higher_is_better=higher,
        choosing=_choosing(scenario),
        scored=tuple(s for s, _ in scored),
        ruled_out=ruled_out,
    )


def _scored(pair: ShapeVariant, figure: float | None, reason: str | None) -> ScoredShape:
    return ScoredShape(
        label=pair.label, prfaas_shape=pair.prfaas_shape, local_shape=pair.local_shape, figure=figure, reason=reason
    )


def for_target(
    scenario: Scenario,
    target: Target,
    *,
    bandwidths_bytes_per_s: Sequence[float] | None = None,
    max_prfaas: int | None = None,
    max_local: int | None = None,
    decode_service_scv: float = 0.0,
) -> ShapeChoice:
    """``size``'s shape (module docstring): each shape pair sized to ``target`` over ``default_search_space``
    (the given link sizes and caps, else its defaults), the cheapest PrfaaS-PD deployment's cost its figure.
    Raises InfeasibleError (with the numbers of the shapes ruled out) when no pair carries the target."""
    if not _choosing(scenario):
        return _fixed(scenario, SIZE_CRITERION, "USD/h", False)
    from prfaas_plan.optimize.shapes import variants
    from prfaas_plan.optimize.sizing import default_search_space, size

    pairs, ruled_out = variants(scenario)
    scored: list[tuple[ScoredShape, ShapeVariant]] = []
    for pair in pairs:
        prices = unit_prices(pair.scenario)
        if not prices.complete:
            scored.append((_scored(pair, None, "a pool is unpriced"), pair))
            continue
        try:
            model = stage_model(pair.scenario)
        except InfeasibleError as exc:
            scored.append((_scored(pair, None, "; ".join(exc.reasons)), pair))
            continue
        space = default_search_space(
            model,
            prices,
            target,
            bandwidths_bytes_per_s=bandwidths_bytes_per_s,
            max_prfaas=max_prfaas,
            max_local=max_local,
        )
        sizing = size(
            model,
            prices,
            target,
            bandwidths_bytes_per_s=space.bandwidths_bytes_per_s,
            max_prfaas=space.max_prfaas,
            max_local=space.max_local,
            decode_service_scv=decode_service_scv,
            homogeneous=False,
        )
        found = sizing.prfaas_pd
        why = None if found is not None else "; ".join(sizing.reasons) or "no PrfaaS-PD deployment carries the target"
        scored.append((_scored(pair, None if found is None else found.usd_per_hour, why), pair))
    return _rank(scenario, scored, ruled_out, criterion=SIZE_CRITERION, unit="USD/h", higher=False)


def for_throughput(scenario: Scenario, resolution_tokens: float = 10.0) -> ShapeChoice:
    """``optimize``'s shape (module docstring): each shape pair's throughput-optimal plan at the scenario's
    instance counts, its Λ_max per USD/h of GPUs (per GPU when a pool is unpriced) its figure."""
    priced = unit_prices(scenario).complete
    criterion = THROUGHPUT_CRITERION if priced else THROUGHPUT_CRITERION_UNPRICED
    unit = "req/s per USD/h" if priced else "req/s per GPU"
    if not _choosing(scenario):
        return _fixed(scenario, criterion, unit, True)
    from prfaas_plan.optimize.shapes import variants

    pairs, ruled_out = variants(scenario)
    scored: list[tuple[ScoredShape, ShapeVariant]] = []
    for pair in pairs:
        spec = pair.scenario
        try:
            model = stage_model(spec)
            lam = search(model, resolution_tokens).throughput_req_per_s
        except InfeasibleError as exc:
            scored.append((_scored(pair, None, "; ".join(exc.reasons)), pair))
            continue
        prices = unit_prices(spec)
        if priced and prices.complete:
            assert prices.prfaas_usd_per_instance_hour is not None and prices.local_usd_per_instance_hour is not None
            per = (
                spec.prfaas.instances * prices.prfaas_usd_per_instance_hour
                + spec.local.instances * prices.local_usd_per_instance_hour
            )
        else:
            per = float(spec.prfaas.gpus + spec.local.gpus)
        scored.append((_scored(pair, lam / per if per > 0 else None, None if per > 0 else "no GPUs"), pair))
    return _rank(scenario, scored, ruled_out, criterion=criterion, unit=unit, higher=True)
