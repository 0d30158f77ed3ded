"""The scipy-free Student-t quantile behind every confidence interval agrees with scipy's."""

from __future__ import annotations

import pytest
from scipy.stats import t as student_t

from prfaas_plan.sim.summary import student_t_quantile


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 9, 19, 49, 199])
def test_t_quantile_matches_scipy_at_the_interval_level(df: int) -> None:
    """Exact for df 1 and 2; within 0.8 % for df >= 3 at the 0.975 level used for 95 % intervals."""
    exact = float(student_t.ppf(0.975, df))
    tolerance = 1e-12 if df <= 2 else 0.008
    assert student_t_quantile(0.975, df) == pytest.approx(exact, rel=tolerance)
