"""report.md of a capacity review: a summary a manager reads in a minute, then every table (from
``io.review_report``) with the provenance of its figures, and each figure after the table it illustrates."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from prfaas_plan.optimize.carrier import Deployment
from prfaas_plan.optimize.uncertainty import EdgeSizing
from prfaas_plan.report.review_data import Table, provenance_kind
from prfaas_plan.studies.review import SCHEMA_VERSION, ErrorBandPart, Option, Review
from prfaas_plan.units import GBIT_PER_S


def _num(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _md_cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "—"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.3g}" if abs(value) < 0.01 else f"{value:.2f}"
    return str(value).replace("|", "\\|")


def _md_table(table: Table, max_rows: int = 40) -> list[str]:
    """A Markdown table; a wide table of a few rows is shown transposed (one column per row), as people read
    a comparison; a long one is thinned to ``max_rows`` (its CSV has every row)."""
    if len(table.rows) <= 4 and len(table.columns) > 8:
        head = ["", *(_md_cell(row[0]) for row in table.rows)]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for i, column in enumerate(table.columns[1:], start=1):
            lines.append("| " + " | ".join([column, *(_md_cell(row[i]) for row in table.rows)]) + " |")
        return lines
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    rows = table.rows
    step = max(1, math.ceil(len(rows) / max_rows))
    for row in rows[::step]:
        lines.append("| " + " | ".join(_md_cell(v) for v in row) + " |")
    if step > 1:
        lines.append("")
        lines.append(f"Every {step}th of {len(rows)} rows; `{table.name}.csv` has them all.")
    return lines


def _loaded_line(r: Review) -> str:
    """The plan's P90 TTFT at the review's load, closed form beside simulation."""
    check = r.loaded.checks["plan"]
    head = f"- **Under load** ({r.loaded.basis}; the best plan above, t = {r.comparison.plan.threshold_tokens:,.0f}): "
    if not check.closed.stable:
        plan = r.comparison.plan
        return head + (
            f"the plan is **unstable** ({check.closed.unstable_stage} saturates): {check.rate_req_per_s:g} req/s is "
            f"past its stability limit, {_md_cell(plan.stability_limit_req_per_s)} req/s (Λ_max "
            f"{plan.throughput_req_per_s:.2f}); the TTFT-against-load figure has the simulation check below it."
        )
    line = head + f"P90 TTFT {_md_cell(check.figure_closed('overall', 'p90'))} s by the closed form"
    if check.simulated is None:
        return line + " (not simulated)."
    fig = check.simulated.figures["overall"]["p90"]
    line += f", {fig.value:.2f} ± {_num(fig.half_width) or 0:.2f} s simulated"
    overall = [d for d in check.disagreements if d.startswith("overall")]
    if not check.disagreements:
        return line + "; the two agree at P50, P90 and P99."
    if not overall:
        return line + "; they agree overall (one route's percentiles differ: see the loaded table)."
    return line + f"; **they disagree** at {'; '.join(overall)} (the verdicts use the simulation)."


_KIND = {"prfaas-pd": "PrfaaS-PD", "homogeneous-pd": "homogeneous PD", "none": "neither"}


def _instances(d: Deployment) -> int:
    return d.n_prfaas + d.n_local


def _shape(d: Deployment) -> str:
    return f"{d.n_prfaas} + {d.n_local}" if d.n_prfaas else f"{d.n_local} instances"


def _usd_delta(value: float) -> str:
    return f"{'-' if value < 0 else '+'}${abs(value):,.0f}"


def _band_factors(b: ErrorBandPart) -> str:
    """The band's factors per pool (once when both pools share them)."""
    per = {
        role: (pool.time_band.prefill.factor, pool.time_band.decode.factor)
        for role, pool in (("PrfaaS", b.scenario.prfaas), ("local", b.scenario.local))
        if pool.method != "measured" and pool.time_band is not None
    }
    text = {role: f"prefill ×/÷ {f[0]:.2f}, decode ×/÷ {f[1]:.2f}" for role, f in per.items()}
    if len(set(per.values())) == 1:
        return next(iter(text.values())) + (" on both pools" if len(per) == 2 else f" on the {next(iter(per))} pool")
    return "; ".join(f"{role} pool: {t}" for role, t in text.items())


def _edge_clause(b: ErrorBandPart, edge: EdgeSizing, rate: float) -> str:
    """What the decision's deployment does at one edge: its margin there, or what is needed instead."""
    kind = b.nominal_verdict
    chosen = b.nominal.prfaas_pd if kind == "prfaas-pd" else b.nominal.homogeneous_pd
    head = f"at the {edge.edge} edge"
    if chosen is None:
        found = edge.sizing.cheapest if edge.sizing is not None else None
        if found is None:
            return f"{head} still no deployment in the search space carries it"
        return f"{head} {_shape(found)} (${found.usd_per_hour:,.0f}/h) would"
    good = edge.nominal_prfaas_goodput_req_per_s if kind == "prfaas-pd" else edge.nominal_homogeneous_goodput_req_per_s
    if good is not None and good >= rate:
        return f"{head} it carries {good:.2f} req/s, a {good / rate - 1:.0%} margin over the target"
    carried = "nothing within the SLO" if not good else f"only {good:.2f} req/s"
    needed = (
        None if edge.sizing is None else edge.sizing.prfaas_pd if kind == "prfaas-pd" else edge.sizing.homogeneous_pd
    )
    if needed is None:
        why = f" ({edge.reason})" if edge.reason else ""
        return (
            f"{head} it carries {carried} and no {_KIND[kind]} deployment in the search space carries the target{why}"
        )
    more = _instances(needed) - _instances(chosen)
    dearer = _usd_delta(needed.usd_per_hour - chosen.usd_per_hour)
    return (
        f"{head} it carries {carried}; the target needs {_shape(needed)} there, "
        f"{more:+d} instance{'s' if abs(more) != 1 else ''} and {dearer}/h"
    )


def band_line(r: Review) -> str | None:
    """One summary line: which of the sizing's conclusions survive the pools' error band (None: no band part)."""
    b, target = r.error_band, r.target
    if b is None or target is None:
        return None
    kind = b.nominal_verdict
    chosen = b.nominal.prfaas_pd if kind == "prfaas-pd" else b.nominal.homogeneous_pd
    subject = (
        f"the sized {_KIND[kind]} ({_shape(chosen)}, ${chosen.usd_per_hour:,.0f}/h)"
        if chosen is not None
        else "no deployment (none carries the target nominally)"
    )
    clauses = "; ".join(_edge_clause(b, e, target.rate_req_per_s) for e in b.edges)
    flips = [f"{_KIND[e.verdict]} at the {e.edge} edge" for e in b.edges if e.verdict != kind]
    decision = (
        f"the decision ({_KIND[kind]} cheapest) holds across the band"
        if not flips
        else f"the decision ({_KIND[kind]} cheapest) **flips**: " + ", ".join(flips)
    )
    from prfaas_plan.studies.uncertainty import contexts_outside_band, pool_outside_band, prompts_outside_band

    notes = [prompts_outside_band(b.scenario, role) for role in ("prfaas", "local")]
    pools = [pool_outside_band(b.scenario, role) for role in ("prfaas", "local")]
    outside = [note for note in (*notes, contexts_outside_band(b.scenario), *pools) if note]
    return (
        f"- **Error band** (roofline or calibrated pricing, held out: {_band_factors(b)}): for "
        f"{subject}, {clauses}; {decision}." + "".join(f" Note: {n}." for n in outside)
    )


def _option_text(o: Option, with_margin: bool) -> str:
    cost = f"${o.usd_per_hour:,.0f}/h" if math.isfinite(o.usd_per_hour) else "unpriced"
    text = f"{o.kind}, {o.label}: {cost}"
    if with_margin and o.margin is not None:
        text += f", goodput {o.figure_req_per_s:.2f} req/s ({o.margin:+.0%} margin over the target)"
    elif math.isfinite(o.usd_per_hour) and o.usd_per_hour > 0:
        text += f", {o.figure_req_per_s:.2f} req/s ({o.figure_req_per_s / o.usd_per_hour * 100:.2f} req/s per $100/h)"
    else:
        text += f", {o.figure_req_per_s:.2f} req/s"
    if o.verdict is not None:
        text += f"; simulated at the target: {o.verdict}"
    return text


def decision_paragraph(r: Review) -> str:
    """The review's first paragraph: the decision on its own objective, how the winner compares with the
    other kinds (PrfaaS-PD, homogeneous PD, naive offload), the equal-cost comparison, and the next best
    alternatives with their cost and margin."""
    rec = r.recommendation
    if rec is None:
        return ""
    win = rec.winner
    target = r.target is not None and r.sizing is not None and win.margin is not None
    text = f"**Decision** ({rec.objective}): **{_option_text(win, target)}**."
    rivals: dict[str, Option] = {}
    for o in rec.options[1:]:
        rivals.setdefault(o.kind, o)
    for kind, o in rivals.items():
        if kind == win.kind:
            continue
        if target and math.isfinite(win.usd_per_hour) and win.usd_per_hour > 0:
            text += (
                f" The cheapest {kind} that carries it costs ${o.usd_per_hour:,.0f}/h, "
                f"{o.usd_per_hour / win.usd_per_hour - 1:+.0%} against the decision."
            )
        elif math.isfinite(o.usd_per_hour) and o.usd_per_hour > 0 and win.usd_per_hour > 0:
            per_win = win.figure_req_per_s / win.usd_per_hour
            per_o = o.figure_req_per_s / o.usd_per_hour
            text += f" {kind} ({o.label}) gives {per_o / per_win - 1:+.0%} of it per dollar."
        elif win.figure_req_per_s > 0:
            text += f" {kind} ({o.label}): {o.figure_req_per_s / win.figure_req_per_s - 1:+.0%}."
    if target and not any(o.kind != win.kind for o in rec.options[1:]):
        others = {"PrfaaS-PD", "homogeneous PD"} - {win.kind}
        text += f" No {' or '.join(sorted(others))} deployment in the search space carries the target."
    naive = r.goodput.naive_heterogeneous.goodput.rate_req_per_s if r.goodput is not None else None
    if target and naive is not None and r.target is not None and naive < r.target.rate_req_per_s:
        text += (
            f" Naive offload (every request prefilled by the PrfaaS pool) carries only {naive:.2f} req/s on the "
            "given deployment."
        )
    if rec.equal_cost_gain is not None and rec.equal_cost_usd_per_hour is not None:
        g = rec.equal_cost_gain
        text += (
            f" At equal cost (${rec.equal_cost_usd_per_hour:,.0f}/h, the given deployment at its Λ_max, against "
            f"{rec.equal_cost_homogeneous_instances} homogeneous PD instances), PrfaaS-PD's Λ_max is "
            + (f"{abs(g):.1%} {'above' if g > 0 else 'below'}" if g != 0 else "level with")
            + " homogeneous PD's: "
            + ("PrfaaS-PD wins." if g > 0 else "homogeneous PD wins." if g < 0 else "a tie.")
        )
    nxt = list(rec.options[1:4])
    if nxt:
        text += " Next best: " + "; ".join(_option_text(o, target) for o in nxt) + "."
    return text


def _summary(r: Review) -> list[str]:
    """The one-minute summary: the decision, whether the target is met, what it costs and what could break."""
    spec, c = r.scenario, r.comparison
    plan = c.plan
    out = []
    paragraph = decision_paragraph(r)
    if paragraph:
        out += [paragraph, ""]
    out += [
        f"- **Best PrfaaS-PD plan on the given deployment** (throughput, equal GPU count): t = "
        f"{plan.threshold_tokens:,.0f} tokens with {plan.n_prfaas} PrfaaS instances and a local split of "
        f"{plan.n_pd_prefill} prefill / {plan.n_pd_decode} decode: Λ_max = {plan.throughput_req_per_s:.2f} req/s, "
        f"{plan.throughput_req_per_s / c.homogeneous_pd.throughput_req_per_s:.2f}× homogeneous PD "
        f"({c.homogeneous_pd.throughput_req_per_s:.2f}) and "
        f"{plan.throughput_req_per_s / c.naive_heterogeneous.throughput_req_per_s:.2f}× naive offload "
        f"({c.naive_heterogeneous.throughput_req_per_s:.2f}); bound by {' + '.join(plan.binding)}.",
        f"- **Link**: {plan.offload_fraction:.0%} of requests offloaded, egress "
        f"{plan.egress_bytes_per_s / GBIT_PER_S:.1f} Gbit/s at Λ_max = {plan.link_utilization:.0%} of the "
        f"{spec.link.bandwidth_bytes_per_s / GBIT_PER_S:g} Gbit/s link.",
    ]
    out.append(_loaded_line(r))
    if r.sizing is not None and r.target is not None:
        own, target = r.sizing.own, r.target
        meets = own.goodput_req_per_s >= target.rate_req_per_s
        split = f"{own.n_pd_prefill} prefill / {spec.local.instances - own.n_pd_prefill} decode"
        line = (
            f"- **Target** {target.rate_req_per_s:g} req/s within P90 TTFT <= {target.ttft_slo_s:g} s: "
            "the deployment as "
            f"given carries up to {own.goodput_req_per_s:.2f} req/s within the SLO at its goodput-optimal plan "
            f"(t = {own.threshold_tokens:,.0f}, {split}), so it "
            + ("**meets** the target" if meets else "**misses** the target")
        )
        under = r.loaded.checks["plan"].figure("overall", "p90") if r.loaded.checks["plan"].closed.stable else None
        if meets and (under is None or under > target.ttft_slo_s):
            state = "unstable there" if under is None else f"has a P90 of {under:.2f} s there"
            same = own.threshold_tokens == plan.threshold_tokens and own.n_pd_prefill == plan.n_pd_prefill
            line += (
                f"; but the Under load line finds that same plan {state}"
                if same
                else f"; run that plan, not the best plan above, which {'is ' if under is None else ''}{state}"
            )
        out.append(line + ".")
        sized = r.sizing.sizing.prfaas_pd
        cheaper = sized.cheaper_plan if sized is not None else None
        if sized is not None and cheaper is not None:
            where = (
                "offloading nothing"
                if cheaper.offload_fraction == 0.0
                else f"at t = {cheaper.threshold_tokens:,.0f} ({cheaper.offload_fraction:.1%} offloaded)"
            )
            out.append(
                f"- **The sized PrfaaS-PD deployment** ({_shape(sized)}, ${sized.usd_per_hour:,.2f}/h at the plan with "
                f"the most margin) also carries the target {where}, N_p/N_d {cheaper.n_pd_prefill}/"
                f"{cheaper.n_pd_decode}, at ${cheaper.cost_at_target.total_usd_per_hour:,.2f}/h: P90 TTFT "
                f"{cheaper.ttft_quantile_at_target_s:.2f} s against the SLO's {target.ttft_slo_s:g} s (less margin)."
            )
        if r.sizing.sizing.prfaas_pd is None and r.sizing.sizing.homogeneous_pd is None:
            out.append("- **No deployment in the search space meets it**: " + "; ".join(r.sizing.sizing.reasons) + ".")
        for name, check in (("PrfaaS-PD", r.sizing.check), ("homogeneous PD", r.sizing.baseline_check)):
            if check is not None and check.decision is not None:
                out.append(f"- **Sized {name}, simulated at the target**: {check.decision.line()}.")
        band = band_line(r)
        if band is not None:
            out.append(band)
    elif r.goodput is not None:
        g = r.goodput
        out.append(
            f"- **Goodput** within P{g.quantile * 100:g} TTFT <= {g.ttft_slo_s:g} s: "
            f"{g.plan.goodput.rate_req_per_s:.2f} "
            f"req/s (homogeneous PD {g.homogeneous_pd.goodput.rate_req_per_s:.2f})."
        )
    if r.tornado is not None and r.tornado.bars:
        bar = r.tornado.bars[0]
        out.append(
            f"- **Most sensitive to** {bar.input}: ±{r.tornado.step:.0%} moves goodput between "
            f"{min(bar.goodput_req_per_s):.2f} and {max(bar.goodput_req_per_s):.2f} req/s "
            f"(base {r.tornado.goodput_req_per_s:.2f})."
        )
    if r.n_minus_one is not None:
        lost = [f.case for f in r.n_minus_one if f.case != "intact" and not f.carries_target]
        intact = next((f for f in r.n_minus_one if f.case == "intact"), None)
        if intact is not None and not intact.carries_target:
            out.append(
                "- **N-1**: the deployment misses the target even intact; with one failure its goodput falls to "
                + ", ".join(
                    f"{f.carried.goodput_req_per_s:.2f} ({f.case})" for f in r.n_minus_one if f.case != "intact"
                )
                + " req/s."
            )
        else:
            out.append(
                "- **N-1**: "
                + (
                    "every single failure still carries the target."
                    if not lost
                    else f"the target is lost with: {', '.join(lost)}."
                )
            )
    kinds = sorted(
        {provenance_kind(v) for k, v in r.provenance.items() if not k.startswith("GPU-hour") and k != "link"}
    )
    out.append(f"- **Evidence**: the stage model's inputs are {', '.join(kinds)} (see Provenance).")
    if r.skipped:
        out.append("- **Not in this review**: " + "; ".join(f"{k} ({v})" for k, v in r.skipped.items()) + ".")
    return out


def report_markdown(r: Review, tables: Sequence[Table], figures: Sequence[tuple[str, str, str]]) -> str:
    """report.md: the summary, then each table with its provenance, the figures (file, caption, provenance)
    after the table they illustrate."""
    spec = r.scenario
    lines = [f"# Capacity review: {spec.name}", ""]
    if spec.description:
        lines += [spec.description, ""]
    lines += ["## Summary", "", *_summary(r), ""]
    by_table = {
        "split_sweep": ("fig5a_split",),
        "threshold_sweep": ("fig5b_threshold", "egress_vs_threshold"),
        "ttft_vs_load": ("ttft_vs_load",),
        "cost_goodput_frontier": ("cost_goodput_pareto",),
        "tornado": ("tornado",),
    }
    figure_of = {f[0].removesuffix(".png"): f for f in figures}
    lines += ["## Tables", ""]
    for table in tables:
        lines += [f"### {table.title}", "", f"Provenance: {table.provenance}. CSV: `{table.name}.csv`.", ""]
        lines += _md_table(table)
        lines.append("")
        for stem in by_table.get(table.name, ()):
            if stem in figure_of:
                name, caption, provenance = figure_of[stem]
                lines += [f"![{caption}]({name})", "", f"*{caption}* Provenance: {provenance}.", ""]
    timings = ", ".join(f"{k} {v:.1f} s" for k, v in r.timings_s.items())
    lines += [
        "## About this review",
        "",
        f"Scenario file: `{spec.file}`. Schema version {SCHEMA_VERSION}. Wall time per part: {timings}.",
        "",
    ]
    return "\n".join(lines)
