"""What every command shares: turning expected errors into exit statuses, and printing JSON."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer

from prfaas_plan.errors import InfeasibleError, InputError, PlanError


@contextmanager
def handled() -> Iterator[None]:
    """Expected errors become one line per problem on stderr: exit 2 for bad input, 1 for infeasible plans."""
    try:
        yield
    except InputError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        raise typer.Exit(2) from None
    except InfeasibleError as exc:
        print("infeasible: no load can be carried; binding constraint:", file=sys.stderr)
        for reason in exc.reasons:
            print(f"  {reason}", file=sys.stderr)
        raise typer.Exit(1) from None
    except PlanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(1) from None


def emit(payload: dict[str, Any]) -> None:
    """Print one JSON object on stdout."""
    print(json.dumps(payload, indent=2))
