"""Golden JSON of every command on the built-in scenarios: run before and after a refactor, then compare.

    python3 tests/golden/capture.py OUTDIR            # one JSON file per command line
    python3 tests/golden/capture.py --compare A B     # every difference, by file and JSON path

A regression guard for moves that must not change answers: the figures are the tool's own outputs, so
agreement proves only that the move changed nothing, not that the figures are right.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Keys whose values are wall-clock times or rates, or absolute paths of a run, not answers.
VOLATILE = {
    "elapsed_s",
    "wall_s",
    "seconds",
    "output",
    "path",
    "directory",
    "scenario_file",
    "events_per_s",
    "requests_per_s",
}

COMMANDS: dict[str, list[str]] = {
    "optimize": ["optimize", "--json"],
    "optimize-roofline": ["optimize", "paper-case-study-roofline", "--json"],
    "optimize-qwen": ["optimize", "qwen3.5-capacity", "--json"],
    "optimize-goodput": ["optimize", "--objective", "goodput", "--ttft-p90-s", "5", "--no-verify", "--json"],
    "optimize-load": ["optimize", "--load", "0.7", "--curve", "--no-verify", "--json"],
    "optimize-load-verify": ["optimize", "--load", "0.6", "--replications", "2", "--verify-requests", "4000", "--json"],
    "evaluate": ["evaluate", "--threshold", "19400", "--n-pd-prefill", "3", "--n-pd-decode", "5", "--json"],
    "evaluate-load": [
        "evaluate",
        "--threshold",
        "19400",
        "--n-pd-prefill",
        "3",
        "--n-pd-decode",
        "5",
        "--load",
        "0.5",
        "--no-verify",
        "--json",
    ],
    "kv": ["kv", "--model", "paper-1t-hybrid", "--hardware", "h200", "--length", "32768", "--json"],
    "kv-roofline": [
        "kv",
        "--model",
        "qwen3.5-397b-a17b",
        "--hardware",
        "h100",
        "--method",
        "roofline",
        "--length",
        "8192",
        "--json",
    ],
    "simulate": ["simulate", "--load", "0.6", "--requests", "4000", "--json"],
    "simulate-example": ["simulate", "example-annotated", "--requests", "3000", "--json"],
    "size": ["size", "--no-verify", "--json"],
    "size-2000": ["size", "--rate", "2000", "--no-verify", "--json"],
    "cost": ["cost", "--json"],
    "matrix": ["matrix", "--json"],
    "headroom": ["headroom", "--json"],
    "fit": ["fit", "--json"],
    "schema-scenario": ["schema", "scenario"],
    "schema-hardware": ["schema", "hardware"],
    "schema-model": ["schema", "model"],
    "model-show": ["model", "show", "paper-1t-hybrid", "--json"],
    "review": ["review", "--quick", "--no-matrix", "--no-sensitivity", "--json"],
}


def _clean(value: object) -> object:
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def capture(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, args in COMMANDS.items():
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-m", "prfaas_plan", *args]
            if args[0] == "review":
                cmd += ["-o", str(Path(tmp) / "rev")]
            env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the tree this script sits in, not an installed copy
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, timeout=900, env=env)
        record = {"argv": args, "exit": proc.returncode, "stderr": proc.stderr[-2000:]}
        try:
            record["json"] = _clean(json.loads(proc.stdout))
        except json.JSONDecodeError:
            record["stdout"] = proc.stdout[-4000:]
        (out / f"{name}.json").write_text(json.dumps(record, indent=1, sort_keys=True))
        print(f"{name}: exit {proc.returncode}", flush=True)


def _diff(a: object, b: object, path: str, found: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                found.append(f"{path}.{key}: only in {'after' if key not in a else 'before'}")
            else:
                _diff(a[key], b[key], f"{path}.{key}", found)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, f"{path}[{i}]", found)
    elif isinstance(a, float) and isinstance(b, float) and (a == b or (math.isnan(a) and math.isnan(b))):
        return
    elif a != b:
        found.append(f"{path}: {str(a)[:120]} -> {str(b)[:120]}")


def compare(before: Path, after: Path) -> int:
    problems = 0
    for file in sorted(before.glob("*.json")):
        other = after / file.name
        if not other.exists():
            print(f"{file.name}: missing after")
            problems += 1
            continue
        found: list[str] = []
        _diff(json.loads(file.read_text()), json.loads(other.read_text()), "", found)
        for line in found:
            print(f"{file.name}{line}")
        problems += bool(found)
        print(f"{file.name}: {'identical' if not found else f'{len(found)} differences'}")
    return problems


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        sys.exit(1 if compare(Path(sys.argv[2]), Path(sys.argv[3])) else 0)
    capture(Path(sys.argv[1]))
