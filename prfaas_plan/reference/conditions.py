"""Measuring conditions for timing numpy on a shared CPU machine, and the estimator of a best time.

``steady``: BLAS pinned to one thread (on these shared 2-core machines a second BLAS thread waits on whatever
else runs and makes GEMM times swing by 5x; numpy's element-wise work is single-threaded anyway) and freed
memory kept in the process (``retained_heap``), both set through ctypes and restored afterwards. Time is then
read on the process CPU clock (``clock_for``), which on an idle machine equals wall time and leaves out time
other processes hold the core. ``best_time_s`` keeps the shortest of several runs, the usual estimator of a
deterministic cost under noise from other processes.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

_BLAS_SETTERS = ("openblas_set_num_threads", "scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_")


@contextlib.contextmanager
def blas_threads(n: int) -> Iterator[bool]:
    """Limit OpenBLAS (as loaded by numpy) to ``n`` threads inside the block; yields whether it could.

    Best effort and Linux-only: finds the loaded OpenBLAS in /proc/self/maps and calls its
    ``*set_num_threads``; restores the previous count afterwards. Elsewhere it yields False and does nothing.
    """
    setter = getter = None
    with contextlib.suppress(OSError):
        for path in sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", Path("/proc/self/maps").read_text()))):
            lib = ctypes.CDLL(path)
            for name in _BLAS_SETTERS:
                if hasattr(lib, name) and hasattr(lib, name.replace("set", "get")):
                    setter, getter = getattr(lib, name), getattr(lib, name.replace("set", "get"))
                    break
    if setter is None or getter is None:
        yield False
        return
    previous = int(getter())
    setter(ctypes.c_int(n))
    try:
        yield True
    finally:
        setter(ctypes.c_int(previous))


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc mallopt parameters (malloc.h)
_GLIBC_DEFAULT_THRESHOLD = 128 * 1024


@contextlib.contextmanager
def retained_heap() -> Iterator[bool]:
    """Keep freed memory in the process inside the block (glibc ``mallopt``); yields whether it could.

    By default glibc hands blocks of 128 KiB and more back to the kernel when they are freed, so every numpy
    temporary of that size page-faults afresh: 40-90 µs for a 64-128 KiB array on these VMs, ten times the
    arithmetic. Serving engines keep a caching allocator for this reason; raising the trim and mmap thresholds
    does the same for numpy. glibc's defaults are set back afterwards.
    """
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        yield False
        return
    retained = mallopt(_M_TRIM_THRESHOLD, 1 << 30) == 1 and mallopt(_M_MMAP_THRESHOLD, 32 << 20) == 1
    try:
        yield retained
    finally:
        mallopt(_M_TRIM_THRESHOLD, _GLIBC_DEFAULT_THRESHOLD)
        mallopt(_M_MMAP_THRESHOLD, _GLIBC_DEFAULT_THRESHOLD)


@contextlib.contextmanager
def steady() -> Iterator[bool]:
    """One BLAS thread and a retained heap (``blas_threads``, ``retained_heap``); yields whether both held."""
    with blas_threads(1) as pinned, retained_heap() as retained:
        yield pinned and retained


def best_time_s(
    run: Callable[[], object],
    repeats: int,
    setup: Callable[[], object] | None = None,
    clock: Callable[[], float] = time.process_time,
    *,
    budget_s: float = 0.0,
    max_repeats: int = 50,
) -> float:
    """Shortest time of at least ``repeats`` runs on ``clock``, more (up to ``max_repeats``) while the runs so
    far took less than ``budget_s`` in all; ``setup`` runs untimed before each.

    The default clock is the process's CPU time: with BLAS on the calling thread (``blas_threads(1)``) it
    equals wall time on an idle machine, and leaves out the time other processes hold the core.
    """
    best, spent, done = math.inf, 0.0, 0
    while done < repeats or (spent < budget_s and done < max_repeats):
        if setup is not None:
            setup()
        start = clock()
        run()
        elapsed = clock() - start
        best, spent, done = min(best, elapsed), spent + elapsed, done + 1
    return best


def clock_for(steady_machine: bool) -> Callable[[], float]:
    """CPU time when the machine is held steady (one BLAS thread on the calling thread), else wall time."""
    return time.process_time if steady_machine else time.perf_counter
