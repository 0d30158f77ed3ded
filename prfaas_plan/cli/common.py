"""What every command shares: turning expected errors into exit statuses, and printing JSON."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import signal
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer

from prfaas_plan.errors import InfeasibleError, InputError, PlanError, Problem

if TYPE_CHECKING:
    from prfaas_plan.report.files import Owner
    from prfaas_plan.spec.scenario import Scenario

#: The flags that set a field of the scenario, and the field each sets: they are edits of the scenario document
#: validated by the scenario loader (``io.overrides``), with its checks and limits (``io.limits``), and a
#: problem with one names the flag.
SCENARIO_FLAGS: dict[str, tuple[str, ...]] = {
    "--bandwidth-gbit-per-s": ("deployment", "link", "bandwidth_gbit_per_s"),
    "--n-prfaas": ("deployment", "prfaas", "instances"),
    "--n-local": ("deployment", "local", "instances"),
    "--tpot-p90-ms": ("slo", "tpot_p90_ms"),
}


class Interrupted(BaseException):
    """SIGINT, SIGTERM or SIGHUP arrived: unwinds the stack (running every cleanup) up to ``interruptible``.

    A BaseException, like KeyboardInterrupt, so that ``except Exception`` does not swallow it; not a
    KeyboardInterrupt, which click would turn into "Aborted!" and exit status 1."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


#: The signals ``interruptible`` turns into ``Interrupted``: Ctrl-C, kill, and a closed terminal (SIGHUP, whose
#: default action would kill the process without removing its temporary files).
INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: What the interruption message adds for the running command (``on_interrupt``); the default names the files.
_NOTE = ["unfinished output files were removed"]


def _on_signal(signum: int, _frame: object) -> None:
    # One signal is enough: ignore further ones so that the cleanup it starts runs to the end.
    for other in INTERRUPTS:
        signal.signal(other, signal.SIG_IGN)
    raise Interrupted(signum)


@contextmanager
def on_interrupt(note: str) -> Iterator[None]:
    """While the body runs, an interruption's message ends with ``note`` (what was kept, how to continue)."""
    _NOTE.append(note)
    try:
        yield
    except (Interrupted, KeyboardInterrupt):
        raise  # the note stays for ``interruptible``'s message (the process is about to exit)
    except BaseException:
        _NOTE.pop()
        raise
    _NOTE.pop()


@contextmanager
def interruptible() -> Iterator[None]:
    """Turn SIGINT, SIGTERM and SIGHUP into ``Interrupted`` while the body runs; on one, print a line on stderr
    and exit with status 128 + signal number (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP), the shell's
    convention. Standard output is guarded too (``report.stdout.guarded_stdout``: a closed or full stdout is one
    line and exit 2; a broken pipe exits quietly with 141)."""
    from prfaas_plan.report.stdout import guarded_stdout

    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return
    # A signal inherited as ignored (SIGHUP under nohup, SIGINT in a background job) stays ignored.
    previous = {
        sig: signal.signal(sig, _on_signal) for sig in INTERRUPTS if signal.getsignal(sig) is not signal.SIG_IGN
    }
    try:
        with guarded_stdout():
            yield
    except (Interrupted, KeyboardInterrupt) as exc:
        signum = exc.signum if isinstance(exc, Interrupted) else int(signal.SIGINT)
        name = signal.Signals(signum).name
        with contextlib.suppress(OSError, ValueError):
            print(f"interrupted ({name}): stopped; {_NOTE[-1]}", file=sys.stderr)
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


def check_output(path: str, flag: str, owner: Owner) -> None:
    """Check before any work that a file can be written at ``path`` by the writer whose files ``owner``
    recognises (``report.files.check_file``: nothing there or one of its own files, never a link, a device, a
    FIFO or another program's file); a problem names the flag."""
    from prfaas_plan.report.files import check_file

    try:
        check_file(path, owner=owner)
    except InputError as exc:
        raise InputError(
            [dataclasses.replace(p, file=None, field=flag, message=f"{p.file}: {p.message}") for p in exc.problems]
        ) from None


def records_owner() -> Owner:
    """The records CSV writer's ``Owner`` (imported when a command needs it)."""
    from prfaas_plan.report.records import OWNER

    return OWNER


def card_owner() -> Owner:
    """The model card writer's ``Owner``."""
    from prfaas_plan.report.card import OWNER

    return OWNER


def profile_owner() -> Owner:
    """The accelerator profile writer's ``Owner``."""
    from prfaas_plan.report.profile import OWNER

    return OWNER


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
        print(f"infeasible: {exc.summary}; binding constraint:", file=sys.stderr)
        for reason in exc.reasons:
            print(f"  {reason}", file=sys.stderr)
        raise failed("infeasible", 1, [{"message": r} for r in exc.reasons]) from None
    except PlanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise failed("plan", 1, [{"message": str(exc)}]) from None


def emit(payload: dict[str, Any]) -> None:
    """Print one JSON object on stdout."""
    import json  # here: a command that prints tables never loads the json package (start-up time)

    print(json.dumps(payload, indent=2))


def load_with_flags(name: str | None, flags: Mapping[str, float | int | None]) -> Scenario:
    """The scenario ``name`` (a file or a built-in name) with the flags that set its fields (``{flag: value}``,
    keys of ``SCENARIO_FLAGS``; None means not given) applied through the scenario loader: one validator and one
    set of limits for the file and the flags. InputError names the flag whose value the loader rejects."""
    from prfaas_plan.io.names import resolve_scenario_path

    given = {flag: value for flag, value in flags.items() if value is not None}
    if not given:  # nothing to edit: the file as it is (the edit machinery stays unloaded: start-up time)
        from prfaas_plan.io.scenario import load_scenario

        return load_scenario(resolve_scenario_path(name))
    from prfaas_plan.io.overrides import Override, load_overridden

    overrides = [Override(path=SCENARIO_FLAGS[flag], value=value, origin=flag) for flag, value in given.items()]
    return load_overridden(resolve_scenario_path(name), overrides)
