"""``prfaas-plan topology``: several PrfaaS and PD clusters planned together (issue 23)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from prfaas_plan.cli.common import check_finite, emit, handled
from prfaas_plan.io.limits import MAX_TTFT_S

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


SimulateOpt = Annotated[
    bool,
    typer.Option(
        "--simulate",
        help="Simulate the global plan (with --faults: every site or link lost a quarter into the run) and print "
        "each region's TTFT and whether every request was completed.",
    ),
]
LoadOpt = Annotated[
    float,
    typer.Option("--load", min=0.01, max=1.5, help="Simulated (and --ttft) rate as a fraction of the plan's λ."),
]
TtftOpt = Annotated[
    bool,
    typer.Option(
        "--ttft",
        help="Print each region's closed-form loaded TTFT (P50/P90/P99) at --load x λ (or --rate): each site a "
        "G/G/c pool shared by the regions routed to it, each link processor-sharing.",
    ),
]
RateOpt = Annotated[
    float | None,
    typer.Option(
        "--rate",
        min=0.0,
        help="With --ttft: the total rate of all regions (req/s, at the plan's mix) instead of --load.",
    ),
]
RequestsOpt = Annotated[int, typer.Option("--requests", min=100, max=1_000_000, help="Simulated requests per region.")]
SeedOpt = Annotated[int, typer.Option("--seed", min=0, max=2**63 - 1, help="Seed of the simulated workload.")]


@topology_app.command("plan")
def plan(
    topology: TopologyArg,
    faults: FaultsOpt = False,
    simulate: SimulateOpt = False,
    load: LoadOpt = 0.7,
    requests: RequestsOpt = 5_000,
    seed: SeedOpt = 0,
    ttft: TtftOpt = False,
    rate: RateOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """The global plan (per PD cluster: threshold, split and the share of its long requests sent to each PrfaaS
    site; maximising the common scale factor of every region's rate), its proven bound, and the two
    alternatives: every region on its nearest site only, and no sharing (each site split among its regions in
    proportion to their rates).

    Example: prfaas-plan topology plan three-regions --faults --json
    """
    from prfaas_plan.io.topology import resolve_topology_path
    from prfaas_plan.report.topology import topology_study_dict
    from prfaas_plan.studies.topology import SimulationRequest, study_file

    with handled(json_output):
        request = SimulationRequest(load=load, requests_per_region=requests, seed=seed) if simulate else None
        want_ttft = ttft or rate is not None
        study = study_file(
            resolve_topology_path(topology),
            faults=faults,
            simulate=request,
            ttft_load=load if want_ttft and rate is None else None,
            ttft_rate_req_per_s=rate,
        )
        payload = topology_study_dict(study)
    if json_output:
        emit(payload)
        return
    _render(payload)


def regions_table(plan: dict[str, Any], data: Callable[[dict[str, Any], str], dict[str, Any]]) -> Any:
    """The per-PD-cluster table of one plan (threshold, offload, split, carried rate, where its long requests
    go); ``data`` gives each row's CSV/JSON record from the region and its "long to" text."""
    from prfaas_plan.cli.render import DataTable

    regions = DataTable(title=f"{plan['label']}: regions")
    for column in ("PD cluster", "threshold (tokens)", "offload p", "N_p / N_d", "carried (req/s)", "long to"):
        regions.add_column(column, justify="left" if column in ("PD cluster", "long to") else "right")
    for r in plan["regions"]:
        shares = ", ".join(f"{k} {v:.0%}" for k, v in r["long_share_by_site"].items() if v > 0) or "—"
        regions.add_row(
            r["cluster"],
            f"{r['threshold_tokens']:,.0f}",
            f"{r['offload_fraction']:.1%}",
            f"{r['n_pd_prefill']} / {r['n_pd_decode']}",
            f"{r['carried_req_per_s']:.3f}",
            shares,
        )
        regions.add_data({"plan": plan["label"], **data(r, shares)})
    return regions


def _region_data(r: dict[str, Any], shares: str) -> dict[str, Any]:
    keys = ("cluster", "threshold_tokens", "offload_fraction", "n_pd_prefill", "n_pd_decode", "carried_req_per_s")
    return {**{k: r[k] for k in keys}, "long_to": shares}


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
        out.print(regions_table(p, _region_data))
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
    if payload["loaded_ttft"]:
        _render_loaded(payload)
    if payload["simulation"]:
        _render_simulation(payload)


SloOpt = Annotated[
    float | None,
    typer.Option(
        "--slo-p90",
        min=0.001,
        max=MAX_TTFT_S,
        help="P90 TTFT SLO in seconds (default: the topology's slo.ttft_p90_s).",
    ),
]


@topology_app.command("size")
def size(topology: TopologyArg, slo_p90: SloOpt = None, json_output: JsonOpt = False) -> None:
    """Instance counts per cluster (and the links to buy) that carry every region's rate (its traffic
    rate_req_per_s) within the P90 TTFT SLO at the lowest whole price found (GPUs, links, egress), with a lower
    bound on the GPU cost. Greedy search over counts, then a descent on the whole price (a local minimum);
    feasibility: the global plan carries the rates and its closed-form P90 meets the SLO per region.

    Example: prfaas-plan topology size three-regions --json
    """
    from prfaas_plan.io.topology import load_topology, resolve_topology_path
    from prfaas_plan.report.topology import topology_size_dict
    from prfaas_plan.studies.topology_size import size_topology

    with handled(json_output):
        check_finite({"--slo-p90": slo_p90})
        loaded = load_topology(resolve_topology_path(topology))
        payload = topology_size_dict(size_topology(loaded, slo_p90), loaded.name)
    if json_output:
        emit(payload)
        return
    from prfaas_plan.cli.render import DataTable, console

    table = DataTable(
        title=f"{payload['topology']}: sized for every region's rate, P90 <= {payload['slo_ttft_p90_s']:g} s"
    )
    # The bound's instances per cluster are its optimum's (fractional sites), not a floor for each cluster: one
    # may need fewer than there when another carries more (hunt18 H13: 36 found beside 40.00).
    for column in ("cluster", "instances", "at the bound's optimum"):
        table.add_column(column, justify="left" if column == "cluster" else "right")
    for name, n in payload["instances"].items():
        table.add_row(name, str(n), f"{payload['lower_bound']['instances'][name]:.2f}")
        table.add_data({"cluster": name, "instances": n, "bound_instances": payload["lower_bound"]["instances"][name]})
    console().print(table)
    cost = payload["usd_per_hour"]
    bound = payload["lower_bound"]
    console().print(
        f"USD/h: GPUs {cost['gpu']:,.1f} + links {cost['links']:,.1f} + egress {cost['egress_at_targets']:,.1f} = "
        f"{cost['total']:,.1f}; lower bound on GPUs {bound['gpu_usd_per_hour']:,.1f} (found is "
        f"{bound['gpu_cost_over_bound']:.1%} above; the column beside the counts is the bound's own plan, whose "
        f"clusters may each be above or below those found). "
        f"Links bought: {', '.join(payload['links_bought']) or 'none'}."
    )
    for r in payload["regions"]:
        console().print(
            f"{r['cluster']}: {r['rate_req_per_s']:.2f} req/s, threshold {r['threshold_tokens']:,.0f}, "
            f"N_p/N_d {r['n_pd_prefill']}/{r['n_pd_decode']}, P50/P90/P99 {r['ttft_p50_s']:.2f}/{r['ttft_p90_s']:.2f}/"
            f"{r['ttft_p99_s']:.2f} s"
        )


def _render_loaded(payload: dict[str, Any]) -> None:
    from prfaas_plan.cli.render import DataTable, console

    loaded = payload["loaded_ttft"]
    table = DataTable(title=f"Closed-form loaded TTFT at {loaded['load']:.3g} x λ, per region (s)")
    for column in ("PD cluster", "rate (req/s)", "mean", "P50", "P90", "P99", "unstable"):
        table.add_column(column, justify="left" if column in ("PD cluster", "unstable") else "right")
    for r in loaded["regions"]:
        cells = [r[f"ttft_{k}_s"] for k in ("mean", "p50", "p90", "p99")]
        table.add_row(
            r["cluster"],
            f"{r['rate_req_per_s']:.3f}",
            *("—" if v is None else f"{v:.3f}" for v in cells),
            r["unstable_stage"] or "",
        )
        table.add_data(
            {
                "cluster": r["cluster"],
                "rate_req_per_s": r["rate_req_per_s"],
                **{f"ttft_{k}_s": r[f"ttft_{k}_s"] for k in ("mean", "p50", "p90", "p99")},
                "unstable_stage": r["unstable_stage"],
            }
        )
    console().print(table)


def _render_simulation(payload: dict[str, Any]) -> None:
    from prfaas_plan.cli.render import DataTable, console

    runs = payload["simulation"]
    regions = [r["cluster"] for r in runs[0]["regions"]]
    table = DataTable(title=f"Simulated at {runs[0]['load']:g} x λ: P90 TTFT per region (s)")
    for column in ("run", *regions, "all completed", "moved"):
        table.add_column(column, justify="left" if column == "run" else "right")
    for run in runs:
        p90 = {r["cluster"]: r["ttft_p90_s"] for r in run["regions"]}
        table.add_row(
            run["run"],
            *("—" if p90[c] is None else f"{p90[c]:.2f}" for c in regions),
            "yes" if run["conserved"] else "NO",
            str(run["moved_by_faults"]),
        )
        table.add_data(
            {
                "run": run["run"],
                **{f"{c}_ttft_p90_s": p90[c] for c in regions},
                "conserved": run["conserved"],
                "moved_by_faults": run["moved_by_faults"],
            }
        )
    console().print(table)


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
