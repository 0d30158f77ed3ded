"""How the searches scale with the pools (issue 11, "Speed and scale"): wall time and peak memory of the
goodput search and the Λ_max search on the built-in paper scenario with N PrfaaS and N local instances.

A script, not a pytest test: each point runs in a fresh interpreter (so that its peak resident set is its
own), under a time limit and an address-space limit, and a point past either is reported as such instead of
taking the machine down. ``--root`` measures another copy of the code (e.g. a ``git archive`` of an older
commit), so before/after tables come from the same script.

Operations (``--ops``):

* ``goodput``: ``best_goodput_plan`` (the (t, N_p) goodput search, P90 <= 5 s, t to 10 tokens).
* ``compare_goodput``: what ``optimize --objective goodput --ttft-p90-s 5`` computes (the search, the
  Λ_max plan, both baselines, each with its goodput).
* ``optimize``: ``search`` (the Λ_max search over t and N_p, t to 10 tokens).
* ``compare``: what ``optimize`` computes (the search and both baselines).

``--scale-link`` grows the link with the PrfaaS pool (the paper's 100 Gbit/s per 4 instances), so that large
pools are not all bound by one 100 Gbit/s link.

Columns: seconds of wall time for the operation alone (the scenario is loaded first), the child's peak
resident set (``ru_maxrss``, MiB, interpreter and imports included) and its growth during the operation.

Example::

    python3 tests/benchmarks/scale.py --out /tmp/scale.json
    python3 tests/benchmarks/scale.py --root /tmp/before --sizes 8 100 300 --out /tmp/before.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
SIZES = (8, 100, 300, 1000, 2000, 5000, 10000, 100000)
OPERATIONS = ("goodput", "compare_goodput", "optimize", "compare")
TTFT_SLO_S = 5.0
RESOLUTION_TOKENS = 10.0


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def _point(operation: str, instances: int, root: Path, scale_link: bool) -> dict[str, Any]:
    """Run one operation at N instances per pool in this interpreter; the result and its cost."""
    sys.path.insert(0, str(root))
    from dataclasses import replace

    from prfaas_plan.io.scenario import load_scenario
    from prfaas_plan.optimize import compare, compare_goodput, search
    from prfaas_plan.optimize.goodput_search import best_goodput_plan
    from prfaas_plan.spec.plan import TtftSlo
    from prfaas_plan.throughput import stage_model

    scenario = load_scenario(root / "workloads" / "paper-case-study.yaml")
    model = replace(stage_model(scenario), n_prfaas=instances, n_local=instances)
    if scale_link:
        share = instances / scenario.prfaas.instances
        model = replace(model, link_bandwidth_bytes_per_s=model.link_bandwidth_bytes_per_s * share)
    pools = (scenario.prfaas.gpus, scenario.local.gpus_per_instance)
    before = _peak_mib()
    start = time.perf_counter()
    if operation == "goodput":
        t, n_p, rate = best_goodput_plan(model, TtftSlo(limit_s=TTFT_SLO_S), resolution_tokens=RESOLUTION_TOKENS)
        result = {"threshold_tokens": t, "n_pd_prefill": n_p, "rate_req_per_s": rate}
    elif operation == "compare_goodput":
        found = compare_goodput(model, *pools, TtftSlo(limit_s=TTFT_SLO_S), resolution_tokens=RESOLUTION_TOKENS)
        result = {
            "threshold_tokens": found.plan.plan.threshold_tokens,
            "n_pd_prefill": found.plan.plan.n_pd_prefill,
            "rate_req_per_s": found.plan.goodput.rate_req_per_s,
        }
    elif operation == "optimize":
        plan = search(model, RESOLUTION_TOKENS)
        result = {
            "threshold_tokens": plan.threshold_tokens,
            "n_pd_prefill": plan.n_pd_prefill,
            "rate_req_per_s": plan.throughput_req_per_s,
        }
    elif operation == "compare":
        plan = compare(model, *pools, RESOLUTION_TOKENS).plan
        result = {
            "threshold_tokens": plan.threshold_tokens,
            "n_pd_prefill": plan.n_pd_prefill,
            "rate_req_per_s": plan.throughput_req_per_s,
        }
    else:
        raise SystemExit(f"unknown operation {operation!r}")
    wall = time.perf_counter() - start
    peak = _peak_mib()
    return {"wall_s": wall, "peak_mib": peak, "growth_mib": peak - before, "result": result}


def _limit_memory(limit_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))


def measure(
    operation: str, instances: int, root: Path, timeout_s: float, memory_gib: float, scale_link: bool = False
) -> dict[str, Any]:
    """One point in a fresh interpreter; ``status`` is "ok", "timeout" or "failed" (memory or an error)."""
    command = [sys.executable, str(Path(__file__).resolve()), "--point", operation, str(instances), "--root", str(root)]
    command += ["--scale-link"] if scale_link else []
    env = {**os.environ, "PYTHONPATH": str(root), "OPENBLAS_NUM_THREADS": "1"}
    row: dict[str, Any] = {"operation": operation, "instances_per_pool": instances}
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout_s,
            check=False,
            preexec_fn=lambda: _limit_memory(int(memory_gib * 2**30)),
        )
    except subprocess.TimeoutExpired:
        return {**row, "status": "timeout", "limit_s": timeout_s}
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {**row, "status": "failed", "error": last[:200], "limit_gib": memory_gib}
    return {**row, "status": "ok", **json.loads(done.stdout.strip().splitlines()[-1])}


def _cell(row: dict[str, Any]) -> str:
    if row["status"] == "timeout":
        return f"> {row['limit_s']:g} s"
    if row["status"] == "failed":
        return "MemoryError" if "MemoryError" in row["error"] or "Unable to allocate" in row["error"] else "error"
    return f"{row['wall_s']:.2f} s, {row['peak_mib']:.0f} MiB"


def main(argv: list[str] | None = None) -> None:
    """Measure every (operation, size) point and print a Markdown table; ``--out`` keeps the rows as JSON."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="instances per pool")
    parser.add_argument("--ops", nargs="+", choices=OPERATIONS, default=list(OPERATIONS))
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="the copy of the code to measure")
    parser.add_argument("--timeout-s", type=float, default=300.0, help="per point")
    parser.add_argument("--memory-gib", type=float, default=8.0, help="address-space limit per point")
    parser.add_argument("--scale-link", action="store_true", help="link bandwidth proportional to the PrfaaS pool")
    parser.add_argument("--out", type=Path, help="write the rows as JSON here")
    parser.add_argument("--point", nargs=2, metavar=("OPERATION", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.point:
        print(json.dumps(_point(args.point[0], int(args.point[1]), args.root.resolve(), args.scale_link)))
        return
    rows = []
    for operation in args.ops:
        skip = False
        for size in sorted(args.sizes):
            if skip:  # a smaller pool already ran out of time or memory
                rows.append({"operation": operation, "instances_per_pool": size, "status": "skipped"})
                continue
            row = measure(operation, size, args.root.resolve(), args.timeout_s, args.memory_gib, args.scale_link)
            rows.append(row)
            skip = row["status"] != "ok"
            print(json.dumps(row), file=sys.stderr, flush=True)
    if args.out:
        header = {"root": str(args.root), "scale_link": args.scale_link}
        args.out.write_text(json.dumps({**header, "rows": rows}, indent=2) + "\n")
    sizes = sorted(args.sizes)
    print("| instances per pool | " + " | ".join(args.ops) + " |")
    print("|---:|" + "---|" * len(args.ops))
    for size in sizes:
        cells = []
        for operation in args.ops:
            row = next(r for r in rows if r["operation"] == operation and r["instances_per_pool"] == size)
            cells.append("skipped" if row["status"] == "skipped" else _cell(row))
        print(f"| {size:,} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
