"""The hostile-file battery for every writer of prfaas-plan, through the real command line in subprocesses.

Every writer (records CSV, sweep rows CSV and JSON Lines, model card, accelerator profile, review directory)
meets every case: no target, its own previous output, a foreign regular file, garbage, another tool's CSV, a
truncated own row, rows of another grid (sweep --resume), a FIFO, a private copy of a character device
(``mknod``: /dev/null's numbers), a full device (a 64 KiB tmpfs, filled), a read-only directory (a read-only
tmpfs; ``chmod`` does not stop root), a symbolic link to a file, a dangling one, a name too long, two processes
at once, and SIGINT / SIGTERM / SIGHUP at a random point of the run. Each trial runs in a fresh directory the
battery made; no writer is ever pointed at the machine's own /dev entries.

Each trial is classified, and the battery prints the counts per outcome (targets: all zero but ``ok``):

- ``traceback``: "Traceback" on stderr;
- ``hang``: the command ran past its timeout (killed);
- ``modified_foreign``: a file that was not the tool's output changed (bytes, inode or file type), a device or
  FIFO became something else, or a link or the file it points to changed;
- ``lost_or_duplicated_rows``: a sweep's rows file misses a point, holds one twice, or holds a line that is not
  a whole row, after the run (and after a ``--resume`` that follows an interruption);
- ``leftovers``: a new entry beside the target (a temporary, a lock file, an ``.old`` directory);
- ``bad_exit``: a refusal that is not exit 2 with one ``error:`` line (progress lines such as ``review: tornado ...``
  may precede it), or a run that should succeed and did not.

Usage: python3 -m tests.benchmarks.hostile_files [--only records,card,...] [--seed N] [--quick] [-v]
(``--quick`` skips the writers whose every run takes tens of seconds: review and profile).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import default_signals

REPO = Path(__file__).resolve().parents[2]
HF_CONFIG = REPO / "tests" / "fixtures" / "hf_configs" / "llama-3.1-8b.json"
GRID = ("--set", "deployment.local.instances=8,16,24")
OTHER_GRID = ("--set", "deployment.local.instances=4,32")
OUTCOMES = ("ok", "traceback", "hang", "modified_foreign", "lost_or_duplicated_rows", "leftovers", "bad_exit")
FOREIGN_TEXT = b"my notes: do not lose these\n"
GARBAGE = bytes(range(256)) * 4
OTHER_CSV = b"name,age,city\nada,36,London\nalan,41,Wilmslow\n"


@dataclass(frozen=True, slots=True, kw_only=True)
class Writer:
    """One writer: how to run it at a target, the target's name, and its usual run time (for signal points)."""

    name: str
    target: str
    argv: Callable[[str], list[str]]
    run_s: float
    timeout_s: float
    is_dir: bool = False
    sweep: bool = False
    slow: bool = False


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "prfaas_plan", *args]


WRITERS = (
    Writer(
        name="records",
        target="records.csv",
        argv=lambda t: cli("simulate", "--requests", "300", "--records", t),
        run_s=1.2,
        timeout_s=60,
    ),
    Writer(
        name="sweep_csv",
        target="rows.csv",
        argv=lambda t: cli("sweep", *GRID, "-o", t),
        run_s=2,
        timeout_s=90,
        sweep=True,
    ),
    Writer(
        name="sweep_jsonl",
        target="rows.jsonl",
        argv=lambda t: cli("sweep", *GRID, "-o", t),
        run_s=2,
        timeout_s=90,
        sweep=True,
    ),
    Writer(
        name="card",
        target="card.yaml",
        argv=lambda t: cli("model", "import", str(HF_CONFIG), "--out", t),
        run_s=0.8,
        timeout_s=60,
    ),
    Writer(
        name="profile",
        target="machine.yaml",
        argv=lambda t: cli("validate", "kernel", "--size", "small", "--profile-out", t),
        run_s=20,
        timeout_s=240,
        slow=True,
    ),
    Writer(
        name="review",
        target="review",
        argv=lambda t: cli("review", "paper-case-study", "--quick", "--no-verify", "-o", t),
        run_s=22,
        timeout_s=240,
        is_dir=True,
        slow=True,
    ),
)


# ------------------------------------------------------------------------------------------------ running


@dataclass(slots=True)
class Run:
    code: int | None  # None: killed at the timeout
    stdout: str
    stderr: str


def spawn(argv: list[str], cwd: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """Start ``argv`` in its own session (so that its worker processes can be killed with it), its output in
    files (a pipe held open by an orphaned worker would make the battery wait forever)."""
    logs = Path(tempfile.mkdtemp(prefix="log-", dir=cwd.parent))
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # this checkout, not an installed copy (the run is elsewhere)
    with (logs / "out").open("wb") as out, (logs / "err").open("wb") as err:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
            preexec_fn=default_signals,
        )
    return proc, logs


def finish(proc: subprocess.Popen[bytes], logs: Path, timeout_s: float) -> Run:
    try:
        code: int | None = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        code = None
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # the command and anything it left running
    proc.wait()
    result = Run(
        code=code,
        stdout=(logs / "out").read_text(errors="replace"),
        stderr=(logs / "err").read_text(errors="replace"),
    )
    shutil.rmtree(logs, ignore_errors=True)
    return result


def run(argv: list[str], cwd: Path, timeout_s: float) -> Run:
    proc, logs = spawn(argv, cwd)
    return finish(proc, logs, timeout_s)


def run_signalled(argv: list[str], cwd: Path, timeout_s: float, delay_s: float, signum: int) -> Run:
    proc, logs = spawn(argv, cwd)
    time.sleep(delay_s)
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signum)
    return finish(proc, logs, timeout_s)


@contextlib.contextmanager
def tmpfs(directory: Path, *options: str) -> Iterator[bool]:
    """Mount a 64 KiB tmpfs at ``directory``; yields whether it worked (unmounted afterwards)."""
    directory.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", ",".join(("size=64k", *options)), "tmpfs", str(directory)], capture_output=True
    )
    try:
        yield done.returncode == 0
    finally:
        if done.returncode == 0:
            subprocess.run(["umount", "-l", str(directory)], capture_output=True)


# -------------------------------------------------------------------------------------------- snapshots


def snapshot(path: Path) -> tuple[object, ...]:
    """What must not change about a foreign entry: type, inode, device numbers, link text, bytes."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ("absent",)
    mode = st.st_mode
    if stat.S_ISLNK(mode):
        return ("link", os.readlink(path), snapshot(path.parent / os.readlink(path)))
    if stat.S_ISREG(mode):
        return ("file", st.st_ino, path.read_bytes())
    if stat.S_ISDIR(mode):
        return ("dir", st.st_ino, tuple(sorted((p.name, snapshot(p)) for p in path.iterdir())))
    return (stat.S_IFMT(mode), st.st_ino, st.st_rdev)


def listing(directory: Path) -> set[str]:
    try:
        return set(os.listdir(directory))
    except OSError:
        return set()


def rows_problems(path: Path, expected: int) -> str | None:
    """Why a sweep's rows file is not exactly ``expected`` whole rows, one per point (None when it is)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        return f"unreadable: {error}"
    ids: list[str] = []
    if path.suffix == ".csv":
        lines = [line for line in text.splitlines() if not line.startswith("#")]
        records = list(csv.reader(lines))
        if not records:
            return "empty"
        width = len(records[0])
        for record in records[1:]:
            if len(record) != width:
                return "a line that is not a whole row"
            ids.append(record[0])
    else:
        for line in text.splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                return "a line that is not a whole row"
            if isinstance(row, dict) and "point_id" in row:
                ids.append(row["point_id"])
    counts = Counter(ids)
    if any(n > 1 for n in counts.values()):
        return "a point twice"
    if len(counts) != expected:
        return f"{len(counts)} points, expected {expected}"
    return None


# ---------------------------------------------------------------------------------------------- trials


@dataclass(slots=True)
class Trial:
    writer: str
    case: str
    outcomes: list[str] = field(default_factory=list)
    detail: str = ""


#: A progress line a long command prints on stderr before its result: the command's name, a colon, what it is
#: doing, and " ..." ("review: tornado ...", cli/review.py; the topology review's lines have the same shape).
_PROGRESS = re.compile(r"[a-z][a-z-]*: .+ \.\.\.")


def one_error_line(result: Run) -> bool:
    """Exit 2 and one ``error:`` line; the other lines, if any, are the command's progress lines."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    progress = [line for line in lines if not line.startswith("error:") and _PROGRESS.fullmatch(line)]
    return result.code == 2 and len(errors) == 1 and len(errors) + len(progress) == len(lines)


def judge(
    trial: Trial,
    result: Run,
    *,
    directory: Path,
    before: set[str],
    target: str,
    foreign: dict[Path, tuple[object, ...]],
    expect: str,
) -> None:
    """Classify one run. ``expect``: "refuse" (exit 2, one error line), "succeed" (exit 0), "either" (0 or 2)."""
    if result.code is None:
        trial.outcomes.append("hang")
    if "Traceback" in result.stderr:
        trial.outcomes.append("traceback")
        trial.detail = result.stderr.strip().splitlines()[-1][:160]
    for path, was in foreign.items():
        if snapshot(path) != was:
            trial.outcomes.append("modified_foreign")
            trial.detail = trial.detail or f"{path.name} changed"
    new = listing(directory) - before - {target}
    if new:
        trial.outcomes.append("leftovers")
        trial.detail = trial.detail or f"left {sorted(new)}"
    if result.code is not None and "traceback" not in trial.outcomes:
        ok = {
            "refuse": one_error_line(result),
            "succeed": result.code == 0,
            "either": result.code == 0 or one_error_line(result),
        }[expect]
        if not ok:
            trial.outcomes.append("bad_exit")
            trial.detail = trial.detail or f"exit {result.code}: {result.stderr.strip()[:160]}"


def make_own(writer: Writer, seed_dir: Path) -> Path:
    """One complete output of ``writer`` (made once, copied into the trials that need one)."""
    seed_dir.mkdir(parents=True, exist_ok=True)
    target = seed_dir / writer.target
    if not target.exists():
        result = run(writer.argv(writer.target), seed_dir, writer.timeout_s)
        if result.code != 0:
            raise SystemExit(f"cannot make an own output of {writer.name}: {result.stderr.strip()[-400:]}")
    return target


def place(source: Path, destination: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, destination, symlinks=True)
    else:
        shutil.copy2(source, destination)


def trials_for(writer: Writer, work: Path, rng: random.Random, seeds: Path) -> Iterator[Trial]:
    """Every case for one writer."""
    own = make_own(writer, seeds / writer.name)
    resume = ("--resume",) if writer.sweep else ()
    force = ("--force",) if writer.is_dir else ()
    counter = iter(range(10_000))

    def fresh(case: str) -> tuple[Trial, Path]:
        directory = work / f"{writer.name}-{next(counter)}-{case}"
        directory.mkdir(parents=True)
        return Trial(writer=writer.name, case=case), directory

    def simple(case: str, setup: Callable[[Path], list[Path]], expect: str, extra: tuple[str, ...] = ()) -> Trial:
        trial, directory = fresh(case)
        foreign_paths = setup(directory)
        foreign = {p: snapshot(p) for p in foreign_paths}
        before = listing(directory)
        result = run([*writer.argv(writer.target), *extra], directory, writer.timeout_s)
        judge(trial, result, directory=directory, before=before, target=writer.target, foreign=foreign, expect=expect)
        if writer.sweep and expect == "succeed" and result.code == 0:
            problem = rows_problems(directory / writer.target, 3)
            if problem:
                trial.outcomes.append("lost_or_duplicated_rows")
                trial.detail = trial.detail or problem
        return trial

    def write(content: bytes) -> Callable[[Path], list[Path]]:
        def setup(directory: Path) -> list[Path]:
            path = directory / writer.target
            if writer.is_dir:
                path.mkdir()
                (path / "notes.txt").write_bytes(content)
            else:
                path.write_bytes(content)
            return [path]

        return setup

    yield simple("absent", lambda d: [], "succeed")

    def own_copy(directory: Path) -> list[Path]:
        place(own, directory / writer.target)
        return []

    # Its own previous output: replaced (review with --force; a sweep resumes it and has nothing left to do).
    yield simple("own", own_copy, "succeed", (*resume, *force))
    if writer.is_dir or writer.sweep:
        # Without --force / --resume the own output is refused, untouched.
        def own_guarded(directory: Path) -> list[Path]:
            own_copy(directory)
            return [directory / writer.target]

        yield simple("own-unforced", own_guarded, "refuse")
    yield simple("foreign", write(FOREIGN_TEXT), "refuse", (*resume, *force))
    yield simple("garbage", write(GARBAGE), "refuse", (*resume, *force))
    yield simple("other-tool-csv", write(OTHER_CSV), "refuse", (*resume, *force))

    if not writer.is_dir:

        def truncated(directory: Path) -> list[Path]:
            data = own.read_bytes()
            cut = data.rstrip(b"\n").rfind(b"\n") + 1 + 7  # into the last line
            (directory / writer.target).write_bytes(data[: min(cut, len(data) - 1)])
            return []

        # A sweep resumes a file cut in its last row (the cut row is run again); the others replace their own.
        yield simple("truncated-row", truncated, "succeed", resume)

    if writer.sweep:

        def other_grid(directory: Path) -> list[Path]:
            result = run(cli("sweep", *OTHER_GRID, "-o", writer.target), directory, writer.timeout_s)
            assert result.code == 0, result.stderr
            return [directory / writer.target]

        yield simple("other-grid", other_grid, "refuse", resume)

    def fifo(directory: Path) -> list[Path]:
        os.mkfifo(directory / writer.target)
        return [directory / writer.target]

    yield simple("fifo", fifo, "refuse", (*resume, *force))

    def chardev(directory: Path) -> list[Path]:
        os.mknod(directory / writer.target, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a private /dev/null copy
        return [directory / writer.target]

    yield simple("char-device", chardev, "refuse", (*resume, *force))

    def link_to_own(directory: Path) -> list[Path]:
        place(own, directory / ("real-" + writer.target))
        (directory / writer.target).symlink_to("real-" + writer.target)
        return [directory / writer.target, directory / ("real-" + writer.target)]

    yield simple("symlink-to-file", link_to_own, "refuse", (*resume, *force))

    def dangling(directory: Path) -> list[Path]:
        (directory / writer.target).symlink_to("nowhere/" + writer.target)
        return [directory / writer.target]

    yield simple("dangling-symlink", dangling, "refuse", (*resume, *force))

    trial, directory = fresh("name-too-long")
    long_name = "n" * 300 + Path(writer.target).suffix
    before = listing(directory)
    result = run(writer.argv(long_name), directory, writer.timeout_s)
    judge(trial, result, directory=directory, before=before, target=long_name, foreign={}, expect="refuse")
    yield trial

    yield from mounted_cases(writer, fresh, own)
    yield concurrent(writer, fresh)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        yield signalled(writer, fresh, own, signum, rng.uniform(0.3, writer.run_s))


def mounted_cases(writer: Writer, fresh: Callable[[str], tuple[Trial, Path]], own: Path) -> Iterator[Trial]:
    """A full device (the previous own output must survive) and a read-only directory."""
    trial, directory = fresh("full-device")
    with tmpfs(directory / "small") as mounted:
        if not mounted:
            trial.outcomes.append("ok")
            trial.detail = "skipped: cannot mount a tmpfs"
            yield trial
        else:
            small = directory / "small"
            previous = small / writer.target
            if writer.sweep:
                previous = small / ("other-" + writer.target)  # a sweep appends: keep a file of ours beside
            if not writer.is_dir:  # a review (its figures) does not fit in 64 KiB
                place(own, previous)
            with contextlib.suppress(OSError), (small / "filler").open("wb") as filler:
                filler.write(b"\0" * (1 << 20))
            foreign = {previous: snapshot(previous)} if previous.exists() else {}
            before = listing(small)
            target = "small/" + writer.target
            extra = ("--force",) if writer.is_dir else ()
            result = run([*writer.argv(target), *extra], directory, writer.timeout_s)
            judge(trial, result, directory=small, before=before, target=writer.target, foreign=foreign, expect="refuse")
            rows = small / writer.target
            if writer.sweep and rows.exists() and not rows.read_bytes().endswith(b"\n") and rows.stat().st_size:
                trial.outcomes.append("lost_or_duplicated_rows")
                trial.detail = trial.detail or "a partial line in the rows file on a full device"
            yield trial
    trial, directory = fresh("read-only-dir")
    with tmpfs(directory / "ro", "ro") as mounted:
        if not mounted:
            trial.outcomes.append("ok")
            trial.detail = "skipped: cannot mount a tmpfs"
        else:
            before = listing(directory / "ro")
            result = run(writer.argv("ro/" + writer.target), directory, writer.timeout_s)
            judge(trial, result, directory=directory / "ro", before=before, target="", foreign={}, expect="refuse")
        yield trial


def concurrent(writer: Writer, fresh: Callable[[str], tuple[Trial, Path]]) -> Trial:
    """Two runs on one target at once: each succeeds or is refused in one line; the result is one whole output
    (a sweep's rows: every point exactly once)."""
    trial, directory = fresh("two-at-once")
    before = listing(directory)
    argv = writer.argv(writer.target)
    started = [spawn(argv, directory) for _ in range(2)]
    results = [finish(proc, logs, writer.timeout_s * 2) for proc, logs in started]
    for result in results:
        judge(trial, result, directory=directory, before=before, target=writer.target, foreign={}, expect="either")
    if not any(r.code == 0 for r in results):
        trial.outcomes.append("bad_exit")
        trial.detail = trial.detail or "neither run succeeded"
    if writer.sweep:
        problem = rows_problems(directory / writer.target, 3)
        if problem:
            trial.outcomes.append("lost_or_duplicated_rows")
            trial.detail = trial.detail or problem
    trial.outcomes = sorted(set(trial.outcomes))
    return trial


def signalled(
    writer: Writer, fresh: Callable[[str], tuple[Trial, Path]], own: Path, signum: int, delay_s: float
) -> Trial:
    """A signal at ``delay_s``: exit 128 + signal (or 0 if it had finished), nothing left, the previous own output
    intact or wholly replaced; a sweep then resumes to exactly one row per point."""
    name = signal.Signals(signum).name
    trial, directory = fresh(f"{name}@{delay_s:.1f}s")
    if not writer.sweep:
        place(own, directory / writer.target)
    before = listing(directory)
    extra = ("--force",) if writer.is_dir else ()
    result = run_signalled([*writer.argv(writer.target), *extra], directory, writer.timeout_s, delay_s, signum)
    judge(trial, result, directory=directory, before=before, target=writer.target, foreign={}, expect="either")
    if "bad_exit" in trial.outcomes and result.code in (0, 128 + signum, -signum):
        trial.outcomes.remove("bad_exit")
    if writer.sweep and (directory / writer.target).exists():
        again = run([*writer.argv(writer.target), "--resume"], directory, writer.timeout_s)
        if again.code != 0 or "Traceback" in again.stderr:
            trial.outcomes.append("bad_exit")
            trial.detail = trial.detail or f"resume: exit {again.code}: {again.stderr.strip()[:160]}"
        problem = rows_problems(directory / writer.target, 3)
        if problem:
            trial.outcomes.append("lost_or_duplicated_rows")
            trial.detail = trial.detail or problem
    elif not writer.sweep:
        target = directory / writer.target
        if not target.exists():
            trial.outcomes.append("modified_foreign")  # the previous output was lost
            trial.detail = trial.detail or "previous output lost"
    return trial


# -------------------------------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated writers (default: all)")
    parser.add_argument("--seed", type=int, default=19)
    parser.add_argument("--quick", action="store_true", help="skip review and profile (their runs take ~20 s)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every trial")
    args = parser.parse_args()
    chosen = [w for w in WRITERS if (not args.only or w.name in args.only.split(",")) and not (args.quick and w.slow)]
    rng = random.Random(args.seed)
    totals: dict[str, Counter[str]] = {}
    bad: list[Trial] = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="prfaas-hostile-") as root:
        work, seeds = Path(root) / "work", Path(root) / "seeds"
        for writer in chosen:
            counts: Counter[str] = Counter()
            for trial in trials_for(writer, work, rng, seeds):
                outcomes = sorted(set(trial.outcomes)) or ["ok"]
                counts.update(outcomes)
                if outcomes != ["ok"]:
                    bad.append(trial)
                if args.verbose:
                    print(f"{writer.name:12} {trial.case:20} {','.join(outcomes):30} {trial.detail}", flush=True)
            totals[writer.name] = counts
    width = max(len(n) for n in totals) if totals else 6
    print(f"\n{'writer':{width}} " + " ".join(f"{o:>{len(o)}}" for o in OUTCOMES))
    for name, counts in totals.items():
        print(f"{name:{width}} " + " ".join(f"{counts.get(o, 0):>{len(o)}}" for o in OUTCOMES))
    all_counts: Counter[str] = sum(totals.values(), Counter())
    print(f"{'total':{width}} " + " ".join(f"{all_counts.get(o, 0):>{len(o)}}" for o in OUTCOMES))
    print(f"\n{sum(all_counts.values())} outcomes over {len(chosen)} writers in {time.perf_counter() - start:.0f} s")
    for trial in bad:
        print(f"  {trial.writer} / {trial.case}: {', '.join(sorted(set(trial.outcomes)))}: {trial.detail}")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
