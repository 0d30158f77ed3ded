"""The engine profiles against the public measurement corpus (tests/benchmarks/corpus_cv.py prints every point).

The fitted terms in hardware_profiles/serving/engines/*.yaml must be what a refit of the corpus gives (run `python3
-m tests.benchmarks.corpus_cv --write` after the corpus changes), fitted on exactly the ids they name. The cross-
validated error is the held-out one (leave-one-source-out), over the measurements the corpus does not exclude from
fitting. The paper's Table 3 (source prfaas-paper-table3) is predicted and reported but fitted by no profile: it is
recovered from KV throughputs with unstated batching and KV dtype, not a batch-1 latency, and on the one
configuration also measured directly it is 2.1x the measured TTFT (corpus_cv.PAPER_EXCLUDED). When written (115
fitted points from 13 public sources; 25 reported only: Table 3 and 5 excluded points): held-out median factor
1.12-1.66 per engine and phase, 1.29 and 93 % within 2x overall; SGLang prefill 1.60 / 80 % and vLLM prefill (one
source) 1.66 / 82 % miss the issue's per-engine targets (1.3x, 90 %). The bounds asserted are guards around those
figures, not targets. The SGLang profile prices Table 3 at 0.27-1.38 of the paper's implied times (median factor
2.45: the paper carries about 0.25 s more per request than every public SGLang source) and Table 5 (in-house vLLM)
at 0.34-0.79; the paper's own deployment is priced by the serving defaults fitted on it
(tests/validation/test_serving_fit.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from prfaas_plan.physics.corpus_fit import EngineFit, HeldOutPoint, factor_stats
from prfaas_plan.spec.engine import EngineProfile
from tests.benchmarks.corpus_cv import markdown, study

pytestmark = pytest.mark.validation
Results = dict[str, tuple[EngineProfile, EngineFit, tuple[HeldOutPoint, ...]]]


@pytest.fixture(scope="module")
def results() -> Results:
    return study()


def test_fitted_profiles_are_a_refit_of_the_corpus(results: Results) -> None:
    """Each engine profile's fitted terms equal a refit to their printed precision, on the ids they name."""
    for key, (engine, fit, _) in results.items():
        assert set(engine.fitted) == set(fit.values), key
        assert engine.fitted_on == fit.fitted_on, key
        shipped = dict(engine.priors) | {t: getattr(engine, t) for t in fit.values}
        for term, value in fit.values.items():
            assert shipped[term] == pytest.approx(value, rel=2e-3, abs=1e-9), (key, term)


def test_held_out_error_per_engine_and_phase(results: Results) -> None:
    """Every engine and phase with points has a held-out median factor below 2 and most points within 2x."""
    every = []
    for key, (_, _, points) in results.items():
        for phase in ("prefill", "decode"):
            ratios = [p.ratio for p in points if p.phase == phase and not p.excluded]
            if ratios:
                median, within = factor_stats(ratios)
                assert median < 2.0 and within >= 0.7, (key, phase, median, within)
                every += ratios
    median, within = factor_stats(every)
    assert median < 1.45 and within >= 0.85, (median, within)
    assert np.all(np.isfinite(every))


def test_report_lists_every_point(results: Results) -> None:
    """Every point is listed, the excluded ones marked and their reasons given."""
    text = markdown(results)
    n = sum(len(points) for _, _, points in results.values())
    assert text.count("\n| ") >= n and "## Every point" in text
    excluded = [p for _, _, points in results.values() for p in points if p.excluded]
    for p in excluded:
        assert f"| {p.id} (excluded) |" in text and p.excluded in text


def test_paper_table3_is_reported_and_fitted_by_no_profile(results: Results) -> None:
    """The paper's 20 Table 3 cells are predicted by the SGLang profile and listed with the reason they are not
    fitted; no profile names them among its fitted ids."""
    from tests.benchmarks.corpus_cv import PAPER_EXCLUDED, PAPER_SOURCE

    paper = [p for _, _, points in results.values() for p in points if p.source == PAPER_SOURCE]
    assert len(paper) == 20 and all(p.engine == "sglang" and p.excluded == PAPER_EXCLUDED for p in paper)
    assert all(np.isfinite(p.ratio) and p.ratio > 0 for p in paper)
    for engine, _, _ in results.values():
        assert not any(i.startswith(PAPER_SOURCE) for i in engine.fitted_on), engine.key
