"""Rich rendering of the capacity commands (``size``, ``cost``)."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from prfaas_plan.cli.render import console
from prfaas_plan.optimize.carrier import Deployment
from prfaas_plan.optimize.economics import CostComparison
from prfaas_plan.optimize.headroom import Failure, Tornado
from prfaas_plan.optimize.matrix import HardwareMatrix
from prfaas_plan.optimize.robust import RobustPlan
from prfaas_plan.optimize.sizing import Sizing
from prfaas_plan.spec.scenario import Scenario
from prfaas_plan.units import GBIT_PER_S

_DASH = "—"


def _money(value: float) -> str:
    return f"${value:,.2f}" if value == value else _DASH


def _deployment_rows(d: Deployment | None, spec: Scenario) -> list[str]:
    if d is None:
        return ["does not carry the target"] + [""] * 8
    prfaas = f"{d.n_prfaas} × {spec.prfaas.hardware_key}" if d.n_prfaas else _DASH
    link = f"{d.bandwidth_bytes_per_s / GBIT_PER_S:g} Gbit/s" if d.n_prfaas else _DASH
    threshold = f"{d.threshold_tokens:,.0f}" if d.threshold_tokens is not None else _DASH
    return [
        prfaas,
        f"{d.n_local} × {spec.local.hardware_key} ({d.n_pd_prefill} P + {d.n_pd_decode} D)",
        link,
        threshold,
        f"{d.goodput_req_per_s:.2f}",
        _money(d.usd_per_hour),
        f"{_money(d.tokens_at_target.usd_per_million_input_tokens)} / "
        f"{_money(d.tokens_at_target.usd_per_million_output_tokens)}",
        f"{_money(d.tokens_at_goodput.usd_per_million_input_tokens)} / "
        f"{_money(d.tokens_at_goodput.usd_per_million_output_tokens)}",
        f"{d.egress_at_target_bytes_per_s / GBIT_PER_S:.1f}",
    ]


def print_sizing(spec: Scenario, sizing: Sizing, payload: dict[str, Any], check: dict[str, Any] | None) -> None:
    """The two sized deployments side by side, the given deployment's limit, the knee and the check."""
    out = console()
    t = sizing.target
    table = Table(
        title=f"{spec.name}: cheapest deployment for {t.rate_req_per_s:g} req/s with P{t.quantile * 100:g} TTFT "
        f"<= {t.ttft_slo_s:g} s",
        title_justify="left",
    )
    table.add_column("")
    table.add_column("PrfaaS-PD", justify="right")
    table.add_column("Homogeneous PD", justify="right")
    labels = [
        "PrfaaS instances",
        "local instances",
        "link",
        "threshold t (tokens)",
        "goodput (req/s)",
        "cost at target (USD/h)",
        "per 1M input / output tokens at target",
        "per 1M input / output tokens at goodput",
        "egress at target (Gbit/s)",
    ]
    for label, a, b in zip(
        labels, _deployment_rows(sizing.prfaas_pd, spec), _deployment_rows(sizing.homogeneous_pd, spec), strict=True
    ):
        table.add_row(label, a, b)
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
    own = payload["given_deployment"]
    limit = own["largest_rate_within_slo"]
    out.print(
        f"The scenario's own deployment ({own['n_prfaas']} PrfaaS + {own['n_local']} local, "
        f"{own['link_bandwidth_gbit_per_s']:g} Gbit/s) carries at most {limit['goodput_req_per_s']:.2f} req/s "
        f"within the SLO (t = {limit['threshold_tokens']:,.0f}, N_p = {limit['n_pd_prefill']})."
    )
    knee = payload.get("bandwidth_knee")
    if knee:
        kt = Table(title="What each link size buys the sized deployment", title_justify="left")
        for col in ("link (Gbit/s)", "Λ_max (req/s)", "binding", "link USD/h"):
            kt.add_column(col, justify="right")
        for p in knee["points"]:
            kt.add_row(
                f"{p['link_bandwidth_gbit_per_s']:g}",
                f"{p['throughput_req_per_s']:.2f}",
                p["binding"],
                _money(p["link_usd_per_hour"]),
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
                "undecided": "[yellow]the SLO lies inside the interval: at the SLO within simulation noise.[/yellow]",
            }[check["simulation_verdict"]],
        )
    out.print(
        "Goodput is the closed form's (latency.goodput); prices: "
        + "; ".join(f"{k}: {v}" for k, v in sizing.prices_source.items()),
        style="dim",
    )


def print_cost(spec: Scenario, c: CostComparison) -> None:
    """The plan priced beside the two homogeneous baselines, and the gain by price ratio."""
    out = console()
    hw = spec.local.hardware_key
    table = Table(
        title=f"{spec.name}: cost of the throughput-optimal plan and homogeneous PD ({hw})", title_justify="left"
    )
    for col in ("", "PrfaaS-PD", "Homogeneous, equal GPU count", "Homogeneous, equal cost"):
        table.add_column(col, justify="right" if col else "left")
    plan_cost = c.plan_cost
    rows = [
        (
            "instances",
            f"{spec.prfaas.instances} × {spec.prfaas.hardware_key} + {spec.local.instances} × {hw}",
            f"{c.equal_gpu.shape.instances} × {hw}",
            f"{c.equal_cost.shape.instances} × {hw}",
        ),
        (
            "Λ_max (req/s)",
            f"{c.plan.throughput_req_per_s:.2f}",
            f"{c.equal_gpu.plan.throughput_req_per_s:.2f}",
            f"{c.equal_cost.plan.throughput_req_per_s:.2f}",
        ),
        (
            "cost at Λ_max (USD/h)",
            _money(plan_cost.breakdown.total_usd_per_hour),
            _money(c.equal_gpu.cost.breakdown.total_usd_per_hour),
            _money(c.equal_cost.cost.breakdown.total_usd_per_hour),
        ),
        (
            "per 1M input / output tokens",
            f"{_money(plan_cost.tokens.usd_per_million_input_tokens)} / "
            f"{_money(plan_cost.tokens.usd_per_million_output_tokens)}",
            f"{_money(c.equal_gpu.cost.tokens.usd_per_million_input_tokens)} / "
            f"{_money(c.equal_gpu.cost.tokens.usd_per_million_output_tokens)}",
            f"{_money(c.equal_cost.cost.tokens.usd_per_million_input_tokens)} / "
            f"{_money(c.equal_cost.cost.tokens.usd_per_million_output_tokens)}",
        ),
        ("PrfaaS-PD gain", "", f"{c.equal_gpu.gain:+.1%}", f"{c.equal_cost.gain:+.1%}"),
    ]
    for row in rows:
        table.add_row(*row)
    out.print(table)
    out.print(f"equal GPU count: {c.equal_gpu.shape.detail}; equal cost: {c.equal_cost.shape.detail}.", style="dim")
    ratio = Table(
        title=f"Equal-cost gain by price ratio r = {spec.prfaas.hardware_key} / {hw} GPU-hour (GPUs only); "
        f"the scenario's prices give r = {c.price_ratio:.2f}",
        title_justify="left",
    )
    for col in ("r", "homogeneous instances", "homogeneous Λ_max (req/s)", "PrfaaS-PD gain"):
        ratio.add_column(col, justify="right")
    for r in c.ratio_table:
        mark = " ◀" if r.ratio_low <= c.price_ratio < r.ratio_high else ""
        ratio.add_row(
            f"{r.ratio_low:.2f}–{r.ratio_high:.2f}",
            str(r.homogeneous_instances),
            f"{r.homogeneous_throughput_req_per_s:.2f}",
            f"{r.gain:+.1%}{mark}",
        )
    out.print(ratio)
    out.print("Prices: " + "; ".join(f"{k}: {v}" for k, v in c.sources.items()), style="dim")


def print_matrix(spec: Scenario, m: HardwareMatrix) -> None:
    """One row per cell (sized deployment and provenance), then the frontier points."""
    out = console()
    t = m.target
    table = Table(
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
            continue
        table.add_row(
            f"{c.prefill} × {c.local}",
            f"{d.n_prfaas} / {d.n_local} / {d.bandwidth_bytes_per_s / GBIT_PER_S:g} Gbit/s",
            _money(d.usd_per_hour),
            f"{d.goodput_req_per_s:.2f}",
            f"{c.prefill_provenance}; {c.local_provenance}",
        )
    out.print(table)
    front = Table(title="Pareto frontier: cost against goodput (against throughput: ✓)", title_justify="left")
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
    out.print(front)


def print_headroom(
    spec: Scenario, target: Any, t: Tornado, failures: tuple[Failure, ...], robust: RobustPlan | None = None
) -> None:
    """The tornado table (widest goodput swing first) and the N-1 table."""
    out = console()
    table = Table(
        title=f"{spec.name}: sensitivity to each input (±{t.step:.0%}, t and split re-optimised); base Λ_max "
        f"{t.throughput_req_per_s:.2f}, goodput {t.goodput_req_per_s:.2f} req/s at P90 <= {target.ttft_slo_s:g} s",
        title_justify="left",
    )
    for col in ("input", "Λ_max low → high", "goodput low → high", "USD/1M tokens low → high"):
        table.add_column(col, justify="left" if col == "input" else "right")
    for b in t.bars:
        table.add_row(
            b.input,
            f"{b.throughput_req_per_s[0]:.2f} → {b.throughput_req_per_s[1]:.2f}",
            f"{b.goodput_req_per_s[0]:.2f} → {b.goodput_req_per_s[1]:.2f}",
            f"{_money(b.usd_per_million_tokens[0])} → {_money(b.usd_per_million_tokens[1])}",
        )
    out.print(table)
    if t.skipped:
        out.print(f"Not applicable to this traffic: {', '.join(t.skipped)}.", style="dim")
    n1 = Table(
        title=f"N-1 at {target.rate_req_per_s:g} req/s (same hardware, t and split re-optimised)", title_justify="left"
    )
    for col in ("case", "PrfaaS / local / link", "goodput (req/s)", "carries target", "P90 TTFT at target"):
        n1.add_column(col, justify="left" if col == "case" else "right")
    for f in failures:
        n1.add_row(
            f.case,
            f"{f.n_prfaas} / {f.n_local} / {f.link_bandwidth_bytes_per_s / GBIT_PER_S:g} Gbit/s",
            f"{f.carried.goodput_req_per_s:.2f}",
            "yes" if f.carries_target else "[bold red]no[/bold red]",
            _DASH if f.ttft_p90_at_target_s is None else f"{f.ttft_p90_at_target_s:.2f} s",
        )
    out.print(n1)
    if robust is not None:
        low = robust.bandwidth_at_quantile_bytes_per_s / GBIT_PER_S
        mean = robust.bandwidth_mean_bytes_per_s / GBIT_PER_S
        rt = Table(
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
        rt.add_row(
            "mean bandwidth",
            f"{robust.at_mean.threshold_tokens:,.0f}",
            str(robust.at_mean.n_pd_prefill),
            f"{robust.mean_plan_goodput_at_quantile_req_per_s:.2f}",
            f"{robust.at_mean.goodput_req_per_s:.2f}",
        )
        out.print(rt)
