"""The console script's entry point: SIGINT, SIGTERM and SIGHUP are handled before anything heavy is imported.

Importing the command line (numpy, typer, rich and the planner) takes a fraction of a second; a signal in that
window used to end in a KeyboardInterrupt traceback. Until ``cli.app.main`` installs its own handlers (which unwind
the stack so that cleanups run), nothing has been written, so a signal ends the process at once with one line on
stderr and status 128 + the signal number, as after the command line is up. A signal the process inherited as
ignored (SIGHUP under ``nohup``, SIGINT in a background job) stays ignored, here and after. Once the command has
returned (or exited), the three are blocked: the run is over, and the exit status stays the command's.

Once the command is over, every object then alive is moved out of the cyclic garbage collector's reach
(``gc.freeze``). The interpreter's finalisation still runs the exit handlers (``atexit``, ``weakref.finalize``),
flushes the standard streams and frees what reference counts free, but its last collections skip the objects
numpy, typer and the planner hold (about 28,000 tracked by the collector after ``optimize``, 24,000 after the bare
imports): the exit took 34-41 ms after ``optimize`` and now takes about 7 ms (2-core Xeon VM; a bare ``python -c
'import numpy, typer, rich'`` spends 29 ms there). What
it gives up: objects that only a reference cycle keeps alive are not finalised at exit, which the interpreter
never promised; the command's files are written and closed (``report.files``) before it returns.

The BLAS libraries run on one thread (``OPENBLAS_NUM_THREADS=1``, set before numpy is imported, unless the
environment already sets ``OPENBLAS_NUM_THREADS``, ``GOTO_NUM_THREADS`` or ``OMP_NUM_THREADS`` to a positive
count: a user's choice stands; an empty value or 0 is no choice, as OpenBLAS reads it). The planner's arrays are
a few thousand numbers, too small for threaded BLAS to gain anything, but the OpenBLAS builds that numpy and scipy
ship each start a thread pool when loaded whose workers spin for a while waiting for work: a second core busy for
nothing, which on a 2-core machine (or one shared with other work) takes the time the command needs. Measured on
a 2-core Xeon VM, medians of 7 alternating runs of a normal install: ``optimize --objective goodput --ttft-p90-s 5
--no-verify`` 0.504 s -> 0.432 s wall and 0.708 s -> 0.431 s CPU; ``optimize --json`` 0.142 s -> 0.130 s. Sweep
workers inherit the setting, which also keeps several of them from oversubscribing the cores (a local Dask cluster
sets one BLAS thread for its workers itself).
"""

from __future__ import annotations

import gc
import os
import signal
from collections.abc import MutableMapping

_EARLY_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: Variables through which a user chooses OpenBLAS's thread count (it reads them in this order).
_BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def one_blas_thread(environ: MutableMapping[str, str]) -> None:
    """Set one BLAS thread in ``environ`` unless it chose a count (see the module's docstring). ``main`` applies it
    to ``os.environ`` before numpy is first imported (OpenBLAS reads the variable when it is loaded); the
    benchmarks apply it to the environment of the processes they time."""
    if not any(_a_count(environ.get(name, "")) for name in _BLAS_THREAD_VARIABLES):
        environ["OPENBLAS_NUM_THREADS"] = "1"


def _a_count(value: str) -> bool:
    """Whether a thread variable's value chooses a count: a positive integer (OpenBLAS takes an empty value, 0 or
    anything it cannot read as a number as unset, and falls back to every core)."""
    try:
        return int(value.strip()) > 0
    except ValueError:
        return False


def _before_start(signum: int, _frame: object) -> None:
    try:
        os.write(
            2, f"interrupted ({signal.Signals(signum).name}): stopped before starting; nothing was written\n".encode()
        )
    finally:
        os._exit(128 + signum)


def main() -> None:
    """Console-script entry point: early signal handlers, then ``prfaas_plan.cli.app.main``."""
    for sig in _EARLY_SIGNALS:
        if signal.getsignal(sig) is not signal.SIG_IGN:  # an inherited ignore (nohup, a background job) stays
            signal.signal(sig, _before_start)
    one_blas_thread(os.environ)
    from prfaas_plan.cli.app import main as run

    try:
        run()
    finally:
        # The command is over (its own handlers have cleaned up and chosen the exit status). The interpreter's
        # finalisation then puts the default actions back before it is done, so a signal in that last moment
        # killed the process with no message and no status of ours: hold the three until the process is gone.
        signal.pthread_sigmask(signal.SIG_BLOCK, _EARLY_SIGNALS)
        gc.freeze()  # the exit's collections skip what is alive now (see the module's docstring)
