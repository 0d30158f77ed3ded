"""JSON has no NaN or infinity: the one place that turns them into null, for a number or a whole structure."""

from __future__ import annotations

import math
from typing import Any


def finite(value: float | None) -> float | None:
    """``value`` (an int stays an int, any other number becomes a Python float), or None where it is None, NaN or
    infinite (an empty cell, JSON null)."""
    if value is None or not math.isfinite(value):
        return None
    return value if isinstance(value, int) else float(value)


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float, at any depth of dicts, lists and tuples, replaced by None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return value
