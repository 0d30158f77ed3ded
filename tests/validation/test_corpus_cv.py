"""The engine profiles against the public measurement corpus (tests/benchmarks/corpus_cv.py prints every point).

The fitted terms in hardware_profiles/serving/engines/*.yaml must be what a refit of the corpus gives (run `python3
-m tests.benchmarks.corpus_cv --write` after the corpus changes), fitted on exactly the ids they name; the attention
efficiency (which the corpus's prompts, at most 8K tokens, cannot identify) and the KV handoff of a disaggregated
prefill (which no public benchmark of an aggregated server carries) are SGLang's fitted on the paper's Table 3
(alternated with the corpus fit until both settle) and the priors elsewhere. The cross-validated error is the
held-out one (leave-one-source-out, each fold redoing both fits without its source), over the measurements the
corpus does not exclude from fitting. The paper's Table 3 (source prfaas-paper-table3) is fitted by no corpus fit:
it is recovered from KV throughputs of a prefill instance whose KV is shipped, not an aggregated server's batch-1
latency, and on the one configuration also measured on such a server it is 2.1x the measured TTFT
(corpus_cv.PAPER_EXCLUDED). When written (124 fitted points from 14 public sources): held-out median factor
1.12-1.49 per engine and phase, 1.30 and 97 % within 2x overall; SGLang prefill 1.49 / 86 % and vLLM prefill (two
sources) 1.46 / 100 % miss the issue's per-engine median target (1.3x). The seventh gathering (159 points from 22
sources) added TensorRT-LLM issue 5929's DeepSeek-R1 on 8xH200 (trtllm-serve's PyTorch flow), which the profile
fitted on dense Llama engines prices 2-3x too fast and which, held in, prices the dense engine benchmarks too slow:
TensorRT-LLM prefill 1.87 / 58 %, decode 1.31 / 87 %, all 1.32 / 89 % (with the all-to-all fix of the same pass; under
the old all-to-all form, which overcharged its expert-parallel points, TensorRT-LLM prefill 1.39 / 68 %). The bounds
asserted are guards around those figures, not targets (TensorRT-LLM prefill's share within 2x is guarded at 50 %,
every other engine and phase at 70 %). The per-MoE-layer prefill cost that came next (same 159 points) gives
TensorRT-LLM prefill 1.22 / 89 %, vLLM prefill 1.19 / 100 %, SGLang prefill 1.37 / 77 %, all 1.21 / 92 %; the 50 %
guard was left as it was. With the GEMM scale and the routed experts' factor then shared by every engine:
TensorRT-LLM prefill 1.20 / 95 %, vLLM prefill 1.24 / 100 %, SGLang prefill 1.31 / 77 %, all 1.22 / 93 %, and
TensorRT-LLM prefill is guarded at 70 % like the rest again. Table 3 and Table 5 against
the shipped SGLang profile: tests/validation/test_table3.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from prfaas_plan.physics.corpus_fit import EngineFit, HeldOutPoint, factor_stats
from prfaas_plan.spec.engine import EngineProfile
from tests.benchmarks.corpus_cv import markdown, settled_study

pytestmark = pytest.mark.validation
Results = dict[str, tuple[EngineProfile, EngineFit, tuple[HeldOutPoint, ...]]]


@pytest.fixture(scope="module")
def settled_results() -> tuple[Results, dict[str, EngineProfile]]:
    return settled_study()


@pytest.fixture(scope="module")
def results(settled_results: tuple[Results, dict[str, EngineProfile]]) -> Results:
    return settled_results[0]


def test_fitted_profiles_are_a_refit_of_the_corpus(settled_results: tuple[Results, dict[str, EngineProfile]]) -> None:
    """Each engine profile's fitted terms equal a refit to their printed precision, on the ids they name; its
    attention efficiency and KV handoff are the settled ones (SGLang's from Table 3, the others' priors)."""
    from tests.benchmarks.corpus_cv import PAPER_SETUP, PAPER_SETUP_TERMS

    results, settled = settled_results
    for key, (engine, _, _) in results.items():
        for term in PAPER_SETUP_TERMS:
            shipped, prior = getattr(engine, term), dict(engine.priors)[term]
            assert shipped == pytest.approx(getattr(settled[key], term), rel=2e-3), (key, term)
            if key not in PAPER_SETUP:
                assert shipped == prior, (key, term)
            else:
                assert shipped != prior, (key, term)
    for key, (engine, fit, _) in results.items():
        assert set(engine.fitted) == set(fit.values), key
        assert engine.fitted_on == fit.fitted_on, key
        shipped = dict(engine.priors) | {t: getattr(engine, t) for t in fit.values}
        for term, value in fit.values.items():
            assert shipped[term] == pytest.approx(value, rel=2e-3, abs=1e-9), (key, term)


def test_held_out_error_per_engine_and_phase(results: Results) -> None:
    """Every engine and phase with points has a held-out median factor below 2 and 70 % of its points within 2x
    (TensorRT-LLM prefill was guarded at half from the seventh gathering until the shared GEMM rates); over all
    points a median below 1.45 and 85 % within 2x."""
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
    """The paper's 20 Table 3 cells are predicted by the SGLang profile and listed with the reason they are not in
    the corpus fit; no profile names them among its fitted ids."""
    from tests.benchmarks.corpus_cv import PAPER_EXCLUDED, PAPER_SOURCE

    paper = [p for _, _, points in results.values() for p in points if p.source == PAPER_SOURCE]
    assert len(paper) == 20 and all(p.engine == "sglang" and p.excluded == PAPER_EXCLUDED for p in paper)
    assert all(np.isfinite(p.ratio) and p.ratio > 0 for p in paper)
    for engine, _, _ in results.values():
        assert not any(i.startswith(PAPER_SOURCE) for i in engine.fitted_on), engine.key


def test_the_shipped_error_bands_are_those_of_this_cross_validation(results: Results) -> None:
    """hardware_profiles/serving/error_bands.yaml is what `python3 -m tests.benchmarks.error_bands --write` gives
    from this cross-validation (run it after a refit): every factor, count and measured range."""
    import yaml

    from tests.benchmarks.error_bands import OUT, bands

    assert yaml.safe_load(OUT.read_text()) == bands(results)
