"""The error band of every engine profile and of the serving defaults, per phase, from the public corpus.

- An engine (sglang, vllm, trtllm): the leave-one-source-out cross-validation of ``corpus_cv.py`` (each source
  predicted by terms fitted without it); the band is the COVERAGE quantile of |log(held-out / measured)|.
- A phase an engine has no held-out point of: the quantile pooled over the engines that have (stated).
- The serving defaults (a pool with no ``engine:``): predicted on every corpus point; the defaults were fitted
  to the paper's Tables 3 and 5, not to the corpus, so these errors are held out too.
- The range of prompt lengths, contexts and batches each band was measured on: where at least two sources have
  measurements on each side (``reached_span``), with the counts per model kind and GPU generation
  (``checked_ranges``); ``kv``, ``size``, ``matrix`` and ``review`` flag a time outside it.

Run: python3 -m tests.benchmarks.error_bands           (the table; from the repository root)
     python3 -m tests.benchmarks.error_bands --write   (also write hardware_profiles/serving/error_bands.yaml and
                                                       its stored parse)
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from prfaas_plan.io.engine_profile import load_corpus, load_generations  # noqa: E402
from prfaas_plan.physics.decode import decode_step_time  # noqa: E402
from prfaas_plan.physics.prefill import prefill_time  # noqa: E402
from prfaas_plan.spec.hardware import RooflineParams  # noqa: E402
from prfaas_plan.spec.uncertainty import model_kind  # noqa: E402
from tests.benchmarks.corpus_cv import CORPUS, Results, case_of, study  # noqa: E402

COVERAGE = 0.8
OUT = REPO / "hardware_profiles" / "serving" / "error_bands.yaml"
HEADER = (
    "# Error bands of the engine profiles and the serving defaults (prfaas_plan/io/error_bands.py reads this).\n"
    "# Written by tests/benchmarks/error_bands.py --write from the public corpus; do not edit by hand.\n"
)


def _entry(ratios: list[float], sources: int, basis: str) -> dict[str, Any]:
    logs = np.abs(np.log(np.asarray(ratios)))
    return {
        "factor": round(float(np.exp(np.quantile(logs, COVERAGE))), 3),
        "points": len(ratios),
        "sources": sources,
        "median_factor": round(float(np.exp(np.median(logs))), 3),
        "median_ratio": round(float(np.exp(np.median(np.log(ratios)))), 3),
        "basis": basis,
    }


#: A prompt length, context or batch counts as measured where at least this many sources have a measurement at or
#: beyond it on each side: a band is a leave-one-source-out error whose quantile is over all its points, so an end of
#: the range that one source alone reached (as two long prompts of one benchmark among prompts of at most 8K) says
#: little about the band there.
MIN_SOURCES_OF_A_RANGE = 2


def reached_span(per_source: dict[str, list[float]]) -> list[float]:
    """From each source's ``[min, max]`` of a quantity (prompt tokens, context, batch), the range of values x with
    at least ``MIN_SOURCES_OF_A_RANGE`` sources that have a measurement at or below x and as many that have one at
    or above x: the second smallest of the minima to the second largest of the maxima. Where that range is empty
    or a single value (two sources that do not overlap, or touch at one value) or there is only one source, the
    whole span: no part of it is corroborated, and no end deserves to be kept over the other."""
    lows = sorted(lo for lo, _ in per_source.values())
    highs = sorted((hi for _, hi in per_source.values()), reverse=True)
    k = MIN_SOURCES_OF_A_RANGE - 1
    if len(per_source) <= k or lows[k] >= highs[k]:
        return [lows[0], highs[0]]
    return [lows[k], highs[k]]


def checked_ranges() -> dict[str, dict[str, dict[str, Any]]]:
    """Per engine (and ``defaults``: every point) and phase, what the counted measurements span: the range of
    prompt tokens of the prefills, of context tokens and batch of the decode steps that at least
    ``MIN_SOURCES_OF_A_RANGE`` sources bracket (``reached_span``), how many were of each model (by model kind) and
    on each GPU generation (``PhaseBand.beyond`` reads them)."""
    generations = load_generations()
    out: dict[str, dict[str, dict[str, Any]]] = {}
    seen: dict[tuple[str, str, str], dict[str, list[float]]] = {}  # (key, phase, quantity) -> source -> [lo, hi]
    for m in load_corpus(CORPUS):
        if m.exclude_from_fit:
            continue
        kind = model_kind(case_of(m, generations).arch)
        generation = generations.get(m.hardware, "other")
        for key in (m.engine, "defaults"):
            spans = out.setdefault(key, {}).setdefault(m.phase, {})
            values = {"tokens": m.tokens} | ({"batch": float(m.batch)} if m.phase == "decode" else {})
            for name, v in values.items():
                sources = seen.setdefault((key, m.phase, name), {})
                lo, hi = sources.get(m.source, [v, v])
                sources[m.source] = [min(lo, v), max(hi, v)]
                spans.setdefault(name, [])  # its place among the keys; the range is set once every source is seen
            models = spans.setdefault("kinds", {}).setdefault(kind, {})
            models[m.model] = models.get(m.model, 0) + 1
            counts = spans.setdefault("generations", {})
            counts[generation] = counts.get(generation, 0) + 1
    for (key, phase, name), sources in seen.items():
        out[key][phase][name] = reached_span(sources)
    for phases in out.values():
        for spans in phases.values():
            spans["kinds"] = {k: dict(sorted(v.items())) for k, v in sorted(spans["kinds"].items())}
            spans["generations"] = dict(sorted(spans["generations"].items()))
    return out


def defaults_ratios() -> dict[str, tuple[list[float], int]]:
    """Serving defaults' predicted / measured on every corpus point, per phase (and the number of sources)."""
    generations, params = load_generations(), RooflineParams()
    out: dict[str, tuple[list[float], set[str]]] = {"prefill": ([], set()), "decode": ([], set())}
    for m in load_corpus(CORPUS):
        if m.exclude_from_fit:  # reported by corpus_cv, counted in no band
            continue
        c = case_of(m, generations)
        if m.phase == "prefill":
            t = float(prefill_time(c.arch, c.instance, params, np.asarray([m.tokens])).total_s[0])
        else:
            t = float(decode_step_time(c.arch, c.instance, params, np.asarray([float(m.batch)]), m.tokens).total_s[0])
        out[m.phase][0].append(t / m.measured_s)
        out[m.phase][1].add(m.source)
    return {k: (v[0], len(v[1])) for k, v in out.items()}


def bands(results: Results | None = None) -> dict[str, Any]:
    """The bands document (from ``results`` of ``corpus_cv.study`` when given, else a fresh study)."""
    results = results if results is not None else study()
    table: dict[str, dict[str, Any]] = {}
    pooled: dict[str, list[float]] = {"prefill": [], "decode": []}
    pooled_sources: dict[str, set[str]] = {"prefill": set(), "decode": set()}
    for key, (_, _, points) in results.items():
        table[key] = {}
        for phase in ("prefill", "decode"):
            mine = [p for p in points if p.phase == phase and not p.excluded]  # excluded: reported, never counted
            if mine:
                sources = {p.source for p in mine}
                table[key][phase] = _entry(
                    [p.ratio for p in mine], len(sources), f"leave-one-source-out cross-validation of {key} {phase}"
                )
                pooled[phase] += [p.ratio for p in mine]
                pooled_sources[phase] |= {f"{key}:{s}" for s in sources}
    for key in table:
        for phase in ("prefill", "decode"):
            if phase not in table[key]:
                table[key][phase] = _entry(
                    pooled[phase],
                    len(pooled_sources[phase]),
                    f"no held-out {phase} point of {key}: the cross-validation pooled over the other engines",
                )
    table["defaults"] = {
        phase: _entry(
            ratios,
            n,
            f"serving defaults (fitted to the paper's Tables 3 and 5) on every corpus {phase} "
            "point, none of them fitted",
        )
        for phase, (ratios, n) in defaults_ratios().items()
    }
    for key, phases in checked_ranges().items():
        for phase, spans in phases.items():
            if key in table and phase in table[key] and not table[key][phase]["basis"].startswith("no held-out"):
                table[key][phase].update(
                    {k: span if isinstance(span, dict) else [round(v, 1) for v in span] for k, span in spans.items()}
                )
    return {
        "source": "tests/benchmarks/error_bands.py over hardware_profiles/serving/corpus/public-measurements.yaml "
        "(the paper's Table 3 and the excluded points counted nowhere): "
        f"factor = the {COVERAGE:.0%} quantile of |log(predicted / measured)|, "
        "held out; median_ratio > 1 means the pricing is too slow",
        "coverage": COVERAGE,
        "bands": table,
    }


if __name__ == "__main__":
    doc = bands()
    print("| pricing | phase | points | sources | band factor | median factor | median ratio |")
    print("|---|---|---|---|---|---|---|")
    for key, phases in doc["bands"].items():
        for phase, e in phases.items():
            print(
                f"| {key} | {phase} | {e['points']} | {e['sources']} | {e['factor']} | {e['median_factor']} | "
                f"{e['median_ratio']} |"
            )
    if "--write" in sys.argv[1:]:
        OUT.write_text(HEADER + yaml.safe_dump(doc, sort_keys=False, width=110))
        # A shipped file: its stored parse (prfaas_plan/io/parsed/) follows it.
        from tests.io.parsed_entries import main as write_parsed_entries

        write_parsed_entries(["--write"])
