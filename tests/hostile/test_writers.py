"""Hostile targets and concurrent runs for every writer, through the real command line. Refusals run in process
(typer's runner over the real app: fast); concurrency, signals and standard output run in subprocesses. Every
target is a file, directory or device node the test makes in tmp_path (a private ``mknod`` copy of /dev/null),
never the machine's own /dev entries. The larger battery is tests/benchmarks/hostile_files.py."""

from __future__ import annotations

import csv
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from prfaas_plan.cli.app import app
from tests.conftest import REPO, default_signals

HF_CONFIG = REPO / "tests" / "fixtures" / "hf_configs" / "llama-3.1-8b.json"
GRID = ("--set", "deployment.local.instances=8,16,24")
FOREIGN = b"my notes: do not lose these\n"

#: Each writer's command line with its output at ``target``, stopped before any long work where possible.
WRITERS: dict[str, Callable[[str], list[str]]] = {
    "records": lambda t: ["simulate", "--requests", "200", "--records", t],
    "card": lambda t: ["model", "import", str(HF_CONFIG), "--out", t],
    "sweep_csv": lambda t: ["sweep", *GRID, "-o", t, "--resume"],
    "sweep_jsonl": lambda t: ["sweep", *GRID, "-o", t, "--resume"],
    "profile": lambda t: ["validate", "kernel", "--profile-out", t],
    "review": lambda t: ["review", "paper-case-study", "--quick", "--no-verify", "--force", "-o", t],
}
NAMES = {"records": "r.csv", "card": "c.yaml", "sweep_csv": "s.csv", "sweep_jsonl": "s.jsonl", "profile": "p.yaml"}


def invoke(args: list[str], cwd: Path) -> tuple[int, str]:
    """Run the app in process from ``cwd``; exit status and stderr (mixed with stdout)."""
    old = Path.cwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(app, args, catch_exceptions=True)
    finally:
        os.chdir(old)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def snapshot(path: Path) -> tuple[object, ...]:
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return ("link", os.readlink(path))
    if stat.S_ISREG(st.st_mode):
        return ("file", st.st_ino, path.read_bytes())
    if stat.S_ISDIR(st.st_mode):
        return ("dir", st.st_ino, sorted(os.listdir(path)))
    return (stat.S_IFMT(st.st_mode), st.st_ino, st.st_rdev)


def make_target(kind: str, path: Path, *, directory: bool) -> None:
    if kind == "foreign":
        if directory:
            path.mkdir()
            (path / "cat.jpg").write_bytes(FOREIGN)
        else:
            path.write_bytes(FOREIGN)
    elif kind == "garbage":
        path.write_bytes(bytes(range(256)) * 2)
    elif kind == "other-csv":
        path.write_bytes(b"name,age\nada,36\n")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "char-device":
        try:
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("mknod is not permitted here")
    elif kind == "symlink":
        real = path.with_name("real-" + path.name)
        real.write_bytes(FOREIGN)
        path.symlink_to(real.name)
    elif kind == "dangling":
        path.symlink_to("nowhere/" + path.name)


KINDS = ("foreign", "garbage", "other-csv", "fifo", "char-device", "symlink", "dangling")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_hostile_target_is_refused_in_one_line_and_left_alone(tmp_path: Path, writer: str, kind: str) -> None:
    """Exit 2, one ``error:`` line naming the path, before any long work; the target and everything beside it
    unchanged (no temporary, no lock file)."""
    if writer == "review" and kind in ("garbage", "other-csv"):
        pytest.skip("a review is a directory: a file in its place is the 'foreign' case")
    name = NAMES.get(writer, "rev")
    target = tmp_path / name
    make_target(kind, target, directory=writer == "review")
    before = {p: snapshot(tmp_path / p) for p in os.listdir(tmp_path)}
    start = time.monotonic()
    code, output = invoke(WRITERS[writer](name), tmp_path)
    assert time.monotonic() - start < 20
    lines = [line for line in output.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:") and name in lines[0], output
    assert {p: snapshot(tmp_path / p) for p in os.listdir(tmp_path)} == before


@pytest.mark.parametrize("writer", ["records", "card", "sweep_csv"])
def test_a_name_too_long_is_one_line(tmp_path: Path, writer: str) -> None:
    name = "n" * 300 + Path(NAMES[writer]).suffix
    code, output = invoke(WRITERS[writer](name), tmp_path)
    assert code == 2 and "file name too long" in output and "Traceback" not in output
    assert os.listdir(tmp_path) == []


def run_cli(args: list[str], cwd: Path, **kwargs: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "prfaas_plan", *args],
        cwd=cwd,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=default_signals,
        **kwargs,  # type: ignore[arg-type]
    )


def point_ids(path: Path) -> list[str]:
    return [row["point_id"] for row in csv.DictReader(path.read_text().splitlines())]


def test_resume_refuses_rows_of_another_grid_and_foreign_files_unchanged(tmp_path: Path) -> None:
    """--resume on rows of another grid (same scenario and options) is refused naming the line; the file is
    not touched. A file cut in its last row is continued: every point once."""
    other = tmp_path / "other.csv"
    code, output = invoke(["sweep", "--set", "deployment.local.instances=4,32", "-o", other.name], tmp_path)
    assert code == 0, output
    before = other.read_bytes()
    code, output = invoke(["sweep", *GRID, "-o", other.name, "--resume"], tmp_path)
    assert code == 2 and "another grid" in output and other.read_bytes() == before
    own = tmp_path / "own.csv"
    assert invoke(["sweep", *GRID, "-o", own.name], tmp_path)[0] == 0
    own.write_bytes(own.read_bytes()[:-9])
    assert invoke(["sweep", *GRID, "-o", own.name, "--resume"], tmp_path)[0] == 0
    assert sorted(point_ids(own)) == sorted(set(point_ids(own))) and len(point_ids(own)) == 3


def test_two_sweeps_on_one_file_never_interleave(tmp_path: Path) -> None:
    """The second sweep is refused at once (the first holds the file's lock); every point once, whole rows."""
    out = tmp_path / "rows.csv"
    args = ["sweep", "--set", "deployment.local.instances=8,16,24,32", "-o", out.name, "--workers", "1"]
    procs = [run_cli(args, tmp_path) for _ in range(2)]
    results = [(p.wait(timeout=120), p.communicate()) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes in ([0, 0], [0, 2]), results
    errors = [err for code, (_, err) in results if code == 2]
    assert all("another prfaas-plan run" in e or "exists" in e for e in errors), errors
    ids = point_ids(out)
    assert len(ids) == 4 and len(set(ids)) == 4
    assert sorted(os.listdir(tmp_path)) == ["rows.csv"]


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM])
def test_a_signal_during_a_sweep_keeps_whole_rows_and_leaves_nothing(tmp_path: Path, signum: int) -> None:
    out = tmp_path / "rows.jsonl"
    args = ["sweep", "--set", "deployment.local.instances=8,16,24,32,40,48", "-o", out.name, "--workers", "1"]
    proc = run_cli(args, tmp_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (out.exists() and out.stat().st_size > 0):
        time.sleep(0.05)
    proc.send_signal(signum)
    code = proc.wait(timeout=60)
    _, err = proc.communicate()
    assert code == 128 + signum and "--resume" in err and "Traceback" not in err, err
    assert sorted(os.listdir(tmp_path)) == ["rows.jsonl"]
    for line in out.read_text().splitlines():
        json.loads(line)


def test_stdout_problems_are_one_line_or_quiet(tmp_path: Path) -> None:
    """stdout closed: exit 2 and one line; a broken pipe: exit 141, nothing on stderr."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    closed = subprocess.run(
        ["sh", "-c", f'"{sys.executable}" -m prfaas_plan kv >&-'], env=env, capture_output=True, text=True, timeout=60
    )
    assert closed.returncode == 2 and closed.stderr.strip().startswith("error: standard output is closed")
    proc = run_cli(["sweep", *GRID, "-o", "-", "--workers", "1"], tmp_path)
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.stdout.close()
    code = proc.wait(timeout=60)
    assert proc.stderr is not None
    err = proc.stderr.read()
    proc.stderr.close()
    assert code in (0, 141) and "Traceback" not in err, err
