"""The Qwen3.5-397B-A17B hardware matrix (``prfaas-plan matrix qwen3.5-capacity``) with instance shapes chosen
(``shape: auto`` on both pools) against the fixed 8-GPU tensor-parallel answer: per cell, the shapes picked,
the PrfaaS-PD cost, the next-best sized shape pair and its cost, the fixed answer's cost and the change, and
the shapes ruled out by memory (with the numbers).

Both matrices are the library's own (``studies.matrix_inputs`` and ``optimize.matrix.hardware_matrix``) on the
CLI's default axes and the scenario's target; no number here is fitted or tuned. It takes minutes on two cores.

Run: python3 -m tests.benchmarks.shapes_matrix [--prefill h200,b200 --local h20] (from the repository root)
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from prfaas_plan.io.names import resolve_scenario_path  # noqa: E402
from prfaas_plan.io.scenario import load_scenario  # noqa: E402
from prfaas_plan.optimize.matrix import CellResult, HardwareMatrix, hardware_matrix  # noqa: E402
from prfaas_plan.spec.cost import Target  # noqa: E402
from prfaas_plan.spec.scenario import Scenario  # noqa: E402
from prfaas_plan.studies.matrix_inputs import matrix_inputs  # noqa: E402


def _matrix(spec: Scenario, target: Target, prefill: list[str], local: list[str], workers: int) -> HardwareMatrix:
    cells = matrix_inputs(spec, prefill, local)
    return hardware_matrix(cells, target, decode_service_scv=spec.traffic.output_length.scv, workers=workers)


def _cost(cell: CellResult) -> float | None:
    d = cell.sizing.prfaas_pd if cell.sizing is not None else None
    return None if d is None else d.usd_per_hour


def _money(x: float | None) -> str:
    return "—" if x is None else f"${x:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="qwen3.5-capacity")
    parser.add_argument("--prefill", default="h200,b200,h100,mi300x")
    parser.add_argument("--local", default="h20,h800,h100")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    spec = load_scenario(resolve_scenario_path(args.scenario))
    assert spec.target is not None, "the scenario needs a target section"
    target = spec.target
    prefill, local = args.prefill.split(","), args.local.split(",")
    auto = replace(spec, prfaas=replace(spec.prfaas, choose_shape=True), local=replace(spec.local, choose_shape=True))
    started = time.perf_counter()
    fixed_m = _matrix(spec, target, prefill, local, args.workers)
    fixed_s = time.perf_counter() - started
    started = time.perf_counter()
    auto_m = _matrix(auto, target, prefill, local, args.workers)
    auto_s = time.perf_counter() - started
    dtype = spec.model.architecture.dtypes.weights if spec.model.architecture else "?"
    print(
        f"{spec.name}: {spec.model.name}, weights {dtype}, "
        f"target {target.rate_req_per_s:g} req/s at P90 TTFT <= {target.ttft_slo_s:g} s"
    )
    print(f"fixed 8-GPU TP matrix {fixed_s:.0f} s, shapes-chosen matrix {auto_s:.0f} s")
    header = ("prefill × local", "chosen (PrfaaS / local)", "USD/h", "next-best", "USD/h", "fixed TP8", "change")
    rows = []
    for a, f in zip(auto_m.cells, fixed_m.cells, strict=True):
        ca, cf = _cost(a), _cost(f)
        change = "—" if ca is None or cf is None else f"{(ca / cf - 1) * 100:+.1f} %"
        rows.append(
            (
                f"{a.prefill} × {a.local}",
                a.shape or "(fixed)",
                _money(ca),
                a.next_shape or "—",
                _money(a.next_usd_per_hour),
                _money(cf) if cf is not None else f"— ({(f.reason or '')[:60]})",
                change,
            )
        )
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    for r in (header, *rows):
        print("  ".join(x.ljust(w) for x, w in zip(r, widths, strict=True)))
    ruled = sorted({why for c in auto_m.cells for why in c.ruled_out})
    print(f"\nshapes ruled out by memory ({len(ruled)}):")
    for why in ruled:
        print(f"  {why}")


if __name__ == "__main__":
    main()
