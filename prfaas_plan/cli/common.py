"""What every command shares: turning expected errors into exit statuses, and printing JSON."""

from __future__ import annotations

import dataclasses
import json
import math
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer

from prfaas_plan.errors import InfeasibleError, InputError, PlanError, Problem
from prfaas_plan.spec.scenario import Scenario
from prfaas_plan.units import GBIT_PER_S

#: Instance counts a flag may set (--n-prfaas, --n-local, --n-pd-prefill, --n-pd-decode). The largest
#: deployments the paper and its sources describe have hundreds of instances per pool; 10,000 leaves ample
#: room while keeping every per-instance array (the search grids, the simulator's servers) in memory.
MAX_INSTANCES = 10_000

#: Instances per pool the goodput search accepts. Its splits are searched by branch and bound and Erlang C costs
#: the same for any pool, so time and memory barely grow with the pool (tests/benchmarks/scale.py, paper
#: scenario: `optimize --objective goodput` without its simulation takes 1.3 s and 75 MiB at 2,000 instances
#: per pool, 1.1 s and 80 MiB at 5,000). The cap is half of MAX_INSTANCES because the homogeneous baseline
#: merges both pools into one: with 8 GPUs per instance in both, that pool stays within MAX_INSTANCES too.
MAX_GOODPUT_INSTANCES = MAX_INSTANCES // 2

#: Range of --bandwidth-gbit-per-s: 1 Mbit/s to 1 Pbit/s. Outside it the link is no datacenter link: below,
#: one KV cache takes hours to move; above, squared transfer times underflow in the queueing formulas.
BANDWIDTH_RANGE_GBIT_PER_S = (1e-3, 1e6)


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived: unwinds the stack (running every cleanup) up to ``interruptible``.

    A BaseException, like KeyboardInterrupt, so that ``except Exception`` does not swallow it; not a
    KeyboardInterrupt, which click would turn into "Aborted!" and exit status 1."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum: int, _frame: object) -> None:
    # One signal is enough: ignore further ones so that the cleanup it starts runs to the end.
    for other in (signal.SIGINT, signal.SIGTERM):
        signal.signal(other, signal.SIG_IGN)
    raise Interrupted(signum)


@contextmanager
def interruptible() -> Iterator[None]:
    """Turn SIGINT and SIGTERM into ``Interrupted`` while the body runs; on one, print a line on stderr and
    exit with status 128 + signal number (130 for Ctrl-C, 143 for SIGTERM), the shell's convention."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return
    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    except (Interrupted, KeyboardInterrupt) as exc:
        signum = exc.signum if isinstance(exc, Interrupted) else int(signal.SIGINT)
        name = signal.Signals(signum).name
        print(f"interrupted ({name}): stopped; unfinished output files were removed", file=sys.stderr)
        sys.exit(128 + signum)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def check_finite(values: dict[str, float | None]) -> None:
    """Refuse NaN and infinite flag values (``{flag: value}``; None means not given): exit 2 naming each."""
    problems = [
        Problem(field=flag, message=f"must be a finite number, got {value}")
        for flag, value in values.items()
        if value is not None and not math.isfinite(value)
    ]
    if problems:
        raise InputError(problems)


def check_bandwidth(bandwidth_gbit_per_s: float | None) -> None:
    """Refuse a --bandwidth-gbit-per-s that is not finite and > 0, or outside ``BANDWIDTH_RANGE_GBIT_PER_S``."""
    if bandwidth_gbit_per_s is None:
        return
    low, high = BANDWIDTH_RANGE_GBIT_PER_S
    if not (math.isfinite(bandwidth_gbit_per_s) and bandwidth_gbit_per_s > 0):
        message = f"must be a finite number > 0, got {bandwidth_gbit_per_s}"
    elif not low <= bandwidth_gbit_per_s <= high:
        message = f"must be between {low:g} and {high:g} Gbit/s (1 Mbit/s to 1 Pbit/s), got {bandwidth_gbit_per_s:g}"
    else:
        return
    raise InputError(Problem(field="--bandwidth-gbit-per-s", message=message))


def check_instances(values: dict[str, int | None]) -> None:
    """Refuse instance counts above ``MAX_INSTANCES`` (``{flag: value}``; None means not given)."""
    problems = [
        Problem(
            field=flag,
            message=f"must be at most {MAX_INSTANCES:,} instances (larger pools do not fit the search grids "
            f"in memory), got {value:,}",
        )
        for flag, value in values.items()
        if value is not None and value > MAX_INSTANCES
    ]
    if problems:
        raise InputError(problems)


def check_goodput_pools(prfaas_instances: int, local_instances: int) -> None:
    """Refuse a goodput search over pools larger than ``MAX_GOODPUT_INSTANCES`` (its time and memory)."""
    problems = [
        Problem(
            field="--objective goodput",
            message=f"searches pools of at most {MAX_GOODPUT_INSTANCES:,} instances (the homogeneous baseline merges "
            f"both pools), the {pool} pool has {count:,}; use --objective throughput",
        )
        for pool, count in (("PrfaaS", prfaas_instances), ("local", local_instances))
        if count > MAX_GOODPUT_INSTANCES
    ]
    if problems:
        raise InputError(problems)


def check_output(path: str, flag: str) -> None:
    """Check before any work that ``path`` can be written (see ``io.records.check_writable``); a problem
    names the flag."""
    from prfaas_plan.report.records import check_writable

    try:
        check_writable(path)
    except InputError as exc:
        raise InputError(
            [dataclasses.replace(p, file=None, field=flag, message=f"{p.file}: {p.message}") for p in exc.problems]
        ) from None


@contextmanager
def handled(json_output: bool = False) -> Iterator[None]:
    """Expected errors become one line per problem on stderr: exit 2 for bad input, 1 for infeasible plans.
    With ``json_output`` the same failure is also printed on stdout as one JSON object, ``{"error": {"kind":
    "input" | "infeasible" | "plan", "exit_status", "problems": [...]}}``, so a pipeline reading stdout never
    sees it empty."""

    def failed(kind: str, status: int, problems: list[dict[str, Any]]) -> typer.Exit:
        if json_output:
            emit({"error": {"kind": kind, "exit_status": status, "problems": problems}})
        return typer.Exit(status)

    try:
        yield
    except InputError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        listed = [
            {"file": p.file, "line": p.line, "field": p.field, "message": p.message, "text": str(p)}
            for p in exc.problems
        ]
        raise failed("input", 2, listed) from None
    except InfeasibleError as exc:
        print("infeasible: no load can be carried; binding constraint:", file=sys.stderr)
        for reason in exc.reasons:
            print(f"  {reason}", file=sys.stderr)
        raise failed("infeasible", 1, [{"message": r} for r in exc.reasons]) from None
    except PlanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise failed("plan", 1, [{"message": str(exc)}]) from None


def emit(payload: dict[str, Any]) -> None:
    """Print one JSON object on stdout."""
    print(json.dumps(payload, indent=2))


def apply_overrides(
    scenario: Scenario,
    *,
    bandwidth_gbit_per_s: float | None = None,
    n_prfaas: int | None = None,
    n_local: int | None = None,
) -> Scenario:
    """Apply the command-line overrides of a scenario, each checked like its YAML field (problems name the flag)."""
    problems = []
    if bandwidth_gbit_per_s is not None and not (bandwidth_gbit_per_s > 0 and bandwidth_gbit_per_s < float("inf")):
        problems.append(
            Problem(
                field="--bandwidth-gbit-per-s",
                message=f"must be a finite number > 0, got {bandwidth_gbit_per_s}",
            )
        )
    if n_prfaas is not None and n_prfaas < 1:
        problems.append(Problem(field="--n-prfaas", message=f"must be >= 1, got {n_prfaas}"))
    if n_local is not None and n_local < 2:
        problems.append(
            Problem(
                field="--n-local",
                message=f"must be >= 2 (one prefill and one decode instance), got {n_local}",
            )
        )
    if problems:
        raise InputError(problems)
    if bandwidth_gbit_per_s is not None:
        scenario = dataclasses.replace(
            scenario, link=dataclasses.replace(scenario.link, bandwidth_bytes_per_s=bandwidth_gbit_per_s * GBIT_PER_S)
        )
    if n_prfaas is not None:
        scenario = dataclasses.replace(scenario, prfaas=dataclasses.replace(scenario.prfaas, instances=n_prfaas))
    if n_local is not None:
        scenario = dataclasses.replace(scenario, local=dataclasses.replace(scenario.local, instances=n_local))
    return scenario
