"""Options and rich rendering for TTFT under load and goodput (``evaluate``/``optimize`` ``--rate``,
``--load``, ``--curve``, ``--objective goodput``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from prfaas_plan.errors import InputError, Problem
from prfaas_plan.throughput import STAGES

if TYPE_CHECKING:
    from prfaas_plan.cli.render import DataTable, Printer

    # Annotations only (start-up time: `optimize --json` checks its options here and loads none of these).
    from prfaas_plan.latency import LoadedTtft, TtftSummary
    from prfaas_plan.latency.profile import Validity
    from prfaas_plan.optimize import Comparison, GoodputComparison, GoodputEvaluation, PlanEvaluation
    from prfaas_plan.spec.plan import TtftSlo
    from prfaas_plan.spec.scenario import Scenario
    from prfaas_plan.studies.under_load import UnderLoad

    # Annotations only: the simulator behind them loads when a command simulates.
    from prfaas_plan.studies.verify import GoodputCheck, LoadedCheck

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
) -> TtftSlo | None:
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
    if objective != "goodput" or slo is None:
        return None
    from prfaas_plan.spec.plan import TtftSlo

    return TtftSlo(limit_s=slo, quantile=0.9)


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


def _why_simulated(check: LoadedCheck) -> str:
    """Why a check's answer is the simulated one (``LoadedCheck.answer_source``)."""
    why = []
    if not check.closed.stable:
        why.append("closed form unstable")
    if not check.validity.in_domain:
        why.append("closed form out of domain")
    if check.beyond_tolerance:
        why.append(f"beyond {check.tolerance:.0%}")
    return ", ".join(why)


def loaded_table(comparison: Comparison, view: UnderLoad, *, plan_title: str) -> DataTable:
    """The plan and both baselines under one load: utilisation, mean waits and TTFT percentiles (as data: one
    row per plan). The TTFT shown as the answer is each check's ``answer``: the simulated figures (marked
    ``sim``) where a simulation ran and the closed form is out of its domain, unstable or beyond the
    tolerance, else the closed form's; the closed form's stay in the rows below it (``same`` where they are
    the answer) and, as data, under ``closed_form_*`` with ``answer_source`` saying whose the answer is."""
    from prfaas_plan.cli.render import Quantity, one, quantity_table

    assert view.checks is not None and view.loaded is not None
    keys = ("plan", "homogeneous_pd", "naive_heterogeneous")
    plans = [comparison.plan, comparison.homogeneous_pd, comparison.naive_heterogeneous]
    Item = tuple["LoadedTtft", "PlanEvaluation", "LoadedCheck"]
    items: list[tuple[str, Item]] = [
        (title, (view.loaded[k], p, view.checks[k]))
        for title, k, p in zip((plan_title, "Homogeneous PD", "Naive heterogeneous"), keys, plans, strict=True)
    ]

    def simulated(i: Item) -> bool:
        return i[2].answer_source == "simulation"

    def waits(x: LoadedTtft) -> str:
        if x.wait_mean_s is None:
            return _DASH
        w = x.wait_mean_s
        return f"{w['prfaas_compute']:.2f} / {w['pd_prefill']:.2f} / {w['pd_decode']:.3f}"

    def wait_data(x: LoadedTtft) -> dict[str, float | None]:
        w = x.wait_mean_s
        return {
            f"wait_mean_{stage}_s": None if w is None else _data(w[stage])
            for stage in ("prfaas_compute", "pd_prefill", "pd_decode")
        }

    def answer(i: Item, kind: str) -> TtftSummary | None:
        return i[2].answer_summary(kind) if simulated(i) else _closed_summary(i[0], kind)

    def marked(i: Item, text: str) -> str:
        return f"[bold]{text}[/bold] sim" if simulated(i) and text != _DASH else text

    def by_route(summary: TtftSummary | None) -> str:
        return _DASH if summary is None else f"{summary.p50_s:.2f} / {summary.p90_s:.2f}"

    def route_data(summary: TtftSummary | None, prefix: str) -> dict[str, float | None]:
        return {
            f"{prefix}_ttft_p50_s": None if summary is None else summary.p50_s,
            f"{prefix}_ttft_p90_s": None if summary is None else summary.p90_s,
        }

    def closed_text(i: Item, text: str) -> str:
        return text if simulated(i) or text == _DASH else "same"

    def route_rows(route: str) -> list[Quantity[Item]]:
        return [
            Quantity(
                label=f"{route} P50/P90 (s)",
                text=lambda i: marked(i, by_route(answer(i, route))),
                data=lambda i: route_data(answer(i, route), route),
            ),
            Quantity(
                label="  closed form (s)",
                text=lambda i: closed_text(i, by_route(i[0].by_route[route])),
                data=lambda i: route_data(i[0].by_route[route], f"closed_form_{route}"),
            ),
        ]

    quantities: list[Quantity[Item]] = [
        Quantity(
            label="rate (req/s)",
            text=lambda i: f"{i[0].rate_req_per_s:.2f}",
            data=one("rate_req_per_s", lambda i: i[0].rate_req_per_s),
        ),
        Quantity(
            label="load (% of Λ_max)",
            text=lambda i: f"{i[0].rate_req_per_s / i[1].throughput_req_per_s:.0%}",
            data=one("load_fraction_of_throughput", lambda i: i[0].rate_req_per_s / i[1].throughput_req_per_s),
        ),
        Quantity(
            label="stability limit (req/s)",
            text=lambda i: f"{i[0].stability_limit_req_per_s:.2f}",
            data=one("stability_limit_req_per_s", lambda i: _data(i[0].stability_limit_req_per_s)),
        ),
        Quantity(
            label="utilisation",
            text=lambda i: _utilization(i[0]),
            data=lambda i: {f"utilization_{s}_fraction": _data(i[0].utilization[s]) for s in STAGES},
        ),
        Quantity(
            label="status",
            text=lambda i: _status(i[0]),
            data=lambda i: {"stable": i[0].stable, "unstable_stage": i[0].unstable_stage},
        ),
        Quantity(label="mean wait PrfaaS/PD-P/slot (s)", text=lambda i: waits(i[0]), data=lambda i: wait_data(i[0])),
        Quantity(
            label="answer from",
            text=lambda i: f"simulation ({_why_simulated(i[2])})" if simulated(i) else "closed form",
            data=one("answer_source", lambda i: i[2].answer_source),
        ),
        Quantity(
            label="TTFT mean/P50/P90/P99 (s)",
            text=lambda i: marked(i, _percentiles(answer(i, "overall"))),
            data=lambda i: _ttft_data(answer(i, "overall")),
        ),
        Quantity(
            label="  closed form (s)",
            text=lambda i: closed_text(i, _percentiles(i[0].ttft)),
            data=lambda i: _ttft_data(i[0].ttft, prefix="closed_form_"),
        ),
        *route_rows("offloaded"),
        *route_rows("local"),
        Quantity(
            label="closed form in its validated domain",
            text=lambda i: _domain(i[2].validity),
            data=one("closed_form_in_domain", lambda i: i[2].validity.in_domain),
        ),
    ]
    sources = {i[2].answer_source for _, i in items}
    whose = "closed form" if sources == {"closed form"} else "simulated where marked 'sim', else closed form"
    return quantity_table(
        items,
        quantities,
        name_key="plan",
        title=f"TTFT under load: {view.label}, {view.traffic_label} ({whose})",
        title_justify="left",
    )


def _closed_summary(loaded: LoadedTtft, kind: str) -> TtftSummary | None:
    return loaded.ttft if kind == "overall" else loaded.by_route[kind]


def _data(value: float | None) -> float | None:
    """A figure as data: None (an empty CSV cell) where it is not finite."""
    return None if value is None or not math.isfinite(value) else value


def _ttft_data(summary: TtftSummary | None, prefix: str = "") -> dict[str, float | None]:
    return {
        f"{prefix}ttft_{stat}_s": None if summary is None else getattr(summary, f"{stat}_s")
        for stat in ("mean", "p50", "p90", "p99")
    }


def _domain(validity: Validity) -> str:
    return "in" if validity.in_domain else "[bold yellow]OUT[/bold yellow]"


_KIND_LABELS = {"overall": "TTFT", "offloaded": "  offloaded", "local": "  local"}


def verification_table(check: LoadedCheck, *, plan_title: str) -> DataTable:
    """The plan's TTFT by the closed form and by simulation, side by side, with their differences."""

    assert check.simulated is not None
    sim = check.simulated
    from prfaas_plan.cli.render import DataTable

    table = DataTable(
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
            relative: float | None = None
            flagged = False
            if closed is not None and figure.value > 0:
                relative = (closed - figure.value) / figure.value
                flagged = any(line.startswith(f"{kind} {stat.upper()}:") for line in check.disagreements)
                diff = f"[bold red]{relative:+.0%}[/bold red]" if flagged else f"{relative:+.0%}"
            table.add_data(
                {
                    "requests": kind,
                    "statistic": stat,
                    "closed_form_s": closed,
                    "simulated_s": figure.value,
                    "simulated_half_width_95_s": _data(figure.half_width),
                    "closed_minus_simulated_over_simulated_fraction": relative,
                    "beyond_tolerance": flagged,
                }
            )
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
            + "."
        )
    else:
        notes.append(f"Closed form and simulation agree within {check.tolerance:.0%} (or the interval).")
    if check.answer_source == "simulation":
        notes.append(f"The answer shown is the simulated one ({_why_simulated(check)}); the closed form is beside it.")
    return notes


def curve_table(plan: PlanEvaluation, curve: list[LoadedTtft], validity: list[Validity] | None = None) -> DataTable:
    """The plan's TTFT percentiles at 10%..95% of its Λ_max."""

    from prfaas_plan.cli.render import DataTable
    from prfaas_plan.latency.profile import Validity

    table = DataTable(
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
        table.add_data(
            {
                "load_fraction_of_throughput": point.rate_req_per_s / plan.throughput_req_per_s,
                "rate_req_per_s": point.rate_req_per_s,
                "stable": point.stable,
                "unstable_stage": point.unstable_stage,
                **_ttft_data(ttft),
                "offloaded_ttft_p90_s": offloaded.p90_s if offloaded else None,
                "local_ttft_p90_s": local.p90_s if local else None,
                "closed_form_in_domain": valid.in_domain,
            }
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


def goodput_table(scenario: Scenario, comparison: GoodputComparison, check: GoodputCheck | None = None) -> DataTable:
    """Goodput-optimal vs throughput-optimal PrfaaS-PD and the baselines under the same TTFT SLO (as data: one
    row per plan)."""
    from prfaas_plan.cli.render import Quantity, one, quantity_table

    q = f"P{comparison.quantile * 100:g}"
    tpot_s = scenario.slo.tpot_p90_s
    tpot = None if tpot_s is None else f"{tpot_s * 1e3:g} ms"
    within = "" if tpot is None else f", TPOT P90 <= {tpot}"
    columns = [
        ("PrfaaS-PD (max goodput)", comparison.plan),
        ("PrfaaS-PD (max Λ_max)", comparison.throughput_plan),
        ("Homogeneous PD", comparison.homogeneous_pd),
        ("Naive heterogeneous", comparison.naive_heterogeneous),
    ]

    def instances(p: PlanEvaluation) -> str:
        return f"{p.n_prfaas or _DASH} / {p.n_pd_prefill or _DASH} / {p.n_pd_decode}"

    def busiest(e: GoodputEvaluation) -> str:
        if e.goodput.rate_req_per_s <= 0:
            return _DASH
        stage = max(STAGES, key=lambda s: e.utilization_at_goodput[s])
        return f"{_STAGE_LABELS[stage]} {e.utilization_at_goodput[stage]:.0%}"

    def busiest_data(e: GoodputEvaluation) -> dict[str, str | float | None]:
        if e.goodput.rate_req_per_s <= 0:
            return {"busiest_stage_at_goodput": None, "busiest_stage_utilization_fraction": None}
        stage = max(STAGES, key=lambda s: e.utilization_at_goodput[s])
        return {
            "busiest_stage_at_goodput": stage,
            "busiest_stage_utilization_fraction": e.utilization_at_goodput[stage],
        }

    def simulated(e: GoodputEvaluation) -> str:
        if check is None or e is not comparison.plan:
            return _DASH
        return f"[bold]{check.simulated_rate_req_per_s:.2f}[/bold] ({check.relative_difference:+.0%} closed form)"

    def simulated_data(e: GoodputEvaluation) -> dict[str, float | None]:
        mine = check is not None and e is comparison.plan
        return {
            "goodput_simulated_req_per_s": check.simulated_rate_req_per_s if mine and check else None,
            "goodput_closed_minus_simulated_fraction": check.relative_difference if mine and check else None,
        }

    quantities: list[Quantity[GoodputEvaluation]] = [
        Quantity(
            label="threshold t (tokens)",
            text=lambda e: _threshold(e.plan),
            data=one("threshold_tokens", lambda e: e.plan.threshold_tokens),
        ),
        Quantity(
            label="instances PrfaaS/PD-P/PD-D",
            text=lambda e: instances(e.plan),
            data=lambda e: {
                "n_prfaas": e.plan.n_prfaas,
                "n_pd_prefill": e.plan.n_pd_prefill,
                "n_pd_decode": e.plan.n_pd_decode,
            },
        ),
        Quantity(
            label="offload fraction p",
            text=lambda e: f"{e.plan.offload_fraction:.1%}",
            data=one("offload_fraction", lambda e: e.plan.offload_fraction),
        ),
        Quantity(
            label="Λ_max (req/s)",
            text=lambda e: f"{e.plan.throughput_req_per_s:.2f}",
            data=one("throughput_req_per_s", lambda e: e.plan.throughput_req_per_s),
        ),
        Quantity(
            # With a P90 TPOT SLO the limit is the lower of the queues' stability and the rate at which P90 TPOT
            # reaches the SLO (latency.goodput.Goodput), so the row says so.
            label="stability limit (req/s)" if tpot is None else f"stability or TPOT P90 <= {tpot} limit (req/s)",
            text=lambda e: f"{e.goodput.stability_limit_req_per_s:.2f}",
            data=one("stability_limit_req_per_s", lambda e: _data(e.goodput.stability_limit_req_per_s)),
        ),
        Quantity(
            label=f"goodput at {q} <= {comparison.ttft_slo_s:g} s{within} (req/s)",
            text=lambda e: f"[bold]{e.goodput.rate_req_per_s:.2f}[/bold]",
            data=one("goodput_req_per_s", lambda e: e.goodput.rate_req_per_s),
        ),
        Quantity(
            label="goodput / Λ_max",
            text=lambda e: f"{e.goodput.rate_req_per_s / e.plan.throughput_req_per_s:.0%}",
            data=one("goodput_over_throughput_ratio", lambda e: e.goodput.rate_req_per_s / e.plan.throughput_req_per_s),
        ),
        Quantity(
            label="limited by",
            text=lambda e: e.goodput.limited_by,
            data=one("limited_by", lambda e: e.goodput.limited_by),
        ),
        Quantity(label="goodput simulated (req/s)", text=simulated, data=simulated_data),
        Quantity(label="busiest stage at goodput", text=busiest, data=busiest_data),
        Quantity(
            label="unloaded TTFT P90 (s)",
            text=lambda e: f"{e.plan.ttft_unloaded_p90_s:.2f}",
            data=one("ttft_unloaded_p90_s", lambda e: e.plan.ttft_unloaded_p90_s),
        ),
    ]
    return quantity_table(
        columns,
        quantities,
        name_key="plan",
        title=f"{scenario.name}: goodput under {q} TTFT <= {comparison.ttft_slo_s:g} s{within}",
        title_justify="left",
    )


def goodput_note(comparison: GoodputComparison, check: GoodputCheck | None = None) -> str:
    """How the threshold and split move when goodput, not Λ_max, is the objective, and what the simulation
    found for the goodput plan."""
    best, paper = comparison.plan, comparison.throughput_plan
    gain = best.goodput.rate_req_per_s / paper.goodput.rate_req_per_s - 1 if paper.goodput.rate_req_per_s else None
    t_best = _threshold(best.plan)
    t_paper = _threshold(paper.plan)
    split_from = f"{paper.plan.n_pd_prefill}/{paper.plan.n_pd_decode}"
    split_to = f"{best.plan.n_pd_prefill}/{best.plan.n_pd_decode}"
    text = f"Max goodput moves t {t_paper} -> {t_best} tokens" + (
        f" and N_p/N_d {split_from} -> {split_to}" if split_to != split_from else f" at the same N_p/N_d {split_to}"
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


def print_under_load(out: Printer, comparison: Comparison, view: UnderLoad | None, *, plan_title: str) -> None:
    """Print the loaded table, the plan's verification and the curve, whichever were asked for (nothing when
    ``view`` is None: no load was asked for)."""
    if view is None:
        return
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
