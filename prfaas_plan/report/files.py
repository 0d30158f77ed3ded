"""Every output file and directory of prfaas-plan is written here: atomically, under a lock, and never over
anything that is not the tool's own output.

**Atomic.** A file is written into a temporary sibling (``.<name>.<pid>.tmp``, same directory, so the rename
is atomic), flushed and fsync'd, then renamed over the target; a directory is built the same way and swapped in
with ``renameat2(RENAME_EXCHANGE)`` where the kernel offers it (the old one is then removed from the temporary
name, so no ``.old`` sibling exists at any moment). Any error or signal removes the temporary: SIGINT raises
KeyboardInterrupt (or the CLI's own exception); SIGTERM and SIGHUP, while they have their default action, are
turned into an exception for the length of the write and re-delivered once the temporary is gone, so the
process still dies of the signal, leaving nothing behind. A SIGKILL can leave a temporary (never a half target).

**Own outputs only.** Every writer names an ``Owner``: the bytes its files begin with (a CSV header, a first
comment line of a YAML file). An existing target is replaced only when it begins with one of them (with
``force`` where the command asks for it) or when it is an empty regular file (it holds nothing to lose); any
other file is never touched: InputError naming it, exit 2. A directory output (a review) carries a marker file,
``DirOwner.marker_name``, whose first line says so; an existing non-empty directory without it is never
replaced, ``force`` or not.

**Special targets.** A symbolic link (to anything, or dangling), a character or block device, a FIFO, a socket,
or a directory where a file is expected (a file where a directory is expected) is refused with one line, exit 2,
and never renamed over: replacing ``/dev/null`` with a regular file breaks a machine. Targets are inspected with
``lstat`` and opened with ``O_NOFOLLOW | O_NONBLOCK``, so neither a link nor a FIFO nobody reads can redirect or
hang a write. Standard output is written only where a command offers ``-`` (``is_stdout``).

**Locked.** The commit (ownership re-check, then rename) holds ``fcntl.flock`` on ``.<name>.lock`` beside the
target; a second run waits up to ``LOCK_WAIT_S`` and then refuses. A long writer (a sweep's rows file) takes
the lock for its whole run without waiting (``output_lock(path, wait_s=0)``). The kernel releases a flock
when its holder dies, so a stale lock file never blocks; the file is removed on release (and a waiter checks
that the file it locked is still the one at the path, so removal cannot let two holders in).

**Held.** While a run holds its commits (``hold_commits``: ``--table N``, whose check can only be made once the
command has printed) each file is written and fsync'd into its temporary at once and renamed at
``release_commits``, or discarded there with every target as it was.

**Errors.** ENOSPC, EDQUOT, EACCES, EPERM, ENAMETOOLONG, EROFS, a missing parent, EISDIR, ELOOP and friends
become one line naming the path and the cause (InputError, exit 2); the previous file stays intact.

**Standard output** is guarded by ``report.stdout.guarded_stdout`` (a module of its own: printing loads no writer).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import io
import os
import shutil
import signal
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import IO, Any, NoReturn, TextIO

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InputError, Problem

#: Longest wait (s) for another run's commit on the same output before refusing. A commit is a rename (a
#: directory's: a handful of renames) after an fsync, well under a second on any healthy disk.
LOCK_WAIT_S = 30.0
#: Polling interval (s) while waiting for a lock.
_LOCK_POLL_S = 0.05
#: Bytes of an existing target read to recognise it (its first line fits).
HEAD_BYTES = 4096
#: Longest file name most file systems take (bytes); longer sibling names are shortened to a digest.
_NAME_MAX = 255
#: The name standing for standard output where a command offers it.
STDOUT_NAME = "-"

_CAUSES = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENAMETOOLONG: "file name too long",
    errno.EROFS: "read-only file system",
    errno.ENOENT: "no such file or directory",
    errno.EISDIR: "is a directory",
    errno.ENOTDIR: "a component of the path is not a directory",
    errno.ELOOP: "too many levels of symbolic links",
    errno.EFBIG: "file too large",
    errno.EIO: "input/output error",
    errno.EMFILE: "too many open files",
    errno.ENFILE: "too many open files in the system",
    errno.EXDEV: "crosses file systems",
    errno.EBUSY: "device or resource busy",
    errno.ETXTBSY: "text file busy",
}


# ------------------------------------------------------------------------------------------- ownership


@frozen
class Owner:
    """How a writer recognises its own files: ``what`` names them in messages ("a records CSV of prfaas-plan
    simulate"); an existing file is its own when it begins with one of ``signatures`` (bytes), or when its
    leading ``#`` comment lines contain one of ``comment_markers`` (for a header whose first line varies, such
    as a model card's, which begins with the model's name)."""

    what: str
    signatures: tuple[bytes, ...] = ()
    comment_markers: tuple[bytes, ...] = ()

    def recognises(self, head: bytes) -> bool:
        """Whether a file beginning with ``head`` is one of this writer's outputs."""
        if any(head.startswith(signature) for signature in self.signatures):
            return True
        if not self.comment_markers:
            return False
        comments = []
        for line in head.split(b"\n"):
            if not line.startswith(b"#"):
                break
            comments.append(line.lstrip(b"# "))
        block = b" ".join(comments)
        return any(marker in block for marker in self.comment_markers)


@frozen
class DirOwner:
    """How a directory writer recognises its own directories: a regular file ``marker_name`` inside whose
    content begins with ``marker_text`` (written into every directory it makes)."""

    what: str
    marker_text: str
    marker_name: str = ".prfaas-plan"

    def recognises(self, directory: Path) -> bool:
        """Whether ``directory`` holds this writer's marker."""
        head = _read_head(directory / self.marker_name)
        return head is not None and head.startswith(self.marker_text.encode("utf-8"))


def is_stdout(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is ``-``, standard output, where a command offers it."""
    return os.fspath(path) == STDOUT_NAME


# ------------------------------------------------------------------------------------------------ errors


def cause(error: OSError) -> str:
    """A short, lower-case description of an OSError's cause, with its errno name (``no space left on the
    device (ENOSPC)``)."""
    number = error.errno
    if number is None:
        return str(error)
    text = _CAUSES.get(number) or (error.strerror or os.strerror(number)).lower()
    return f"{text} ({errno.errorcode.get(number, number)})"


def problem(path: str | os.PathLike[str], message: str) -> InputError:
    """An InputError naming ``path`` (as given) with ``message``."""
    return InputError(Problem(file=os.fspath(path), message=message))


def write_error(path: str | os.PathLike[str], error: OSError) -> InputError:
    """``error`` as one line naming ``path``: cannot write: <cause>."""
    number = error.errno
    if number == errno.ENOENT:
        parent = Path(os.fspath(path)).parent
        if not parent.is_dir():
            return problem(path, f"cannot write: no such directory: {parent}")
    return problem(path, f"cannot write: {cause(error)}")


# ------------------------------------------------------------------------------------------- inspection


def _sibling(target: Path, tag: str) -> Path:
    """A hidden name beside ``target``: ``.<name>.<tag>``, or a digest of the name when that would exceed the
    file system's name limit (the target's own name may be near it)."""
    name = f".{target.name}.{tag}"
    if len(os.fsencode(name)) > _NAME_MAX:
        import hashlib  # names near the limit only (start-up time: every command imports this module)

        digest = hashlib.sha256(os.fsencode(target.name)).hexdigest()[:16]
        name = f".prfaas-plan-{digest}.{tag}"
    return target.with_name(name)


def temporary_path(target: str | os.PathLike[str]) -> Path:
    """Where this process builds ``target`` before the rename (``.<name>.<pid>.tmp``)."""
    return _sibling(Path(os.fspath(target)), f"{os.getpid()}.tmp")


def lock_path(target: str | os.PathLike[str]) -> Path:
    """The lock file of ``target`` (``.<name>.lock``)."""
    return _sibling(Path(os.fspath(target)), "lock")


def _read_head(path: Path) -> bytes | None:
    """The first ``HEAD_BYTES`` of a regular file at ``path`` (not following a link, never blocking on a FIFO);
    None when it is absent or not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, HEAD_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _lstat(path: Path) -> os.stat_result | None:
    """``lstat(path)``, None when nothing is there; InputError for a missing parent or any other failure."""
    try:
        return os.lstat(path)
    except FileNotFoundError:
        parent = path.parent
        try:
            parent_mode = os.stat(parent).st_mode
        except OSError as error:
            if error.errno in (errno.ENOENT, errno.ENOTDIR):
                raise problem(path, f"cannot write: no such directory: {parent}") from None
            raise write_error(path, error) from None
        if not stat.S_ISDIR(parent_mode):
            raise problem(path, f"cannot write: {parent} is not a directory") from None
        return None
    except OSError as error:
        raise write_error(path, error) from None


def _refuse_link(path: Path) -> NoReturn:
    try:
        where = os.readlink(path)
    except OSError:
        where = "?"
    dangling = "" if os.path.exists(path) else ", dangling"
    raise problem(path, f"is a symbolic link (to {where}{dangling}); refusing to write through it: give the real path")


def inspect_file_target(path: str | os.PathLike[str], *, owner: Owner, force: bool = True) -> os.stat_result | None:
    """Check that a file may be written at ``path``: nothing there (in an existing directory), an empty regular
    file, or a regular file ``owner`` recognises (replaced only with ``force``). Returns the existing file's
    stat, or None. InputError naming the path for anything else: a link, a device, a FIFO, a socket, a
    directory, another program's file, a missing parent."""
    target = Path(os.fspath(path))
    text = os.fspath(path)
    if not text.strip() or target.name in ("", ".", ".."):
        raise InputError(Problem(file=repr(text), message="not a file name"))
    st = _lstat(target)
    if st is None:
        return None
    if stat.S_ISLNK(st.st_mode):
        _refuse_link(target)
    if not stat.S_ISREG(st.st_mode):
        raise problem(target, f"is {_kind(st.st_mode)}, not a regular file; refusing to write over it")
    if st.st_size == 0:
        return st
    head = _read_head(target)
    if head is None:
        raise problem(target, "cannot read it to check that it is an output of prfaas-plan; not replaced")
    if not owner.recognises(head):
        raise problem(
            target, f"exists and is not {owner.what}; refusing to replace it (move it away or choose another name)"
        )
    if not force:
        raise problem(target, f"exists ({owner.what}); use --force to replace it")
    return st


def inspect_dir_target(path: str | os.PathLike[str], *, owner: DirOwner, force: bool) -> str | None:
    """Check that a directory may be written at ``path``: nothing there, an empty directory, or one of
    ``owner``'s directories (replaced only with ``force``). Returns None (absent), ``"empty"`` or ``"own"``.
    InputError naming the path for anything else."""
    target = Path(os.fspath(path))
    text = os.fspath(path)
    if not text.strip() or target.name in ("", ".", ".."):
        raise InputError(Problem(file=repr(text), message="not a directory name"))
    st = _lstat(target)
    if st is None:
        return None
    if stat.S_ISLNK(st.st_mode):
        _refuse_link(target)
    if not stat.S_ISDIR(st.st_mode):
        what = "a file" if stat.S_ISREG(st.st_mode) else _kind(st.st_mode)
        raise problem(target, f"is {what}, not a directory; refusing to write over it")
    try:
        with os.scandir(target) as entries:
            empty = next(entries, None) is None
    except OSError as error:
        raise write_error(target, error) from None
    if empty:
        return "empty"
    if not owner.recognises(target):
        raise problem(
            target,
            f"exists, is not empty and is not {owner.what} (no {owner.marker_name} marker); not replaced, even "
            "with --force: move it away or choose another name",
        )
    if not force:
        raise problem(target, f"exists ({owner.what}) and is not empty (use --force to replace it)")
    return "own"


# ------------------------------------------------------------------------------------------------ locks


@contextlib.contextmanager
def output_lock(path: str | os.PathLike[str], *, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """Hold the lock of output ``path`` while the body runs (flock on ``lock_path(path)``): wait up to
    ``wait_s`` for another holder, then refuse (InputError naming the path). The lock file is removed on
    release; the kernel drops a dead holder's lock, so a stale file never blocks."""
    fd = _acquire(Path(os.fspath(path)), wait_s)
    lock = lock_path(path)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lock)  # while still holding it: a waiter re-checks that its file is still the one here
        os.close(fd)


def _acquire(target: Path, wait_s: float) -> int:
    lock = lock_path(target)
    deadline = time.monotonic() + max(wait_s, 0.0)
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise problem(lock, "the lock file is a symbolic link; refusing to use it") from None
            raise write_error(target, error) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise problem(lock, "the lock file is not a regular file; refusing to use it")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                if time.monotonic() >= deadline:
                    waited = f" after waiting {wait_s:g} s" if wait_s > 0 else ""
                    raise problem(
                        target, f"another prfaas-plan run{holder} is writing it{waited}; refusing to interleave"
                    ) from None
                os.close(fd)
                fd = -1
                time.sleep(_LOCK_POLL_S)
                continue
            try:
                here = os.stat(lock, follow_symlinks=False)
            except FileNotFoundError:  # the holder removed it as we locked it: take the next one
                here = None
            mine = os.fstat(fd)
            if here is None or (here.st_dev, here.st_ino) != (mine.st_dev, mine.st_ino):
                os.close(fd)
                fd = -1
                continue
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
            return fd
        except BaseException:
            if fd >= 0:
                os.close(fd)
            raise


def _holder(fd: int) -> str:
    """`` (pid N)`` from a lock file's content, when it names one."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return f" (pid {text})" if text.isdigit() else ""


# ---------------------------------------------------------------------------------------------- signals


class _Signalled(BaseException):
    """SIGTERM or SIGHUP arrived during a write while its action was the default: unwinds (removing the
    temporary), then the signal is delivered again with its default action."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_signalled(signum: int, _frame: FrameType | None) -> None:
    for other in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):
            signal.signal(other, signal.SIG_IGN)
    raise _Signalled(signum)


@contextlib.contextmanager
def _signals_unwind() -> Iterator[None]:
    """While the body runs, SIGTERM and SIGHUP with their default action raise ``_Signalled`` instead of
    killing the process outright; once the stack has unwound, the signal is re-delivered (default action).
    Handlers someone else installed (the CLI's) are left alone. Only the main thread can set handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    installed: dict[signal.Signals, Any] = {}
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) == signal.SIG_DFL:
            installed[signum] = signal.signal(signum, _raise_signalled)
    try:
        yield
    except _Signalled as caught:
        for installed_signum in installed:
            signal.signal(installed_signum, signal.SIG_DFL)
        os.kill(os.getpid(), caught.signum)
        raise  # not reached: the default action of both signals ends the process
    finally:
        for installed_signum, previous in installed.items():
            if signal.getsignal(installed_signum) in (_raise_signalled, signal.SIG_IGN):
                signal.signal(installed_signum, previous)


# ------------------------------------------------------------------------------------------- file writer


def _fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable (best effort: some file systems refuse to fsync directories)."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _create_exclusive(path: Path, mode: int = 0o666) -> int:
    """Create ``path`` (which must not exist: a leftover of a dead process with this pid is removed first)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(path, flags, mode)
    except FileExistsError:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            raise
        os.unlink(path)
        return os.open(path, flags, mode)


def check_file(path: str | os.PathLike[str], *, owner: Owner, force: bool = True) -> None:
    """Check before a long run that ``path`` can be written (``inspect_file_target``, then a temporary sibling
    created and removed). InputError naming the path."""
    inspect_file_target(path, owner=owner, force=force)
    target = Path(os.fspath(path))
    partial = temporary_path(target)
    try:
        os.close(_create_exclusive(partial))
    except OSError as error:
        raise write_error(target, error) from None
    with contextlib.suppress(OSError):
        os.unlink(partial)


@contextlib.contextmanager
def atomic_file(
    path: str | os.PathLike[str],
    *,
    owner: Owner,
    force: bool = True,
    binary: bool = False,
    wait_s: float = LOCK_WAIT_S,
) -> Iterator[IO[Any]]:
    """Open a stream whose content replaces ``path`` when the body ends normally (module docstring): text
    (UTF-8, no newline translation) or ``binary``. The target is checked now and again under the lock at the
    commit; on any error or signal the temporary is removed and the target is as it was. OSErrors become
    InputError naming ``path``."""
    target = Path(os.fspath(path))
    inspect_file_target(target, owner=owner, force=force)
    partial = temporary_path(target)
    held = False
    with _signals_unwind():
        try:
            fd = _create_exclusive(partial)
        except OSError as error:
            raise write_error(target, error) from None
        try:
            raw = os.fdopen(fd, "wb")
            stream: IO[Any] = raw if binary else io.TextIOWrapper(raw, encoding="utf-8", newline="")
            try:
                yield stream
                stream.flush()
                os.fsync(raw.fileno())
                stream.close()
            except BaseException:
                with contextlib.suppress(OSError, ValueError):  # keep the first error (or the signal)
                    stream.close()
                raise
            if _held is not None:  # the run holds its commits back (``hold_commits``): the rename waits
                same = os.path.realpath(partial)  # a second write of the same file, however spelled, replaces it
                _held[:] = [entry for entry in _held if os.path.realpath(entry[0]) != same]
                _held.append((partial, target, owner, force))
                held = True
                return
            _commit_owned(partial, target, owner, force, wait_s)
        except OSError as error:
            raise write_error(target, error) from None
        finally:
            if not held:
                with contextlib.suppress(OSError):
                    os.unlink(partial)


#: The files a run has written and fsync'd but not yet renamed over their targets while it holds its commits back
#: (``hold_commits``): (temporary, target, owner, force). None while every commit is immediate.
_held: list[tuple[Path, Path, Owner, bool]] | None = None


def hold_commits() -> None:
    """Hold back every file commit of this process until ``release_commits``, so that a check that can only be made
    once the command has printed (``--table N`` past the tables it printed) can still refuse with nothing written.
    Each file is still written and fsync'd into its temporary sibling at once; only the rename waits."""
    global _held
    if _held is None:
        _held = []


def commits_held() -> bool:
    """Whether this run holds its file commits back (``hold_commits``)."""
    return _held is not None


def readable_path(target: str | os.PathLike[str]) -> Path:
    """Where the content just written for ``target`` can be read back in this run: its held temporary while the
    run holds its commits (``hold_commits``), else the target itself."""
    path = Path(os.fspath(target))
    same = os.path.realpath(path)
    for partial, held_target, _, _ in _held or ():
        if os.path.realpath(held_target) == same:
            return partial
    return path


def release_commits(commit: bool) -> tuple[Path, ...]:
    """End ``hold_commits``: rename the held files over their targets (each ownership re-checked under its lock, as
    an immediate commit is), or with ``commit`` False discard them, leaving every target as it was; returns the
    targets. A failed commit raises InputError naming its target; the files not yet committed are then
    discarded."""
    global _held
    held, _held = _held or [], None
    try:
        for partial, target, owner, force in held if commit else ():
            try:
                _commit_owned(partial, target, owner, force, LOCK_WAIT_S)
            except OSError as error:
                raise write_error(target, error) from None
    finally:
        for partial, *_ in held:
            with contextlib.suppress(OSError):
                os.unlink(partial)
    return tuple(target for _, target, _, _ in held)


def _commit_owned(partial: Path, target: Path, owner: Owner, force: bool, wait_s: float) -> None:
    """Under ``target``'s lock, check it again (still absent, empty or ``owner``'s) and rename ``partial`` over it;
    then make the rename durable."""
    with output_lock(target, wait_s=wait_s):
        existing = inspect_file_target(target, owner=owner, force=force)
        _commit_file(partial, target, existing)
    _fsync_dir(target.parent)


def _commit_file(partial: Path, target: Path, existing: os.stat_result | None) -> None:
    """Rename ``partial`` over ``target``: keeping the permission bits of the file it replaces; when nothing
    was there, by ``link`` (which fails rather than replace anything that appeared meanwhile)."""
    if existing is not None:
        with contextlib.suppress(OSError):
            os.chmod(partial, stat.S_IMODE(existing.st_mode))
        os.replace(partial, target)
        return
    try:
        os.link(partial, target)
    except FileExistsError:
        raise problem(target, "appeared while it was being written (another program?); not replaced") from None
    except OSError as error:
        if error.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS):
            raise
        os.replace(partial, target)  # a file system without hard links: a plain rename
        return
    os.unlink(partial)


def write_file(
    path: str | os.PathLike[str],
    data: str | bytes,
    *,
    owner: Owner,
    force: bool = True,
    wait_s: float = LOCK_WAIT_S,
) -> Path:
    """Write ``data`` (text as UTF-8) as the file ``path`` atomically (``atomic_file``); returns the path."""
    with atomic_file(path, owner=owner, force=force, binary=True, wait_s=wait_s) as stream:
        stream.write(data.encode("utf-8") if isinstance(data, str) else data)
    return Path(os.fspath(path))


# -------------------------------------------------------------------------------------- append (streams)


def open_append(path: str | os.PathLike[str], *, owner: Owner) -> TextIO:
    """Open ``path`` for appending whole lines (a sweep's rows file), creating it when absent. The caller
    holds ``output_lock(path)`` and has checked the content it appends to. Refuses what
    ``inspect_file_target`` refuses (with ``force``: an own file is appended to, not replaced)."""
    target = Path(os.fspath(path))
    before = inspect_file_target(target, owner=owner, force=True)
    flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    if before is None:
        flags |= os.O_CREAT | os.O_EXCL
    try:
        fd = os.open(target, flags, 0o666)
    except OSError as error:
        raise write_error(target, error) from None
    st = os.fstat(fd)
    moved = before is not None and (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino)
    if moved or not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise problem(target, "was replaced while it was being checked; not written")
    os.set_blocking(fd, True)
    return io.TextIOWrapper(os.fdopen(fd, "wb"), encoding="utf-8", newline="", write_through=True)


# ------------------------------------------------------------------------------------- directory writer


def check_dir(path: str | os.PathLike[str], *, owner: DirOwner, force: bool) -> None:
    """Check before a long run that a directory can be written at ``path`` (``inspect_dir_target``, then the
    temporary sibling created and removed). InputError naming the path."""
    inspect_dir_target(path, owner=owner, force=force)
    target = Path(os.fspath(path))
    partial = temporary_path(target)
    try:
        _mkdir_fresh(partial)
    except OSError as error:
        raise write_error(target, error) from None
    with contextlib.suppress(OSError):
        os.rmdir(partial)


def _mkdir_fresh(path: Path) -> None:
    """Make ``path`` (a leftover of a dead process with this pid is removed first)."""
    try:
        os.mkdir(path)
    except FileExistsError:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            raise
        shutil.rmtree(path)
        os.mkdir(path)


def write_dir(
    path: str | os.PathLike[str],
    files: Mapping[str, str | bytes],
    *,
    owner: DirOwner,
    force: bool,
    wait_s: float = LOCK_WAIT_S,
) -> list[Path]:
    """Write ``files`` (plain name -> text or bytes) and ``owner``'s marker as the directory ``path``,
    atomically (module docstring). Returns the written paths (without the marker), in the order given."""
    target = Path(os.fspath(path))
    for name in files:
        if not name or Path(name).name != name or name in (".", "..", owner.marker_name):
            raise ValueError(f"not a plain file name: {name!r}")
    inspect_dir_target(target, owner=owner, force=force)
    partial = temporary_path(target)
    with _signals_unwind():
        try:
            _mkdir_fresh(partial)
        except OSError as error:
            raise write_error(target, error) from None
        try:
            for name, content in [*files.items(), (owner.marker_name, owner.marker_text)]:
                fd = _create_exclusive(partial / name)
                with os.fdopen(fd, "wb") as handle:
                    handle.write(content.encode("utf-8") if isinstance(content, str) else content)
                    handle.flush()
                    os.fsync(handle.fileno())
            _fsync_dir(partial)
            with output_lock(target, wait_s=wait_s):
                state = inspect_dir_target(target, owner=owner, force=force)
                if state == "own":
                    _exchange(partial, target)  # the old review now sits at ``partial``; removed below
                else:
                    os.rename(partial, target)  # replaces an empty directory; never a non-empty one
            _fsync_dir(target.parent)
        except OSError as error:
            raise write_error(target, error) from None
        finally:
            if os.path.lexists(partial):
                shutil.rmtree(partial, ignore_errors=True)
    return [target / name for name in files]


def _libc_renameat2() -> Callable[..., int] | None:
    """libc's ``renameat2`` (glibc 2.28+), or None where the C library lacks it."""
    import ctypes

    try:
        function: Callable[..., int] = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    return function


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(partial: Path, target: Path) -> None:
    """Swap the directories ``partial`` and ``target`` in one step (``renameat2(RENAME_EXCHANGE)``); where the
    kernel or file system lacks it, the old directory is moved aside, the new one renamed in, and the old one
    renamed back to ``partial`` (so that the caller removes it; on failure it is put back)."""
    import ctypes

    renameat2 = _libc_renameat2()
    if renameat2 is not None:
        result = renameat2(_AT_FDCWD, os.fsencode(partial), _AT_FDCWD, os.fsencode(target), _RENAME_EXCHANGE)
        if result == 0:
            return
        number = ctypes.get_errno()
        if number not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise OSError(number, os.strerror(number), os.fspath(target))
    aside = _sibling(target, f"{os.getpid()}.old")
    os.rename(target, aside)
    try:
        os.rename(partial, target)
    except BaseException:
        os.rename(aside, target)
        raise
    os.rename(aside, partial)
