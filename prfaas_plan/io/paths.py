"""Where the built-in inputs live, and how a path is shown in messages."""

from __future__ import annotations

from pathlib import Path


def builtin_root() -> Path:
    """Where the built-in ``workloads/`` and ``hardware_profiles/`` live: inside the installed wheel, or the
    repository root when running from a source checkout."""
    packaged = Path(__file__).resolve().parents[1] / "_builtin"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2]


def display_path(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it (shorter messages), else as given
    (also when the working directory has been deleted, or a path cannot be resolved)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError, RuntimeError):  # OSError: no working directory; RuntimeError: a symlink loop
        return str(path)
