"""A hardware matrix: every (prefill accelerator, local accelerator) pair sized to one target, and the Pareto
frontiers of cost against goodput and against throughput.

A cell's point is its cheapest PrfaaS-PD deployment (``sizing.size``): cost per hour at the target rate,
its goodput (the largest rate within the SLO) and its Λ_max (the stage model's throughput at its plan). A
point is on a frontier when no other point costs no more and carries strictly more (or costs strictly
less and carries no less). Homogeneous PD on each local accelerator is sized too and enters the frontiers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InfeasibleError
from prfaas_plan.optimize.carrier import Deployment
from prfaas_plan.optimize.cost import UnitPrices
from prfaas_plan.optimize.plans import evaluate
from prfaas_plan.optimize.sizing import Sizing, default_search_space, size
from prfaas_plan.spec.cost import Target
from prfaas_plan.throughput import StageModel, with_link_rate


@frozen
class CellInput:
    """One pair to size: its stage model and prices, or why it cannot be (weights that do not fit, ...)."""

    prefill: str
    local: str
    model: StageModel | None
    prices: UnitPrices | None
    reason: str | None
    prefill_provenance: str
    local_provenance: str
    #: With ``shape: auto``: the (shape label, stage model, prices) pairs of shapes to size
    #: (``optimize.shapes.variants``); the cheapest is chosen. Empty: the pools' own shapes.
    variants: tuple[tuple[str, StageModel, UnitPrices], ...] = ()
    #: Shapes ruled out for the cell's pools, with the numbers (weights or KV that do not fit).
    ruled_out: tuple[str, ...] = ()


@frozen
class MatrixPoint:
    """One deployment on the cost plane: which cell, which kind, its cost, goodput and Λ_max."""

    prefill: str
    local: str
    kind: str
    usd_per_hour: float
    goodput_req_per_s: float
    throughput_req_per_s: float


@frozen
class CellResult:
    """A sized cell: its sizing (None with a reason when it could not be sized)."""

    prefill: str
    local: str
    prefill_provenance: str
    local_provenance: str
    sizing: Sizing | None
    reason: str | None
    #: The shapes chosen (``PrfaaS / local``; "" when the pools keep their own), the next-best sized shape
    #: pair and its PrfaaS-PD cost (None: it carries no deployment or there is none).
    shape: str = ""
    next_shape: str = ""
    next_usd_per_hour: float | None = None
    ruled_out: tuple[str, ...] = ()


@frozen
class HardwareMatrix:
    """Every cell, the points on the cost plane and the frontiers (indices into ``points``)."""

    target: Target
    cells: tuple[CellResult, ...]
    points: tuple[MatrixPoint, ...]
    frontier_goodput: tuple[int, ...]
    frontier_throughput: tuple[int, ...]


def pareto(costs: Sequence[float], values: Sequence[float]) -> tuple[int, ...]:
    """Indices of the points no other point dominates (cost no higher and value no lower, one of them
    strictly), in ascending cost."""
    keep = []
    for i, (c, v) in enumerate(zip(costs, values, strict=True)):
        dominated = any(
            (c2 <= c and v2 >= v) and (c2 < c or v2 > v)
            for j, (c2, v2) in enumerate(zip(costs, values, strict=True))
            if j != i
        )
        if not dominated:
            keep.append(i)
    return tuple(sorted(keep, key=lambda i: (costs[i], -values[i])))


def _throughput(model: StageModel, d: Deployment) -> float:
    sized = with_link_rate(replace(model, n_prfaas=d.n_prfaas, n_local=d.n_local), d.bandwidth_bytes_per_s or 1.0)
    t = d.threshold_tokens if d.threshold_tokens is not None else model.lengths.upper_tokens
    return evaluate(sized, t, d.n_pd_prefill).throughput_req_per_s


def _size_cell(task: tuple[CellInput, Target, float, bool]) -> tuple[Sizing, StageModel, str, str, float | None]:
    """One cell's sizing, its stage model, and with shape variants the chosen shape, the next-best one and its
    cost (a top-level function, so that worker processes can run it)."""
    cell, target, scv, homogeneous = task
    if not cell.variants:
        assert cell.model is not None and cell.prices is not None
        return _size_model(cell.model, cell.prices, target, scv, homogeneous), cell.model, "", "", None
    sized = [(label, _size_model(m, p, target, scv, homogeneous), m) for label, m, p in cell.variants]
    sized.sort(key=lambda x: x[1].prfaas_pd.usd_per_hour if x[1].prfaas_pd is not None else float("inf"))
    (label, sizing, model), rest = sized[0], sized[1:]
    nxt = rest[0] if rest else None
    nxt_cost = nxt[1].prfaas_pd.usd_per_hour if nxt is not None and nxt[1].prfaas_pd is not None else None
    return sizing, model, label, nxt[0] if nxt is not None else "", nxt_cost


def _size_model(model: StageModel, prices: UnitPrices, target: Target, scv: float, homogeneous: bool) -> Sizing:
    space = default_search_space(model, prices, target)
    return size(
        model,
        prices,
        target,
        bandwidths_bytes_per_s=space.bandwidths_bytes_per_s,
        max_prfaas=space.max_prfaas,
        max_local=space.max_local,
        decode_service_scv=scv,
        homogeneous=homogeneous,
    )


def hardware_matrix(
    cells: Sequence[CellInput], target: Target, *, decode_service_scv: float = 0.0, workers: int = 1
) -> HardwareMatrix:
    """Size every cell to ``target`` (default search spaces) and collect the cost-plane frontiers.

    ``workers`` > 1 sizes the cells in that many processes (each cell is independent; the results are the
    same, in the same order). Homogeneous PD is sized once per local accelerator, with its first cell.
    """
    sized = [c for c in cells if (c.model is not None and c.prices is not None) or c.variants]
    seen: set[str] = set()
    tasks = []
    for cell in sized:
        tasks.append((cell, target, decode_service_scv, cell.local not in seen))
        seen.add(cell.local)
    if workers > 1 and len(tasks) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("fork" if "fork" in methods else None)
        with ProcessPoolExecutor(max_workers=min(workers, len(tasks)), mp_context=context) as pool:
            sizings = list(pool.map(_size_cell, tasks))
    else:
        sizings = [_size_cell(task) for task in tasks]
    by_cell = {id(cell): sized for (cell, *_), sized in zip(tasks, sizings, strict=True)}
    results: list[CellResult] = []
    points: list[MatrixPoint] = []
    for cell in cells:
        found = by_cell.get(id(cell))
        if found is None:
            results.append(
                CellResult(
                    prefill=cell.prefill,
                    local=cell.local,
                    prefill_provenance=cell.prefill_provenance,
                    local_provenance=cell.local_provenance,
                    sizing=None,
                    reason=cell.reason or "no prices",
                    ruled_out=cell.ruled_out,
                )
            )
            continue
        sizing, model, shape, next_shape, next_usd = found
        results.append(
            CellResult(
                prefill=cell.prefill,
                local=cell.local,
                prefill_provenance=cell.prefill_provenance,
                local_provenance=cell.local_provenance,
                sizing=sizing,
                reason=None if sizing.prfaas_pd is not None else "; ".join(sizing.reasons) or None,
                shape=shape,
                next_shape=next_shape,
                next_usd_per_hour=next_usd,
                ruled_out=cell.ruled_out,
            )
        )
        for d, kind in ((sizing.prfaas_pd, "prfaas-pd"), (sizing.homogeneous_pd, "homogeneous-pd")):
            if d is None:
                continue
            points.append(
                MatrixPoint(
                    prefill=cell.prefill if kind == "prfaas-pd" else "",
                    local=cell.local,
                    kind=kind,
                    usd_per_hour=d.usd_per_hour,
                    goodput_req_per_s=d.goodput_req_per_s,
                    throughput_req_per_s=_throughput(model, d),
                )
            )
    if not points and results:
        raise InfeasibleError([f"{r.prefill} x {r.local}: {r.reason}" for r in results])
    costs = [p.usd_per_hour for p in points]
    return HardwareMatrix(
        target=target,
        cells=tuple(results),
        points=tuple(points),
        frontier_goodput=pareto(costs, [p.goodput_req_per_s for p in points]),
        frontier_throughput=pareto(costs, [p.throughput_req_per_s for p in points]),
    )
