"""``prfaas-plan sweep``: a grid over scenario fields, run on local processes or a Dask cluster, streamed to a
JSON Lines or CSV file one row per point, resumable."""

from __future__ import annotations

import os
import resource
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from prfaas_plan._frozen import frozen
from prfaas_plan.cli.common import INTERRUPTS, check_finite, emit, handled, on_interrupt
from prfaas_plan.errors import InputError, Problem

if TYPE_CHECKING:  # annotations only; concurrent.futures (and logging) load when a sweep runs
    from concurrent.futures import Executor, Future

#: Default number of local worker processes: the CPU count, capped (beyond it the rows file and the parent's
#: scheduling become the limit, and memory grows by one interpreter per worker).
MAX_DEFAULT_WORKERS = 32
#: Tasks kept in flight per worker: enough to hide the round trip to a worker, few enough that a sweep of
#: 100,000 points does not hold 100,000 pickled tasks.
TASKS_PER_WORKER = 4
#: What a worker runs for a point, imported once by the process the local workers fork from.
_WORKER_MODULES = (
    "prfaas_plan.report.sweep_rows",
    "prfaas_plan.io.sweep_grid",
    "prfaas_plan.io.scenario",
    "prfaas_plan.report.plans",
    "prfaas_plan.throughput",
    "prfaas_plan.optimize.throughput_search",
)
#: Seconds to wait for a Dask scheduler given by --scheduler.
SCHEDULER_TIMEOUT_S = 10


def sweep(
    scenario: Annotated[
        str | None,
        typer.Argument(
            help="Scenario YAML file, or a built-in scenario name (default: paper-case-study).", show_default=False
        ),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="A swept field and its values: PATH=V1,V2,... with PATH dotted, e.g. "
            "deployment.link.bandwidth_gbit_per_s, traffic.input_length.mu, deployment.prfaas.hardware, "
            "cost.gpu_usd_per_hour.h20, cost.link.ports[1].usd_per_hour. Repeat for a grid (the product of all).",
            show_default=False,
        ),
    ] = None,
    grid: Annotated[
        Path | None,
        typer.Option(
            "--grid",
            help="A YAML sweep file: a mapping set: of PATH to a list of values (values may be mappings).",
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        str,
        typer.Option(
            "--out",
            "-o",
            help="Rows file: .jsonl (JSON Lines) or .csv, one row per point; - streams JSON Lines to stdout.",
        ),
    ] = ...,  # type: ignore[assignment]
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the sweep in --out: skip the points it already holds.")
    ] = False,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            max=1024,
            help="Points run at once (default: the CPU count, at most 32; with --scheduler, the cluster's threads).",
            show_default=False,
        ),
    ] = None,
    goodput: Annotated[
        bool, typer.Option("--goodput", help="Also find each point's goodput-optimal plan under its P90 TTFT SLO.")
    ] = False,
    ttft_p90_s: Annotated[
        float | None,
        typer.Option(
            "--ttft-p90-s",
            help="P90 TTFT SLO for --goodput (default: each point's slo.ttft_p90_s).",
            show_default=False,
        ),
    ] = None,
    resolution_tokens: Annotated[
        float, typer.Option("--resolution-tokens", min=0.001, help="Resolution of the threshold search.")
    ] = 10.0,
    load: Annotated[
        float | None,
        typer.Option(
            "--load",
            help="Also score each point's best plan at this fraction of its Λ_max (0-1): closed-form P90 TTFT.",
            show_default=False,
        ),
    ] = None,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="With --load: check each point's P90 TTFT by simulation (slow: replications x requests per point).",
        ),
    ] = False,
    replications: Annotated[
        int, typer.Option("--replications", min=2, max=100, help="--verify: simulated realisations per point.")
    ] = 5,
    verify_requests: Annotated[
        int,
        typer.Option("--verify-requests", min=1000, max=1_000_000, help="--verify: requests per realisation."),
    ] = 20_000,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**63 - 1, help="--verify: seed of the workloads.")] = 0,
    engine: Annotated[
        str, typer.Option("--engine", help="local (processes on this machine) or dask (the optional 'dask' extra).")
    ] = "local",
    scheduler: Annotated[
        str | None,
        typer.Option(
            "--scheduler",
            help="--engine dask: the scheduler's address (default: start a local cluster).",
            show_default=False,
        ),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the summary as one JSON object.")] = False,
) -> None:
    """Evaluate the best plan (and, with --goodput, the goodput-optimal one) at every point of a grid of scenario
    fields, in parallel, one row per point in --out. Ctrl-C keeps every finished row; --resume continues.

    Example: prfaas-plan sweep --set deployment.local.instances=8,16 --set traffic.input_length.mu=9.5,9.9 -o rows.csv
    Example: prfaas-plan sweep --set deployment.link.bandwidth_gbit_per_s=10,25,100 -o bw.jsonl --goodput --ttft-p90-s 5
    Example: prfaas-plan sweep my.yaml --grid sweep.yaml -o rows.jsonl --resume --engine dask --scheduler tcp://10.0.0.1:8786
    """
    from prfaas_plan.io.file_kind import topology_argument

    topology = topology_argument(scenario)
    if topology is not None:
        from prfaas_plan.cli import topology_commands

        topo_flags: dict[str, object] = {
            "--workers": workers,
            "--ttft-p90-s": ttft_p90_s,
            "--load": load,
            "--scheduler": scheduler,
        }
        given = {k: v is not None for k, v in topo_flags.items()} | {"--resume": resume, "--goodput": goodput}
        given |= {"--verify": verify, "--engine": engine != "local", "--resolution-tokens": resolution_tokens != 10.0}
        topology_commands.sweep(topology, sets=set_ or [], grid=grid, out=out, given=given, json_output=json_output)
        return
    from prfaas_plan.studies.sweep_point import SweepOptions

    kept = "printed" if out == "-" else f"kept in {out}: the same command with --resume continues"
    with handled(), on_interrupt(f"the rows finished so far are {kept}"):
        check_finite({"--ttft-p90-s": ttft_p90_s, "--resolution-tokens": resolution_tokens, "--load": load})
        _check_options(load, verify, ttft_p90_s, engine, scheduler)
        options = SweepOptions(
            resolution_tokens=resolution_tokens,
            goodput=goodput,
            ttft_p90_s=ttft_p90_s,
            load_fraction=load,
            verify=verify,
            replications=replications,
            requests=verify_requests,
            seed=seed,
        )
        plan = _prepare(scenario, set_ or [], grid, options, out, resume)
        summary = _execute(plan, engine, scheduler, workers)
    if json_output and out != "-":
        emit(summary)
        return
    from prfaas_plan.cli.render import console

    statuses = ", ".join(f"{n} {s}" for s, n in sorted(summary["statuses"].items())) or "nothing to do"
    console(stderr=out == "-").print(  # with -o -, stdout carries the rows
        f"{summary['points']:,} points ({summary['skipped']:,} already in {out}): {statuses}; "
        f"{summary['wall_s']:.1f} s on {summary['workers']} {engine} workers "
        f"({summary['points_per_s'] or 0:.1f} points/s) -> {out}"
    )


@frozen
class _Plan:
    """A checked sweep: the points still to run as tasks, and where their rows go."""

    tasks: list[Any]
    points: int
    out: str
    kind: str
    header: list[str]
    resume: bool
    rows: Any  # report.sweep_rows.RowsTarget, holding the rows file's lock


def _prepare(scenario: str | None, sets: list[str], grid: Path | None, options: Any, out: str, resume: bool) -> _Plan:
    """Parse the grid, load the base scenario, check every value through the loader and the rows file, and
    list the points not already in it. Every input error is raised here, before any point runs."""
    from prfaas_plan.cli.sweep_grid import SET, grid_from_options
    from prfaas_plan.io import sweep_grid
    from prfaas_plan.io.names import resolve_scenario_path
    from prfaas_plan.report import sweep_rows

    kind = sweep_rows.rows_format(out, field="--out")
    the_grid = grid_from_options(sets, grid)
    base, spec = sweep_grid.load_base(resolve_scenario_path(scenario))
    _check_goodput_slo(options, spec.slo.ttft_p90_s, the_grid)
    sweep_grid.check_axes(base, the_grid.axes, field=SET)
    header = sweep_rows.columns(the_grid.axes, options)
    digest = sweep_rows.run_digest(base, options)
    # Held (locked) from here to the last row: a second sweep on the file is refused, never interleaved.
    ids = {sweep_rows.point_id(point) for point in the_grid.points()}
    rows = sweep_rows.RowsTarget(
        out, kind, header, digest, ids, resume=resume, resume_field="--resume", out_field="--out"
    )
    done = rows.done
    tasks = [
        sweep_rows.PointTask(base=base, axes=the_grid.axes, params=point, options=options, digest=digest)
        for point in the_grid.points()
        if sweep_rows.point_id(point) not in done
    ]
    return _Plan(tasks=tasks, points=the_grid.size, out=out, kind=kind, header=header, resume=resume, rows=rows)


def _execute(plan: _Plan, engine: str, scheduler: str | None, workers: int | None) -> dict[str, Any]:
    """Run the plan's tasks on the engine, streaming each row to the rows file; the summary."""
    from prfaas_plan.report import sweep_rows

    start = time.perf_counter()
    counts: dict[str, int] = {}
    parallel = 0
    with plan.rows, plan.rows.open() as rows, ExitStack() as stack:

        def record(row: dict[str, Any]) -> None:
            rows.write(row)
            counts[row["status"]] = counts.get(row["status"], 0) + 1

        if plan.tasks:
            if engine == "local":
                _check_open_files(workers or min(os.cpu_count() or 1, MAX_DEFAULT_WORKERS))
            with _process_limits(workers):
                executor, parallel = _executor(stack, engine, scheduler, workers)
                _run(
                    iter(plan.tasks),
                    len(plan.tasks),
                    executor,
                    sweep_rows.run_point,
                    record,
                    window=TASKS_PER_WORKER * parallel,
                )
    wall_s = time.perf_counter() - start
    return {
        "points": plan.points,
        "skipped": plan.points - len(plan.tasks),
        "evaluated": len(plan.tasks),
        "statuses": counts,
        "workers": parallel,
        "engine": engine,
        "wall_s": wall_s,
        "points_per_s": len(plan.tasks) / wall_s if plan.tasks and wall_s > 0 else None,
        "out": plan.out,
    }


@contextmanager
def _process_limits(workers: int | None) -> Iterator[None]:
    """Starting worker processes past the open-file or process limit (``ulimit -n 16``: each worker takes a
    few pipes) is one line naming --workers, exit 2; the rows already written stay."""
    import errno
    from concurrent.futures.process import BrokenProcessPool

    try:
        yield
    except OSError as error:
        if error.errno not in (errno.EMFILE, errno.ENFILE, errno.EAGAIN, errno.ENOMEM):
            raise
        raise InputError(
            Problem(
                field="--workers",
                message=f"cannot start {workers or 'the default number of'} worker processes: {error.strerror} "
                f"(open-file limit {_open_file_limit()}); give fewer --workers or raise the limit (ulimit -n)",
            )
        ) from None
    except BrokenProcessPool:
        raise InputError(
            Problem(field="--workers", message="a worker process could not start or died; give fewer --workers")
        ) from None


def _open_file_limit() -> str:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return "unlimited" if soft == resource.RLIM_INFINITY else str(soft)


#: Open files a local sweep needs: about 16 for this process, the rows file and the fork server, and 4 per
#: worker (its pipes); measured: 4 workers start with a limit of 24 and fail at 20.
_BASE_FILES, _FILES_PER_WORKER = 16, 4


def _check_open_files(n_workers: int) -> None:
    """Refuse before starting anything when the open-file limit cannot hold the workers' pipes (a worker or
    the fork server failing to start prints its own traceback on stderr)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = _BASE_FILES + _FILES_PER_WORKER * n_workers
    if soft != resource.RLIM_INFINITY and soft < needed:
        raise InputError(
            Problem(
                field="--workers",
                message=f"{n_workers} worker processes need about {needed} open files, and the limit is {soft} "
                "(ulimit -n): give fewer --workers or raise the limit",
            )
        )


def _check_options(
    load: float | None, verify: bool, ttft_p90_s: float | None, engine: str, scheduler: str | None
) -> None:
    _check_load(load, verify)
    _check_engine(engine, scheduler)
    if ttft_p90_s is not None and not ttft_p90_s > 0:
        raise InputError(Problem(field="--ttft-p90-s", message=f"must be > 0, got {ttft_p90_s}"))


def _check_load(load: float | None, verify: bool) -> None:
    if load is not None and not 0 < load < 1:
        raise InputError(Problem(field="--load", message=f"must be a fraction of Λ_max in (0, 1), got {load:g}"))
    if verify and load is None:
        raise InputError(Problem(field="--verify", message="checks the TTFT at a load: give --load too"))


def _check_engine(engine: str, scheduler: str | None) -> None:
    if engine not in ("local", "dask"):
        raise InputError(Problem(field="--engine", message=f"must be local or dask, got '{engine}'"))
    if scheduler is not None and engine != "dask":
        raise InputError(Problem(field="--scheduler", message="applies only with --engine dask"))


def _check_goodput_slo(options: Any, base_slo_s: float | None, the_grid: Any) -> None:
    """--goodput needs an SLO: the option's, the scenario's, or a swept slo.ttft_p90_s."""
    swept = any(axis.name in ("slo", "slo.ttft_p90_s") for axis in the_grid.axes)
    if options.goodput and options.ttft_p90_s is None and base_slo_s is None and not swept:
        raise InputError(
            Problem(
                field="--goodput", message="needs a P90 TTFT SLO: give --ttft-p90-s, or slo.ttft_p90_s in the scenario"
            )
        )


def _ignore_sigint() -> None:
    """Worker processes leave Ctrl-C to the parent, which stops the sweep and shuts them down."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def _interrupts_held() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP while the body runs (in the main thread): one that arrives is noted, and
    handled by the handler it would have met once the body is done. SIGINT and SIGHUP are also blocked in this
    thread's signal mask, which a process started in the body inherits (through exec too).

    Around the local pool's construction (which starts multiprocessing's resource tracker) and each ``submit``
    (which may start the fork server and a worker), for two reasons:

    - a signal that unwound the parent half-way through starting a worker left a worker the pool did not know
      of, so the shutdown did not wait for it, and the parent's exit unlinked the call queue's semaphores while
      the worker was still reading them from its pipe: a FileNotFoundError traceback from the worker after the
      parent had exited 143. Once ``submit`` returns, every worker started is the pool's, and the shutdown waits
      for it;
    - Ctrl-C and a closed terminal signal the whole process group. The fork server printed a KeyboardInterrupt
      traceback when Ctrl-C came while it imported the evaluation code, and SIGHUP killed the resource tracker
      (which ignores only SIGINT and SIGTERM), whose replacement printed a KeyError traceback per semaphore the
      parent then released. Started with both blocked, the tracker, the server and the workers it forks never
      receive them; the parent, which does, shuts them down. SIGTERM keeps its default action there (the pool
      stops a broken pool's workers with it)."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return
    held: list[int] = []

    def note(signum: int, _frame: object) -> None:
        held.append(signum)

    previous = {sig: signal.signal(sig, note) for sig in INTERRUPTS}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGHUP})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a signal that waited is noted here
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        if held:
            _deliver(held[0], previous[signal.Signals(held[0])])


def _deliver(signum: int, handler: Any) -> None:
    """Act on ``signum`` as ``handler`` (a previous disposition, now restored) would have."""
    if callable(handler):
        handler(signum, None)
    elif handler != signal.SIG_IGN:  # the default action (or a handler set outside Python)
        os.kill(os.getpid(), signum)


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Ignore SIGINT while the body runs (in the main thread; elsewhere signals cannot be set, nor arrive)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _executor(stack: ExitStack, engine: str, scheduler: str | None, workers: int | None) -> tuple[Executor, int]:
    """Local worker processes, or a Dask client's executor (a scheduler at ``scheduler``, or a local cluster of
    single-threaded worker processes), closed by ``stack``; with how many points run at once (``workers``,
    default the CPU count, or a remote cluster's threads)."""
    n_workers = workers or min(os.cpu_count() or 1, MAX_DEFAULT_WORKERS)
    if engine == "local":
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # forkserver: workers fork from a clean server process, not from this one (which runs the progress bar's
        # thread); the server imports the evaluation code once, so each worker starts in milliseconds.
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(list(_WORKER_MODULES))
        with _interrupts_held():
            pool = ProcessPoolExecutor(max_workers=n_workers, mp_context=context, initializer=_ignore_sigint)
            stack.callback(pool.shutdown, wait=True, cancel_futures=True)
        return pool, n_workers
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise InputError(
            Problem(field="--engine dask", message="needs the optional dask extra: pip install 'prfaas-plan[dask]'")
        ) from None
    if scheduler is None:
        import logging

        # Worker processes started while SIGINT is ignored keep ignoring it (an ignored signal survives exec, and
        # Python then installs no KeyboardInterrupt handler): Ctrl-C reaches this process alone, which closes the
        # cluster, instead of every worker printing a KeyboardInterrupt traceback.
        with _sigint_ignored():
            cluster = stack.enter_context(
                LocalCluster(  # type: ignore[no-untyped-call,unused-ignore]
                    n_workers=n_workers,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    silence_logs=logging.ERROR,
                )
            )
        client = stack.enter_context(Client(cluster))  # type: ignore[no-untyped-call,unused-ignore]
    else:
        try:
            client = stack.enter_context(Client(scheduler, timeout=SCHEDULER_TIMEOUT_S))  # type: ignore[no-untyped-call,unused-ignore]
        except (OSError, ValueError, TypeError) as exc:
            raise InputError(Problem(field="--scheduler", message=f"cannot reach '{scheduler}': {exc}")) from None
    # Closing the client with tasks in flight (after Ctrl-C) makes the scheduler and the futures' callbacks log
    # errors about tasks nobody waits for any more; the rows file is already whole, so they are silenced.
    stack.callback(_silence_dask_logs)
    if scheduler is not None and workers is None:
        n_workers = max(1, sum(client.nthreads().values()))
    executor: Executor = client.get_executor()
    return executor, n_workers


def _silence_dask_logs() -> None:
    import logging

    for name in ("distributed", "tornado"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def _run(
    tasks: Iterator[Any],
    total: int,
    executor: Executor,
    work: Callable[[Any], dict[str, Any]],
    record: Callable[[dict[str, Any]], None],
    *,
    window: int,
) -> None:
    """Run ``work`` on every task with at most ``window`` in flight, passing each result to ``record`` as it
    completes, with a progress bar on stderr when it is a terminal. On an interruption the tasks not started
    are cancelled; the rows recorded so far stay."""
    from concurrent.futures import FIRST_COMPLETED, wait

    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    stderr = Console(stderr=True)
    progress = Progress(
        TextColumn("sweep"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=stderr,
        disable=not stderr.is_terminal,
    )
    pending: set[Future[dict[str, Any]]] = set()
    with progress:
        bar = progress.add_task("sweep", total=total)
        while True:
            while len(pending) < window:
                task = next(tasks, None)
                if task is None:
                    break
                with _interrupts_held():  # a worker it starts is whole, and the pool's, before a signal acts
                    future = executor.submit(work, task)
                pending.add(future)
            if not pending:
                return
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                record(future.result())
                progress.advance(bar)
