"""``prfaas-plan topology``: several PrfaaS and PD clusters planned together (issue 23)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from prfaas_plan.cli.common import emit, handled

topology_app = typer.Typer(
    no_args_is_help=True,
    help="Topologies: several PrfaaS sites and regional PD clusters joined by links, planned together.",
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")]
TopologyArg = Annotated[
    str,
    typer.Argument(
        help="Topology YAML file or built-in name (e.g. three-regions); a scenario file is read as a topology "
        "of one PrfaaS cluster, one PD cluster and one link.",
        show_default=False,
    ),
]


FaultsOpt = Annotated[
    bool,
    typer.Option(
        "--faults",
        help="Add N-1 on the global plan (fluid throughput): each PrfaaS site lost (rerouted, or its share "
        "prefilled locally), each link lost, each PD cluster drained.",
    ),
]


@topology_app.command("plan")
def plan(topology: TopologyArg, faults: FaultsOpt = False, json_output: JsonOpt = False) -> None:
    """The global plan (per PD cluster: threshold, split and the share of its long requests sent to each PrfaaS
    site; maximising the common scale factor of every region's rate), its proven bound, and the two
    alternatives: every region on its nearest site only, and no sharing (each site split among its regions in
    proportion to their rates).

    Example: prfaas-plan topology plan three-regions --faults --json
    """
    from prfaas_plan.io.topology import resolve_topology_path
    from prfaas_plan.report.topology import topology_study_dict
    from prfaas_plan.studies.topology import study_file

    with handled(json_output):
        study = study_file(resolve_topology_path(topology), faults=faults)
        payload = topology_study_dict(study)
    if json_output:
        emit(payload)
        return
    _render(payload)


def _render(payload: dict[str, Any]) -> None:
    from prfaas_plan.cli.render import DataTable, console

    out = console()
    plans = [payload["global_plan"], *payload["alternatives"].values()]
    summary = DataTable(title=f"{payload['topology']}: global plan and alternatives")
    for column in ("plan", "scale λ", "carried (req/s)", "USD/h", "USD per 1M req", "vs global"):
        summary.add_column(column, justify="left" if column == "plan" else "right")
    best = payload["global_plan"]["scale"]
    for p in plans:
        price = p["price"]
        total, per_m = price["total_usd_per_hour"], price["usd_per_million_requests"]
        summary.add_row(
            p["label"],
            f"{p['scale']:.4g}",
            f"{p['throughput_req_per_s']:.2f}",
            "—" if total is None else f"${total:,.0f}",
            "—" if per_m is None else f"${per_m:,.2f}",
            f"{p['scale'] / best:.3f}",
        )
        summary.add_data(
            {
                "plan": p["label"],
                "scale": p["scale"],
                "throughput_req_per_s": p["throughput_req_per_s"],
                "total_usd_per_hour": total,
                "usd_per_million_requests": per_m,
                "scale_over_global": p["scale"] / best,
            }
        )
    out.print(summary)
    bound = payload["bound"]
    out.print(
        f"Bound on λ over every threshold: {bound['scale']:.4g} (the global plan is within {bound['gap']:.2%}). "
        f"Gain of sharing: {payload['gain']['vs_no_sharing']:.3f}x over no sharing, "
        f"{payload['gain']['vs_nearest_site_only']:.3f}x over nearest site only."
    )
    for p in plans:
        regions = DataTable(title=f"{p['label']}: regions")
        for column in ("PD cluster", "threshold (tokens)", "offload p", "N_p / N_d", "carried (req/s)", "long to"):
            regions.add_column(column, justify="left" if column in ("PD cluster", "long to") else "right")
        for r in p["regions"]:
            shares = ", ".join(f"{k} {v:.0%}" for k, v in r["long_share_by_site"].items() if v > 0) or "—"
            regions.add_row(
                r["cluster"],
                f"{r['threshold_tokens']:,.0f}",
                f"{r['offload_fraction']:.1%}",
                f"{r['n_pd_prefill']} / {r['n_pd_decode']}",
                f"{r['carried_req_per_s']:.3f}",
                shares,
            )
            regions.add_data(
                {
                    "plan": p["label"],
                    "cluster": r["cluster"],
                    "threshold_tokens": r["threshold_tokens"],
                    "offload_fraction": r["offload_fraction"],
                    "n_pd_prefill": r["n_pd_prefill"],
                    "n_pd_decode": r["n_pd_decode"],
                    "carried_req_per_s": r["carried_req_per_s"],
                    "long_to": shares,
                }
            )
        out.print(regions)
        links = DataTable(title=f"{p['label']}: links and sites")
        for column in ("link", "req/s", "KV (Gbit/s)", "bandwidth (Gbit/s)", "utilisation"):
            links.add_column(column, justify="left" if column == "link" else "right")
        for lk in p["links"]:
            name = f"{lk['prfaas']} → {lk['pd']}"
            links.add_row(
                name,
                f"{lk['req_per_s']:.3f}",
                f"{lk['kv_gbit_per_s']:.2f}",
                f"{lk['bandwidth_gbit_per_s']:g}",
                f"{lk['utilization']:.1%}",
            )
            links.add_data(
                {
                    "plan": p["label"],
                    "link": name,
                    "req_per_s": lk["req_per_s"],
                    "kv_gbit_per_s": lk["kv_gbit_per_s"],
                    "bandwidth_gbit_per_s": lk["bandwidth_gbit_per_s"],
                    "utilization": lk["utilization"],
                }
            )
        for site, use in p["site_utilization"].items():
            links.add_row(f"site {site}", "", "", "", f"{use:.1%}")
            links.add_data(
                {
                    "plan": p["label"],
                    "link": f"site {site}",
                    "req_per_s": None,
                    "kv_gbit_per_s": None,
                    "bandwidth_gbit_per_s": None,
                    "utilization": use,
                }
            )
        out.print(links)
    if payload["n_minus_one"]:
        _render_faults(payload)


def _render_faults(payload: dict[str, Any]) -> None:
    from prfaas_plan.cli.render import DataTable, console

    table = DataTable(title="N-1 on the global plan (fluid throughput)")
    regions = list(payload["rates_req_per_s"])
    for column in ("loss", "scale λ", "carried (req/s)", "vs plan", *regions):
        table.add_column(column, justify="left" if column == "loss" else "right")
    for f in payload["n_minus_one"]:
        carried = f["carried_req_per_s"]
        table.add_row(
            f["fault"],
            f"{f['scale']:.4g}",
            f"{f['throughput_req_per_s']:.2f}",
            f"{f['throughput_vs_plan']:.1%}",
            *(f"{carried[r]:.2f}" for r in regions),
        )
        table.add_data(
            {
                "loss": f["fault"],
                "scale": f["scale"],
                "throughput_req_per_s": f["throughput_req_per_s"],
                "throughput_vs_plan": f["throughput_vs_plan"],
                **{f"{r}_req_per_s": carried[r] for r in regions},
            }
        )
    console().print(table)
