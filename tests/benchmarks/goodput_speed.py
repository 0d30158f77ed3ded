"""Wall time of ``optimize --objective goodput`` on the paper scenario (a benchmark: it reports, never asserts).

    python3 -m tests.benchmarks.goodput_speed [--runs 5] [--slo 5] [--keep VENV]

Prints, as the median (and min/max) of ``--runs`` fresh interpreters:
- end to end: ``python -m prfaas_plan optimize --objective goodput --ttft-p90-s SLO --no-verify --json``;
- search: the ``compare_goodput`` call alone in a fresh interpreter, after the scenario is loaded and the model
  built, so it includes what the search imports lazily on first use (scipy.special) but not the CLI start-up;
- search CPU: the same call's process CPU time, steadier than wall time on a machine shared with other work
  (compare old and new alternately, in the same minutes);
- search, scipy.special already imported: the same call after ``import scipy.special`` (outside the timing), so
  that the library's import (about 0.25 s on an idle core: scipy 1.17's array-API layer) and the search's own
  work can be told apart.
Each run is a new process so that no cache (lru_cache, imported modules) carries over between runs. The search
lines run BLAS on one thread, as the command does (``prfaas_plan/cli/entry.py``), unless the environment chose a
count.

By default the runs import the working tree (``python -m prfaas_plan`` from the repository root). With
``--keep VENV`` they run a normal (non-editable) install instead: the virtual environment of
``tests.benchmarks.startup`` (created there if missing: a wheel of the working tree, its dependencies pinned to
this interpreter's versions, none of this interpreter's site-packages or start-up hooks), its ``prfaas-plan``
command end to end, and its interpreter for the search lines, run outside the repository.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if sys.path[:1] != [str(REPO)]:  # run as a script from anywhere, ahead of any installed top-level `tests`
    sys.path.insert(0, str(REPO))

from prfaas_plan.cli.entry import one_blas_thread  # noqa: E402
from tests.benchmarks.startup import installed  # noqa: E402

# Times compare_goodput alone; prints its wall and CPU seconds on the last line of stdout.
_SEARCH = """
import sys, time
from prfaas_plan.io.names import resolve_scenario_path
from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.optimize import compare_goodput
from prfaas_plan.spec.plan import TtftSlo
from prfaas_plan.throughput import stage_model

spec = load_scenario(resolve_scenario_path(None))
model = stage_model(spec)
slo = TtftSlo(limit_s=float(sys.argv[1]))
start, cpu = time.perf_counter(), time.process_time()
compare_goodput(model, spec.prfaas.gpus, spec.local.gpus_per_instance, slo, resolution_tokens=10.0,
                decode_service_scv=spec.traffic.output_length.scv)
print(time.perf_counter() - start, time.process_time() - cpu)
"""


# The search lines do not go through the command's entry point, which runs BLAS on one thread unless the
# environment chose a count (prfaas_plan/cli/entry.py): they are given the same setting.
_AS_THE_COMMAND = dict(os.environ)
one_blas_thread(_AS_THE_COMMAND)


@dataclass(frozen=True)
class _Where:
    """What the runs execute: the command's argv prefix, the interpreter of the search lines, their directory."""

    command: tuple[str, ...]
    python: str
    cwd: Path


def _end_to_end(where: _Where, slo: float) -> float:
    command = [*where.command, "optimize", "--objective", "goodput", "--ttft-p90-s", str(slo)]
    start = time.perf_counter()
    subprocess.run([*command, "--no-verify", "--json"], cwd=where.cwd, check=True, capture_output=True)
    return time.perf_counter() - start


def _search(where: _Where, slo: float, preimport: bool = False) -> tuple[float, float]:
    code = _SEARCH.replace("\nspec = ", "\nimport scipy.special\nspec = ", 1) if preimport else _SEARCH
    done = subprocess.run(
        [where.python, "-c", code, str(slo)],
        cwd=where.cwd,
        env=_AS_THE_COMMAND,
        check=True,
        capture_output=True,
        text=True,
    )
    wall, cpu = (float(v) for v in done.stdout.strip().splitlines()[-1].split())
    return wall, cpu


def _line(name: str, seconds: list[float]) -> str:
    return (
        f"{name:<12} median {statistics.median(seconds):6.3f} s   min {min(seconds):6.3f} s   "
        f"max {max(seconds):6.3f} s   ({len(seconds)} runs)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--slo", type=float, default=5.0, help="P90 TTFT SLO (s)")
    parser.add_argument("--keep", type=Path, default=None, help="time a normal install in this virtual environment")
    args = parser.parse_args()
    if args.keep is None:
        where = _Where((sys.executable, "-m", "prfaas_plan"), sys.executable, REPO)
        what = "the working tree"
    else:
        python = installed(args.keep)
        where = _Where((str(args.keep / "bin" / "prfaas-plan"),), str(python), args.keep)
        what = f"a normal install in {args.keep}"
    _end_to_end(where, args.slo)  # warm-up (page cache, .pyc)
    end_to_end = [_end_to_end(where, args.slo) for _ in range(args.runs)]
    search = [_search(where, args.slo) for _ in range(args.runs)]
    imported = [_search(where, args.slo, preimport=True) for _ in range(args.runs)]
    print(f"optimize --objective goodput --ttft-p90-s {args.slo:g} --no-verify (paper scenario, {what})")
    print(_line("end to end", end_to_end))
    print(_line("search", [wall for wall, _ in search]))
    print(_line("search CPU", [cpu for _, cpu in search]))
    print(_line("search, scipy.special imported first", [wall for wall, _ in imported]))


if __name__ == "__main__":
    main()
