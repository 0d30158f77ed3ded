"""cli.validate: option checks that must fail before minutes of timing."""

from __future__ import annotations

from pathlib import Path

import pytest

from prfaas_plan.cli.validate import _can_make_dir, _check_profile_out
from prfaas_plan.errors import InputError
from tests.conftest import run_cli


def test_a_negative_seed_is_a_usage_error_not_a_traceback() -> None:
    result = run_cli("validate", "kernel", "--seed", "-1")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "--seed" in result.stderr


def test_profile_out_under_proc_is_refused_before_timing() -> None:
    """/proc is a directory that root may "write" by its permission bits, yet no directory can be made in it:
    the check tries, and refuses at once (it used to time for half a minute, then end in FileNotFoundError)."""
    if not Path("/proc").is_dir():
        pytest.skip("no /proc here")
    assert not _can_make_dir(Path("/proc"))
    with pytest.raises(InputError, match="cannot create its directory"):
        _check_profile_out(Path("/proc/prfaas-plan-no-such-dir/x.yaml"))


def test_profile_out_in_a_new_directory_of_a_writable_one_passes_and_leaves_nothing(tmp_path: Path) -> None:
    _check_profile_out(tmp_path / "new" / "deeper" / "x.yaml")
    assert list(tmp_path.iterdir()) == []
