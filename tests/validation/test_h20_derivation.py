"""The H20 prefill points in hardware_profiles/h20.yaml are derived, not measured: this re-derives them.

Digest §2.9: a quadratic T(l) = c0 + c1 l + c2 l^2 is fixed by three Table 6 figures, all linear in c:
    9 / T(E[L]) = 2.11          (homogeneous PD, 9 prefill instances, l_short = E[L] since p = 0)
    3 / T(E[L | L <= 19.4K]) = 1.64   (PrfaaS-PD's PD-P stage)
    E[T(L)] = 4.44 s            (homogeneous mean TTFT, zero load)
Solving that system with this package's length distribution must give the curve the profile file holds.
"""

from __future__ import annotations

import numpy as np
import pytest

from prfaas_plan.spec.scenario import Scenario
from prfaas_plan.throughput import StageModel

pytestmark = pytest.mark.validation


def test_h20_points_are_the_curve_backed_out_of_table6(paper_scenario: Scenario, paper_model: StageModel) -> None:
    """The fitted H20 curve equals the solution of the three Table 6 constraints within 1 % at 1K-128K."""
    lengths = paper_scenario.traffic.input_length
    mean = lengths.mean_tokens
    short = float(lengths.mean_below(19_400))
    second = float(lengths.partial_moment(2, lengths.lower_tokens - 1, lengths.upper_tokens))
    system = np.array([[1.0, mean, mean**2], [1.0, short, short**2], [1.0, mean, second]])
    rhs = np.array([9 / 2.11, 3 / 1.64, 4.44])
    coefficients = np.linalg.solve(system, rhs)
    assert paper_scenario.local.profile.prefill.provenance == "derived"
    for length in (1_000, 8_000, 32_000, 128_000):
        derived = coefficients @ np.array([1.0, length, length**2])
        assert float(paper_model.local_prefill(length)) == pytest.approx(derived, rel=0.01)
