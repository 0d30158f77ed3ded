"""Choosing instance shapes (``shape: auto``): which shapes each pool may take, a screen that ranks them by
what the physics says a request costs on them, and the variants of a scenario that sizing then prices.

For a pool that chooses (``Pool.choose_shape``; measured pools keep the shape they were measured on), every
shape its accelerator's scale-up domain offers the model (``physics.shapes.candidate_shapes``) is checked
for memory: its weights, plus one request's KV/state at the longest length it must hold (the longest input
for the PrfaaS pool; the longest input plus the mean output for the local pool), must fit its usable HBM;
the shapes that do not are ruled out with the numbers.

Screen. Each remaining shape is priced by the physics (``physics.pools.pool_costs``: prefill curve, decode
batch and step at the scenario's context and TPOT) and ranked by the GPU cost of one request's work on it
at full utilisation: instance price x E[T_prefill(L)] for the PrfaaS pool; instance price x (E[T_prefill(L)]
+ mean output tokens x step / batch) for the local pool, which prefills and decodes. This is a screen, not
the answer: it ignores queueing, the TTFT SLO and the threshold split. The answer is sizing's: ``variants``
returns the screen's best pair of shapes and the pairs that change one pool to its runner-up, each a full
scenario that ``optimize.sizing.size`` prices; the cheapest sized pair is chosen and the next is reported
beside it.
"""

from __future__ import annotations

from dataclasses import replace

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InfeasibleError
from prfaas_plan.optimize.cost import unit_prices
from prfaas_plan.physics.pools import pool_costs
from prfaas_plan.spec.scenario import Pool, Scenario
from prfaas_plan.spec.shape import InstanceShape

#: How many shapes per pool the screen passes on to sizing (the best, and its runner-up).
SCREENED_PER_POOL = 2
_SECONDS_PER_HOUR = 3600.0


@frozen
class ScreenedShape:
    """One shape of one pool: the pool in that shape and the screen's cost of a request on it, USD."""

    shape: InstanceShape
    pool: Pool
    usd_per_request: float


@frozen
class PoolShapes:
    """A pool's shapes after the memory check, in the screen's order, and those ruled out (with why)."""

    role: str
    screened: tuple[ScreenedShape, ...]
    ruled_out: tuple[str, ...]


@frozen
class ShapeVariant:
    """A scenario with both pools in chosen shapes (the pools' ``shape`` set, ``choose_shape`` cleared)."""

    prfaas_shape: InstanceShape
    local_shape: InstanceShape
    scenario: Scenario

    @property
    def label(self) -> str:
        """``PrfaaS shape / local shape``, each with its GPU count."""
        return f"{_shape_text(self.prfaas_shape)} / {_shape_text(self.local_shape)}"


def _shape_text(shape: InstanceShape) -> str:
    return f"{shape.gpus}g {shape.label}"


def _context_tokens(scenario: Scenario) -> float:
    """The decode context the stage model prices at (``throughput.stage_model``)."""
    return scenario.traffic.input_length.mean_tokens + scenario.traffic.output_length.mean_tokens / 2


def _longest_tokens(scenario: Scenario, role: str) -> float:
    longest = scenario.traffic.input_length.upper_tokens
    return longest if role == "prfaas" else longest + scenario.traffic.output_length.mean_tokens


def _screen_cost(scenario: Scenario, pool: Pool, role: str) -> float:
    """The screen's USD per request on ``pool`` (module docstring); inf when it cannot serve the role."""
    lengths = scenario.traffic.input_length
    tpot_s = 1.0 / scenario.slo.decode_tokens_per_s
    costs = pool_costs(
        pool, scenario.model, context_tokens=_context_tokens(scenario), tpot_s=tpot_s, with_decode=role == "local"
    )
    price = unit_prices(replace(scenario, prfaas=pool, local=pool)).prfaas_usd_per_instance_hour
    if price is None:
        return float("inf")
    seconds = float(costs.prefill.expect(lengths, lengths.lower_tokens - 1.0, lengths.upper_tokens))
    if role == "local":
        batch, step = costs.decode_max_batch, costs.decode_step_time_s
        if not batch or step is None or batch < 1:
            return float("inf")
        seconds += scenario.traffic.output_length.mean_tokens * step / batch
    return price / _SECONDS_PER_HOUR * seconds


def pool_shapes(scenario: Scenario, role: str) -> PoolShapes:
    """``role``'s pool (``prfaas`` or ``local``) in every shape it may take, screened (module docstring). A
    pool that does not choose keeps its one shape (``Pool.instance_shape``), unscreened."""
    pool = scenario.prfaas if role == "prfaas" else scenario.local
    arch = scenario.model.architecture
    if not pool.choose_shape or pool.method == "measured" or arch is None:
        return PoolShapes(
            role=role,
            screened=(ScreenedShape(shape=pool.instance_shape, pool=pool, usd_per_request=0.0),),
            ruled_out=(),
        )
    from prfaas_plan.physics.shapes import candidate_shapes, memory_problem  # choosing pools only (start-up time)

    ruled_out: list[str] = []
    kept: list[ScreenedShape] = []
    for shape in candidate_shapes(arch, pool.accelerator):
        why = memory_problem(scenario.model.name, arch, pool.accelerator, shape, _longest_tokens(scenario, role))
        if why is not None:
            ruled_out.append(why)
            continue
        shaped = replace(pool, gpus_per_instance=shape.gpus, shape=shape, choose_shape=False)
        cost = _screen_cost(scenario, shaped, role)
        if cost == float("inf"):
            ruled_out.append(f"{_shape_text(shape)} on {pool.hardware_key}: cannot decode within the TPOT SLO")
            continue
        kept.append(ScreenedShape(shape=shape, pool=shaped, usd_per_request=cost))
    kept.sort(key=lambda s: s.usd_per_request)
    return PoolShapes(role=role, screened=tuple(kept), ruled_out=tuple(ruled_out))


def variants(
    scenario: Scenario, prfaas: PoolShapes | None = None, local: PoolShapes | None = None
) -> tuple[tuple[ShapeVariant, ...], tuple[str, ...]]:
    """The shape pairs sizing should price (module docstring: the screen's best pair first, then each pool
    moved to its runner-up) and the shapes ruled out; ``prfaas`` and ``local`` are the pools' screens when
    already made (a matrix screens each hardware once). Raises InfeasibleError when a pool has no shape left."""
    prfaas = prfaas if prfaas is not None else pool_shapes(scenario, "prfaas")
    local = local if local is not None else pool_shapes(scenario, "local")
    ruled_out = (*prfaas.ruled_out, *local.ruled_out)
    for found, role in ((prfaas, "prfaas"), (local, "local")):
        if not found.screened:
            raise InfeasibleError([f"{role}: no instance shape holds the model", *found.ruled_out])
    p, l_ = prfaas.screened[:SCREENED_PER_POOL], local.screened[:SCREENED_PER_POOL]
    pairs = [(p[0], l_[0])] + [(x, l_[0]) for x in p[1:]] + [(p[0], y) for y in l_[1:]]
    return (
        tuple(
            ShapeVariant(
                prfaas_shape=a.shape,
                local_shape=b.shape,
                scenario=replace(scenario, prfaas=a.pool, local=b.pool),
            )
            for a, b in pairs
        ),
        ruled_out,
    )


def chooses_shapes(scenario: Scenario) -> bool:
    """Whether either pool of ``scenario`` lets the planner choose its shape (and can: not a measured pool)."""
    return scenario.prfaas.chooses_shape or scenario.local.chooses_shape
