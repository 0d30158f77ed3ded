"""Tables of the capacity answers at the edges of the pools' error bands."""

from __future__ import annotations

from typing import Any

from prfaas_plan.cli.render import DataTable, console

#: The notes a pool's band carries where the scenario outruns its measurements (``report.uncertainty``).
_OUTSIDE = ("prompts_outside_band", "contexts_outside_band", "pool_outside_band")


def _usd(value: float | None) -> str:
    return "—" if value is None else f"${value:,.2f}"


def _bands_line(bands: dict[str, Any]) -> str:
    parts = []
    for role, b in bands.items():
        if b.get("band", 1) is None:
            parts.append(f"{role}: no band ({b['why']})")
        else:
            parts.append(
                f"{role}: prefill x/÷ {b['prefill_factor']:.2f}, decode x/÷ {b['decode_factor']:.2f} "
                f"({b['coverage']:.0%} of held-out errors; {b['prefill_basis']}; {b['decode_basis']})"
                + "".join(f"; {b[k]}" for k in _OUTSIDE if k in b)
            )
    return "Error bands: " + "; ".join(parts)


def _dep_data(prefix: str, d: dict[str, Any] | None) -> dict[str, Any]:
    """A deployment needed at an edge as data (empty cells: none carries the target there)."""
    return {
        f"{prefix}_n_prfaas": None if d is None else d["n_prfaas"],
        f"{prefix}_n_local": None if d is None else d["n_local"],
        f"{prefix}_usd_per_hour": None if d is None else d["usd_per_hour"],
    }


def print_size_band(payload: dict[str, Any]) -> None:
    """The sizing at each edge: verdict, deployments needed, nominal deployments' goodput there."""
    out = console()
    table = DataTable(title="At the edges of the error band (slow: times x factor; fast: ÷ factor)")
    for column in ("edge", "verdict", "PrfaaS-PD needed", "homogeneous PD needed", "nominal goodput (PrfaaS / homog.)"):
        table.add_column(column)
    for edge, e in payload["edges"].items():

        def dep(d: dict[str, Any] | None) -> str:
            return "none" if d is None else f"{d['n_prfaas']} / {d['n_local']}, {_usd(d['usd_per_hour'])}"

        good = [e["nominal_prfaas_pd_goodput_req_per_s"], e["nominal_homogeneous_pd_goodput_req_per_s"]]
        table.add_row(
            edge,
            e["verdict"],
            dep(e["prfaas_pd"]),
            dep(e["homogeneous_pd"]),
            " / ".join("—" if g is None else f"{g:.2f}" for g in good),
        )
        table.add_data(
            {
                "edge": edge,
                "verdict": e["verdict"],
                **_dep_data("prfaas_pd", e["prfaas_pd"]),
                **_dep_data("homogeneous_pd", e["homogeneous_pd"]),
                "nominal_prfaas_pd_goodput_req_per_s": good[0],
                "nominal_homogeneous_pd_goodput_req_per_s": good[1],
            }
        )
    out.print(table)
    for edge, e in payload["edges"].items():
        if e["verdict"] == "none" and e["reason"]:
            out.print(f"{edge} edge: {e['reason']}")
    holds = "holds" if payload["verdict_holds"] else "does not hold"
    out.print(f"The nominal verdict ({payload['nominal_verdict']}) {holds} across the band.")
    out.print(_bands_line(payload["bands"]))


def print_matrix_band(payload: dict[str, Any]) -> None:
    """Every cell's verdict nominal and at both edges."""
    out = console()
    table = DataTable(title="Verdicts across the error band (cheapest: PrfaaS-PD or homogeneous PD)")
    for column in ("prefill × local", "nominal", "slow edge", "fast edge", "holds", "USD/h PrfaaS (slow / fast)"):
        table.add_column(column)
    for c in payload["cells"]:
        v, cost = c["verdicts"], c["prfaas_pd_usd_per_hour"]
        table.add_row(
            f"{c['prefill']} × {c['local']}",
            v["nominal"],
            v["slow"],
            v["fast"],
            "yes" if c["holds"] else "flips",
            f"{_usd(cost['slow'])} / {_usd(cost['fast'])}",
        )
        table.add_data(
            {
                "prefill_hardware": c["prefill"],
                "local_hardware": c["local"],
                "verdict_nominal": v["nominal"],
                "verdict_slow_edge": v["slow"],
                "verdict_fast_edge": v["fast"],
                "holds": c["holds"],
                "prfaas_pd_slow_edge_usd_per_hour": cost["slow"],
                "prfaas_pd_fast_edge_usd_per_hour": cost["fast"],
            }
        )
    out.print(table)
    out.print(
        f"{payload['holding']} cell(s) hold, {payload['flipping']} flip; both edges sized in {payload['wall_s']:.1f} s."
    )
    for edge, why in payload["edge_reasons"].items():
        out.print(f"{edge} edge: {why}")
    for note in payload.get("outside_band", []):
        out.print(f"note: {note}", style="yellow")
