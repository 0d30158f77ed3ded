"""The engine profiles against the public measurement corpus (tests/benchmarks/corpus_cv.py prints every point).

The fitted terms in hardware_profiles/serving/engines/*.yaml must be what a refit of the corpus gives (run
`python3 tests/benchmarks/corpus_cv.py --write` after the corpus changes), fitted on exactly the ids they name.
SGLang's fit includes the paper's Table 3 (source prfaas-paper-table3). The cross-validated error is the held-out
one (leave-one-source-out), over the measurements the corpus does not exclude from fitting. When written (69
fitted points and 1 excluded, 11 sources): held-out median factor 1.18-2.06 per engine and phase, 77 % of points
within 2x overall, short of the issue's targets (1.3x, 90 %); the bounds asserted are loose guards around those
figures, not targets. Table 3 by the SGLang profile is in-sample (median 1.20, worst 1.52); Table 5 (in-house
vLLM, not fitted by any engine) is out of sample (0.84-1.16).
"""

from __future__ import annotations

import numpy as np
import pytest

from prfaas_plan.physics.corpus_fit import EngineFit, HeldOutPoint, factor_stats
from prfaas_plan.spec.hardware import EngineProfile
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
                assert median < 2.5 and within >= 0.3, (key, phase, median, within)
                every += ratios
    median, within = factor_stats(every)
    assert median < 1.9 and within >= 0.7, (median, within)
    assert np.all(np.isfinite(every))


def test_report_lists_every_point(results: Results) -> None:
    """Every point is listed, the excluded ones marked and their reasons given."""
    text = markdown(results)
    n = sum(len(points) for _, _, points in results.values())
    assert text.count("\n| ") >= n and "## Every point" in text
    excluded = [p for _, _, points in results.values() for p in points if p.excluded]
    for p in excluded:
        assert f"| {p.id} (excluded) |" in text and p.excluded in text


def test_sglang_profile_reproduces_tables_3_and_5() -> None:
    """The SGLang profile on the paper's points (8xH200): Table 3 (fitted: in-sample) median factor within 1.3
    and every cell within 2x; Table 5 (the 1T hybrid, fitted by no engine) within 2x."""
    from prfaas_plan.io.engine_profile import load_named_engine
    from prfaas_plan.physics.engine import engine_params
    from prfaas_plan.physics.prefill import prefill_seconds
    from tests.benchmarks.serving_roofline import TABLE5_MODEL, load_defaults, load_observations

    params = engine_params(load_named_engine("sglang"), "hopper")
    table3: list[float] = []
    table5: list[float] = []
    for obs in load_observations(load_defaults()):
        ratios = prefill_seconds(obs.arch, obs.instance, params, np.asarray(obs.lengths_tokens)) / np.asarray(
            obs.measured_s
        )
        (table5 if obs.model == TABLE5_MODEL else table3).extend(ratios)
    f3, f5 = (np.exp(np.abs(np.log(np.asarray(r)))) for r in (table3, table5))
    assert len(f3) == 20 and len(f5) == 4
    assert float(np.median(f3)) < 1.3 and np.all(f3 < 2.0), f3
    assert np.all(f5 < 2.0), f5
