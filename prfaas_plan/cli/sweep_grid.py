"""The ``sweep`` command's grid syntax: ``--set PATH=V1,V2,...`` options (scalars only) and ``--grid FILE``,
turned into the library's checked grid (``io.sweep.Grid``) with every problem naming the flag."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from prfaas_plan.errors import InputError, Problem
from prfaas_plan.io.sweep_grid import (
    MAX_VALUES_PER_AXIS,
    Axis,
    Grid,
    load_grid_file,
    make_grid,
    parse_path,
    repeated,
    value_text,
)
from prfaas_plan.io.yamlsrc import dotted

SET = "--set"
#: Longest ``--set`` option (characters); no scenario field and its values need more.
MAX_SET_CHARS = 4096

_INT = re.compile(r"[+-]?\d+")


def scalar(token: str) -> Any:
    """A ``--set`` value: an integer, a finite number, true/false, null, or else a string. Numbers are read
    as Python reads them (``1e3`` is 1000.0; YAML 1.1 would read a string). ValueError for NaN or infinity."""
    if _INT.fullmatch(token):
        return int(token)
    lowered = token.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "~"):
        return None
    try:
        number = float(token)
    except ValueError:
        return token
    if not math.isfinite(number):
        raise ValueError(f"must be a finite number, got {token}")
    return number


def parse_set(option: str) -> Axis:
    """One ``--set PATH=V1,V2,...`` option as an axis whose origin is ``--set PATH`` (a sweep file can also
    give mappings or lists)."""
    if len(option) > MAX_SET_CHARS:
        raise InputError(Problem(field=SET, message=f"longer than {MAX_SET_CHARS} characters"))
    if "=" not in option:
        raise InputError(Problem(field=f"{SET} {option[:80]}", message="expected PATH=VALUE[,VALUE...]"))
    raw_path, raw_values = option.split("=", 1)
    path = parse_path(raw_path)
    if path is None:
        raise InputError(
            Problem(
                field=f"{SET} {option[:80]}",
                message=f"'{raw_path.strip()}' is not a dotted field path such as deployment.link.bandwidth_gbit_per_s",
            )
        )
    name = dotted(path)
    values: list[Any] = []
    problems = []
    tokens = raw_values.split(",")
    if len(tokens) > MAX_VALUES_PER_AXIS:
        raise InputError(
            Problem(field=f"{SET} {name}", message=f"{len(tokens)} values, at most {MAX_VALUES_PER_AXIS} per field")
        )
    for token in tokens:
        token = token.strip()
        if not token:
            problems.append(Problem(field=f"{SET} {name}", message="an empty value (two commas, or none given)"))
            continue
        try:
            values.append(scalar(token))
        except ValueError as exc:
            problems.append(Problem(field=f"{SET} {name}={token}", message=str(exc)))
    problems += [
        Problem(field=f"{SET} {name}={value_text(values[i])}", message="given twice") for i in repeated(values)
    ]
    if problems:
        raise InputError(problems)
    return Axis(path=path, values=tuple(values), origin=f"{SET} {name}")


def grid_from_options(sets: list[str], grid_file: Path | None) -> Grid:
    """The grid of the ``--set`` options followed by the ``--grid`` file's fields, checked together; problems
    of the grid as a whole name ``--set``."""
    axes = [parse_set(option) for option in sets]
    axes += load_grid_file(grid_file) if grid_file is not None else []
    if not axes:
        raise InputError(Problem(field=SET, message="nothing to sweep: give --set PATH=VALUES or --grid FILE"))
    return make_grid(axes, field=SET)
