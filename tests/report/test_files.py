"""report.files: every output is written atomically, under a lock, and never over anything that is not the
tool's own output. The targets are files, directories and device nodes the tests create themselves (a private
``mknod`` copy in tmp_path, a small tmpfs where mounting is permitted), never the machine's own /dev entries."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from prfaas_plan.errors import InputError
from prfaas_plan.report import files, stdout
from tests.conftest import default_signals

OWNER = files.Owner(what="a test output of prfaas-plan", signatures=(b"# prfaas-plan test\n",))
DIR_OWNER = files.DirOwner(what="a test directory of prfaas-plan", marker_text="prfaas-plan test directory\n")
OWN = "# prfaas-plan test\nbody\n"
FOREIGN = "somebody else's notes\n"
IS_ROOT = os.geteuid() == 0


def write(target: Path, data: str, **kwargs: object) -> Path:
    """``files.write_file`` with the tests' owner."""
    return files.write_file(target, data, owner=OWNER, **kwargs)  # type: ignore[arg-type]


def listing(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


def refused(excinfo: pytest.ExceptionInfo[InputError], path: Path, *words: str) -> None:
    """The error is one problem naming ``path`` and containing each of ``words``."""
    (problem,) = excinfo.value.problems
    assert problem.file == str(path)
    for word in words:
        assert word in problem.message, problem.message


def mknod_char(path: Path, major: int, minor: int) -> Path:
    """A private character device node (a copy of /dev/null is 1,3; of /dev/full 1,7); skip unless permitted."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    except OSError as error:
        pytest.skip(f"cannot mknod here: {error.strerror}")
    return path


@contextlib.contextmanager
def tmpfs(directory: Path, *options: str) -> Iterator[Path]:
    """A small tmpfs mounted at ``directory`` (skip where mounting is not permitted), unmounted afterwards."""
    directory.mkdir()
    opts = ",".join(("size=64k", *options))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(directory)], capture_output=True)
    if done.returncode != 0:
        pytest.skip("mounting a tmpfs is not permitted here")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False, capture_output=True)


# ------------------------------------------------------------------------------------------ regular files


def test_new_then_own_file_replaced_atomically_nothing_left(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    write(target, OWN)
    assert target.read_text() == OWN
    write(target, OWN + "more\n")
    assert target.read_text() == OWN + "more\n"
    assert listing(tmp_path) == ["out.txt"]  # no temporary, no lock file


def test_replacing_keeps_the_permission_bits(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text(OWN)
    target.chmod(0o640)
    write(target, OWN + "x\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_foreign_file_is_never_modified(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text(FOREIGN)
    before = target.stat()
    with pytest.raises(InputError) as excinfo:
        write(target, OWN)
    refused(excinfo, target, "is not a test output of prfaas-plan", "refusing")
    after = target.stat()
    assert target.read_text() == FOREIGN and (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert listing(tmp_path) == ["notes.txt"]


def test_empty_file_is_replaced(tmp_path: Path) -> None:
    target = tmp_path / "empty.txt"
    target.touch()
    write(target, OWN)
    assert target.read_text() == OWN


def test_own_file_without_force_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text(OWN)
    with pytest.raises(InputError) as excinfo:
        write(target, OWN + "x\n", force=False)
    refused(excinfo, target, "--force")
    assert target.read_text() == OWN


def test_error_in_the_body_leaves_the_previous_file(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text(OWN)
    with pytest.raises(RuntimeError), files.atomic_file(target, owner=OWNER) as stream:
        stream.write("# prfaas-plan test\nhalf")
        raise RuntimeError("boom")
    assert target.read_text() == OWN
    assert listing(tmp_path) == ["out.txt"]


@pytest.mark.parametrize("dangling", [False, True])
def test_symlink_target_is_refused_and_left_alone(tmp_path: Path, dangling: bool) -> None:
    real = tmp_path / "real.txt"
    if not dangling:
        real.write_text(OWN)  # even a link to one of our own files
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    with pytest.raises(InputError) as excinfo:
        write(link, OWN + "x\n")
    refused(excinfo, link, "symbolic link", *(["dangling"] if dangling else []))
    assert link.is_symlink()
    assert real.exists() != dangling
    if not dangling:
        assert real.read_text() == OWN
    assert listing(tmp_path) == sorted(["link.txt", *([] if dangling else ["real.txt"])])


def test_char_device_copy_is_refused_and_stays_a_device(tmp_path: Path) -> None:
    null = mknod_char(tmp_path / "null", 1, 3)
    with pytest.raises(InputError) as excinfo:
        write(null, OWN)
    refused(excinfo, null, "character device")
    assert stat.S_ISCHR(os.lstat(null).st_mode)
    with pytest.raises(InputError):
        files.check_file(null, owner=OWNER)
    assert listing(tmp_path) == ["null"]


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    start = time.monotonic()
    with pytest.raises(InputError) as excinfo:
        write(fifo, OWN)
    assert time.monotonic() - start < 2.0
    refused(excinfo, fifo, "FIFO")
    with pytest.raises(InputError):
        files.open_append(fifo, owner=OWNER)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_socket_and_directory_are_refused(tmp_path: Path) -> None:
    directory = tmp_path / "dir"
    directory.mkdir()
    with pytest.raises(InputError) as excinfo:
        write(directory, OWN)
    refused(excinfo, directory, "a directory")
    path = tmp_path / "sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        with pytest.raises(InputError) as excinfo:
            write(path, OWN)
        refused(excinfo, path, "a socket")


def test_missing_parent_and_file_as_parent(tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "out.txt"
    with pytest.raises(InputError) as excinfo:
        write(target, OWN)
    refused(excinfo, target, "no such directory")
    plain = tmp_path / "plain"
    plain.write_text(FOREIGN)
    with pytest.raises(InputError) as excinfo:
        write(plain / "out.txt", OWN)
    assert "not a directory" in excinfo.value.problems[0].message
    assert plain.read_text() == FOREIGN


def test_long_names(tmp_path: Path) -> None:
    """A name at the limit is written (its temporary and lock names are shortened); one over it is refused."""
    at_limit = tmp_path / ("n" * 255)
    write(at_limit, OWN)
    assert at_limit.read_text() == OWN and listing(tmp_path) == [at_limit.name]
    too_long = tmp_path / ("n" * 300)
    with pytest.raises(InputError) as excinfo:
        write(too_long, OWN)
    refused(excinfo, too_long, "file name too long", "ENAMETOOLONG")


def test_permission_denied_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """EACCES (made by the OS for an ordinary user; simulated for root, whom permissions do not stop)."""
    target = tmp_path / "out.txt"
    target.write_text(OWN)
    if IS_ROOT:
        real_open = os.open

        def denied(path: object, flags: int, *args: object, **kwargs: object) -> int:
            if str(path).endswith(".tmp"):
                raise PermissionError(errno.EACCES, "Permission denied", str(path))
            return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "open", denied)
    else:
        tmp_path.chmod(0o555)
    try:
        with pytest.raises(InputError) as excinfo:
            write(target, OWN + "x\n")
    finally:
        tmp_path.chmod(0o755)
    refused(excinfo, target, "permission denied", "EACCES")
    monkeypatch.undo()
    assert target.read_text() == OWN and listing(tmp_path) == ["out.txt"]


def test_full_disk_keeps_the_previous_file(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "small") as small:
        target = small / "out.txt"
        target.write_text(OWN)
        with pytest.raises(InputError) as excinfo:
            write(target, OWN + "x" * 200_000)
        refused(excinfo, target, "no space left", "ENOSPC")
        assert target.read_text() == OWN
        assert listing(small) == ["out.txt"]
        with pytest.raises(InputError) as excinfo:
            files.write_dir(small / "review", {"big.bin": b"x" * 200_000}, owner=DIR_OWNER, force=False)
        assert "ENOSPC" in excinfo.value.problems[0].message
        assert listing(small) == ["out.txt"]


def test_read_only_file_system(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", "ro") as ro:
        with pytest.raises(InputError) as excinfo:
            write(ro / "out.txt", OWN)
        refused(excinfo, ro / "out.txt", "read-only file system", "EROFS")
        with pytest.raises(InputError):
            files.check_dir(ro / "review", owner=DIR_OWNER, force=False)


# ---------------------------------------------------------------------------------------------- directories


def test_directory_written_replaced_with_force_and_marked(tmp_path: Path) -> None:
    target = tmp_path / "review"
    written = files.write_dir(target, {"a.md": "one", "b.bin": b"\x00"}, owner=DIR_OWNER, force=False)
    assert [p.name for p in written] == ["a.md", "b.bin"]
    assert listing(target) == [".prfaas-plan", "a.md", "b.bin"]
    with pytest.raises(InputError) as excinfo:
        files.write_dir(target, {"a.md": "two"}, owner=DIR_OWNER, force=False)
    refused(excinfo, target, "--force")
    assert (target / "a.md").read_text() == "one"
    files.write_dir(target, {"a.md": "two"}, owner=DIR_OWNER, force=True)
    assert (target / "a.md").read_text() == "two" and listing(target) == [".prfaas-plan", "a.md"]
    assert listing(tmp_path) == ["review"]  # no .old, no temporary, no lock


def test_empty_directory_is_filled(tmp_path: Path) -> None:
    target = tmp_path / "review"
    target.mkdir()
    files.write_dir(target, {"a.md": "one"}, owner=DIR_OWNER, force=False)
    assert (target / "a.md").read_text() == "one"


def test_foreign_directory_is_never_replaced_even_with_force(tmp_path: Path) -> None:
    target = tmp_path / "photos"
    target.mkdir()
    (target / "cat.jpg").write_bytes(b"\xff\xd8")
    with pytest.raises(InputError) as excinfo:
        files.write_dir(target, {"a.md": "one"}, owner=DIR_OWNER, force=True)
    refused(excinfo, target, "not a test directory of prfaas-plan")
    assert listing(target) == ["cat.jpg"] and listing(tmp_path) == ["photos"]


@pytest.mark.parametrize("kind", ["file", "symlink", "dangling", "fifo"])
def test_directory_writer_refuses_special_targets(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "review"
    if kind == "file":
        target.write_text(FOREIGN)
    elif kind == "symlink":
        real = tmp_path / "real"
        files.write_dir(real, {"a.md": "mine"}, owner=DIR_OWNER, force=False)
        target.symlink_to(real)
    elif kind == "dangling":
        target.symlink_to(tmp_path / "gone")
    else:
        os.mkfifo(target)
    before = listing(tmp_path)
    with pytest.raises(InputError) as excinfo:
        files.write_dir(target, {"a.md": "one"}, owner=DIR_OWNER, force=True)
    assert excinfo.value.problems[0].file == str(target)
    assert listing(tmp_path) == before
    if kind == "symlink":
        assert (tmp_path / "real" / "a.md").read_text() == "mine"


def test_directory_exchange_fallback_without_renameat2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the kernel lacks RENAME_EXCHANGE, the old directory goes aside and is removed: nothing remains."""
    target = tmp_path / "review"
    files.write_dir(target, {"a.md": "one"}, owner=DIR_OWNER, force=False)
    monkeypatch.setattr(files, "_libc_renameat2", lambda: None)
    files.write_dir(target, {"a.md": "two"}, owner=DIR_OWNER, force=True)
    assert (target / "a.md").read_text() == "two" and listing(tmp_path) == ["review"]


# ---------------------------------------------------------------------------------------------------- locks


def test_lock_held_elsewhere_makes_a_writer_wait_then_refuse(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    with files.output_lock(target, wait_s=0):
        with pytest.raises(InputError) as excinfo:
            write(target, OWN, wait_s=0.2)
        refused(excinfo, target, "another prfaas-plan run", f"pid {os.getpid()}")
        assert not target.exists()
    write(target, OWN)
    assert listing(tmp_path) == ["out.txt"]


def test_stale_lock_file_does_not_block(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    files.lock_path(target).write_text("999999\n")  # left by a process that died: nobody holds a flock on it
    write(target, OWN, wait_s=0)
    assert target.read_text() == OWN and listing(tmp_path) == ["out.txt"]


def test_lock_file_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    victim = tmp_path / "victim"
    victim.write_text(FOREIGN)
    files.lock_path(target).symlink_to(victim)
    with pytest.raises(InputError):
        write(target, OWN)
    assert victim.read_text() == FOREIGN


WRITER = """
import sys, time
from prfaas_plan.report import files
from prfaas_plan.errors import InputError
owner = files.Owner(what="a test output of prfaas-plan", signatures=(b"# prfaas-plan test\\n",))
dir_owner = files.DirOwner(what="a test directory of prfaas-plan", marker_text="prfaas-plan test directory\\n")
kind, target, tag, pause = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
try:
    if kind == "dir":
        files.check_dir(target, owner=dir_owner, force=False)
        time.sleep(pause)
        files.write_dir(target, {"who": tag}, owner=dir_owner, force=False)
    else:
        with files.atomic_file(target, owner=owner) as stream:
            stream.write("# prfaas-plan test\\n")
            print("writing", flush=True)
            for _ in range(int(pause * 100)):
                stream.write(tag * 1000 + "\\n")
                time.sleep(0.01)
except InputError as exc:
    print(f"refused: {exc}", file=sys.stderr)
    sys.exit(2)
"""


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_signals,
    )


def test_two_processes_on_one_review_never_both_succeed(tmp_path: Path) -> None:
    """Both pass the early check; at the commit, under the lock, the second finds the first's review and is
    refused (without --force): one review, whole, and one clear refusal; nothing silently deleted."""
    target = tmp_path / "review"
    procs = [spawn("dir", str(target), tag, "0.5") for tag in ("A", "B")]
    results = [(p.wait(timeout=30), p.communicate()) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    winner = "A" if results[0][0] == 0 else "B"
    assert (target / "who").read_text() == winner
    assert listing(tmp_path) == ["review"]


# -------------------------------------------------------------------------------------------------- signals


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_signal_during_a_write_removes_the_temporary(tmp_path: Path, signum: int) -> None:
    target = tmp_path / "out.txt"
    target.write_text(OWN)
    proc = spawn("file", str(target), "x", "5")
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "writing"
    time.sleep(0.1)
    proc.send_signal(signum)
    code = proc.wait(timeout=20)
    proc.communicate()
    # Killed by the signal after the unwinding (SIGINT: Python re-raises it once KeyboardInterrupt is uncaught).
    assert code == -signum
    assert target.read_text() == OWN
    assert listing(tmp_path) == ["out.txt"]


# ----------------------------------------------------------------------------------------------- appending


def test_open_append_creates_appends_and_refuses_foreign(tmp_path: Path) -> None:
    target = tmp_path / "rows.txt"
    with files.output_lock(target, wait_s=0), files.open_append(target, owner=OWNER) as stream:
        stream.write(OWN)
    with files.open_append(target, owner=OWNER) as stream:
        stream.write("row\n")
    assert target.read_text() == OWN + "row\n"
    foreign = tmp_path / "notes.txt"
    foreign.write_text(FOREIGN)
    with pytest.raises(InputError):
        files.open_append(foreign, owner=OWNER)
    assert foreign.read_text() == FOREIGN


# -------------------------------------------------------------------------------------------- standard output

PRINTER = """
import sys
from prfaas_plan.report import stdout
with stdout.guarded_stdout():
    for _ in range(int(sys.argv[1])):
        print("x" * 1000)
"""


def run_printer(lines: int, stdout: IO[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PRINTER, str(lines)], stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=30
    )


def test_stdout_closed_is_one_line_and_exit_2() -> None:
    done = subprocess.run(
        ["sh", "-c", f'"{sys.executable}" -c "$0" 3 >&-', PRINTER], stderr=subprocess.PIPE, text=True, timeout=30
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: standard output is closed; redirect it (e.g. >/dev/null) instead"
    ]


def test_stdout_on_a_full_device_is_one_line_and_exit_2(tmp_path: Path) -> None:
    full = mknod_char(tmp_path / "full", 1, 7)
    with full.open("w") as sink:
        done = run_printer(3, stdout=sink)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "ENOSPC" in lines[0] and "standard output" in lines[0], done.stderr


def test_broken_pipe_exits_quietly_with_141() -> None:
    printer = subprocess.Popen(
        [sys.executable, "-c", PRINTER, "10000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert printer.stdout is not None
    printer.stdout.readline()
    printer.stdout.close()
    code = printer.wait(timeout=30)
    assert printer.stderr is not None
    err = printer.stderr.read()
    printer.stderr.close()
    assert code == stdout.BROKEN_PIPE_STATUS and err == ""


def test_guarded_stdout_passes_ordinary_output_through(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with out.open("w") as sink:
        done = run_printer(2, stdout=sink)
    assert done.returncode == 0 and done.stderr == ""
    assert out.read_text() == ("x" * 1000 + "\n") * 2


def test_cause_names_the_errno() -> None:
    text = files.cause(OSError(errno.ENOSPC, "No space left on device"))
    assert text == "no space left on the device (ENOSPC)"
    assert textwrap.shorten(files.cause(OSError(errno.EROFS, "x")), 80).endswith("(EROFS)")


def test_comment_markers_recognise_a_header_whose_first_line_varies() -> None:
    owner = files.Owner(what="a card", comment_markers=(b"by `prfaas-plan model import`",))
    assert owner.recognises(b"# llama: imported from x.json by\n# `prfaas-plan model import`. Check\nkey: 1\n")
    assert not owner.recognises(b"key: 1\n# llama: imported by `prfaas-plan model import`\n")  # not leading
    assert not owner.recognises(b"# my own card\nkey: 1\n")


def test_a_sweep_on_a_full_disk_leaves_no_empty_rows_file(tmp_path: Path) -> None:
    """A sweep whose first row does not fit (ENOSPC) removes the rows file it created (a CSV one with its header
    too), so no file is left to block or mislead a rerun; a file that was there before (even empty) is left where
    it was."""
    from prfaas_plan.report import sweep_rows

    header = ["point_id", "run_digest", "status"]
    row = {"point_id": "p0", "run_digest": "d", "status": "x" * 200_000}
    resume = {"resume_field": "--resume", "out_field": "--out"}
    with tmpfs(tmp_path / "small") as small:
        for name, before in (("new.jsonl", None), ("new.csv", None), ("kept.jsonl", "")):
            target_path = small / name
            if before is not None:
                target_path.write_text(before)
            kind = target_path.suffix[1:]
            target = sweep_rows.RowsTarget(str(target_path), kind, header, "d", set(), resume=False, **resume)
            with target, target.open() as rows, pytest.raises(InputError) as excinfo:
                rows.write(row)
            assert "ENOSPC" in excinfo.value.problems[0].message
            assert target_path.exists() == (before is not None), name
        assert listing(small) == ["kept.jsonl"]


def test_held_commits_wait_then_commit_or_leave_every_target_as_it_was(tmp_path: Path) -> None:
    """While a run holds its commits (``--table N``), a write leaves the target as it was until the release: a
    commit replaces it (a second write of the same file wins), a discard removes the temporaries and leaves the
    previous file and no new one."""
    old, new = tmp_path / "old.txt", tmp_path / "new.txt"
    write(old, OWN)
    files.hold_commits()
    try:
        write(old, OWN + "first\n")
        write(old, OWN + "second\n")
        write(new, OWN)
        assert old.read_text() == OWN and not new.exists()
    finally:
        files.release_commits(commit=True)
    assert old.read_text() == OWN + "second\n" and new.read_text() == OWN
    assert listing(tmp_path) == ["new.txt", "old.txt"]
    files.hold_commits()
    try:
        write(old, OWN + "third\n")
        write(tmp_path / "other.txt", OWN)
    finally:
        files.release_commits(commit=False)
    assert old.read_text() == OWN + "second\n" and listing(tmp_path) == ["new.txt", "old.txt"]
    write(old, OWN)  # released: commits are immediate again
    assert old.read_text() == OWN


def test_a_held_commit_still_refuses_a_file_that_became_foreign(tmp_path: Path) -> None:
    """The ownership check is made again at the release: a file that another program wrote meanwhile is left
    alone, InputError naming it, and nothing temporary stays."""
    target = tmp_path / "out.txt"
    files.hold_commits()
    try:
        write(target, OWN)
        target.write_text(FOREIGN)
        with pytest.raises(InputError, match=r"out\.txt"):
            files.release_commits(commit=True)
    finally:
        files.release_commits(commit=False)
    assert target.read_text() == FOREIGN and listing(tmp_path) == ["out.txt"]
