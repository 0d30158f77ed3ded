"""A capacity review as data documents: ``review.json`` (everything, with a schema version) and one CSV table
per part (``io.review_markdown`` writes report.md from the same tables).

Every figure is labelled with how it was obtained: ``measured`` (profiled points), ``derived`` (backed out of
published results or a model card), ``calibrated`` (roofline fitted to measured points), ``roofline``
(datasheet and default efficiencies), ``closed form`` (the stage model or a queueing formula over those) and
``simulated`` (the discrete-event simulator, with a 95 % interval).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

from prfaas_plan._frozen import frozen
from prfaas_plan.optimize.carrier import Deployment
from prfaas_plan.optimize.headroom import Tornado
from prfaas_plan.optimize.plans import PlanEvaluation
from prfaas_plan.optimize.sizing import Sizing
from prfaas_plan.report.capacity import (
    carried_to_dict,
    cost_comparison_to_dict,
    headroom_to_dict,
    knee_to_dict,
    matrix_to_dict,
    sizing_to_dict,
    target_to_dict,
)
from prfaas_plan.report.plans import check_to_dict, comparison_to_dict, goodput_comparison_to_dict
from prfaas_plan.report.uncertainty import edges_to_dict
from prfaas_plan.spec.cost import Target
from prfaas_plan.studies.review import SCHEMA_VERSION, Review
from prfaas_plan.studies.verify import LoadedCheck
from prfaas_plan.units import GBIT_PER_S

#: Provenance kinds, in the order a label is searched for them.
_KINDS = (
    ("measured", "measured"),
    ("calibrat", "calibrated"),
    ("roofline", "roofline"),
    ("derived", "derived"),
    ("model card", "derived"),
    ("price", "price list"),
)
PLAN_KEYS = ("plan", "homogeneous_pd", "naive_heterogeneous")
PLAN_TITLES = {
    "plan": "PrfaaS-PD (optimised)",
    "homogeneous_pd": "Homogeneous PD",
    "naive_heterogeneous": "Naive heterogeneous",
}


def provenance_kind(source: str) -> str:
    """The kind of a provenance line: measured, calibrated, roofline, derived, price list or given."""
    low = source.lower()
    return next((kind for key, kind in _KINDS if key in low), "given")


@frozen
class Table:
    """One table of the review: written as ``{name}.csv`` and shown in report.md under ``title``."""

    name: str
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    provenance: str


# --------------------------------------------------------------------------------------------------------
# review.json
# --------------------------------------------------------------------------------------------------------


def _num(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _seq(values: Sequence[float]) -> list[float | None]:
    return [_num(v) for v in values]


def review_to_dict(r: Review) -> dict[str, Any]:
    """Everything the review computed, JSON-ready (null for a value that does not exist, e.g. an idle stage);
    a part that was not computed is null and named in ``skipped`` with the reason."""
    spec = r.scenario
    fig5a, fig5b, curve = r.split_sweep, r.threshold_sweep, r.load_curve
    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "scenario": spec.name,
        "scenario_file": spec.file,
        "options": {
            "quick": r.options.quick,
            "verify": r.options.verify.verify,
            "replications": r.options.verify.replications,
            "requests_per_replication": r.options.verify.requests,
            "seed": r.options.verify.seed,
            "matrix": None
            if r.options.matrix is None
            else {"prefill": list(r.options.matrix[0]), "local": list(r.options.matrix[1])},
            "sensitivity": r.options.sensitivity,
            "tornado_step": r.options.tornado_step,
        },
        "target": None if r.target is None else target_to_dict(r.target),
        "ttft_slo_s": r.ttft_slo_s,
        "comparison": comparison_to_dict(spec, r.comparison),
        "split_sweep": {
            "threshold_tokens": fig5a.threshold_tokens,
            "n_pd_prefill": list(fig5a.n_pd_prefill),
            "throughput_req_per_s": _seq(fig5a.throughput_req_per_s),
            "stage_bound_req_per_s": {k: _seq(v) for k, v in fig5a.stage_bound_req_per_s.items()},
        },
        "threshold_sweep": {
            "n_pd_prefill": fig5b.n_pd_prefill,
            "threshold_tokens": list(fig5b.threshold_tokens),
            "offload_fraction": list(fig5b.offload_fraction),
            "throughput_req_per_s": _seq(fig5b.throughput_req_per_s),
            "stage_bound_req_per_s": {k: _seq(v) for k, v in fig5b.stage_bound_req_per_s.items()},
            "egress_at_max_throughput_gbit_per_s": [e / GBIT_PER_S for e in fig5b.egress_at_max_bytes_per_s],
            "egress_at_target_gbit_per_s": None
            if fig5b.egress_at_target_bytes_per_s is None
            else _seq([e / GBIT_PER_S for e in fig5b.egress_at_target_bytes_per_s]),
            "link_bandwidth_gbit_per_s": fig5b.link_bandwidth_bytes_per_s / GBIT_PER_S,
        },
        "loaded": {
            "basis": r.loaded.basis,
            "plans": {k: check_to_dict(c, _plan(r, k).throughput_req_per_s) for k, c in r.loaded.checks.items()},
        },
        "ttft_vs_load": {
            "max_throughput_req_per_s": curve.max_throughput_req_per_s,
            "closed_form": [check_to_dict(c, curve.max_throughput_req_per_s) for c in curve.closed],
            "simulated": [check_to_dict(c, curve.max_throughput_req_per_s) for c in curve.simulated],
        },
        "goodput": None if r.goodput is None else goodput_comparison_to_dict(spec, r.goodput),
        "sizing": None,
        "error_band": None
        if r.error_band is None
        else edges_to_dict(r.error_band.scenario, r.error_band.nominal_verdict, r.error_band.edges),
        "cost": None if r.cost is None else cost_comparison_to_dict(r.cost, spec.local.hardware_key),
        "matrix": None if r.matrix is None else matrix_to_dict(r.matrix),
        "cost_goodput_frontier": None,
        "sensitivity": None,
        "recommendation": None if r.recommendation is None else _recommendation(r),
        "skipped": dict(r.skipped),
        "timings_s": dict(r.timings_s),
        "provenance": {k: {"source": v, "kind": provenance_kind(v)} for k, v in r.provenance.items()},
    }
    if r.sizing is not None:
        out["sizing"] = {
            **sizing_to_dict(r.sizing.sizing),
            "given_deployment_largest_rate_within_slo": carried_to_dict(r.sizing.own),
            "bandwidth_knee": None if r.sizing.knee is None else knee_to_dict(r.sizing.knee),
            "simulation_check": None if r.sizing.check is None else check_to_dict(r.sizing.check),
            "homogeneous_pd_simulation_check": None
            if r.sizing.baseline_check is None
            else check_to_dict(r.sizing.baseline_check),
        }
    if r.frontier is not None:
        out["cost_goodput_frontier"] = {
            "points": [
                {
                    "label": p.label,
                    "source": p.source,
                    "usd_per_hour_at_target": p.usd_per_hour,
                    "goodput_req_per_s": p.goodput_req_per_s,
                }
                for p in r.frontier.points
            ],
            "pareto": list(r.frontier.pareto),
        }
    if r.tornado is not None or r.n_minus_one is not None:
        # headroom_to_dict converts both at once; a part not computed is given as a placeholder and dropped.
        placeholder = Tornado(
            step=r.options.tornado_step,
            throughput_req_per_s=math.nan,
            goodput_req_per_s=math.nan,
            usd_per_million_tokens=math.nan,
            bars=(),
            skipped=(),
        )
        target = r.target or Target(rate_req_per_s=math.nan, ttft_slo_s=r.ttft_slo_s or math.nan)
        both = headroom_to_dict(target, r.tornado or placeholder, r.n_minus_one or ())
        out["sensitivity"] = {
            "tornado": both["tornado"] if r.tornado is not None else None,
            "n_minus_one": both["n_minus_one"] if r.n_minus_one is not None else None,
        }
    return out


def _recommendation(r: Review) -> dict[str, Any]:
    rec = r.recommendation
    assert rec is not None
    return {
        "objective": rec.objective,
        "options": [
            {
                "rank": i + 1,
                "kind": o.kind,
                "label": o.label,
                "usd_per_hour": _num(o.usd_per_hour),
                "req_per_s": o.figure_req_per_s,
                "margin_over_target": o.margin,
                "simulation_verdict": o.verdict,
            }
            for i, o in enumerate(rec.options)
        ],
        "equal_cost_gain": rec.equal_cost_gain,
        "equal_cost_usd_per_hour": rec.equal_cost_usd_per_hour,
        "equal_cost_homogeneous_instances": rec.equal_cost_homogeneous_instances,
    }


def _plan(r: Review, key: str) -> PlanEvaluation:
    c = r.comparison
    return {"plan": c.plan, "homogeneous_pd": c.homogeneous_pd, "naive_heterogeneous": c.naive_heterogeneous}[key]


# --------------------------------------------------------------------------------------------------------
# Tables (one CSV each, and the Markdown report's tables)
# --------------------------------------------------------------------------------------------------------


def _inputs_note(r: Review) -> str:
    """The stage model's inputs with their provenance kinds, e.g. "prefill (h200, PrfaaS): measured; ..."."""
    model_keys = [k for k in r.provenance if not k.startswith("GPU-hour") and k != "link"]
    return "; ".join(f"{k}: {provenance_kind(r.provenance[k])}" for k in model_keys)


def _prices_note(r: Review) -> str:
    keys = [k for k in r.provenance if k.startswith("GPU-hour") or k == "link"]
    return "; ".join(f"{k}: {r.provenance[k]}" for k in keys)


def _plan_row(key: str, p: PlanEvaluation, base: float) -> tuple[Any, ...]:
    return (
        key,
        p.threshold_tokens,
        p.n_prfaas,
        p.n_pd_prefill,
        p.n_pd_decode,
        p.offload_fraction,
        p.throughput_req_per_s,
        _num(p.stability_limit_req_per_s),
        _num(p.theta_prfaas_req_per_s),
        _num(p.theta_pd_prefill_req_per_s),
        p.theta_pd_decode_req_per_s,
        p.throughput_req_per_s / base,
        p.egress_bytes_per_s / GBIT_PER_S,
        p.link_utilization,
        p.ttft_unloaded_mean_s,
        p.ttft_unloaded_p90_s,
        "+".join(p.binding),
    )


def _check_row(label: str, c: LoadedCheck, lam: float) -> tuple[Any, ...]:
    sim = c.simulated.figures.get("overall", {}) if c.simulated is not None else {}
    cells: list[Any] = [label, c.rate_req_per_s, c.rate_req_per_s / lam if lam > 0 else None, c.closed.stable]
    cells += [c.answer("overall", "p90"), c.answer_source]
    for stat in ("mean", "p50", "p90", "p99"):
        cells.append(c.figure_closed("overall", stat))
    for stat in ("p50", "p90", "p99"):
        fig = sim.get(stat)
        cells += [None if fig is None else fig.value, None if fig is None else _num(fig.half_width)]
    cells.append(None if c.simulated is None else not c.disagreements)
    cells.append(None if c.decision is None else c.decision.verdict)
    return tuple(cells)


_CHECK_COLUMNS = (
    "rate_req_per_s",
    "load_fraction",
    "stable",
    "p90_s",
    "p90_source",
    "closed_mean_s",
    "closed_p50_s",
    "closed_p90_s",
    "closed_p99_s",
    "simulated_p50_s",
    "simulated_p50_ci95_s",
    "simulated_p90_s",
    "simulated_p90_ci95_s",
    "simulated_p99_s",
    "simulated_p99_ci95_s",
    "agrees",
    "slo_verdict",
)


def _deployment_row(d: Deployment) -> tuple[Any, ...]:
    return (
        d.label,
        d.n_prfaas,
        d.n_local,
        d.bandwidth_bytes_per_s / GBIT_PER_S,
        d.threshold_tokens,
        d.n_pd_prefill,
        d.n_pd_decode,
        d.goodput_req_per_s,
        d.usd_per_hour,
        _num(d.tokens_at_target.usd_per_million_tokens),
    )


def _simulation_note(r: Review) -> str:
    v = r.options.verify
    if not v.verify:
        return "simulation off (--no-verify)"
    return (
        f"simulated: {v.budget_line()}; mean and 95 % interval; p90_s is the answer presented, from p90_source "
        "(the simulation where the closed form is out of its domain or beyond tolerance)"
    )


def _steady_tables(r: Review) -> list[Table]:
    """The steady-state tables: plans, TTFT under load and against load, the split and threshold sweeps."""
    c = r.comparison
    base = c.homogeneous_pd.throughput_req_per_s
    tables: list[Table] = [
        Table(
            name="plans",
            title="Best plan and baselines (steady state, Eqs. 1-8)",
            columns=(
                "plan",
                "threshold_tokens",
                "n_prfaas",
                "n_pd_prefill",
                "n_pd_decode",
                "offload_fraction",
                "max_throughput_req_per_s",
                "stability_limit_req_per_s",
                "theta_prfaas_req_per_s",
                "theta_pd_prefill_req_per_s",
                "theta_pd_decode_req_per_s",
                "gain_vs_homogeneous",
                "egress_at_max_gbit_per_s",
                "link_utilization",
                "ttft_unloaded_mean_s",
                "ttft_unloaded_p90_s",
                "binding_stages",
            ),
            rows=tuple(_plan_row(k, _plan(r, k), base) for k in PLAN_KEYS),
            provenance=f"closed form over {_inputs_note(r)}; TTFT unloaded (no queueing)",
        )
    ]
    lam = c.plan.throughput_req_per_s
    tables.append(
        Table(
            name="loaded",
            title=f"TTFT under load ({r.loaded.basis})",
            columns=("plan", *_CHECK_COLUMNS),
            rows=tuple(_check_row(k, chk, _plan(r, k).throughput_req_per_s) for k, chk in r.loaded.checks.items()),
            provenance=f"closed form ({r.loaded.checks['plan'].method}); {_simulation_note(r)} (the plan only)",
        )
    )
    curve = r.load_curve
    rows = [_check_row("closed form", chk, lam) for chk in curve.closed]
    rows += [_check_row("simulated", chk, lam) for chk in curve.simulated]
    tables.append(
        Table(
            name="ttft_vs_load",
            title="TTFT of the optimised plan against load",
            columns=("kind", *_CHECK_COLUMNS),
            rows=tuple(rows),
            provenance=f"closed form at every load; {_simulation_note(r)} at the simulated loads",
        )
    )
    a = r.split_sweep
    tables.append(
        Table(
            name="split_sweep",
            title=f"Λ_max against the split at t = {a.threshold_tokens:,.0f} tokens (Fig. 5a)",
            columns=(
                "n_pd_prefill",
                "n_pd_decode",
                "max_throughput_req_per_s",
                *(f"{s}_bound_req_per_s" for s in a.stage_bound_req_per_s),
            ),
            rows=tuple(
                (
                    n,
                    r.scenario.local.instances - n,
                    _num(a.throughput_req_per_s[i]),
                    *(_num(v[i]) for v in a.stage_bound_req_per_s.values()),
                )
                for i, n in enumerate(a.n_pd_prefill)
            ),
            provenance=f"closed form over {_inputs_note(r)}",
        )
    )
    b = r.threshold_sweep
    at_target = b.egress_at_target_bytes_per_s
    tables.append(
        Table(
            name="threshold_sweep",
            title=f"Λ_max and egress against the threshold at N_p = {b.n_pd_prefill} (Fig. 5b)",
            columns=(
                "threshold_tokens",
                "offload_fraction",
                "max_throughput_req_per_s",
                *(f"{s}_bound_req_per_s" for s in b.stage_bound_req_per_s),
                "egress_at_max_gbit_per_s",
                "egress_at_target_gbit_per_s",
            ),
            rows=tuple(
                (
                    t,
                    b.offload_fraction[i],
                    _num(b.throughput_req_per_s[i]),
                    *(_num(v[i]) for v in b.stage_bound_req_per_s.values()),
                    b.egress_at_max_bytes_per_s[i] / GBIT_PER_S,
                    None if at_target is None else _num(at_target[i] / GBIT_PER_S),
                )
                for i, t in enumerate(b.threshold_tokens)
            ),
            provenance=f"closed form over {_inputs_note(r)}",
        )
    )
    return tables


def _goodput_tables(r: Review) -> list[Table]:
    """The tables of the review's ``goodput`` part."""
    tables: list[Table] = []
    if r.goodput is not None:
        g = r.goodput
        evaluations = (
            ("goodput-optimal", g.plan),
            ("throughput-optimal", g.throughput_plan),
            ("homogeneous_pd", g.homogeneous_pd),
            ("naive_heterogeneous", g.naive_heterogeneous),
        )
        tables.append(
            Table(
                name="goodput",
                title=f"Goodput: the most traffic with P{g.quantile * 100:g} TTFT <= {g.ttft_slo_s:g} s",
                columns=(
                    "plan",
                    "threshold_tokens",
                    "n_pd_prefill",
                    "n_pd_decode",
                    "goodput_req_per_s",
                    "max_throughput_req_per_s",
                    "limited_by",
                ),
                rows=tuple(
                    (
                        k,
                        e.plan.threshold_tokens,
                        e.plan.n_pd_prefill,
                        e.plan.n_pd_decode,
                        e.goodput.rate_req_per_s,
                        e.plan.throughput_req_per_s,
                        e.goodput.limited_by,
                    )
                    for k, e in evaluations
                ),
                provenance="closed form (queueing over the stage model); not simulated",
            )
        )
    return tables


def _sizing_tables(r: Review) -> list[Table]:
    """The tables of the review's ``sizing`` part."""
    tables: list[Table] = []
    if r.sizing is not None:
        s = r.sizing
        deployments = [d for d in (s.sizing.prfaas_pd, s.sizing.homogeneous_pd) if d is not None]
        check = ""
        if s.check is not None and s.check.simulated is not None:
            fig = s.check.simulated.figures["overall"]["p90"]
            half = _num(fig.half_width) or 0.0
            check = f"; the sized PrfaaS-PD's P90 at the target simulated: {fig.value:.2f} ± {half:.2f} s"
        tables.append(
            Table(
                name="sizing",
                title=f"Cheapest deployments for {s.sizing.target.rate_req_per_s:g} req/s within P90 TTFT <= "
                f"{s.sizing.target.ttft_slo_s:g} s",
                columns=(
                    "deployment",
                    "n_prfaas",
                    "n_local",
                    "link_gbit_per_s",
                    "threshold_tokens",
                    "n_pd_prefill",
                    "n_pd_decode",
                    "goodput_req_per_s",
                    "usd_per_hour_at_target",
                    "usd_per_million_tokens_at_target",
                ),
                rows=tuple(_deployment_row(d) for d in deployments),
                provenance=f"closed form; prices: {_prices_note(r)}{check}",
            )
        )
        if s.knee is not None:
            tables.append(
                Table(
                    name="bandwidth_knee",
                    title="What each link size buys the sized PrfaaS-PD deployment",
                    columns=("link_gbit_per_s", "max_throughput_req_per_s", "binding", "link_usd_per_hour"),
                    rows=tuple(
                        (p.bandwidth_bytes_per_s / GBIT_PER_S, p.throughput_req_per_s, p.binding, p.link_usd_per_hour)
                        for p in s.knee.points
                    ),
                    provenance="closed form; link prices from the scenario",
                )
            )
    return tables


def _band_tables(r: Review) -> list[Table]:
    """The table of the review's ``error_band`` part: the nominal sizing, then the sizing at each edge."""
    b = r.error_band
    if b is None:
        return []

    def row(
        edge: str,
        verdict: str,
        found: Sizing | None,
        goodput: tuple[float | None, float | None],
        scales: Mapping[str, tuple[float, float]],
    ) -> tuple[Any, ...]:
        prfaas = None if found is None else found.prfaas_pd
        homog = None if found is None else found.homogeneous_pd
        return (
            edge,
            verdict,
            None if prfaas is None else prfaas.n_prfaas,
            None if prfaas is None else prfaas.n_local,
            None if prfaas is None else prfaas.usd_per_hour,
            None if homog is None else homog.n_local,
            None if homog is None else homog.usd_per_hour,
            *goodput,
            *(x for role in ("prfaas", "local") for x in scales[role]),
        )

    nominal = b.nominal
    rows = [
        row(
            "nominal",
            b.nominal_verdict,
            nominal,
            (
                None if nominal.prfaas_pd is None else nominal.prfaas_pd.goodput_req_per_s,
                None if nominal.homogeneous_pd is None else nominal.homogeneous_pd.goodput_req_per_s,
            ),
            {"prfaas": (1.0, 1.0), "local": (1.0, 1.0)},
        )
    ]
    for e in b.edges:
        scales = {role: (e.prefill_factor[role], e.decode_factor[role]) for role in ("prfaas", "local")}
        good = (e.nominal_prfaas_goodput_req_per_s, e.nominal_homogeneous_goodput_req_per_s)
        rows.append(row(e.edge, e.verdict, e.sizing, good, scales))
    bands = [pool.time_band for pool in (b.scenario.prfaas, b.scenario.local) if pool.time_band is not None]
    sources = sorted(
        {f"prefill: {t.prefill.basis}" for t in bands}
        | {f"decode: {t.decode.basis}" for t in bands}
        | {t.source for t in bands}
    )
    return [
        Table(
            name="error_band",
            title="Sizing at the edges of the error band (slow: prefill and decode times x factor; fast: ÷ factor)",
            columns=(
                "edge",
                "cheapest",
                "prfaas_pd_n_prfaas",
                "prfaas_pd_n_local",
                "prfaas_pd_usd_per_hour",
                "homogeneous_pd_n_local",
                "homogeneous_pd_usd_per_hour",
                "nominal_prfaas_pd_goodput_req_per_s",
                "nominal_homogeneous_pd_goodput_req_per_s",
                "prfaas_prefill_time_scale",
                "prfaas_decode_time_scale",
                "local_prefill_time_scale",
                "local_decode_time_scale",
            ),
            rows=tuple(rows),
            provenance="closed form at each edge (each row sized again; nominal_* columns: the nominal sizing's "
            "deployments re-scored there); bands: " + ("; ".join(sources) or "the serving defaults'"),
        )
    ]


def _cost_tables(r: Review) -> list[Table]:
    """The tables of the review's ``cost`` part."""
    tables: list[Table] = []
    if r.cost is not None:
        k = r.cost
        rows: list[tuple[Any, ...]] = [
            (
                "PrfaaS-PD (optimised)",
                k.plan_cost.n_prfaas,
                k.plan_cost.n_local,
                k.plan.throughput_req_per_s,
                k.plan_cost.breakdown.total_usd_per_hour,
                _num(k.plan_cost.tokens.usd_per_million_tokens),
                None,
            ),
        ]
        for label, p in (
            ("homogeneous PD, equal GPU count", k.equal_gpu),
            ("homogeneous PD, equal cost", k.equal_cost),
        ):
            rows.append(
                (
                    label,
                    0,
                    p.shape.instances,
                    p.plan.throughput_req_per_s,
                    p.cost.breakdown.total_usd_per_hour,
                    _num(p.cost.tokens.usd_per_million_tokens),
                    p.gain,
                )
            )
        tables.append(
            Table(
                name="cost",
                title="Cost at Λ_max beside homogeneous PD at equal GPU count and at equal cost",
                columns=(
                    "deployment",
                    "n_prfaas",
                    "n_local",
                    "max_throughput_req_per_s",
                    "usd_per_hour",
                    "usd_per_million_tokens",
                    "plan_gain_over_it",
                ),
                rows=tuple(rows),
                provenance=f"closed form; prices: {_prices_note(r)}",
            )
        )
    return tables


def _matrix_tables(r: Review) -> list[Table]:
    """The tables of the review's ``matrix`` part."""
    tables: list[Table] = []
    if r.matrix is not None:
        rows = []
        for cell in r.matrix.cells:
            d = cell.sizing.prfaas_pd if cell.sizing is not None else None
            rows.append(
                (
                    cell.prefill,
                    cell.local,
                    cell.prefill_provenance,
                    cell.local_provenance,
                    None if d is None else d.n_prfaas,
                    None if d is None else d.n_local,
                    None if d is None else d.bandwidth_bytes_per_s / GBIT_PER_S,
                    None if d is None else d.goodput_req_per_s,
                    None if d is None else d.usd_per_hour,
                    cell.reason,
                )
            )
        tables.append(
            Table(
                name="matrix",
                title="Hardware alternatives, each sized to the target",
                columns=(
                    "prefill_hardware",
                    "local_hardware",
                    "prefill_provenance",
                    "local_provenance",
                    "n_prfaas",
                    "n_local",
                    "link_gbit_per_s",
                    "goodput_req_per_s",
                    "usd_per_hour_at_target",
                    "infeasible",
                ),
                rows=tuple(rows),
                provenance="closed form; each pool from the best evidence for it (column provenance)",
            )
        )
    return tables


def _frontier_tables(r: Review) -> list[Table]:
    """The tables of the review's ``frontier`` part."""
    tables: list[Table] = []
    if r.frontier is not None:
        front = set(r.frontier.pareto)
        tables.append(
            Table(
                name="cost_goodput_frontier",
                title="Cost against goodput (Pareto frontier marked)",
                columns=("deployment", "source", "usd_per_hour_at_target", "goodput_req_per_s", "on_frontier"),
                rows=tuple(
                    (p.label, p.source, p.usd_per_hour, p.goodput_req_per_s, i in front)
                    for i, p in enumerate(r.frontier.points)
                ),
                provenance=f"closed form; prices: {_prices_note(r)}",
            )
        )
    return tables


def _tornado_tables(r: Review) -> list[Table]:
    """The tables of the review's ``tornado`` part."""
    tables: list[Table] = []
    if r.tornado is not None:
        t = r.tornado
        tables.append(
            Table(
                name="tornado",
                title=f"Sensitivity: each input moved by ±{t.step:.0%} (t and split re-optimised)",
                columns=(
                    "input",
                    "max_throughput_low_req_per_s",
                    "max_throughput_high_req_per_s",
                    "goodput_low_req_per_s",
                    "goodput_high_req_per_s",
                    "usd_per_million_tokens_low",
                    "usd_per_million_tokens_high",
                ),
                rows=(
                    (
                        "(base)",
                        t.throughput_req_per_s,
                        t.throughput_req_per_s,
                        t.goodput_req_per_s,
                        t.goodput_req_per_s,
                        _num(t.usd_per_million_tokens),
                        _num(t.usd_per_million_tokens),
                    ),
                    *(
                        (
                            bar.input,
                            *bar.throughput_req_per_s,
                            *bar.goodput_req_per_s,
                            *(_num(v) for v in bar.usd_per_million_tokens),
                        )
                        for bar in t.bars
                    ),
                ),
                provenance="closed form; low = input × (1 - step), high = × (1 + step)"
                + (f"; not applicable: {', '.join(t.skipped)}" if t.skipped else ""),
            )
        )
    return tables


def _n_minus_one_tables(r: Review) -> list[Table]:
    """The tables of the review's ``n_minus_one`` part."""
    tables: list[Table] = []
    if r.n_minus_one is not None:
        tables.append(
            Table(
                name="n_minus_one",
                title="N-1: one thing failed, re-optimised for goodput",
                columns=(
                    "case",
                    "n_prfaas",
                    "n_local",
                    "link_gbit_per_s",
                    "max_throughput_req_per_s",
                    "goodput_req_per_s",
                    "carries_target",
                    "ttft_p90_at_target_s",
                ),
                rows=tuple(
                    (
                        f.case,
                        f.n_prfaas,
                        f.n_local,
                        f.link_bandwidth_bytes_per_s / GBIT_PER_S,
                        _num(f.throughput_req_per_s),
                        f.carried.goodput_req_per_s,
                        f.carries_target,
                        f.ttft_p90_at_target_s,
                    )
                    for f in r.n_minus_one
                ),
                provenance="closed form (not simulated)",
            )
        )
    return tables


def _closing_tables(r: Review) -> list[Table]:
    """The review's closing table."""
    tables: list[Table] = []
    tables.append(
        Table(
            name="provenance",
            title="Where the inputs come from",
            columns=("quantity", "kind", "source"),
            rows=tuple((k, provenance_kind(v), v) for k, v in r.provenance.items()),
            provenance="the scenario, its hardware profiles and model card",
        )
    )
    return tables


def review_tables(r: Review) -> tuple[Table, ...]:
    """Every table of the review, in report order; a part that was skipped has no table."""
    tables = [
        table
        for part in (
            _steady_tables,
            _goodput_tables,
            _sizing_tables,
            _band_tables,
            _cost_tables,
            _matrix_tables,
            _frontier_tables,
            _tornado_tables,
            _n_minus_one_tables,
            _closing_tables,
        )
        for table in part(r)
    ]
    return tuple(tables)


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if not math.isfinite(value) else repr(value)
    return value


def table_csv(table: Table) -> str:
    """A table as CSV: a header of the column names, then the rows (empty cells for missing values)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(table.columns)
    for row in table.rows:
        writer.writerow([_csv_cell(v) for v in row])
    return buffer.getvalue()
