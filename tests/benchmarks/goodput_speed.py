"""Wall time of ``optimize --objective goodput`` on the paper scenario (a benchmark: it reports, never asserts).

    python3 tests/benchmarks/goodput_speed.py [--runs 5] [--slo 5]

Prints, as the median (and min/max) of ``--runs`` fresh interpreters:
- end to end: ``python -m prfaas_plan optimize --objective goodput --ttft-p90-s SLO --no-verify --json``;
- search: the ``compare_goodput`` call alone in a fresh interpreter, after the scenario is loaded and the model
  built, so it includes what the search imports lazily on first use (scipy.special) but not the CLI start-up;
- search CPU: the same call's process CPU time, steadier than wall time on a machine shared with other work
  (compare old and new alternately, in the same minutes);
- search, scipy.special already imported: the same call after ``import scipy.special`` (outside the timing), so
  that the library's import (about 0.25 s on an idle core: scipy 1.17's array-API layer) and the search's own
  work can be told apart.
Each run is a new process so that no cache (lru_cache, imported modules) carries over between runs.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

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


def _end_to_end(slo: float) -> float:
    command = [sys.executable, "-m", "prfaas_plan", "optimize", "--objective", "goodput", "--ttft-p90-s", str(slo)]
    start = time.perf_counter()
    subprocess.run([*command, "--no-verify", "--json"], cwd=REPO, check=True, capture_output=True)
    return time.perf_counter() - start


def _search(slo: float, preimport: bool = False) -> tuple[float, float]:
    code = _SEARCH.replace("\nspec = ", "\nimport scipy.special\nspec = ", 1) if preimport else _SEARCH
    done = subprocess.run([sys.executable, "-c", code, str(slo)], cwd=REPO, check=True, capture_output=True, text=True)
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
    args = parser.parse_args()
    end_to_end = [_end_to_end(args.slo) for _ in range(args.runs)]
    search = [_search(args.slo) for _ in range(args.runs)]
    imported = [_search(args.slo, preimport=True) for _ in range(args.runs)]
    print(f"optimize --objective goodput --ttft-p90-s {args.slo:g} --no-verify (paper scenario)")
    print(_line("end to end", end_to_end))
    print(_line("search", [wall for wall, _ in search]))
    print(_line("search CPU", [cpu for _, cpu in search]))
    print(_line("search, scipy.special imported first", [wall for wall, _ in imported]))


if __name__ == "__main__":
    main()
