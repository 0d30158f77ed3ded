"""The instance shapes ``size`` and ``optimize`` report (``optimize.shape_choice``): each pool's shape, whether
the planner chose it, the criterion, the next-best shape pair and its figure, and the shapes ruled out."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only
    from prfaas_plan.optimize.shape_choice import ScoredShape, ShapeChoice
    from prfaas_plan.spec.shape import InstanceShape


def shape_to_dict(shape: InstanceShape) -> dict[str, Any]:
    """GPUs per instance and the parallel degrees, with the short label (``TP8``, ``DP8 EP8``)."""
    return {
        "label": shape.label,
        "gpus": shape.gpus,
        "tensor_parallel": shape.tensor_parallel,
        "expert_parallel": shape.expert_parallel,
        "attention_data_parallel": shape.attention_data_parallel,
    }


def _scored(s: ScoredShape | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {
        "label": s.label,
        "prfaas": shape_to_dict(s.prfaas_shape),
        "local": shape_to_dict(s.local_shape),
        "value": s.figure,
        "reason": s.reason,
    }


def shape_choice_to_dict(choice: ShapeChoice) -> dict[str, Any]:
    """``shapes``: per pool its shape and ``chosen_by`` (``auto`` or ``fixed``) and, for a pool that chose,
    ``alternative`` (the best priced pair with this pool in another shape; None for a fixed pool); the chosen
    pair and the next-best with their ``value`` in ``unit`` under ``criterion``; every pair priced, best first;
    and the shapes ruled out with their numbers."""
    chosen = choice.chosen
    pools: dict[str, Any] = {}
    for role, shape in (("prfaas", chosen.prfaas_shape), ("local", chosen.local_shape)):
        auto = role in choice.choosing
        pools[role] = {
            **shape_to_dict(shape),
            "chosen_by": "auto" if auto else "fixed",
            "alternative": _scored(choice.alternative(role)) if auto else None,
        }
    return {
        "criterion": choice.criterion,
        "unit": choice.unit,
        "higher_is_better": choice.higher_is_better,
        "pools": pools,
        "chosen": _scored(chosen),
        "next_best": _scored(choice.next_best) if choice.choosing else None,
        "candidates": [_scored(s) for s in choice.scored] if choice.choosing else [],
        "ruled_out": list(choice.ruled_out),
    }
