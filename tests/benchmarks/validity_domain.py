"""Judge the windowed TTFT model's validity flag on a family of traffic it was not tuned on (issue 21;
``tests/validation/traffic_family.py`` describes the family and the cells). For each cell: the closed form's
P90/P99 TTFT beside the simulator's (means over seeds), whether they agree within 20 %, and whether the flag
says in domain; then the confusion table. Figures only.

The flag's rules were set on the tuning seed set (``--seeds tuning``) and are judged on the judging set
(``--seeds judging``, the default). About 8 min per seed set on 2 cores with the defaults.

    python3 -m tests.benchmarks.validity_domain --seeds judging --jobs 2 --json cells.json
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from functools import lru_cache

from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.optimize import PlanEvaluation, search
from prfaas_plan.throughput import StageModel, stage_model
from tests.conftest import PAPER_SCENARIO
from tests.validation.traffic_family import (
    JUDGING_SEED,
    LOADS,
    TOLERANCE,
    TUNING_SEED,
    CellResult,
    Pattern,
    confusion,
    family,
    run_cell,
)


@lru_cache(maxsize=1)
def _paper() -> tuple[StageModel, PlanEvaluation]:
    model = stage_model(load_scenario(PAPER_SCENARIO))
    return model, search(model)


def _run(job: tuple[Pattern, float, int, int, int]) -> CellResult:
    pattern, load, seed, replications, n = job
    model, plan = _paper()
    return run_cell(model, plan, pattern, load, seed, replications, n)


def format_cells(cells: list[CellResult]) -> str:
    """One line per cell: figures, error, verdict and the flag's first reason."""
    lines = [f"{'pattern':<20} {'load':>4} {'P90 cf/sim (s)':>16} {'P99 cf/sim (s)':>16} {'err':>5}  verdict"]
    for c in cells:
        verdict = ("in domain" if c.in_domain else "flagged") + (", within" if c.within else ", OUTSIDE")
        reason = f"  [{c.reasons[0][:70]}]" if c.reasons else ""
        lines.append(
            f"{c.pattern:<20} {c.load:4.0%} {c.closed_p90_s:7.2f}/{c.sim_p90_s:<8.2f} "
            f"{c.closed_p99_s:7.2f}/{c.sim_p99_s:<8.2f} {c.error:5.0%}  {verdict}{reason}"
        )
    return "\n".join(lines)


def format_confusion(cells: list[CellResult]) -> str:
    """The confusion table and the two targets of issue 21."""
    counts = confusion(cells)
    inside = counts["in domain, within"] + counts["in domain, outside"]
    flagged = counts["flagged, within"] + counts["flagged, outside"]
    miss = counts["in domain, outside"] / inside if inside else 0.0
    needless = counts["flagged, within"] / flagged if flagged else 0.0
    return "\n".join(
        [
            f"{'':<10} {'within ' + format(TOLERANCE, '.0%'):>11} {'outside':>8} {'total':>6}",
            f"{'in domain':<10} {counts['in domain, within']:>11} {counts['in domain, outside']:>8} {inside:>6}",
            f"{'flagged':<10} {counts['flagged, within']:>11} {counts['flagged, outside']:>8} {flagged:>6}",
            f"in-domain cells outside {TOLERANCE:.0%}: {miss:.1%} (target <= 2 %); "
            f"flagged cells within: {needless:.1%} (target <= 50 %)",
        ]
    )


def main() -> None:
    """Run the family on one seed set, print the cells and the confusion table, optionally save JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", choices=("tuning", "judging"), default="judging")
    parser.add_argument("--replications", type=int, default=4)
    parser.add_argument("--requests", type=int, default=6000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", default=None, help="write every cell (with the pool features) here")
    options = parser.parse_args()
    seed = TUNING_SEED if options.seeds == "tuning" else JUDGING_SEED
    jobs = [(p, load, seed, options.replications, options.requests) for p in family() for load in LOADS]
    with ProcessPoolExecutor(options.jobs) as pool:
        cells = list(pool.map(_run, jobs, chunksize=1))
    print(
        f"{options.seeds} seeds ({seed}): {len(cells)} cells, {options.replications} x {options.requests:,} "
        "requests each; paper scenario, throughput-optimal plan"
    )
    print(format_cells(cells))
    print()
    print(format_confusion(cells))
    if options.json:
        with open(options.json, "w") as out:
            json.dump([{**asdict(c), "error": c.error, "within": c.within} for c in cells], out, indent=1)


if __name__ == "__main__":
    main()
