"""The error hierarchy. Expected errors carry what the CLI needs to print one clear line per problem.

- ``InputError``: bad files or flags; exit status 2.
- ``InfeasibleError``: no configuration can carry load; exit status 1, with the binding constraint.
- ``ModelDomainError``: a formula was asked outside the domain where it holds.
Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

from prfaas_plan._frozen import frozen


class PlanError(Exception):
    """Base class of every expected prfaas-plan error."""


@frozen
class Problem:
    """One problem with an input: where it is (file, line, dotted field path) and what is wrong."""

    message: str
    file: str | None = None
    line: int | None = None
    field: str | None = None

    def __str__(self) -> str:
        where = ""
        if self.file is not None:
            where = self.file if self.line is None else f"{self.file}:{self.line}"
        if self.field:
            where = f"{where} {self.field}" if where else self.field
        return f"{where}: {self.message}" if where else self.message


class InputError(PlanError):
    """One or more problems with user input (files or options). All problems are collected, not just the first."""

    def __init__(self, problems: list[Problem] | Problem | str) -> None:
        if isinstance(problems, str):
            problems = [Problem(message=problems)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems: tuple[Problem, ...] = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class InfeasibleError(PlanError):
    """No configuration meets the constraints; ``reasons`` name the binding constraints."""

    def __init__(self, reasons: list[str] | str, *, summary: str = "no load can be carried") -> None:
        self.reasons: tuple[str, ...] = (reasons,) if isinstance(reasons, str) else tuple(reasons)
        #: The headline printed above the reasons (``infeasible: <summary>; binding constraint:``).
        self.summary = summary
        super().__init__("; ".join(self.reasons))


class ModelDomainError(PlanError):
    """A formula was evaluated outside the domain where it holds (e.g. utilisation >= 1)."""
