"""The engine profiles against the public measurement corpus, cross-validated: prints every point's ratio.

Each engine's fitted terms (``physics.corpus_fit.FIT_TERMS``) are fitted on that engine's measurements in
``hardware_profiles/serving/corpus/public-measurements.yaml``; each source's points are predicted by terms fitted
without that source (leave-one-source-out). The held-out ratios are the error to quote; the in-sample column is
what the shipped profile (fitted on everything) gives, which is not a validation.

The measurements of ``held-out-measurements.yaml`` (found after the profiles were fitted) are fitted by nothing:
the report's last section predicts them with the profiles as shipped (an out-of-sample check) and says whether
each lies inside its engine's error band and whether ``kv`` would have flagged it as outside the band's domain.

Run: python3 tests/benchmarks/corpus_cv.py                  (the report, Markdown)
     python3 tests/benchmarks/corpus_cv.py --write          (also record the all-source fit in the engine profiles,
                                                            and rewrite their stored parses)
     python3 tests/benchmarks/corpus_cv.py --with-paper     (a report only: SGLang also fitted on Table 3)
     python3 tests/benchmarks/corpus_cv.py --with-held-out  (a report only: the held-out measurements fitted too)
     python3 tests/benchmarks/corpus_cv.py --moe-prior S    (a report only: every engine's per-MoE-layer prefill
                                                            cost drawn to a prior of S seconds)

The paper's Table 3 is predicted and reported beside the corpus but fitted by no corpus fit (``PAPER_EXCLUDED``).
Read as the times of a disaggregated prefill instance until its KV is handed off, its 20 cells set SGLang's
attention efficiency (which the corpus, at most 8K tokens, cannot identify) and KV handoff (which no public
benchmark of an aggregated server carries) alone (``paper_setup_terms``), so those cells are a consistency check;
the paper's Table 5 (in-house vLLM, another model, not fitted) checks the handoff, though not the attention
efficiency, which it cannot tell apart (tests/validation/test_table3.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
if sys.path[:1] != [str(REPO)]:  # run as a script from anywhere, ahead of any installed top-level `tests`
    sys.path.insert(0, str(REPO))

from prfaas_plan._frozen import frozen  # noqa: E402
from prfaas_plan.io.engine_profile import (  # noqa: E402
    CORPUS_FILE,
    HELD_OUT_FILE,
    engines_dir,
    load_corpus,
    load_generations,
    load_named_engine,
)
from prfaas_plan.io.names import load_named_hardware, load_named_model  # noqa: E402
from prfaas_plan.physics.corpus_fit import (  # noqa: E402
    CORPUS_TERMS,
    CorpusCase,
    EngineFit,
    HeldOutPoint,
    cross_validate_corpus,
    factor_stats,
    fit_corpus,
    fit_engine,
    fitted_cases,
    predict,
)
from prfaas_plan.physics.engine import with_dtypes  # noqa: E402
from prfaas_plan.physics.roofline import Instance  # noqa: E402
from prfaas_plan.spec.engine import CorpusMeasurement, EngineProfile  # noqa: E402

CORPUS = REPO.joinpath(*CORPUS_FILE)
HELD_OUT = REPO.joinpath(*HELD_OUT_FILE)
ENGINES = ("sglang", "vllm", "trtllm")
#: A fitted term below this is solver round-off at its lower bound of 0 (a picosecond, for the terms in seconds; the
#: smallest fitted term away from the bound is 5.7e-06 s, TensorRT-LLM's per-kernel decode cost): ``write_engine_fit``
#: writes it as 0.
ROUND_OFF = 1e-12


def _edit_profile(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Apply ``edit`` to an engine profile's data and write it back, keeping the file's leading comment lines."""
    text = path.read_text()
    header = "".join(line for line in text.splitlines(keepends=True)[:20] if line.startswith("#"))
    data: dict[str, Any] = yaml.safe_load(text)
    edit(data)
    path.write_text(header + yaml.safe_dump(data, sort_keys=False, width=110, allow_unicode=True))


def write_engine_fit(
    path: Path, values: Mapping[str, float], fitted_on: Sequence[str], corpus: str, source: str
) -> None:
    """Record a fit in an engine profile: each fitted term's ``value`` (``gemm_efficiency_scale`` is the GEMM
    table's ``scale``, ``overhead_scale_<generation>`` that generation's entry of ``overhead_scale``), and the
    ``fit`` section naming the terms, the corpus ids fitted on and the corpus; the file's leading comment lines
    are kept."""

    def edit(data: dict[str, Any]) -> None:
        for term, value in values.items():
            if term == "gemm_efficiency_scale":
                data["gemm_efficiency"]["scale"] = round(float(value), 4)
            elif term == "expert_gemm_scale":
                data["gemm_efficiency"]["expert_scale"] = round(float(value), 4)
            elif term.startswith("overhead_scale_"):
                data["overhead_scale"][term.removeprefix("overhead_scale_")]["value"] = round(float(value), 4)
            else:
                # A term the fit drove to its lower bound of 0 is written as 0, not as solver round-off.
                data["terms"][term]["value"] = float(f"{float(value):.4g}") if abs(value) >= ROUND_OFF else 0.0
        data["fit"] = {"source": source, "corpus": corpus, "fitted": list(values), "fitted_on": list(fitted_on)}

    _edit_profile(path, edit)


def write_engine_term(path: Path, term: str, value: float, source: str) -> None:
    """Set one term's ``value`` and ``source`` in an engine profile (a term set apart from the corpus fit); the
    file's leading comment lines are kept."""

    def edit(data: dict[str, Any]) -> None:
        data["terms"][term]["value"] = float(f"{float(value):.4g}")
        data["terms"][term]["source"] = source

    _edit_profile(path, edit)


def _dtype(name: str) -> str | None:
    return None if name == "unknown" else ("bf16" if name == "fp16" else name)


def _priced_dtypes(m: CorpusMeasurement) -> tuple[str | None, str | None]:
    """The weights' and routed experts' dtypes a measurement is priced in (None: the card's)."""
    return _dtype(m.weights_dtype), (_dtype(m.experts_dtype) if m.experts_dtype else None)


def instance_gpus(m: CorpusMeasurement) -> int:
    """The GPUs of the instance that serves one request: the tensor- or expert-parallel group."""
    return max(m.tensor_parallel, m.expert_parallel)


def case_of(m: CorpusMeasurement, generations: dict[str, str]) -> CorpusCase:
    """A measurement with its card (served in the measured dtypes; ``unknown`` keeps the card's, fp16 is priced
    as bf16), its instance (the tensor- or expert-parallel group that serves one request) and generation. A
    measurement that does not say whether CUDA graphs were on is priced with them (the engines' default)."""
    card = load_named_model(m.model)
    assert card.architecture is not None, m.model
    weights, experts = _priced_dtypes(m)
    arch = with_dtypes(card.architecture, weights, _dtype(m.kv_dtype), experts)
    accelerator = load_named_hardware(m.hardware).accelerator
    instance = Instance(accelerator=accelerator, gpus=instance_gpus(m))
    measurement = m if m.cuda_graphs is not None else replace(m, cuda_graphs=True)
    return CorpusCase(
        measurement=measurement, arch=arch, instance=instance, generation=generations.get(m.hardware, "other")
    )


#: Why Table 3 is not in the corpus fit: it fails the corpus's rule for a prefill point (a latency of an
#: aggregated server at batch 1) and carries a per-request time no public benchmark shows. The 2.4 % below is
#: `prfaas-plan kv --model qwen3.5-397b-a17b --hardware h200 --gpus 8 --engine sglang --length 610` (0.142 s)
#: against `--length 1000` (0.146 s) with the shipped SGLang profile; a refit can move it.
PAPER_EXCLUDED = (
    "not an aggregated server's latency: recovered as S_kv / Phi_kv from Table 3's KV throughputs, the time of a "
    "prefill instance whose KV is shipped (the paper states neither the batching nor the KV dtype behind them); "
    "on the one configuration also measured on an aggregated server (Qwen3.5-397B BF16, 8xH200, SGLang, 1K) the "
    "implied time 0.43 s is 2.1x the SGLang Cookbook's median TTFT at concurrency 1 (0.21 s, "
    "sgl-cookbook-qwen3.5-h200, whose prompts averaged 610 tokens, not 1K: SGLang's profile prices 1K only 2.4 % "
    "above 610, its fixed costs dominating). Priced with SGLang's KV handoff; its 20 cells are what "
    "SGLang's attention efficiency and KV handoff are fitted on alone (paper_setup_terms), so its ratio is a "
    "consistency check"
)


def paper_cases(generations: dict[str, str], *, fitted: bool = False) -> list[CorpusCase]:
    """The paper's Table 3 (SGLang v0.5.9 on 8xH200, five public models, batch-1 prefill latencies recovered
    from its KV throughputs: hardware_profiles/serving/defaults.yaml) as SGLang measurements of one source,
    ``prfaas-paper-table3``; the cards' dtypes as published. Table 5 (in-house vLLM, an inferred card) is left
    out: it is neither SGLang nor a public model."""
    from tests.benchmarks.serving_roofline import TABLE5_MODEL, load_defaults, load_observations

    out = []
    for obs in load_observations(load_defaults()):
        if obs.model == TABLE5_MODEL:
            continue
        for length, seconds in zip(obs.lengths_tokens, obs.measured_s, strict=True):
            m = CorpusMeasurement(
                id=f"prfaas-paper-table3-{obs.model}-{length / 1000:g}k",
                source=PAPER_SOURCE,
                engine="sglang",
                engine_version="0.5.9",
                model=obs.model,
                hardware=obs.instance.accelerator.key,
                gpus=obs.instance.gpus,
                tensor_parallel=obs.instance.gpus,
                expert_parallel=1,
                weights_dtype=obs.arch.dtypes.weights,
                kv_dtype=obs.arch.dtypes.kv_cache,
                cuda_graphs=True,
                phase="prefill",
                batch=1,
                tokens=length,
                measured_s=seconds,
                metric="single-request prefill latency until the KV is handed off, S_kv / Phi_kv of Table 3",
                exclude_from_fit="" if fitted else PAPER_EXCLUDED,
                disaggregated=True,
            )
            out.append(
                CorpusCase(
                    measurement=m,
                    arch=obs.arch,
                    instance=obs.instance,
                    generation=generations.get(m.hardware, "other"),
                )
            )
    return out


PAPER_SOURCE = "prfaas-paper-table3"


Results = dict[str, tuple[EngineProfile, EngineFit, tuple[HeldOutPoint, ...]]]


def study(corpus: Path = CORPUS, *, fit_paper: bool = False) -> Results:
    """Per engine: its profile as shipped, the fit on all its measurements and every held-out point
    (``settled_study``)."""
    return settled_study(corpus, fit_paper=fit_paper)[0]


def settled_study(
    corpus: Path = CORPUS, *, fit_paper: bool = False, also: Path | None = None, moe_prior: float | None = None
) -> tuple[Results, dict[str, EngineProfile]]:
    """Per engine: its profile as shipped, the corpus fit on all its measurements and every held-out point, each
    fold redoing the corpus fit and, where the engine has evidence from the paper's setup, that fit without its
    source (``settled_fit``); and the profiles with the all-source fits applied (what ``--write`` ships). The
    paper's Table 3 is predicted beside them, in the corpus fit only where ``fit_paper`` is true (a report,
    never written; the paper-setup terms then stay at their priors)."""
    generations = load_generations()
    cases = [case_of(m, generations) for m in load_corpus(corpus)]
    if also is not None:  # more measurements fitted as corpus sources (``--with-held-out``: a report only)
        cases += [case_of(m, generations) for m in load_corpus(also)]
    cases += paper_cases(generations, fitted=fit_paper)
    shipped = {key: load_named_engine(key) for key in ENGINES if any(c.measurement.engine == key for c in cases)}
    priors = {key: _priors(e) for key, e in shipped.items()}
    if moe_prior is not None:  # every engine's per-MoE-layer prefill cost started from, and drawn to, this prior
        priors = {key: replace(e, prefill_moe_layer_overhead_s=moe_prior) for key, e in priors.items()}
    settled: dict[str, EngineProfile] = {}

    def fold(keep: Sequence[CorpusCase], held_out: str | None) -> tuple[dict[str, EngineFit], dict[str, EngineProfile]]:
        # With Table 3 in the corpus fit (``fit_paper``), the paper-setup terms stay at their priors: the same cells
        # are not fitted twice.
        setup = held_out != PAPER_SOURCE and not fit_paper
        fits, engines = settled_fit(keep, priors, generations, paper_setup=setup)
        if held_out is None:
            settled.update(engines)
        return fits, engines

    fits, points = cross_validate_corpus(cases, priors, fold_fit=fold)
    results = {key: (e, fits[key], tuple(p for p in points if p.engine == key)) for key, e in shipped.items()}
    return results, settled


#: The terms the paper's setup sets apart from the corpus fit (``paper_setup_terms``): the attention efficiency
#: (the corpus's prompts, at most 8K tokens but one benchmark's two dense Llama prompts, spend at most about a
#: quarter of their kernel time in attention and cannot identify it) and the KV handoff (no public benchmark of an
#: aggregated server carries it).
PAPER_SETUP_TERMS = ("attention_efficiency", "kv_handoff_s")


def _priors(engine: EngineProfile) -> EngineProfile:
    """The profile with its fitted terms (``CORPUS_TERMS`` and ``PAPER_SETUP_TERMS``) back at their priors (the
    profile's ``prior:`` of each term): what a refit starts from and is regularised towards."""
    values: dict[str, Any] = {
        t: v
        for t, v in engine.priors
        if (t in CORPUS_TERMS or t in PAPER_SETUP_TERMS) and not t.startswith("overhead_scale_")
    }
    scales = [(t.removeprefix("overhead_scale_"), v) for t, v in engine.priors if t.startswith("overhead_scale_")]
    return replace(engine, overhead_scale=tuple(scales), **values)


#: At most this many alternations of the corpus fit and the paper-setup fit (``settled_fit``); they stop when no
#: paper-setup term moves by a share of ``SETTLED`` or more. 0.1 %: the corpus fit keeps the best of three starts,
#: and near a tie between two of them the alternation can cycle at the solver's precision (SGLang's attention
#: efficiency 0.51021 and 0.51030 in turn, a 2e-4 share, in one fold after the seventh gathering), below any figure
#: the report prints.
SETTLE_ROUNDS = 40
SETTLED = 1e-3


def settled_fit(
    cases: Sequence[CorpusCase],
    priors: dict[str, EngineProfile],
    generations: dict[str, str],
    *,
    paper_setup: bool = True,
) -> tuple[dict[str, EngineFit], dict[str, EngineProfile]]:
    """The corpus fit of ``cases`` (``fit_corpus``, the terms' priors from ``priors``) and each engine's
    ``PAPER_SETUP_TERMS`` from the paper's setup (``paper_setup_terms``; kept at their priors without
    ``paper_setup`` or without evidence), alternated from the priors until those settle (the two fits depend on
    each other). The fitted terms and the profiles with both applied."""
    setup = {k: {t: float(getattr(e, t)) for t in PAPER_SETUP_TERMS} for k, e in priors.items()}
    for _ in range(SETTLE_ROUNDS):
        current = {k: replace(e, **setup[k]) for k, e in priors.items()}
        fits = fit_corpus(cases, current) if fitted_cases(cases) else {}
        engines = {k: fits[k].apply(e) if k in fits else e for k, e in current.items()}
        found = {k: paper_setup_terms(e, generations) if paper_setup else None for k, e in engines.items()}
        moved = {
            k: v
            for k, v in found.items()
            if v is not None and any(_moved(v[t], setup[k][t]) for t in PAPER_SETUP_TERMS)
        }
        if not moved:
            return fits, engines
        for k, v in moved.items():
            setup[k].update(v)
    raise RuntimeError(f"the corpus and paper-setup fits did not settle in {SETTLE_ROUNDS} rounds")


def _moved(new: float, old: float) -> bool:
    """Whether a term moved by a share of ``SETTLED`` or more (of 1 ms for a term near 0 s)."""
    return abs(new - old) >= SETTLED * max(abs(old), 1e-3)


#: The engines with evidence from the paper's setup: the paper's Table 3 (SGLang v0.5.9 on 8xH200, all 20
#: cells). vLLM and TensorRT-LLM have none and keep the priors.
PAPER_SETUP = ("sglang",)
ATTENTION_SOURCE = (
    "fitted with kv_handoff_s on the paper's Table 3 (SGLang v0.5.9, 8xH200, five public models, 1K-128K: the "
    "only SGLang timings of prompts of 32K and more found but one benchmark's two dense Llama-3.1-70B prompts), "
    "alternated with the corpus fit of the other terms until both settle (tests/benchmarks/corpus_cv.py, "
    "settled_fit; each cross-validation fold redoes both without its source). Not from the public corpus, whose "
    "prompts (at most 8K tokens but those two) spend at most about a quarter of their kernel time in attention "
    "and cannot tell it from the GEMM rate. The cells are S_kv / "
    "Phi_kv with the KV dtype (BF16 assumed) and batching unstated, so they are a consistency check of this "
    "term (the paper's Table 5, which checks the KV handoff, cannot tell this term: it passes at 0.2 and at the "
    "prior). Prior: "
    "FlashAttention-3 causal BF16 forward on H100 at long context (hardware_profiles/serving/defaults.yaml "
    "kernel_shapes)"
)
NO_ATTENTION_SOURCE = (
    "prior, not fitted: FlashAttention-3 causal BF16 forward on H100 at long context (hardware_profiles/serving/"
    "defaults.yaml kernel_shapes). The corpus's prompts of this engine (at most 8K tokens) spend at most about a "
    "quarter of their kernel time in attention and cannot identify it, and no long-prompt timing of it was found: "
    "prompts of 32K and more are priced by extrapolation (kv flags them)"
)
HANDOFF_SOURCE = (
    "fitted with attention_efficiency on the paper's Table 3 (SGLang v0.5.9, 8xH200, five public models), read as "
    "the times of a PD-disaggregated prefill instance until its KV is handed to the decode side: at 1K they "
    "exceed the public aggregated-server benchmarks of the same engine and models by 0.2-0.3 s per request (the "
    "SGLang Cookbook's Qwen3.5-397B on 8xH200 at concurrency 1: 0.21 s at 610 tokens against 0.43 s). The "
    "paper does not say how it timed them, so the reading is ours: a wait (bootstrap with the decode instance, "
    "the send of the last layers), which kv adds to T_prefill in Phi_kv and the planner's prefill curves leave "
    "out. The paper's Table 5 (in-house vLLM, another model, not fitted) shows the same size, as the paper-fit "
    "serving defaults' 0.297 s per request fitted on both tables already did. Prior: assumed, "
    "tens of milliseconds (an RDMA handshake and one layer's send)"
)
NO_HANDOFF_SOURCE = (
    "assumed prior, not measured: tens of milliseconds per request (an RDMA handshake and one layer's send); no "
    "timing of this engine's disaggregated prefill was found (SGLang's, fitted on the paper's Table 3, is about "
    "0.3 s)"
)


def paper_setup_terms(engine: EngineProfile, generations: dict[str, str]) -> dict[str, float] | None:
    """``PAPER_SETUP_TERMS`` of ``engine`` (its other terms as given) fitted on its evidence from the paper's
    setup (``PAPER_SETUP``: all of Table 3's cells), from the YAML priors; None where it has none."""
    if engine.key not in PAPER_SETUP:
        return None
    cells = paper_cases(generations, fitted=True)
    start = replace(engine, **{t: v for t, v in engine.priors if t in PAPER_SETUP_TERMS})
    fit = fit_engine(cells, start, terms=PAPER_SETUP_TERMS)
    return {t: fit.values[t] for t in PAPER_SETUP_TERMS}


def markdown(results: Results | None = None) -> str:
    """The cross-validation table per engine and phase (over the measurements the corpus does not exclude from
    fitting), the exclusions with their reasons, then every point."""
    results = results if results is not None else study()
    lines = [
        "## Leave-one-source-out cross-validation (held-out predicted / measured)",
        "",
        "| engine | phase | points | sources | median factor | within 2x |",
        "|---|---|---|---|---|---|",
    ]
    for key, (_, _, points) in results.items():
        for phase in ("prefill", "decode"):
            mine = [p for p in points if p.phase == phase and not p.excluded]
            if not mine:
                continue
            median, within = factor_stats([p.ratio for p in mine])
            sources = len({p.source for p in mine})
            lines.append(f"| {key} | {phase} | {len(mine)} | {sources} | {median:.2f} | {within:.0%} |")
    every = [p for _, _, pts in results.values() for p in pts]
    kept = [p for p in every if not p.excluded]
    median, within = factor_stats([p.ratio for p in kept])
    lines.append(f"| all | both | {len(kept)} | | {median:.2f} | {within:.0%} |")
    excluded = [p for p in every if p.excluded]
    if excluded:
        lines += ["", "## Excluded from every fit (predicted, not counted above)", ""]
        lines += [f"- {p.id}: ratio {p.ratio:.2f}; {p.excluded}" for p in excluded]
    lines += ["", "## Fitted terms (all sources)", ""]
    for key, (engine, fit, _) in results.items():
        terms = ", ".join(f"{t} {fit.values[t]:.4g}" for t in CORPUS_TERMS if t in fit.values)
        setup = ", ".join(f"{t} {getattr(engine, t):.4g}" for t in PAPER_SETUP_TERMS)
        lines.append(f"- {key}: {terms}; {setup} (not corpus-fitted)")
    lines += ["", "## Every point", "", "| id | source | phase | measured s | held-out ratio | in-sample ratio |"]
    lines.append("|---|---|---|---|---|---|")
    for p in every:
        mark = " (excluded)" if p.excluded else ""
        lines.append(
            f"| {p.id}{mark} | {p.source} | {p.phase} | {p.measured_s:.4g} | {p.ratio:.2f} | "
            f"{p.in_sample_s / p.measured_s:.2f} |"
        )
    return "\n".join(lines)


def _priced_configuration(m: CorpusMeasurement) -> tuple[object, ...]:
    """What ``case_of`` and the fit price a prefill's configuration by, but its length, request cost, handoff and KV
    dtype: engine, model, hardware, the instance's GPUs (``instance_gpus``), whether experts are parallel (as
    ``corpus_fit.case_params`` reads it), and the weights' and experts' dtypes as priced (``_priced_dtypes``)."""
    return (m.engine, m.model, m.hardware, instance_gpus(m), m.expert_parallel > 1, *_priced_dtypes(m))


def _fast_kv(m: CorpusMeasurement) -> bool:
    """Whether the KV cache is priced at a narrower dtype than the card's BF16 (attention then runs at its rate)."""
    return _dtype(m.kv_dtype) in ("fp8", "fp4")


def demands_at_least(a: CorpusMeasurement, b: CorpusMeasurement) -> bool:
    """Whether ``a`` is a prefill the physics prices as ``b``'s configuration (``_priced_configuration``: EP 4 and
    EP 8 on 8 GPUs alike) with at least as much of every other input it prices by: as many tokens, the per-request
    cost where ``b`` pays it, the KV handoff where ``b`` waits for it, a KV dtype no narrower than ``b``'s."""
    return (
        a.phase == b.phase == "prefill"
        and _priced_configuration(a) == _priced_configuration(b)
        and a.tokens >= b.tokens
        and (a.includes_request_overhead or not b.includes_request_overhead)
        and (a.disaggregated or not b.disaggregated)
        and (_fast_kv(b) or not _fast_kv(a))
    )


def contradictions(measurements: Sequence[CorpusMeasurement]) -> list[tuple[CorpusMeasurement, CorpusMeasurement]]:
    """Pairs (slower, faster) of fitted prefill measurements, of one source or two, where ``faster`` demands at
    least as much as ``slower`` (``demands_at_least``) and was measured in less time. Prefill time never falls
    as a prompt grows or a cost is added (tests/physics/test_engine.py), so for a pair measured a factor r apart
    any profile of this physics prices one of the two off by sqrt(r) or more: the disagreement between the sources,
    not the physics, sets that floor (or, within one source, its noise). Where a side is a mean over prompts of several
    lengths (ShareGPT, a random range), its length is the mean and the floor holds only approximately."""
    kept = [m for m in measurements if m.phase == "prefill" and not m.exclude_from_fit]
    return [
        (slow, fast)
        for slow in kept
        for fast in kept
        if fast is not slow and demands_at_least(fast, slow) and fast.measured_s < slow.measured_s
    ]


def contradictions_markdown(results: Results, measurements: Sequence[CorpusMeasurement]) -> str:
    """The contradicting pairs (``contradictions``) with each side's held-out ratio and the floor they set."""
    pairs = contradictions(measurements)
    ratios = {p.id: p.ratio for _, _, points in results.values() for p in points}
    lines = [
        "## Measurements that contradict each other (same prefill configuration, the more demanding one timed faster)",
        "",
        "Any profile of this physics prices one point of each pair off by at least the floor, sqrt(slower / "
        "faster): its prefill time never falls as the prompt grows or a cost is added (the floor is approximate "
        "where a side is a mean over prompts of several lengths).",
        "",
        "| engine | slower: id | tokens | s | held-out ratio | faster: id | tokens | s | held-out ratio | "
        "slower / faster | floor | sources |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for slow, fast in pairs:
        r = slow.measured_s / fast.measured_s
        lines.append(
            f"| {slow.engine} | {slow.id} | {slow.tokens:.0f} | {slow.measured_s:.4g} | {ratios[slow.id]:.2f} | "
            f"{fast.id} | {fast.tokens:.0f} | {fast.measured_s:.4g} | {ratios[fast.id]:.2f} | {r:.2f} | "
            f"{r**0.5:.2f} | {'one' if slow.source == fast.source else 'two'} |"
        )
    if not pairs:
        lines.append("| none | | | | | | | | | | | |")
    return "\n".join(lines)


@frozen
class HeldOutCheck:
    """One held-out measurement predicted by its engine's shipped profile, against its error band."""

    id: str
    source: str
    engine: str
    phase: str
    measured_s: float
    predicted_s: float
    #: The band's factor for the engine and phase, and ``beyond``'s sentence ("" inside its domain).
    band_factor: float
    outside_domain: str
    #: The fit its source was found after (the source's ``found_after`` in the held-out file: a commit).
    found_after: str = ""

    @property
    def ratio(self) -> float:
        """Predicted / measured."""
        return self.predicted_s / self.measured_s

    @property
    def within_band(self) -> bool:
        """Whether the ratio lies within [1 / factor, factor] of the engine's band for the phase."""
        return 1.0 / self.band_factor <= self.ratio <= self.band_factor


def held_out_checks(path: Path = HELD_OUT) -> list[HeldOutCheck]:
    """Every measurement of ``path`` priced by its engine's profile as shipped (no refit), with its band."""
    from prfaas_plan.io.error_bands import builtin_band
    from prfaas_plan.spec.uncertainty import model_kind

    generations = load_generations()
    measurements = load_corpus(path)
    found = found_after(path)
    keys = {m.engine for m in measurements}
    engines = {key: load_named_engine(key) for key in keys}
    bands = {key: builtin_band(key) for key in keys}
    out = []
    for m in measurements:
        case = case_of(m, generations)
        phase_band = bands[m.engine].prefill if m.phase == "prefill" else bands[m.engine].decode
        batch = None if m.phase == "prefill" else float(m.batch)
        note = phase_band.beyond(
            m.phase, m.tokens, batch, kind=model_kind(case.arch), model=m.model, generation=case.generation
        )
        out.append(
            HeldOutCheck(
                id=m.id,
                source=m.source,
                engine=m.engine,
                phase=m.phase,
                measured_s=m.measured_s,
                predicted_s=predict(case, engines[m.engine]),
                band_factor=phase_band.factor,
                outside_domain=note,
                found_after=found.get(m.source, ""),
            )
        )
    return out


def found_after(path: Path = HELD_OUT) -> dict[str, str]:
    """Each held-out source's ``found_after``: the commit of the fit it was found after ("" where not given)."""
    sources = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("sources") or ()
    return {str(s["id"]): str(s.get("found_after", "")) for s in sources if isinstance(s, dict) and "id" in s}


def _summary_row(first: str, phase: str, mine: Sequence[HeldOutCheck]) -> str:
    """One summary row of the held-out section: points, sources, median factor, share within 2x, how many lie
    within their band and how many ``kv`` flags as outside its domain."""
    median, within = factor_stats([c.ratio for c in mine])
    inside = sum(c.within_band for c in mine)
    flagged = sum(bool(c.outside_domain) for c in mine)
    return (
        f"| {first} | {phase} | {len(mine)} | {len({c.source for c in mine})} | {median:.2f} | {within:.0%} | "
        f"{inside} of {len(mine)} | {flagged} of {len(mine)} |"
    )


def held_out_markdown(checks: Sequence[HeldOutCheck]) -> str:
    """The held-out measurements' section: per engine and phase the median factor and share within 2x, then
    every point with its band and whether ``kv`` flags it as outside the band's domain."""
    lines = [
        "## Held out of every fit: measurements found after the profiles were fitted (shipped profiles, no refit)",
        "",
        "| engine | phase | points | sources | median factor | within 2x | within its band | flagged outside it |",
        "|---|---|---|---|---|---|---|---|",
    ]
    groups = sorted({(c.engine, c.phase) for c in checks}, key=lambda g: (ENGINES.index(g[0]), g[1] != "prefill"))
    for engine, phase in groups:
        lines.append(_summary_row(engine, phase, [c for c in checks if (c.engine, c.phase) == (engine, phase)]))
    for commit in dict.fromkeys(c.found_after for c in checks if c.found_after):
        lines.append(_summary_row(f"found after {commit}", "both", [c for c in checks if c.found_after == commit]))
    if checks:
        median, within = factor_stats([c.ratio for c in checks])
        lines.append(f"| all | both | {len(checks)} | | {median:.2f} | {within:.0%} | | |")
    lines += [
        "",
        "| id | source | phase | measured s | predicted / measured | band | flagged |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in checks:
        lines.append(
            f"| {c.id} | {c.source} | {c.phase} | {c.measured_s:.4g} | {c.ratio:.2f} | {c.band_factor:.2f}x | "
            f"{'yes' if c.outside_domain else 'no'} |"
        )
    return "\n".join(lines)


def write(results: Results, settled: dict[str, EngineProfile]) -> None:
    """Record each engine's all-source fit in its profile: the corpus terms and the paper-setup terms of
    ``settled`` (from the paper's setup where there is evidence, else their priors: ``settled_fit``)."""
    for key, (_, fit, _) in results.items():
        path = engines_dir() / f"{key}.yaml"
        write_engine_fit(
            path,
            fit.values,
            fit.fitted_on,
            "hardware_profiles/serving/corpus/public-measurements.yaml",
            "least squares on log(predicted / measured) over the ids below with weak priors "
            "(prfaas_plan/physics/corpus_fit.py); refit by tests/benchmarks/corpus_cv.py --write; held-out error "
            "by leave-one-source-out in the same script's report",
        )
        fitted = key in PAPER_SETUP
        attention = ATTENTION_SOURCE if fitted else NO_ATTENTION_SOURCE
        write_engine_term(path, "attention_efficiency", settled[key].attention_efficiency, attention)
        handoff = HANDOFF_SOURCE if fitted else NO_HANDOFF_SOURCE
        write_engine_term(path, "kv_handoff_s", settled[key].kv_handoff_s, handoff)


if __name__ == "__main__":
    args = sys.argv[1:]
    with_paper = "--with-paper" in args  # SGLang also fitted on Table 3 (a report; never written)
    with_held_out = "--with-held-out" in args  # the held-out measurements fitted as corpus sources (a report)
    # Another prior for every engine's per-MoE-layer prefill cost (seconds; a report): where a fold leaves an
    # engine no prefill of a MoE model, that prior prices its held-out points.
    moe_prior = None
    if "--moe-prior" in args:
        at = args.index("--moe-prior")
        try:
            moe_prior = float(args[at + 1])
        except (IndexError, ValueError):
            sys.exit("--moe-prior takes a number of seconds, e.g. --moe-prior 0.001")
        if not 0.0 < moe_prior <= 0.05:
            sys.exit(f"--moe-prior: must be in (0, 0.05] seconds, got {args[at + 1]}")
    if (with_paper or with_held_out or moe_prior is not None) and "--write" in args:
        sys.exit(
            "--with-paper, --with-held-out and --moe-prior are reports only: the shipped profiles are fitted on the "
            "corpus alone, from the priors they state"
        )
    found, settled = settled_study(fit_paper=with_paper, also=HELD_OUT if with_held_out else None, moe_prior=moe_prior)
    print(markdown(found))
    print()
    print(contradictions_markdown(found, load_corpus(CORPUS)))
    if "--write" in args:
        write(found, settled)
        # The profiles are shipped files: their stored parses (prfaas_plan/io/parsed/) follow them.
        from tests.io.parsed_entries import main as write_parsed_entries

        write_parsed_entries(["--write"])
    if not with_held_out:  # after any --write, so that it prices with the profiles as they are now shipped
        print()
        print(held_out_markdown(held_out_checks()))
        if "--write" in args:
            print()
            print(
                "(bands: hardware_profiles/serving/error_bands.yaml as it stands; `python3 -m "
                "tests.benchmarks.error_bands --write` refits them on this fit)"
            )
