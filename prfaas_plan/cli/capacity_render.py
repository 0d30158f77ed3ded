"""Rich rendering of the capacity commands (``size``, ``cost``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from prfaas_plan.cli.render import DataTable, Datum, Quantity, console, cost_quantities, one, quantity_table
from prfaas_plan.report.jsonsafe import finite
from prfaas_plan.report.token_cost import token_cost_dict
from prfaas_plan.units import GBIT_PER_S

if TYPE_CHECKING:
    # Annotations only: `optimize` draws its shape line from here without loading the sizing, matrix,
    # headroom and economics searches (start-up time).
    from prfaas_plan.optimize.carrier import Deployment
    from prfaas_plan.optimize.economics import CostComparison, PlanCost
    from prfaas_plan.optimize.headroom import Failure, Tornado
    from prfaas_plan.optimize.matrix import HardwareMatrix
    from prfaas_plan.optimize.robust import RobustPlan
    from prfaas_plan.optimize.sizing import Sizing
    from prfaas_plan.spec.scenario import Scenario

_DASH = "—"


def _money(value: float) -> str:
    return f"${value:,.2f}" if value == value else _DASH


def _deployment_quantities(spec: Scenario) -> list[Quantity[Deployment | None]]:
    """The rows of a sized deployment: what it is made of, its goodput, its cost at the target (split into GPUs,
    link and egress) and ``optimize.cost.token_cost``'s figures at the target rate and at its goodput."""

    def made(d: Deployment | None, text: Callable[[Deployment], str], empty: str = "") -> str:
        return empty if d is None else text(d)

    def value(get: Callable[[Deployment], Datum]) -> Callable[[Deployment | None], Datum]:
        return lambda d: None if d is None else get(d)

    def tokens(d: Deployment | None, at: str) -> dict[str, Any] | None:
        if d is None:
            return None
        t = d.tokens_at_target if at == "target" else d.tokens_at_goodput
        c = d.cost_at_target
        split: dict[str, float | None]
        if at == "target":
            split = {
                "gpus_usd_per_hour": c.prfaas_usd_per_hour + c.local_usd_per_hour,
                "link_usd_per_hour": c.link_usd_per_hour,
                "egress_usd_per_hour": c.egress_usd_per_hour,
            }
        else:
            split = {"gpus_usd_per_hour": None, "link_usd_per_hour": None, "egress_usd_per_hour": None}
        return {"usd_per_hour": t.usd_per_hour, **split, **token_cost_dict(t)}

    at_target: list[Quantity[Deployment | None]] = cost_quantities("target", "target", lambda d: tokens(d, "target"))
    per_token_at_goodput: Quantity[Deployment | None] = cost_quantities(
        "goodput", "goodput", lambda d: tokens(d, "goodput")
    )[2]
    return [
        Quantity(
            label="PrfaaS instances",
            text=lambda d: made(
                d,
                lambda x: f"{x.n_prfaas} × {spec.prfaas.hardware_key}" if x.n_prfaas else _DASH,
                "does not carry the target",
            ),
            data=lambda d: {"carries_target": d is not None, "n_prfaas": value(lambda x: x.n_prfaas)(d)},
        ),
        Quantity(
            label="local instances",
            text=lambda d: made(
                d, lambda x: f"{x.n_local} × {spec.local.hardware_key} ({x.n_pd_prefill} P + {x.n_pd_decode} D)"
            ),
            data=lambda d: {
                "n_local": value(lambda x: x.n_local)(d),
                "n_pd_prefill": value(lambda x: x.n_pd_prefill)(d),
                "n_pd_decode": value(lambda x: x.n_pd_decode)(d),
            },
        ),
        Quantity(
            label="link",
            text=lambda d: made(
                d, lambda x: f"{x.bandwidth_bytes_per_s / GBIT_PER_S:g} Gbit/s" if x.n_prfaas else _DASH
            ),
            data=one("link_bandwidth_gbit_per_s", value(lambda x: x.bandwidth_bytes_per_s / GBIT_PER_S)),
        ),
        Quantity(
            label="threshold t (tokens)",
            text=lambda d: made(d, lambda x: f"{x.threshold_tokens:,.0f}" if x.threshold_tokens is not None else _DASH),
            data=one("threshold_tokens", value(lambda x: x.threshold_tokens)),
        ),
        Quantity(
            label="goodput (req/s)",
            text=lambda d: made(d, lambda x: f"{x.goodput_req_per_s:.2f}"),
            data=one("goodput_req_per_s", value(lambda x: x.goodput_req_per_s)),
        ),
        *at_target,
        per_token_at_goodput,
        Quantity(
            label="egress at target (Gbit/s)",
            text=lambda d: made(d, lambda x: f"{x.egress_at_target_bytes_per_s / GBIT_PER_S:.1f}"),
            data=one("egress_at_target_gbit_per_s", value(lambda x: x.egress_at_target_bytes_per_s / GBIT_PER_S)),
        ),
    ]


def _offloads_nothing(d: Deployment | None) -> bool:
    """Whether a sized PrfaaS-PD deployment routes no request to its PrfaaS pool (threshold above every one)."""
    return d is not None and d.n_prfaas > 0 and d.offload_fraction == 0.0


def print_sizing(spec: Scenario, sizing: Sizing, payload: dict[str, Any], check: dict[str, Any] | None) -> None:
    """The two sized deployments side by side, the given deployment's limit, the knee and the check."""
    out = console()
    t = sizing.target
    table = quantity_table(
        [("PrfaaS-PD", sizing.prfaas_pd), ("Homogeneous PD", sizing.homogeneous_pd)],
        _deployment_quantities(spec),
        name_key="deployment",
        title=f"{spec.name}: cheapest deployment for {t.rate_req_per_s:g} req/s with P{t.quantile * 100:g} TTFT "
        f"<= {t.ttft_slo_s:g} s",
        title_justify="left",
    )
    out.print(table)
    floor = sizing.cost_floor_usd_per_hour
    if floor is not None and sizing.prfaas_pd is not None:
        found = sizing.prfaas_pd.usd_per_hour
        out.print(
            f"Large search space: PrfaaS-PD found by a pattern search from the fluid optimum, not proven cheapest. "
            f"No deployment in the space costs less than {floor:,.2f} USD/h (the fluid floor); this one is "
            f"within {(found / floor - 1) * 100:.1f} % of it.",
            style="yellow",
        )
    for reason in sizing.reasons:
        out.print(f"infeasible: {reason}", style="yellow")
    cheaper = sizing.prfaas_pd.cheaper_plan if sizing.prfaas_pd is not None else None
    if sizing.prfaas_pd is not None and cheaper is not None:
        own = sizing.prfaas_pd
        where = (
            "offloading nothing"
            if cheaper.offload_fraction == 0.0
            else f"t = {cheaper.threshold_tokens:,.0f}, {cheaper.offload_fraction:.1%} offloaded"
        )
        out.print(
            f"The PrfaaS-PD deployment also carries the target at a cheaper plan ({where}, N_p/N_d "
            f"{cheaper.n_pd_prefill}/{cheaper.n_pd_decode}): {cheaper.cost_at_target.total_usd_per_hour:,.2f} USD/h "
            f"at the target, {own.usd_per_hour - cheaper.cost_at_target.total_usd_per_hour:,.2f} USD/h less in egress, "
            f"with P{t.quantile * 100:g} TTFT {cheaper.ttft_quantile_at_target_s:.2f} s against the SLO's "
            f"{t.ttft_slo_s:g} s: less margin than its own plan above, which has the most."
            + (
                " Offloading nothing, its PrfaaS instances would sit idle: homogeneous PD with them added."
                if cheaper.offload_fraction == 0.0
                else ""
            ),
            style="yellow",
        )
    if _offloads_nothing(sizing.prfaas_pd):
        out.print(
            "The cheapest PrfaaS-PD deployment offloads nothing (its threshold is above every request): its PrfaaS "
            "instances sit idle, and it is homogeneous PD with them added.",
            style="yellow",
        )
    own = payload["given_deployment"]
    limit = own["largest_rate_within_slo"]
    out.print(
        f"The scenario's own deployment ({own['n_prfaas']} PrfaaS + {own['n_local']} local, "
        f"{own['link_bandwidth_gbit_per_s']:g} Gbit/s) carries at most {limit['goodput_req_per_s']:.2f} req/s "
        f"within the SLO (t = {limit['threshold_tokens']:,.0f}, N_p = {limit['n_pd_prefill']})."
    )
    knee = payload.get("bandwidth_knee")
    if knee:
        kt = DataTable(title="What each link size buys the sized deployment", title_justify="left")
        for col in ("link (Gbit/s)", "Λ_max (req/s)", "binding", "link USD/h"):
            kt.add_column(col, justify="right")
        for p in knee["points"]:
            kt.add_row(
                f"{p['link_bandwidth_gbit_per_s']:g}",
                f"{p['throughput_req_per_s']:.2f}",
                p["binding"],
                _money(p["link_usd_per_hour"]),
            )
            kt.add_data(
                {
                    "link_bandwidth_gbit_per_s": p["link_bandwidth_gbit_per_s"],
                    "throughput_req_per_s": p["throughput_req_per_s"],
                    "binding": p["binding"],
                    "link_usd_per_hour": p["link_usd_per_hour"],
                }
            )
        out.print(kt)
        where = knee["knee_gbit_per_s"]
        out.print(
            "The link stops binding at "
            + (f"{where:g} Gbit/s." if where is not None else "no size listed: it binds throughout."),
            style="dim",
        )
    if check is not None:
        hw = check["simulated_p90_half_width_s"]
        out.print(
            f"Simulated at {check['rate_req_per_s']:g} req/s: P90 TTFT {check['simulated_p90_s']:.2f} s"
            + (f" ± {hw:.2f}" if hw is not None else "")
            + f" (closed form {check['closed_form_p90_s']:.2f} s; {check['replications']} × "
            f"{check['requests']:,} requests): "
            + {
                "meets": "meets the SLO.",
                "misses": "[bold red]misses the SLO[/bold red].",
                "undecided": "[yellow]undecided within the simulation budget: the SLO lies inside the "
                "interval.[/yellow]",
            }[check["simulation_verdict"]]
            + (f" Stopped by: {check['decision']['stopped_by']}." if check.get("decision") else ""),
        )
    out.print(
        "Goodput is the closed form's (latency.goodput); prices: "
        + "; ".join(f"{k}: {v}" for k, v in sizing.prices_source.items()),
        style="dim",
    )


def print_cost(spec: Scenario, c: CostComparison) -> None:
    """The plan priced beside the two homogeneous baselines (cost split and cost per token at each one's Λ_max),
    and the gain by price ratio."""
    out = console()
    hw = spec.local.hardware_key
    plan_cost = c.plan_cost
    Item = tuple[str, float, "PlanCost", float | None]
    items: list[tuple[str, Item]] = [
        (
            "PrfaaS-PD",
            (
                f"{spec.prfaas.instances} × {spec.prfaas.hardware_key} + {spec.local.instances} × {hw}",
                c.plan.throughput_req_per_s,
                plan_cost,
                None,
            ),
        ),
        (
            "Homogeneous, equal GPU count",
            (
                f"{c.equal_gpu.shape.instances} × {hw}",
                c.equal_gpu.plan.throughput_req_per_s,
                c.equal_gpu.cost,
                c.equal_gpu.gain,
            ),
        ),
        (
            "Homogeneous, equal cost",
            (
                f"{c.equal_cost.shape.instances} × {hw}",
                c.equal_cost.plan.throughput_req_per_s,
                c.equal_cost.cost,
                c.equal_cost.gain,
            ),
        ),
    ]

    def at(cost: PlanCost) -> dict[str, Any]:
        b = cost.breakdown
        return {
            "usd_per_hour": b.total_usd_per_hour,
            "gpus_usd_per_hour": b.prfaas_usd_per_hour + b.local_usd_per_hour,
            "link_usd_per_hour": b.link_usd_per_hour,
            "egress_usd_per_hour": b.egress_usd_per_hour,
            **token_cost_dict(cost.tokens),
        }

    quantities: list[Quantity[Item]] = [
        Quantity(
            label="instances",
            text=lambda i: i[0],
            data=lambda i: {"n_prfaas": i[2].n_prfaas, "n_local": i[2].n_local},
        ),
        Quantity(label="Λ_max (req/s)", text=lambda i: f"{i[1]:.2f}", data=one("throughput_req_per_s", lambda i: i[1])),
        *cost_quantities("Λ_max", "throughput", lambda i: at(i[2])),
        Quantity(
            label="PrfaaS-PD gain",
            text=lambda i: "" if i[3] is None else f"{i[3]:+.1%}",
            data=one("prfaas_pd_gain_fraction", lambda i: i[3]),
        ),
    ]
    table = quantity_table(
        items,
        quantities,
        name_key="deployment",
        title=f"{spec.name}: cost of the throughput-optimal plan and homogeneous PD ({hw})",
        title_justify="left",
    )
    out.print(table)
    out.print(f"equal GPU count: {c.equal_gpu.shape.detail}; equal cost: {c.equal_cost.shape.detail}.", style="dim")
    ratio = DataTable(
        title=f"Equal-cost gain by price ratio r = {spec.prfaas.hardware_key} / {hw} GPU-hour (GPUs only); "
        f"the scenario's prices give r = {c.price_ratio:.2f}",
        title_justify="left",
    )
    for col in ("r", "homogeneous instances", "homogeneous Λ_max (req/s)", "PrfaaS-PD gain"):
        ratio.add_column(col, justify="right")
    for r in c.ratio_table:
        here = r.ratio_low <= c.price_ratio < r.ratio_high
        ratio.add_row(
            f"{r.ratio_low:.2f}–{r.ratio_high:.2f}",
            str(r.homogeneous_instances),
            f"{r.homogeneous_throughput_req_per_s:.2f}",
            f"{r.gain:+.1%}{' ◀' if here else ''}",
        )
        ratio.add_data(
            {
                "price_ratio_from": r.ratio_low,
                "price_ratio_to": r.ratio_high,
                "homogeneous_instances": r.homogeneous_instances,
                "homogeneous_throughput_req_per_s": r.homogeneous_throughput_req_per_s,
                "prfaas_pd_gain_fraction": r.gain,
                "scenario_price_ratio_in_range": here,
            }
        )
    out.print(ratio)
    out.print("Prices: " + "; ".join(f"{k}: {v}" for k, v in c.sources.items()), style="dim")


def _cell_data(c: Any, d: Deployment | None) -> dict[str, Datum]:
    """A matrix cell as data: the pair, its sized deployment (PrfaaS-PD; empty when none carries the target)."""
    return {
        "kind": "prfaas-pd",
        "prefill_hardware": c.prefill,
        "local_hardware": c.local,
        "n_prfaas": None if d is None else d.n_prfaas,
        "n_local": None if d is None else d.n_local,
        "link_bandwidth_gbit_per_s": None if d is None else d.bandwidth_bytes_per_s / GBIT_PER_S,
        "usd_per_hour": None if d is None else d.usd_per_hour,
        "goodput_req_per_s": None if d is None else d.goodput_req_per_s,
        "infeasible": c.reason if d is None else None,
        "prefill_provenance": c.prefill_provenance,
        "local_provenance": c.local_provenance,
    }


def print_matrix(spec: Scenario, m: HardwareMatrix) -> None:
    """One row per cell (sized deployment and provenance), then the frontier points."""
    out = console()
    t = m.target
    table = DataTable(
        title=f"{spec.name}: each hardware pair sized to {t.rate_req_per_s:g} req/s, P90 TTFT <= {t.ttft_slo_s:g} s",
        title_justify="left",
    )
    for col in ("prefill × local", "PrfaaS / local / link", "USD/h", "goodput", "evidence (prefill; local)"):
        table.add_column(col, justify="left" if col.startswith(("prefill", "evidence")) else "right")
    for c in m.cells:
        d = c.sizing.prfaas_pd if c.sizing is not None else None
        if d is None:
            table.add_row(
                f"{c.prefill} × {c.local}",
                f"[yellow]{c.reason}[/yellow]",
                "",
                "",
                f"{c.prefill_provenance}; {c.local_provenance}",
            )
            table.add_data(_cell_data(c, None))
            continue
        table.add_row(
            f"{c.prefill} × {c.local}",
            f"{d.n_prfaas} / {d.n_local} / {d.bandwidth_bytes_per_s / GBIT_PER_S:g} Gbit/s",
            _money(d.usd_per_hour),
            f"{d.goodput_req_per_s:.2f}",
            f"{c.prefill_provenance}; {c.local_provenance}",
        )
        table.add_data(_cell_data(c, d))
    shown: set[str] = set()
    for c in m.cells:  # homogeneous PD on each local accelerator, once (it does not depend on the prefill side)
        h = c.sizing.homogeneous_pd if c.sizing is not None else None
        if c.local in shown or h is None:
            continue
        shown.add(c.local)
        table.add_row(
            f"homogeneous PD × {c.local}",
            f"— / {h.n_local} / —",
            _money(h.usd_per_hour),
            f"{h.goodput_req_per_s:.2f}",
            c.local_provenance,
        )
        table.add_data(
            {**_cell_data(c, h), "kind": "homogeneous-pd", "prefill_hardware": None, "prefill_provenance": None}
        )
    out.print(table)
    idle = [f"{c.prefill} × {c.local}" for c in m.cells if c.sizing and _offloads_nothing(c.sizing.prfaas_pd)]
    if idle:
        out.print(
            "Offloading nothing (the cheapest PrfaaS-PD is homogeneous PD with idle PrfaaS instances): "
            + ", ".join(idle)
            + ".",
            style="yellow",
        )
    for c in m.cells:  # shape: auto (optimize.shapes): the shapes chosen and the next-best sized pair
        if c.shape:
            cost = "no deployment" if c.next_usd_per_hour is None else f"{_money(c.next_usd_per_hour)}/h"
            out.print(
                f"shape {c.prefill} × {c.local}: {c.shape}" + (f"; next {c.next_shape}: {cost}" * bool(c.next_shape))
            )
    front = DataTable(title="Pareto frontier: cost against goodput (against throughput: ✓)", title_justify="left")
    for col in ("deployment", "USD/h", "goodput (req/s)", "Λ_max (req/s)", "on throughput frontier"):
        front.add_column(col, justify="left" if col == "deployment" else "right")
    for i in m.frontier_goodput:
        p = m.points[i]
        name = f"{p.prefill} × {p.local}" if p.kind == "prfaas-pd" else f"homogeneous {p.local}"
        front.add_row(
            name,
            _money(p.usd_per_hour),
            f"{p.goodput_req_per_s:.2f}",
            f"{p.throughput_req_per_s:.2f}",
            "✓" if i in m.frontier_throughput else "",
        )
        front.add_data(
            {
                "deployment": name,
                "kind": p.kind,
                "usd_per_hour": p.usd_per_hour,
                "goodput_req_per_s": p.goodput_req_per_s,
                "throughput_req_per_s": p.throughput_req_per_s,
                "on_throughput_frontier": i in m.frontier_throughput,
            }
        )
    out.print(front)


def print_headroom(
    spec: Scenario, target: Any, t: Tornado, failures: tuple[Failure, ...], robust: RobustPlan | None = None
) -> None:
    """The tornado table (widest goodput swing first) and the N-1 table."""
    out = console()
    table = DataTable(
        title=f"{spec.name}: sensitivity to each input (±{t.step:.0%}, t and split re-optimised); base Λ_max "
        f"{t.throughput_req_per_s:.2f}, goodput {t.goodput_req_per_s:.2f} req/s at P90 <= {target.ttft_slo_s:g} s",
        title_justify="left",
    )
    for col in ("input", "Λ_max low → high", "goodput low → high", "USD per 1M tokens at goodput low → high"):
        table.add_column(col, justify="left" if col == "input" else "right")
    for b in t.bars:
        table.add_row(
            b.input,
            f"{b.throughput_req_per_s[0]:.2f} → {b.throughput_req_per_s[1]:.2f}",
            f"{b.goodput_req_per_s[0]:.2f} → {b.goodput_req_per_s[1]:.2f}",
            f"{_money(b.usd_per_million_tokens[0])} → {_money(b.usd_per_million_tokens[1])}",
        )
        table.add_data(
            {
                "input": b.input,
                "low_factor": b.low_factor,
                "high_factor": b.high_factor,
                "throughput_low_req_per_s": b.throughput_req_per_s[0],
                "throughput_high_req_per_s": b.throughput_req_per_s[1],
                "goodput_low_req_per_s": b.goodput_req_per_s[0],
                "goodput_high_req_per_s": b.goodput_req_per_s[1],
                "usd_per_million_tokens_at_goodput_low": finite(b.usd_per_million_tokens[0]),
                "usd_per_million_tokens_at_goodput_high": finite(b.usd_per_million_tokens[1]),
            }
        )
    out.print(table)
    if t.skipped:
        out.print(f"Not applicable to this traffic: {', '.join(t.skipped)}.", style="dim")
    n1 = DataTable(
        title=f"N-1 at {target.rate_req_per_s:g} req/s (same hardware, t and split re-optimised)", title_justify="left"
    )
    columns = ("case", "PrfaaS / local / link", "plan: t / N_p + N_d", "goodput (req/s)", "carries target")
    for col in (*columns, "P90 TTFT at target (this plan)"):
        n1.add_column(col, justify="left" if col == "case" else "right")
    for f in failures:
        n_decode = f.n_local - f.carried.n_pd_prefill
        n1.add_row(
            f.case,
            f"{f.n_prfaas} / {f.n_local} / {f.link_bandwidth_bytes_per_s / GBIT_PER_S:g} Gbit/s",
            f"{f.carried.threshold_tokens:,.0f} / {f.carried.n_pd_prefill} + {n_decode}",
            f"{f.carried.goodput_req_per_s:.2f}",
            "yes" if f.carries_target else "[bold red]no[/bold red]",
            _DASH if f.ttft_p90_at_target_s is None else f"{f.ttft_p90_at_target_s:.2f} s",
        )
        n1.add_data(
            {
                "case": f.case,
                "n_prfaas": f.n_prfaas,
                "n_local": f.n_local,
                "link_bandwidth_gbit_per_s": f.link_bandwidth_bytes_per_s / GBIT_PER_S,
                "threshold_tokens": f.carried.threshold_tokens,
                "n_pd_prefill": f.carried.n_pd_prefill,
                "n_pd_decode": n_decode,
                "goodput_req_per_s": f.carried.goodput_req_per_s,
                "carries_target": f.carries_target,
                "ttft_p90_at_target_s": f.ttft_p90_at_target_s,
            }
        )
    out.print(n1)
    out.print(
        "Each case's P90 is at its own goodput-optimal plan (t and split above), so it can differ from a P90 of the "
        "same deployment at another plan (e.g. the throughput-optimal split of optimize).",
        style="dim",
    )
    if robust is not None:
        low = robust.bandwidth_at_quantile_bytes_per_s / GBIT_PER_S
        mean = robust.bandwidth_mean_bytes_per_s / GBIT_PER_S
        rt = DataTable(
            title=f"Robust plan: goodput at the link's P{robust.quantile * 100:g} bandwidth ({low:.1f} Gbit/s) "
            f"and at its mean ({mean:.1f} Gbit/s)",
            title_justify="left",
        )
        for col in (
            "planned for",
            "t (tokens)",
            "N_p",
            f"goodput at {low:.1f} Gbit/s",
            f"goodput at {mean:.1f} Gbit/s",
        ):
            rt.add_column(col, justify="left" if col == "planned for" else "right")
        rt.add_row(
            f"P{robust.quantile * 100:g} bandwidth (robust)",
            f"{robust.robust.threshold_tokens:,.0f}",
            str(robust.robust.n_pd_prefill),
            f"{robust.robust.goodput_req_per_s:.2f}",
            f"{robust.robust_goodput_at_mean_req_per_s:.2f}",
        )
        rt.add_data(
            {
                "planned_for": "bandwidth_quantile",
                "threshold_tokens": robust.robust.threshold_tokens,
                "n_pd_prefill": robust.robust.n_pd_prefill,
                "goodput_at_quantile_bandwidth_req_per_s": robust.robust.goodput_req_per_s,
                "goodput_at_mean_bandwidth_req_per_s": robust.robust_goodput_at_mean_req_per_s,
            }
        )
        rt.add_row(
            "mean bandwidth",
            f"{robust.at_mean.threshold_tokens:,.0f}",
            str(robust.at_mean.n_pd_prefill),
            f"{robust.mean_plan_goodput_at_quantile_req_per_s:.2f}",
            f"{robust.at_mean.goodput_req_per_s:.2f}",
        )
        rt.add_data(
            {
                "planned_for": "bandwidth_mean",
                "threshold_tokens": robust.at_mean.threshold_tokens,
                "n_pd_prefill": robust.at_mean.n_pd_prefill,
                "goodput_at_quantile_bandwidth_req_per_s": robust.mean_plan_goodput_at_quantile_req_per_s,
                "goodput_at_mean_bandwidth_req_per_s": robust.at_mean.goodput_req_per_s,
            }
        )
        out.print(rt)


def shape_line(shapes: dict[str, Any]) -> str:
    """One line: each pool's instance shape (chosen or fixed), the criterion and the next-best pair's figure
    (``report.shapes.shape_choice_to_dict``'s dictionary)."""
    pools = shapes["pools"]
    held = ", ".join(
        f"{name} {p['gpus']} GPUs {p['label']} ({'chosen' if p['chosen_by'] == 'auto' else 'fixed'})"
        for name, p in (("PrfaaS", pools["prfaas"]), ("local", pools["local"]))
    )
    nxt = shapes["next_best"]
    if not any(p["chosen_by"] == "auto" for p in pools.values()):
        return f"Instance shapes: {held}; no alternative priced (no pool says shape: auto)."
    unit = shapes["unit"]
    chosen = shapes["chosen"]["value"]

    def figure(value: float | None) -> str:
        if value is None:
            return "none"
        return f"{value:,.2f} {unit}" if unit == "USD/h" else f"{value:.4g} {unit}"

    if nxt is None:
        tail = "no other shape pair left to price"
    elif nxt["value"] is None:
        tail = f"next best {nxt['label']}: {nxt['reason']}"
    else:
        tail = f"next best {nxt['label']} at {figure(nxt['value'])}"
    ruled = len(shapes["ruled_out"])
    if ruled:
        tail += f"; {ruled} shape(s) ruled out by memory (JSON shapes.ruled_out has the numbers)"
    return f"Instance shapes: {held}; by {shapes['criterion']}: {figure(chosen)}; {tail}."
