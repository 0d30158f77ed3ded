"""The windowed model's validity flag on a seeded subset of the generated traffic family
(``tests/validation/traffic_family.py``; the whole family and its confusion table:
``python3 -m tests.benchmarks.validity_domain``), on the judging seed set, not the one the rules were set on.

- Traffic the flag calls in domain (mild two-rate modulation, long prompts) has the closed form's P90 and P99
  TTFT within 20 % of the simulator's.
- Two rates 3x apart switching every 2 minutes at 50 % load (the miss of issue 21) is flagged for drift near
  capacity.
- Quantised timestamps (3 s buckets) are named in the reasons, and pricing them with each bucket spread over
  it lands within 20 % of the simulator run on the true arrival times.
"""

from __future__ import annotations

import pytest

from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.optimize import PlanEvaluation, search
from prfaas_plan.throughput import StageModel, stage_model
from tests.conftest import PAPER_SCENARIO
from tests.validation.traffic_family import JUDGING_SEED, TOLERANCE, CellResult, family, run_cell

pytestmark = pytest.mark.validation


@pytest.fixture(scope="module")
def paper() -> tuple[StageModel, PlanEvaluation]:
    model = stage_model(load_scenario(PAPER_SCENARIO))
    return model, search(model)


def _cell(paper: tuple[StageModel, PlanEvaluation], name: str, load: float) -> CellResult:
    pattern = next(p for p in family() if p.name == name)
    return run_cell(*paper, pattern, load, JUDGING_SEED, replications=2, n=4000)


def test_in_domain_cells_are_within_tolerance(paper: tuple[StageModel, PlanEvaluation]) -> None:
    """Each cell the flag calls in domain is within the tolerance, and at least one of these mild cells is in
    domain (a short trace can still show noise as drift: 4,000 requests here). Bimodal prompt lengths give the
    prefill pools a service-time cs² above 1, which the service-variability rule (``DOMAIN_MAX_SERVICE_SCV``,
    added after this test was written) puts out of domain: that cell was within the tolerance, so the rule is
    conservative there, and the test checks that it is the rule that flags it."""
    cells = [
        _cell(paper, name, load)
        for name, load in (("mmpp 1.5x 30s", 0.5), ("long lengths", 0.7), ("bimodal lengths", 0.5))
    ]
    for cell in cells:
        if cell.in_domain:
            assert cell.error <= TOLERANCE, (
                cell.pattern,
                cell.closed_p90_s,
                cell.sim_p90_s,
                cell.closed_p99_s,
                cell.sim_p99_s,
            )
    assert sum(cell.in_domain for cell in cells) >= 1, [cell.reasons for cell in cells]
    bimodal = cells[2]
    assert any("service times vary more" in r for r in bimodal.reasons), bimodal.reasons


def test_two_rates_switching_every_two_minutes_is_flagged(paper: tuple[StageModel, PlanEvaluation]) -> None:
    cell = _cell(paper, "mmpp 3x 120s", 0.5)
    assert not cell.in_domain
    assert any("load drifts" in r for r in cell.reasons), cell.reasons


def test_quantised_timestamps_are_named_and_priced_spread(paper: tuple[StageModel, PlanEvaluation]) -> None:
    cell = _cell(paper, "quantised 3s", 0.7)
    assert any("quantised to 3 s buckets" in r for r in cell.reasons), cell.reasons
    assert cell.error <= TOLERANCE, (cell.closed_p90_s, cell.sim_p90_s, cell.closed_p99_s, cell.sim_p99_s)
