"""Standard output, guarded: ``guarded_stdout`` makes a closed stdout (``>&-``), a full device behind it (ENOSPC
on flush) or any other write error one line on stderr and exit 2; a broken pipe (``| head``) exits quietly with
status 141 (128 + SIGPIPE, what a shell reports for a coreutils program in the same place).

Apart from ``report.files`` (every output file and directory) so that a command printing to stdout loads
neither the file writers nor their ownership records (start-up time); the error's wording is ``files.cause``.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import sys
from collections.abc import Iterator
from typing import Any, NoReturn, TextIO

#: Exit status for a broken pipe on stdout: 128 + SIGPIPE, as a shell reports for `yes | head`.
BROKEN_PIPE_STATUS = 128 + 13


class StdoutFailed(BaseException):
    """Writing standard output failed: carries the OSError. A BaseException so that neither click's own
    broken-pipe handling nor an ``except Exception`` swallows it before ``guarded_stdout``."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error)
        self.error = error


class _GuardedStream:
    """A proxy of the real stdout whose write and flush turn an OSError into ``StdoutFailed``."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as error:
            raise StdoutFailed(error) from None

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as error:
            raise StdoutFailed(error) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null so that the interpreter's final flush cannot fail again."""
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)


def _stdout_exit(error: OSError) -> NoReturn:
    """Leave after a failed write to stdout: quietly with ``BROKEN_PIPE_STATUS`` on a broken pipe, else one
    line on stderr and exit 2."""
    from prfaas_plan.report.files import cause  # the write error's wording (only once a write has failed)

    _silence_stdout()
    sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (replaces stdout for the last flush)
    if error.errno == errno.EPIPE:
        raise SystemExit(BROKEN_PIPE_STATUS)
    with contextlib.suppress(Exception):
        print(f"error: standard output: cannot write: {cause(error)}", file=sys.stderr)
    raise SystemExit(2)


@contextlib.contextmanager
def guarded_stdout() -> Iterator[None]:
    """Run the body with stdout guarded (module docstring): a closed stdout is refused before it starts; a
    failed write or the final flush ends the process with one line and exit 2 (a broken pipe: quietly, 141)."""
    real = sys.stdout
    if real is None or _closed(real):
        with contextlib.suppress(Exception):
            print("error: standard output is closed; redirect it (e.g. >/dev/null) instead", file=sys.stderr)
        raise SystemExit(2)
    guard = _GuardedStream(real)
    sys.stdout = guard
    try:
        try:
            yield
        except StdoutFailed as failed:
            _stdout_exit(failed.error)
        except SystemExit:
            _flush(real)
            raise
        _flush(real)
    finally:
        if sys.stdout is guard:
            sys.stdout = real


def _closed(stream: TextIO) -> bool:
    try:
        os.fstat(stream.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        return isinstance(stream, io.TextIOWrapper)  # a real file whose descriptor is gone
    return False


def _flush(stream: TextIO) -> None:
    try:
        stream.flush()
    except OSError as error:
        _stdout_exit(error)
