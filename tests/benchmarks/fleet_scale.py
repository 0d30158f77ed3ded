"""Fleet-sized scenarios (issue 19): wall time and peak resident memory of each command on a scenario file with
N instances in each pool, at N = 1,000, 4,000 and 10,000 (``io.limits.MAX_INSTANCES``).

The scenario is the built-in paper case study written to a temporary YAML file with both pools at N instances
and the link grown with the PrfaaS pool (the paper's 100 Gbit/s per 4 instances), so that the fleet is not
bound by one 100 Gbit/s link. Each command runs as the real command line in a fresh interpreter; its peak
resident set is the child's own (``ru_maxrss``), interpreter and imports included.

Commands:

* ``load``: the scenario loaded and validated (``io.scenario.load_scenario``), nothing else.
* ``optimize``: ``optimize F --no-verify --json``.
* ``goodput``: ``optimize F --objective goodput --ttft-p90-s 5 --no-verify --json``.
* ``simulate``: ``simulate F --requests 20000 --json``.

A script, not a test: it prints a Markdown table and never asserts on time.

Example::

    python3 tests/benchmarks/fleet_scale.py
    python3 tests/benchmarks/fleet_scale.py --sizes 1000 --commands optimize goodput
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
PAPER_SCENARIO = REPO_ROOT / "workloads" / "paper-case-study.yaml"
SIZES = (1_000, 4_000, 10_000)
#: The paper's link per PrfaaS instance: 100 Gbit/s for 4 instances (§4.1).
GBIT_PER_S_PER_PRFAAS_INSTANCE = 100.0 / 4
COMMANDS: dict[str, list[str]] = {
    "load": ["-c", "import sys; from pathlib import Path; from prfaas_plan.io.scenario import load_scenario; "
             "load_scenario(Path(sys.argv[1]))"],
    "optimize": ["-m", "prfaas_plan", "optimize", "{file}", "--no-verify", "--json"],
    "goodput": ["-m", "prfaas_plan", "optimize", "{file}", "--objective", "goodput", "--ttft-p90-s", "5",
                "--no-verify", "--json"],
    "simulate": ["-m", "prfaas_plan", "simulate", "{file}", "--requests", "20000", "--json"],
}  # fmt: skip


def fleet_scenario(directory: Path, instances: int) -> Path:
    """The paper scenario with ``instances`` in each pool and the link scaled with the PrfaaS pool."""
    text = PAPER_SCENARIO.read_text()
    for old in ("instances: 4 ", "instances: 8 "):
        if old not in text:
            raise SystemExit(f"{PAPER_SCENARIO}: expected '{old.strip()}' in a pool")
        text = text.replace(old, f"instances: {instances} ")
    link = "bandwidth_gbit_per_s: 100 "
    if link not in text:
        raise SystemExit(f"{PAPER_SCENARIO}: expected '{link.strip()}'")
    text = text.replace(link, f"bandwidth_gbit_per_s: {instances * GBIT_PER_S_PER_PRFAAS_INSTANCE:g} ")
    path = directory / f"fleet-{instances}.yaml"
    path.write_text(text)
    return path


def run(command: str, scenario: Path, timeout_s: float) -> dict[str, Any]:
    """One command on one scenario in a fresh interpreter: wall seconds, the child's peak RSS in MiB, its exit
    status, and the headline figure of its JSON (when it prints one)."""
    argv = [sys.executable, *(a.replace("{file}", str(scenario)) for a in COMMANDS[command])]
    if command == "load":
        argv.append(str(scenario))
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        child = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=REPO_ROOT)
        try:
            child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            return {"command": command, "status": "timeout", "limit_s": timeout_s}
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    peak_mib = _peak_mib_of_children()
    row: dict[str, Any] = {"command": command, "status": "ok" if child.returncode == 0 else "failed"}
    row.update(wall_s=wall, peak_mib=peak_mib, exit_status=child.returncode)
    if child.returncode != 0:
        row["error"] = (stderr.strip().splitlines() or ["?"])[-1][:200]
    elif stdout.strip():
        row["figure"] = _figure(command, json.loads(stdout))
    return row


def _peak_mib_of_children() -> float:
    """The peak resident set of the command just run: each point runs in its own process (``--point``) with
    that one child, since ``ru_maxrss`` of RUSAGE_CHILDREN is the largest of all children reaped."""
    import resource

    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0  # KiB on Linux


def _figure(command: str, payload: dict[str, Any]) -> str:
    if command == "optimize":
        plan = payload["plan"]
        return f"Λ_max {plan['throughput_req_per_s']:,.0f} req/s, N_p/N_d {plan['n_pd_prefill']}/{plan['n_pd_decode']}"
    if command == "goodput":
        plan = payload["plan"]
        return f"goodput {plan['goodput']['rate_req_per_s']:,.0f} req/s, N_p {plan['n_pd_prefill']}"
    if command == "simulate":
        sim = payload["simulated"]
        # A short run on a large fleet may see no request finish inside its measured window: the simulator then
        # reports no throughput (null, not 0), and says on stderr how many requests would give one.
        rate = sim["throughput_req_per_s"]
        throughput = "no throughput measured" if rate is None else f"throughput {rate:,.0f} req/s"
        p90 = sim["ttft_s"]["p90"]
        ttft = "no P90 TTFT" if p90 is None else f"P90 TTFT {p90:.2f} s"
        return f"{ttft}, {throughput}, {sim['measured_requests']:,} measured"
    return ""


def main(argv: list[str] | None = None) -> None:
    """Measure every (command, size) point in a fresh interpreter and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="instances per pool")
    parser.add_argument("--commands", nargs="+", choices=tuple(COMMANDS), default=list(COMMANDS))
    parser.add_argument("--timeout-s", type=float, default=600.0, help="per command")
    parser.add_argument("--out", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sorted(args.sizes):
            scenario = fleet_scenario(Path(tmp), size)
            for command in args.commands:
                # ru_maxrss of the children is the largest so far: measure each point in its own process so
                # that a small point after a large one is not shown the large one's peak.
                done = subprocess.run(
                    [sys.executable, __file__, "--point", command, str(scenario), str(args.timeout_s)],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if done.returncode != 0:
                    raise SystemExit(done.stderr)
                row = {"instances_per_pool": size, **json.loads(done.stdout)}
                rows.append(row)
                print(json.dumps(row, ensure_ascii=False), file=sys.stderr, flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
    print("| instances per pool | command | wall (s) | peak RSS (MiB) | figure |")
    print("|---:|---|---:|---:|---|")
    for row in rows:
        if row["status"] == "timeout":
            print(f"| {row['instances_per_pool']:,} | {row['command']} | > {row['limit_s']:g} | — | timeout |")
            continue
        figure = row.get("figure") or row.get("error", "")
        print(
            f"| {row['instances_per_pool']:,} | {row['command']} | {row['wall_s']:.2f} | {row['peak_mib']:.0f} "
            f"| {figure} |"
        )


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--point":
        print(json.dumps(run(sys.argv[2], Path(sys.argv[3]), float(sys.argv[4])), ensure_ascii=False))
    else:
        main()
