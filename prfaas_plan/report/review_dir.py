"""Writing a review directory through ``report.files.write_dir``: every file is written into a temporary sibling
directory, which then takes the target's place in one step, so that a reader (or an interrupted run) never sees
half a review; the commit holds the output's lock, so two reviews on one directory never both succeed.

Every review directory carries a marker file (``OWNER.marker_name``). An existing non-empty directory is
replaced only when it has the marker and ``force`` is given; any other directory (no marker) is never touched,
``force`` or not; a link, a file, a device or a FIFO in its place is refused.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from prfaas_plan.report.files import DirOwner, check_dir, write_dir

#: How a review directory is recognised: a ``.prfaas-plan`` file inside whose first line says so.
OWNER = DirOwner(what="a review directory of prfaas-plan", marker_text="prfaas-plan review directory\n")


def check_review_dir(path: str | os.PathLike[str], *, force: bool = False) -> None:
    """Check, before any work, that a review directory can be written at ``path`` (``report.files.check_dir``).
    Raises InputError naming the path."""
    check_dir(path, owner=OWNER, force=force)


def write_review_dir(
    path: str | os.PathLike[str], files: Mapping[str, str | bytes], *, force: bool = False
) -> list[Path]:
    """Write ``files`` (name -> text or bytes; plain names, no directories) as the directory ``path``,
    atomically (module docstring). Returns the written paths, in the order given."""
    return write_dir(path, files, owner=OWNER, force=force)
