"""Writing a review directory atomically: every file is written into a temporary sibling directory, which is
then renamed into place, so that a reader (or an interrupted run) never sees half a review.

An existing non-empty directory is refused unless ``force``; with ``force`` the old directory is moved aside,
the new one renamed into place and the old one removed. Ctrl-C or SIGTERM (``cli.common.interruptible``
turns both into an exception) unwinds through the ``finally`` that removes the temporary directory.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from prfaas_plan.errors import InputError, Problem


def _partial_dir(target: Path) -> Path:
    """The temporary sibling directory a review is built in."""
    return target.with_name(f".{target.name}.{os.getpid()}.tmp")


def _aside_dir(target: Path) -> Path:
    """Where an existing review is moved while the new one takes its place (``force``)."""
    return target.with_name(f".{target.name}.{os.getpid()}.old")


def check_review_dir(path: str | os.PathLike[str], *, force: bool = False) -> None:
    """Check, before any work, that a review directory can be written at ``path``: a name that is not a file,
    not a non-empty directory unless ``force``, in a directory where the temporary sibling can be created
    (tried by creating and removing it). Raises InputError naming the path."""
    text = os.fspath(path)
    target = Path(text)
    if not text.strip() or target.name in ("", ".", ".."):
        raise InputError(Problem(file=repr(text), message="not a directory name"))
    if target.exists() and not target.is_dir():
        raise InputError(Problem(file=text, message="exists and is not a directory"))
    if target.is_dir() and any(target.iterdir()) and not force:
        raise InputError(Problem(file=text, message="exists and is not empty (use --force to replace it)"))
    partial = _partial_dir(target)
    try:
        partial.mkdir()
    except FileExistsError:
        raise InputError(
            Problem(file=str(partial), message="a temporary directory of this name is in the way")
        ) from None
    except OSError as error:
        raise InputError(Problem(file=text, message=f"cannot write: {error.strerror or error}")) from None
    partial.rmdir()


def write_review_dir(
    path: str | os.PathLike[str], files: Mapping[str, str | bytes], *, force: bool = False
) -> list[Path]:
    """Write ``files`` (name -> text or bytes; plain names, no directories) as the directory ``path``,
    atomically (module docstring). Returns the written paths, in the order given."""
    target = Path(os.fspath(path))
    for name in files:
        if not name or Path(name).name != name or name in (".", ".."):
            raise ValueError(f"not a plain file name: {name!r}")
    check_review_dir(target, force=force)
    partial = _partial_dir(target)
    aside = _aside_dir(target)
    partial.mkdir()
    try:
        for name, content in files.items():
            data = content.encode("utf-8") if isinstance(content, str) else content
            with (partial / name).open("xb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        if target.is_dir() and any(target.iterdir()):
            target.rename(aside)  # only reached with force (checked above)
        # rename() replaces an empty directory and fails on a non-empty one: nothing is overwritten by accident.
        partial.rename(target)
    finally:
        if partial.exists():
            shutil.rmtree(partial, ignore_errors=True)
        if aside.exists():
            if not target.exists():  # the new review did not land: put the old one back
                aside.rename(target)
            else:
                shutil.rmtree(aside, ignore_errors=True)
    return [target / name for name in files]
