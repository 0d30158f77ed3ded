"""cli.latency_render: the --rate/--load checks of optimize and evaluate."""

from __future__ import annotations

import pytest

from prfaas_plan.cli.latency_render import check_load_options
from prfaas_plan.errors import InputError
from tests.conftest import run_cli


@pytest.mark.parametrize(("rate", "load"), [(0.0, None), (None, 0.0), (-1.0, None), (None, float("nan"))])
def test_zero_negative_or_nan_load_is_refused_naming_the_flag(rate: float | None, load: float | None) -> None:
    with pytest.raises(InputError) as error:
        check_load_options(rate, load)
    assert str(error.value).startswith("--rate" if rate is not None else "--load")
    assert "> 0" in str(error.value)


def test_a_positive_rate_or_load_passes() -> None:
    check_load_options(0.5, None)
    check_load_options(None, 1e-9)


@pytest.mark.parametrize(
    "args",
    [
        ("optimize", "--load", "0"),
        ("optimize", "--rate", "0"),
        ("evaluate", "--threshold", "4000", "--n-pd-prefill", "3", "--n-pd-decode", "5", "--load", "0"),
    ],
)
def test_zero_load_through_the_cli_is_one_line_and_exit_2(args: tuple[str, ...]) -> None:
    """These ended in a ValueError traceback from the arrival process (rate 0)."""
    result = run_cli(*args)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().count("\n") == 0 and "must be a finite number > 0" in result.stderr
