"""The held-out measurements (hardware_profiles/serving/corpus/held-out-measurements.yaml) stay apart from the fit.

They were found after the engine profiles were fitted and are an out-of-sample check of them
(``tests/benchmarks/corpus_cv.py``, its section "Held out of every fit"): so no profile may name one among the
measurements it was fitted on, and no id or source may also be in the corpus the fit reads.
"""

from __future__ import annotations

import math

import pytest
import yaml

from prfaas_plan.io.engine_profile import CORPUS_FILE, HELD_OUT_FILE, engines_dir, load_corpus
from tests.conftest import REPO

HELD_OUT = REPO.joinpath(*HELD_OUT_FILE)
CORPUS = REPO.joinpath(*CORPUS_FILE)


def test_held_out_measurements_load_and_share_nothing_with_the_corpus() -> None:
    held_out = load_corpus(HELD_OUT)
    corpus = load_corpus(CORPUS)
    assert held_out, "the held-out file holds no measurement"
    assert not {m.id for m in held_out} & {m.id for m in corpus}
    assert not {m.source for m in held_out} & {m.source for m in corpus}


def test_no_engine_profile_was_fitted_on_a_held_out_measurement() -> None:
    held_out = {m.id for m in load_corpus(HELD_OUT)}
    corpus = {m.id for m in load_corpus(CORPUS)}
    profiles = sorted(engines_dir().glob("*.yaml"))
    fitted = 0
    for path in profiles:
        fit = (yaml.safe_load(path.read_text()) or {}).get("fit") or {}
        fitted_on = set(fit.get("fitted_on") or ())
        fitted += bool(fitted_on)
        assert not fitted_on & held_out, f"{path.name} was fitted on held-out measurements"
        assert fitted_on <= corpus, f"{path.name} names fitted measurements that are not in the corpus"
    assert fitted, "no engine profile records a fit: the check above checked nothing"


def test_every_held_out_source_is_documented() -> None:
    sources = (REPO / "hardware_profiles" / "serving" / "corpus" / "SOURCES.md").read_text()
    for source in {m.source for m in load_corpus(HELD_OUT)}:
        assert f"## {source}" in sources, f"{source} has no section in SOURCES.md"


def test_the_out_of_sample_check_prices_every_held_out_point() -> None:
    from tests.benchmarks.corpus_cv import held_out_checks, held_out_markdown

    checks = held_out_checks()
    assert len(checks) == len(load_corpus(HELD_OUT))
    for c in checks:
        assert math.isfinite(c.predicted_s) and c.predicted_s > 0, c.id
        assert c.band_factor >= 1.0, c.id
    report = held_out_markdown(checks)
    assert all(c.id in report for c in checks)


def test_every_held_out_source_says_which_fit_it_was_found_after() -> None:
    """A held-out batch is judged apart (corpus_cv prints one row per ``found_after``), so every source names the
    commit of the fit it was found after, and every batch shows up in the report."""
    from tests.benchmarks.corpus_cv import found_after, held_out_checks, held_out_markdown

    found = found_after(HELD_OUT)
    sources = {m.source for m in load_corpus(HELD_OUT)}
    assert sources <= set(found)
    for source in sources:
        commit = found[source]
        assert len(commit) >= 7 and all(ch in "0123456789abcdef" for ch in commit), (source, commit)
    report = held_out_markdown(held_out_checks())
    for commit in set(found.values()):
        assert f"| found after {commit} |" in report


def test_every_found_after_names_a_commit_of_this_repository() -> None:
    """Where the repository's history is at hand, each ``found_after`` resolves to one of its commits (a typo
    that is still hexadecimal would pass the format check)."""
    import shutil
    import subprocess

    from tests.benchmarks.corpus_cv import found_after

    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("no git history here (an installed copy): nothing to resolve the commits against")
    shallow = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--is-shallow-repository"], capture_output=True, text=True, check=False
    )
    if shallow.returncode != 0 or shallow.stdout.strip() != "false":
        pytest.skip("a shallow or unreadable clone: older commits may be missing from it")
    for source, commit in found_after(HELD_OUT).items():
        done = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, f"{source}: found_after {commit} is not a commit of this repository"


def test_contradictions_pair_a_more_demanding_prefill_timed_faster() -> None:
    """The corpus report's contradicting pairs: the same prefill configuration as priced where the point with at least
    as many tokens (and the per-request cost where the other pays it, a KV dtype no narrower) was timed faster.
    Another GPU count, a shorter prompt timed faster, or a point kept out of the fit makes no pair."""
    from dataclasses import replace

    from prfaas_plan.spec.engine import CorpusMeasurement
    from tests.benchmarks.corpus_cv import contradictions

    base = CorpusMeasurement(
        id="a", source="one", engine="sglang", engine_version="x", model="deepseek-v3", hardware="h200", gpus=8,
        tensor_parallel=8, expert_parallel=1, weights_dtype="fp8", kv_dtype="bf16", cuda_graphs=None,
        phase="prefill", batch=1, tokens=600.0, measured_s=0.16,
    )  # fmt: skip
    longer_faster = replace(base, id="b", source="two", tokens=1_000.0, measured_s=0.10)
    engine_only = replace(
        base, id="c", source="three", tokens=1_000.0, measured_s=0.09, includes_request_overhead=False
    )
    other_gpus = replace(longer_faster, id="d", gpus=4, tensor_parallel=4, measured_s=0.05)
    shorter_faster = replace(base, id="e", tokens=300.0, measured_s=0.08)  # faster than a and b, and shorter
    excluded = replace(longer_faster, id="f", measured_s=0.01, exclude_from_fit="served from a cache")
    pairs = contradictions([base, longer_faster, engine_only, other_gpus, shorter_faster, excluded])
    assert {(slow.id, fast.id) for slow, fast in pairs} == {("a", "b")}
    # The engine-only timing skips the per-request cost, so the served one may take longer without contradiction,
    # but not the other way round.
    served_slower = replace(base, id="g", tokens=1_000.0, measured_s=0.5)
    engine_only_slow = replace(engine_only, tokens=500.0, measured_s=0.6)
    pairs = contradictions([served_slower, engine_only_slow])
    assert {(slow.id, fast.id) for slow, fast in pairs} == {("c", "g")}
    # An FP8 KV cache prices attention faster, so a faster FP8-KV point contradicts no BF16 one; EP 4 and EP 8 on 8
    # GPUs are priced alike, so they pair.
    fp8_kv = replace(longer_faster, id="h", kv_dtype="fp8")
    assert not contradictions([base, fp8_kv])
    ep4, ep8 = replace(base, id="i", expert_parallel=4), replace(longer_faster, id="j", expert_parallel=8)
    assert {(slow.id, fast.id) for slow, fast in contradictions([ep4, ep8])} == {("i", "j")}
