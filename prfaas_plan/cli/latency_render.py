"""Options and rich rendering for TTFT under load and goodput (``evaluate``/``optimize`` ``--rate``,
``--load``, ``--curve``, ``--objective goodput``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from prfaas_plan.errors import InputError, Problem
from prfaas_plan.latency import LoadedTtft, TtftSummary
from prfaas_plan.latency.profile import Validity
from prfaas_plan.optimize import Comparison, GoodputComparison, GoodputEvaluation, PlanEvaluation
from prfaas_plan.spec.scenario import Scenario
from prfaas_plan.studies.under_load import UnderLoad
from prfaas_plan.studies.verify import GoodputCheck, LoadedCheck
from prfaas_plan.throughput import STAGES

if TYPE_CHECKING:  # rich is imported only when a table is drawn (--json never pays for it)
    from rich.console import Console
    from rich.table import Table

_DASH = "—"
_STAGE_LABELS = {"prfaas_compute": "PrfaaS", "prfaas_link": "link", "pd_prefill": "PD-P", "pd_decode": "PD-D"}


def _finite(name: str, value: float | None, minimum: float, strict: bool) -> list[Problem]:
    if value is None:
        return []
    ok = math.isfinite(value) and (value > minimum if strict else value >= minimum)
    if ok:
        return []
    relation = ">" if strict else ">="
    return [Problem(field=name, message=f"must be a finite number {relation} {minimum:g}, got {value}")]


def check_load_options(rate: float | None, load: float | None) -> None:
    """--rate and --load: finite, > 0, not both (InputError naming the option). Zero is refused: nothing
    arrives, so there is nothing to simulate, and the TTFT without queueing is the table's unloaded TTFT."""
    problems = _finite("--rate", rate, 0.0, strict=True) + _finite("--load", load, 0.0, strict=True)
    if rate is not None and load is not None:
        problems.append(Problem(field="--rate/--load", message="give one of them, not both"))
    if problems:
        raise InputError(problems)


def goodput_slo(
    objective: str, ttft_p90_s: float | None, scenario: Scenario, rate: float | None, load: float | None, curve: bool
) -> float | None:
    """Check --objective and its companions; the P90 TTFT SLO for the goodput objective, else None."""
    problems = []
    if objective not in ("throughput", "goodput"):
        problems.append(Problem(field="--objective", message=f"must be 'throughput' or 'goodput', got {objective!r}"))
    problems += _finite("--ttft-p90-s", ttft_p90_s, 0.0, strict=True)
    if objective == "throughput" and ttft_p90_s is not None:
        problems.append(Problem(field="--ttft-p90-s", message="applies only with --objective goodput"))
    slo = ttft_p90_s if ttft_p90_s is not None else scenario.slo.ttft_p90_s
    if objective == "goodput":
        if slo is None:
            problems.append(
                Problem(field="--ttft-p90-s", message="required with --objective goodput (the scenario sets no slo)")
            )
        for name, given in (("--rate", rate is not None), ("--load", load is not None), ("--curve", curve)):
            if given:
                problems.append(
                    Problem(field=name, message="not available with --objective goodput (use `evaluate` on the plan)")
                )
    if problems:
        raise InputError(problems)
    return slo if objective == "goodput" else None


def _s(value: float | None) -> str:
    return _DASH if value is None else f"{value:.2f}"


def _percentiles(summary: TtftSummary | None) -> str:
    if summary is None:
        return _DASH
    return f"{summary.mean_s:.2f} / {summary.p50_s:.2f} / {summary.p90_s:.2f} / {summary.p99_s:.2f}"


def _utilization(loaded: LoadedTtft) -> str:
    parts = [f"{_STAGE_LABELS[s]} {loaded.utilization[s]:.0%}" for s in STAGES if loaded.utilization[s] > 0]
    return " · ".join(parts) if all(math.isfinite(loaded.utilization[s]) for s in STAGES) else "no servers"


def _status(loaded: LoadedTtft) -> str:
    return "stable" if loaded.stable else f"[bold red]unstable ({loaded.unstable_stage})[/bold red]"


def loaded_table(comparison: Comparison, view: UnderLoad, *, plan_title: str) -> Table:
    """The plan and both baselines under one load: utilisation, mean waits and TTFT percentiles."""
    from rich.table import Table

    assert view.checks is not None and view.loaded is not None
    table = Table(title=f"TTFT under load: {view.label}, {view.traffic_label} (closed form)", title_justify="left")
    table.add_column("")
    for title in (plan_title, "Homogeneous PD", "Naive heterogeneous"):
        table.add_column(title, justify="right")
    columns = [view.loaded[k] for k in ("plan", "homogeneous_pd", "naive_heterogeneous")]
    plans = [comparison.plan, comparison.homogeneous_pd, comparison.naive_heterogeneous]

    def waits(x: LoadedTtft) -> str:
        if x.wait_mean_s is None:
            return _DASH
        w = x.wait_mean_s
        return f"{w['prfaas_compute']:.2f} / {w['pd_prefill']:.2f} / {w['pd_decode']:.3f}"

    def by_route(x: LoadedTtft, route: str) -> str:
        summary = x.by_route[route]
        return _DASH if summary is None else f"{summary.p50_s:.2f} / {summary.p90_s:.2f}"

    rows = [
        ("rate (req/s)", [f"{x.rate_req_per_s:.2f}" for x in columns]),
        (
            "load (% of Λ_max)",
            [f"{x.rate_req_per_s / p.throughput_req_per_s:.0%}" for x, p in zip(columns, plans, strict=True)],
        ),
        ("stability limit (req/s)", [f"{x.stability_limit_req_per_s:.2f}" for x in columns]),
        ("utilisation", [_utilization(x) for x in columns]),
        ("status", [_status(x) for x in columns]),
        ("mean wait PrfaaS/PD-P/slot (s)", [waits(x) for x in columns]),
        ("TTFT mean/P50/P90/P99 (s)", [_percentiles(x.ttft) for x in columns]),
        ("offloaded P50/P90 (s)", [by_route(x, "offloaded") for x in columns]),
        ("local P50/P90 (s)", [by_route(x, "local") for x in columns]),
        (
            "closed form in its validated domain",
            [_domain(view.checks[k].validity) for k in ("plan", "homogeneous_pd", "naive_heterogeneous")],
        ),
    ]
    for label, cells in rows:
        table.add_row(label, *cells)
    return table


def _domain(validity: Validity) -> str:
    return "in" if validity.in_domain else "[bold yellow]OUT[/bold yellow]"


_KIND_LABELS = {"overall": "TTFT", "offloaded": "  offloaded", "local": "  local"}


def verification_table(check: LoadedCheck, *, plan_title: str) -> Table:
    """The plan's TTFT by the closed form and by simulation, side by side, with their differences."""
    from rich.table import Table

    assert check.simulated is not None
    sim = check.simulated
    table = Table(
        title=f"{plan_title} at {check.rate_req_per_s:.2f} req/s: closed form vs simulation", title_justify="left"
    )
    for header in ("", "closed form (s)", "simulated ±95% (s)", "difference"):
        table.add_column(header, justify="right" if header else "left")
    for kind in ("overall", "offloaded", "local"):
        stats = sim.figures.get(kind)
        if stats is None:
            continue
        for stat in ("mean", "p50", "p90", "p99"):
            closed = check.figure_closed(kind, stat)
            figure = stats[stat]
            interval = "" if math.isnan(figure.half_width) else f" ± {figure.half_width:.2f}"
            diff = _DASH
            if closed is not None and figure.value > 0:
                relative = (closed - figure.value) / figure.value
                flagged = any(line.startswith(f"{kind} {stat.upper()}:") for line in check.disagreements)
                diff = f"[bold red]{relative:+.0%}[/bold red]" if flagged else f"{relative:+.0%}"
            table.add_row(
                f"{_KIND_LABELS[kind]} {stat.upper() if stat != 'mean' else 'mean'}",
                _s(closed),
                f"{figure.value:.2f}{interval}",
                diff,
            )
    return table


def check_notes(check: LoadedCheck) -> list[str]:
    """What the closed form is, whether it is inside its validated domain, how the simulation was run, and
    which figures the verdicts use."""
    notes = [f"Closed form: {check.method}."]
    if check.validity.in_domain:
        notes.append("It is inside the domain where it was validated against the simulator.")
    else:
        notes.append("OUT OF ITS VALIDATED DOMAIN: " + "; ".join(check.validity.reasons) + ".")
    if check.simulated is None:
        notes.append("Not verified by simulation (--no-verify).")
        return notes
    sim = check.simulated
    notes.append(f"Simulated: {sim.realisation}; {sim.wall_s:.2f} s.")
    if check.disagreements:
        notes.append(
            f"The closed form differs from the simulation by more than {check.tolerance:.0%}: "
            + "; ".join(check.disagreements)
            + ". Use the simulated figures."
        )
    else:
        notes.append(f"Closed form and simulation agree within {check.tolerance:.0%} (or the interval).")
    return notes


def curve_table(plan: PlanEvaluation, curve: list[LoadedTtft], validity: list[Validity] | None = None) -> Table:
    """The plan's TTFT percentiles at 10%..95% of its Λ_max."""
    from rich.table import Table

    table = Table(
        title=f"TTFT vs load for the plan (Λ_max {plan.throughput_req_per_s:.2f} req/s)", title_justify="left"
    )
    for col in ("load", "rate (req/s)", "status", "mean", "P50", "P90", "P99", "offloaded P90", "local P90", "domain"):
        table.add_column(col, justify="right")
    marks = validity if validity is not None else [Validity(in_domain=True, reasons=())] * len(curve)
    for point, valid in zip(curve, marks, strict=True):
        ttft = point.ttft
        offloaded, local = point.by_route["offloaded"], point.by_route["local"]
        table.add_row(
            f"{point.rate_req_per_s / plan.throughput_req_per_s:.0%}",
            f"{point.rate_req_per_s:.2f}",
            _status(point),
            _s(ttft.mean_s if ttft else None),
            _s(ttft.p50_s if ttft else None),
            _s(ttft.p90_s if ttft else None),
            _s(ttft.p99_s if ttft else None),
            _s(offloaded.p90_s if offloaded else None),
            _s(local.p90_s if local else None),
            _domain(valid),
        )
    return table


def load_note() -> str:
    """What the loaded figures are."""
    return (
        "Loaded TTFT: G/G/c prefill pools (Whitt), decode-slot admission and a processor-sharing link on "
        "which each transfer's time spreads with its size; for a trace or bursty arrivals, the windowed model "
        "driven by the requests themselves. 'domain': whether the closed form is inside the domain where it "
        "was validated against the simulator. Λ_max is the paper's fluid bound; the stability limit uses "
        "E[T(L)] and is lower because T is convex."
    )


def _threshold(plan: PlanEvaluation) -> str:
    if plan.threshold_tokens is None or plan.offload_fraction <= 0.0:
        return "— (offload none)"
    if plan.offload_fraction >= 1.0:
        return "0 (offload all)"
    return f"{plan.threshold_tokens:,.0f}"


def goodput_table(scenario: Scenario, comparison: GoodputComparison, check: GoodputCheck | None = None) -> Table:
    """Goodput-optimal vs throughput-optimal PrfaaS-PD and the baselines under the same TTFT SLO."""
    from rich.table import Table

    q = f"P{comparison.quantile * 100:g}"
    table = Table(title=f"{scenario.name}: goodput under {q} TTFT <= {comparison.ttft_slo_s:g} s", title_justify="left")
    table.add_column("")
    columns = [
        ("PrfaaS-PD (max goodput)", comparison.plan),
        ("PrfaaS-PD (max Λ_max)", comparison.throughput_plan),
        ("Homogeneous PD", comparison.homogeneous_pd),
        ("Naive heterogeneous", comparison.naive_heterogeneous),
    ]
    for title, _ in columns:
        table.add_column(title, justify="right")

    def instances(p: PlanEvaluation) -> str:
        return f"{p.n_prfaas or _DASH} / {p.n_pd_prefill or _DASH} / {p.n_pd_decode}"

    def busiest(e: GoodputEvaluation) -> str:
        if e.goodput.rate_req_per_s <= 0:
            return _DASH
        stage = max(STAGES, key=lambda s: e.utilization_at_goodput[s])
        return f"{_STAGE_LABELS[stage]} {e.utilization_at_goodput[stage]:.0%}"

    rows: list[tuple[str, Callable[[GoodputEvaluation], str]]] = [
        ("threshold t (tokens)", lambda e: _threshold(e.plan)),
        ("instances PrfaaS/PD-P/PD-D", lambda e: instances(e.plan)),
        ("offload fraction p", lambda e: f"{e.plan.offload_fraction:.1%}"),
        ("Λ_max (req/s)", lambda e: f"{e.plan.throughput_req_per_s:.2f}"),
        ("stability limit (req/s)", lambda e: f"{e.goodput.stability_limit_req_per_s:.2f}"),
        (
            f"goodput at {q} <= {comparison.ttft_slo_s:g} s (req/s)",
            lambda e: f"[bold]{e.goodput.rate_req_per_s:.2f}[/bold]",
        ),
        ("goodput / Λ_max", lambda e: f"{e.goodput.rate_req_per_s / e.plan.throughput_req_per_s:.0%}"),
        ("limited by", lambda e: e.goodput.limited_by),
        (
            "goodput simulated (req/s)",
            lambda e: (
                _DASH
                if check is None or e is not comparison.plan
                else f"[bold]{check.simulated_rate_req_per_s:.2f}[/bold] ({check.relative_difference:+.0%} closed form)"
            ),
        ),
        ("busiest stage at goodput", busiest),
        ("unloaded TTFT P90 (s)", lambda e: f"{e.plan.ttft_unloaded_p90_s:.2f}"),
    ]
    for label, cell in rows:
        table.add_row(label, *(cell(e) for _, e in columns))
    return table


def goodput_note(comparison: GoodputComparison, check: GoodputCheck | None = None) -> str:
    """How the threshold and split move when goodput, not Λ_max, is the objective, and what the simulation
    found for the goodput plan."""
    best, paper = comparison.plan, comparison.throughput_plan
    gain = best.goodput.rate_req_per_s / paper.goodput.rate_req_per_s - 1 if paper.goodput.rate_req_per_s else None
    t_best = _threshold(best.plan)
    t_paper = _threshold(paper.plan)
    text = (
        f"Max goodput moves t {t_paper} -> {t_best} tokens and N_p/N_d {paper.plan.n_pd_prefill}/"
        f"{paper.plan.n_pd_decode} -> {best.plan.n_pd_prefill}/{best.plan.n_pd_decode}"
    )
    if gain is not None:
        capacity = best.plan.throughput_req_per_s / paper.plan.throughput_req_per_s - 1
        text += f": {gain:+.1%} goodput for {capacity:+.1%} Λ_max."
    plans = (best, paper, comparison.homogeneous_pd, comparison.naive_heterogeneous)
    if any(e.goodput.limited_by == "unloaded" for e in plans):
        text += " 'unloaded': even an empty system misses the SLO."
    if check is None:
        text += " Goodput is the closed form's, not verified by simulation (--no-verify)."
    else:
        text += (
            f" Verified by simulation ({check.realisation}): the goodput plan carries "
            f"{check.simulated_rate_req_per_s:.2f} req/s within the SLO; the verdict uses that figure."
        )
    return text


def print_under_load(out: Console, comparison: Comparison, view: UnderLoad, *, plan_title: str) -> None:
    """Print the loaded table, the plan's verification and the curve, whichever were asked for."""
    if view.checks is not None:
        out.print(loaded_table(comparison, view, plan_title=plan_title))
        check = view.checks["plan"]
        if check.simulated is not None:
            out.print(verification_table(check, plan_title=plan_title))
        out.print(" ".join(check_notes(check)), style="dim")
    if view.curve is not None:
        out.print(curve_table(comparison.plan, view.curve, view.curve_validity))
    if view.checks is not None or view.curve is not None:
        out.print(load_note(), style="dim")
