"""The review's figures as PNG bytes (matplotlib, Agg backend). Import this module only where figures are
drawn: matplotlib costs about half a second at start-up, which no other command should pay."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import field
from typing import Any

import matplotlib

matplotlib.use("Agg")  # a file backend, chosen before pyplot is imported: no display is needed

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from prfaas_plan._frozen import frozen
from prfaas_plan.studies.review import Review
from prfaas_plan.units import GBIT_PER_S

#: Figure size (inches; the legend takes the right quarter) and resolution (dots per inch): legible in a
#: design document at 1,500 x 720 pixels.
SIZE_IN = (10.0, 4.8)
DPI = 150
STAGE_LABELS = {
    "prfaas_compute": "PrfaaS compute",
    "prfaas_link": "PrfaaS link",
    "pd_prefill": "local prefill",
    "pd_decode": "local decode",
}
STAGE_COLOURS = {
    "prfaas_compute": "tab:orange",
    "prfaas_link": "tab:purple",
    "pd_prefill": "tab:green",
    "pd_decode": "tab:red",
}


@frozen
class Figure:
    """A drawn figure: its file name, a one-line caption, the provenance of what it shows, and the PNG."""

    name: str
    caption: str
    provenance: str
    png: bytes
    #: The matplotlib figure, kept open when the builder was asked to (``keep=True``: for tests that read its
    #: artists); None once closed.
    drawing: Any = field(default=None, compare=False, repr=False)


def _png(fig: Any, keep: bool = False) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight", pad_inches=0.15)
    if not keep:
        plt.close(fig)
    return buffer.getvalue()


def _axes(title: str) -> tuple[Any, Any]:
    fig, ax = plt.subplots(figsize=SIZE_IN, layout="constrained")
    ax.set_title(title, fontsize=11)
    ax.grid(True, alpha=0.3)
    return fig, ax


def _finite_max(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return max(finite) if finite else 1.0


def _top(lam: Sequence[float], bounds: Any) -> float:
    """The y-axis top of a Λ plot: 1.6 × the largest Λ_max, raised past a stage bound that would otherwise run
    along the frame."""
    top = 1.6 * _finite_max(lam)
    for values in bounds.values():
        finite = [v for v in values if math.isfinite(v)]
        if finite and 0.9 * top <= min(finite) <= 1.3 * top:
            top = 1.12 * min(finite)
    return top


def _label_points(ax: Any, labels: Sequence[tuple[str, float, float]], marker_size_pt: float = 8.0) -> None:
    """Name each point beside it, trying a few positions in turn so that no name covers another name, a point
    (its marker's whole extent, ``marker_size_pt`` across) or the frame; each name keeps the first free
    position, and a name with none is left out (the CSV names it). Names are drawn above the markers."""
    fig = ax.figure
    fig.draw_without_rendering()  # settle the constrained layout, so that data map to their final pixels
    renderer = fig.canvas.get_renderer()
    radius = 0.5 * marker_size_pt * fig.dpi / 72.0 + 2.0
    frame = ax.get_window_extent(renderer)
    taken = []
    for _, x, y in labels:
        cx, cy = ax.transData.transform((x, y))
        taken.append((cx - radius, cy - radius, cx + radius, cy + radius))
    offsets = (
        (6, -12, "left"),
        (6, 5, "left"),
        (-6, 5, "right"),
        (-6, -12, "right"),
        (0, 9, "center"),
        (0, -18, "center"),
        (12, -3, "left"),
        (-12, -3, "right"),
    )
    for text, x, y in labels:
        for dx, dy, ha in offsets:
            note = ax.annotate(
                text, (x, y), textcoords="offset points", xytext=(dx, dy), ha=ha, fontsize=7, zorder=6, gid="point-name"
            )
            box = note.get_window_extent(renderer)
            rect = (box.x0 - 4, box.y0 - 2, box.x1 + 4, box.y1 + 2)  # a margin: names must not touch either
            clash = any(rect[0] < t[2] and t[0] < rect[2] and rect[1] < t[3] and t[1] < rect[3] for t in taken)
            clash = clash or not (
                frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
            )
            if not clash:
                taken.append(rect)
                break
            note.remove()  # no free place: the point stays unnamed rather than overprint (the CSV names it)


def _stage_lines(ax: Any, x: Any, bounds: dict[str, Sequence[float]], top: float) -> list[str]:
    """Each stage's bound on Λ, dashed. A stage whose bound lies above the plot everywhere is not drawn (a
    legend entry with nothing on the plot misleads): its name is returned, for the caption to say."""
    off = []
    for stage, values in bounds.items():
        y = np.asarray(values, dtype=np.float64)
        if not np.isfinite(y).any():
            continue
        if np.nanmin(np.where(np.isfinite(y), y, np.nan)) > top:
            off.append(f"{STAGE_LABELS[stage]} (above {top:.1f} req/s throughout)")
            continue
        label = f"{STAGE_LABELS[stage]} bound"
        ax.plot(x, np.where(np.isfinite(y), y, np.nan), "--", lw=1.2, color=STAGE_COLOURS[stage], label=label)
    return off


def _off_note(off: Sequence[str]) -> str:
    return f" Bounds off the plot, not drawn: {'; '.join(off)}." if off else ""


def _legend_outside(ax: Any) -> None:
    """The legend to the right of the axes, where it hides no curve."""
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def split_figure(r: Review, keep: bool = False) -> Figure:
    """Paper Fig. 5a: Λ_max against the split N_p / N_d at the chosen threshold."""
    a, plan = r.split_sweep, r.comparison.plan
    n_local = r.scenario.local.instances
    x = np.asarray(a.n_pd_prefill)
    lam = np.asarray(a.throughput_req_per_s)
    top = _top(list(lam), a.stage_bound_req_per_s)
    fig, ax = _axes(f"Λ_max against the local split at t = {a.threshold_tokens:,.0f} tokens (cf. paper Fig. 5a)")
    ax.plot(x, lam, "-o", lw=2.4, color="black", label="Λ_max (Eq. 6)", zorder=3)
    off = _stage_lines(ax, x, dict(a.stage_bound_req_per_s), top)
    ax.plot(
        [plan.n_pd_prefill],
        [plan.throughput_req_per_s],
        "*",
        ms=16,
        color="gold",
        mec="black",
        zorder=4,
        label=f"chosen: {plan.n_pd_prefill}/{plan.n_pd_decode}, {plan.throughput_req_per_s:.2f} req/s",
    )
    ax.set_ylim(0, top)
    step = max(1, len(x) // 16)
    ticks = x[::step]
    ax.set_xticks(ticks, [f"{n}/{n_local - n}" for n in ticks])
    ax.set_xlabel("local prefill / decode instances, N_p / N_d")
    ax.set_ylabel("throughput Λ (req/s)")
    _legend_outside(ax)
    return Figure(
        name="fig5a_split.png",
        caption=f"Λ_max (solid) and each stage's bound (dashed) against N_p / N_d at t = {a.threshold_tokens:,.0f} "
        "tokens; the star is the chosen split." + _off_note(off),
        provenance="closed form (Eqs. 3-6) over the scenario's profiles",
        png=_png(fig, keep),
        drawing=fig if keep else None,
    )


def _teeth(t_tokens: Any, lam: Any) -> list[float]:
    """Thresholds (tokens) just past which Λ_max falls while it rises on both sides: the saw-tooth."""
    t = np.asarray(t_tokens, dtype=np.float64)
    y = np.asarray(lam, dtype=np.float64)
    d = np.diff(y)
    out = []
    for i in range(1, d.size - 1):
        if d[i] < 0 and d[i - 1] > 0 and np.any(d[i + 1 : i + 4] > 0):
            out.append(float(t[i]))
    return out


def _teeth_note(teeth: Sequence[float]) -> str:
    """The saw-tooth explained: chunked prefill (``physics.prefill``: ceil(l / prefill_chunk_tokens) passes,
    each with a per-layer overhead and a weight read), a step in the prefill time at each multiple of the
    chunk, spread by the tabulated curve's linear interpolation over one knot (about 2 %)."""
    if not teeth:
        return ""
    where = ", ".join(f"{v / 1e3:,.1f}K" for v in teeth[:6])
    return (
        f" The teeth (Λ_max falls near t = {where} tokens) are chunked prefill, not noise: a roofline-costed pool "
        "prefills a request in chunks of prefill_chunk_tokens (8,192 by default, SGLang's chunked_prefill_size), "
        "each extra chunk adding the per-layer overhead (layer_overhead_ms x layers) and another read of the "
        "weights, so prefill time steps up at each multiple of the chunk (spread over one knot, about 2 %, of the "
        "tabulated curve: e.g. 16,384 to about 16,750 tokens). With one chunk for the whole context the teeth vanish."
    )


def threshold_figure(r: Review, keep: bool = False) -> Figure:
    """Paper Fig. 5b: Λ_max against the threshold t at the chosen split."""
    b, plan = r.threshold_sweep, r.comparison.plan
    t = np.asarray(b.threshold_tokens) / 1e3
    lam = np.asarray(b.throughput_req_per_s)
    top = _top(list(lam), b.stage_bound_req_per_s)
    fig, ax = _axes(
        f"Λ_max against the threshold at N_p / N_d = {b.n_pd_prefill}/{r.scenario.local.instances - b.n_pd_prefill}"
        " (cf. paper Fig. 5b)"
    )
    ax.plot(t, lam, "-", lw=2.4, color="black", label="Λ_max (Eq. 6)", zorder=3)
    off = _stage_lines(ax, t, dict(b.stage_bound_req_per_s), top)
    t_star = (plan.threshold_tokens or 0.0) / 1e3
    ax.axvline(t_star, color="gray", lw=1, ls=":")
    ax.plot(
        [t_star],
        [plan.throughput_req_per_s],
        "*",
        ms=16,
        color="gold",
        mec="black",
        zorder=4,
        label=f"chosen: t = {t_star:,.1f}K, {plan.throughput_req_per_s:.2f} req/s",
    )
    ax.set_ylim(0, top)
    ax.set_xlim(0, t.max())
    ax.set_xlabel("routing threshold t (thousand uncached input tokens)")
    ax.set_ylabel("throughput Λ (req/s)")
    _legend_outside(ax)
    return Figure(
        name="fig5b_threshold.png",
        caption=f"Λ_max (solid) and each stage's bound (dashed) against t at N_p = {b.n_pd_prefill}; the star is "
        "the chosen threshold." + _off_note(off) + _teeth_note(_teeth(b.threshold_tokens, lam)),
        provenance="closed form (Eqs. 1-6) over the scenario's profiles and length distribution",
        png=_png(fig, keep),
        drawing=fig if keep else None,
    )


def egress_figure(r: Review, keep: bool = False) -> Figure:
    """Cross-datacenter egress against t (at Λ_max, and at the target rate) with the link's capacity."""
    b, plan = r.threshold_sweep, r.comparison.plan
    t = np.asarray(b.threshold_tokens) / 1e3
    at_max = np.asarray(b.egress_at_max_bytes_per_s) / GBIT_PER_S
    link = b.link_bandwidth_bytes_per_s / GBIT_PER_S
    fig, ax = _axes(f"Cross-datacenter egress against the threshold (N_p = {b.n_pd_prefill})")
    ax.plot(t, at_max, "-", lw=2.2, color="tab:blue", label="egress at Λ_max(t)")
    not_carried = None
    if b.egress_at_target_bytes_per_s is not None and r.target is not None:
        at_target = np.asarray(b.egress_at_target_bytes_per_s, dtype=np.float64) / GBIT_PER_S
        if np.isfinite(at_target).any():
            ax.plot(  # above the chosen-point star: the star must not hide the curve where the two meet
                t,
                at_target,
                "-.",
                lw=1.8,
                color="tab:cyan",
                zorder=5,
                label=f"egress at the target, {r.target.rate_req_per_s:g} req/s (where carried)",
            )
        else:  # nothing to draw: said in the title, not as a legend entry without a line
            not_carried = f"the target, {r.target.rate_req_per_s:g} req/s, is carried at no t"
    ax.axhline(link, color="tab:red", lw=1.6, ls="--", label=f"link capacity, {link:g} Gbit/s")
    t_star = (plan.threshold_tokens or 0.0) / 1e3
    ax.axvline(t_star, color="gray", lw=1, ls=":")
    ax.plot(
        [t_star],
        [plan.egress_bytes_per_s / GBIT_PER_S],
        "*",
        ms=16,
        color="gold",
        mec="black",
        zorder=4,
        label=f"chosen t = {t_star:,.1f}K: {plan.egress_bytes_per_s / GBIT_PER_S:.1f} Gbit/s",
        alpha=0.8,
    )
    ax.set_ylim(0, 1.15 * max(link, float(np.nanmax(at_max))))
    ax.set_xlim(0, t.max())
    ax.set_xlabel("routing threshold t (thousand uncached input tokens)")
    ax.set_ylabel("egress (Gbit/s)")
    util = ax.secondary_yaxis("right", functions=(lambda g: 100 * g / link, lambda u: u * link / 100))
    util.set_ylabel("link utilisation (%)")
    if not_carried:
        ax.set_title(f"{ax.get_title()}\n({not_carried})", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.09, 1.0), borderaxespad=0.0)
    return Figure(
        name="egress_vs_threshold.png",
        caption="KV-cache egress over the link against t: at Λ_max(t) and at the target rate, with the link's "
        "capacity." + (f" No curve at the target: {not_carried}." if not_carried else ""),
        provenance="closed form (Λ · p · S_kv(l_long), §4.3.1); KV size from the scenario's profile",
        png=_png(fig, keep),
        drawing=fig if keep else None,
    )


def _log_seconds_axis(ax: Any, values: Sequence[float]) -> None:
    """A log time axis that holds every value, with labelled ticks at 1, 2 and 5 times each power of ten (and
    at every integer multiple when the range is under a factor of 4), so that values below 1 s are read too."""
    finite = [v for v in values if math.isfinite(v) and v > 0]
    if not finite:
        return
    lo, hi = min(finite) / 1.1, max(finite) * 1.25
    # Down to the next 1, 2 or 5 times a power of ten: a labelled tick at or below the lowest value.
    decade = 10.0 ** math.floor(math.log10(lo))
    lo = max(m * decade for m in (1.0, 2.0, 5.0) if m * decade <= lo)
    ax.set_ylim(lo, hi)
    subs = (1.0, 2.0, 5.0) if hi / lo >= 4 else tuple(float(k) for k in range(1, 10))
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.yaxis.set_minor_locator(LogLocator(base=10, subs=tuple(float(k) for k in range(1, 10))))
    ax.yaxis.set_minor_formatter(NullFormatter())


def ttft_figure(r: Review, keep: bool = False) -> Figure:
    """TTFT percentiles against the offered rate: closed form as lines, simulation as points with 95 % intervals."""
    curve = r.load_curve
    lam = curve.max_throughput_req_per_s
    colours = {"p50": "tab:blue", "p90": "tab:orange", "p99": "tab:red"}
    fig, ax = _axes("TTFT of the optimised plan against load")
    rates = np.array([c.rate_req_per_s for c in curve.closed])
    shown: list[float] = []
    for stat, colour in colours.items():
        y = np.array([c.figure_closed("overall", stat) or np.nan for c in curve.closed], dtype=np.float64)
        ax.plot(rates, y, "-", lw=2, color=colour, label=f"{stat.upper()} closed form")
        shown += [float(v) for v in y]
    for stat, colour in colours.items():
        xs, ys, errs = [], [], []
        for c in curve.simulated:
            if c.simulated is None or "overall" not in c.simulated.figures:
                continue
            f = c.simulated.figures["overall"][stat]
            xs.append(c.rate_req_per_s)
            ys.append(f.value)
            errs.append(f.half_width if math.isfinite(f.half_width) else 0.0)
            shown += [f.value - errs[-1], f.value + errs[-1]]
        if xs:
            ax.errorbar(
                xs,
                ys,
                yerr=errs,
                fmt="o",
                ms=6,
                capsize=4,
                color=colour,
                mec="black",
                label=f"{stat.upper()} simulated (95 % CI)",
            )
    at_target = r.loaded.checks.get("plan") if r.target is not None else None
    if at_target is not None and at_target.simulated is not None and "overall" in at_target.simulated.figures:
        # The plan simulated at the target rate itself (the review's loaded part), whatever the curve's loads.
        for stat, colour in colours.items():
            f = at_target.simulated.figures["overall"][stat]
            hw = f.half_width if math.isfinite(f.half_width) else 0.0
            ax.errorbar(
                [at_target.rate_req_per_s],
                [f.value],
                yerr=[hw],
                fmt="D",
                ms=7,
                capsize=4,
                color=colour,
                mec="black",
                zorder=5,
                label=f"{stat.upper()} simulated at the target rate",
            )
            shown += [f.value - hw, f.value + hw]
    if r.ttft_slo_s is not None:
        ax.axhline(r.ttft_slo_s, color="black", ls="--", lw=1, label=f"P90 SLO, {r.ttft_slo_s:g} s")
        shown.append(r.ttft_slo_s)
    if r.target is not None:
        ax.axvline(
            r.target.rate_req_per_s,
            color="gray",
            ls=":",
            lw=1.2,
            label=f"target rate, {r.target.rate_req_per_s:g} req/s"
            + ("" if r.target.rate_req_per_s < lam else " (past Λ_max: at the right edge)"),
        )
    ax.set_yscale("log")
    _log_seconds_axis(ax, shown)
    ax.set_xlim(0, max(lam, 1.02 * r.target.rate_req_per_s if r.target is not None else 0.0))
    ax.set_xlabel(f"offered rate (req/s); the plan's Λ_max = {lam:.2f} req/s")
    ax.set_ylabel("time to first token (s, log scale)")
    top = ax.secondary_xaxis("top", functions=(lambda x: x / lam, lambda f: f * lam))
    top.set_xlabel("load (fraction of Λ_max)")
    _legend_outside(ax)
    v = r.options.verify
    sim = (
        f"simulated: {v.replications} replications × {v.requests:,} requests per point"
        if curve.simulated
        else "no simulation (--no-verify)"
    )
    method = curve.closed[0].method if curve.closed else "closed form"
    return Figure(
        name="ttft_vs_load.png",
        caption="TTFT percentiles against the offered rate: closed form (lines) and simulation (points, 95 % "
        "intervals; diamonds: at the target rate).",
        provenance=f"closed form ({method}); {sim}",
        png=_png(fig, keep),
        drawing=fig if keep else None,
    )


def pareto_figure(r: Review, keep: bool = False) -> Figure | None:
    """Cost against goodput of every priced deployment, the Pareto frontier joined."""
    if r.frontier is None or not r.frontier.points:
        return None
    points, front = r.frontier.points, r.frontier.pareto
    markers = {
        "given": ("s", "tab:gray", "the scenario's deployment"),
        "scaled": ("o", "white", "it with more or fewer instances"),
        "sizing": ("D", "tab:blue", "sized to the target"),
        "matrix": ("^", "tab:green", "hardware alternative, sized"),
    }
    names = "N_prfaas+N_local" + (", or prefill+local hardware" if any(p.source == "matrix" for p in points) else "")
    fig, ax = _axes(f"Cost against goodput (Pareto frontier); points named {names}")
    fx = [points[i].goodput_req_per_s for i in front]
    fy = [points[i].usd_per_hour for i in front]
    ax.plot(fx, fy, "-", color="black", lw=1.2, alpha=0.6, label="Pareto frontier", zorder=1)
    for source, (marker, colour, label) in markers.items():
        xs = [p.goodput_req_per_s for p in points if p.source == source]
        ys = [p.usd_per_hour for p in points if p.source == source]
        if source == "sizing":  # the legend says which link each sized deployment has
            label += ": " + "; ".join(p.label.replace(" sized", "") for p in points if p.source == source)
        if xs:
            ax.plot(xs, ys, marker, ms=8, color=colour, mec="black", ls="none", label=label, zorder=2)
    if r.target is not None:
        ax.axvline(
            r.target.rate_req_per_s, color="tab:red", ls="--", lw=1, label=f"target, {r.target.rate_req_per_s:g} req/s"
        )
    xmax = max(max(p.goodput_req_per_s for p in points), r.target.rate_req_per_s if r.target else 0.0)
    ax.set_xlim(0, 1.35 * xmax)
    ax.set_ylim(0, 1.2 * max(p.usd_per_hour for p in points))
    slo = r.target.ttft_slo_s if r.target is not None else r.ttft_slo_s
    ax.set_xlabel(f"goodput: the most traffic within P90 TTFT <= {slo:g} s (req/s)")
    ax.set_ylabel("cost at the target rate (USD/h)")
    # Points are named by their instance counts alone (the legend says what each marker is; the CSV says all).
    _legend_outside(ax)  # outside the axes: inside, it covered points and their names
    _label_points(ax, [(p.label.split(" ")[0], p.goodput_req_per_s, p.usd_per_hour) for p in points])
    return Figure(
        name="cost_goodput_pareto.png",
        caption="Hourly cost (GPUs, link, egress) against goodput of each priced deployment; the line joins the "
        "Pareto frontier.",
        provenance="closed form; prices from the scenario and its hardware profiles",
        png=_png(fig, keep),
        drawing=fig if keep else None,
    )


def tornado_figure(r: Review, keep: bool = False) -> Figure | None:
    """The sensitivity tornado: Λ_max, goodput and USD per million tokens at each input's low and high end."""
    t = r.tornado
    if t is None or not t.bars:
        return None
    bars = list(reversed(t.bars))  # widest goodput swing at the top
    names = [b.input for b in bars]
    panels = (
        ("Λ_max (req/s)", t.throughput_req_per_s, [b.throughput_req_per_s for b in bars]),
        ("goodput (req/s)", t.goodput_req_per_s, [b.goodput_req_per_s for b in bars]),
        ("USD per million tokens", t.usd_per_million_tokens, [b.usd_per_million_tokens for b in bars]),
    )
    fig, axes = plt.subplots(1, 3, figsize=(12.0, 0.45 * len(bars) + 2.2), sharey=True, layout="constrained")
    y = np.arange(len(bars))
    for ax, (label, base, pairs) in zip(axes, panels, strict=True):
        low = np.array([p[0] for p in pairs], dtype=np.float64)
        high = np.array([p[1] for p in pairs], dtype=np.float64)
        ax.barh(y, low - base, left=base, height=0.6, color="tab:blue", label=f"input × {1 - t.step:g}")
        ax.barh(y, high - base, left=base, height=0.6, color="tab:orange", alpha=0.85, label=f"input × {1 + t.step:g}")
        ax.axvline(base, color="black", lw=1)
        ax.set_xlabel(label)
        ax.set_title(f"base {base:.2f}", fontsize=9)
        ax.grid(True, axis="x", alpha=0.3)
    axes[0].set_yticks(y, names)
    axes[0].legend(fontsize=8, loc="lower left")
    fig.suptitle(f"Sensitivity: each input moved by ±{t.step:.0%}, threshold and split re-optimised", fontsize=11)
    return Figure(
        name="tornado.png",
        caption=f"Each input moved by ±{t.step:.0%} (blue: lower, orange: higher), with t and the split "
        "re-optimised; bars sorted by goodput swing.",
        provenance="closed form (stage model and queueing) over perturbed inputs",
        png=_png(fig, keep),
        drawing=fig if keep else None,
    )


def review_figures(r: Review, keep: bool = False) -> list[Figure]:
    """Every figure the review's parts allow, in report order (``keep``: the matplotlib figures stay open in
    ``Figure.drawing``, for a reader's checks; close them with ``plt.close``)."""
    figures = [split_figure(r, keep), threshold_figure(r, keep), egress_figure(r, keep), ttft_figure(r, keep)]
    figures += [f for f in (pareto_figure(r, keep), tornado_figure(r, keep)) if f is not None]
    return figures
