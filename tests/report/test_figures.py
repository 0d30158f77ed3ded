"""The review's figures read as a reader reads them: names cover no other name, point or legend; every legend
entry has something drawn on the plot; the target is marked (a simulated point at the target rate on TTFT
against load); a log time axis has labelled ticks where the data are; the egress-at-target curve is not hidden
under the chosen-point star; the saw-tooth of Λ_max against the threshold is explained in the caption."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.container import ErrorbarContainer
from matplotlib.lines import Line2D

from prfaas_plan.io.names import resolve_scenario_path
from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.optimize.cost import unit_prices
from prfaas_plan.optimize.throughput_search import best_plan
from prfaas_plan.report.figures import Figure, review_figures
from prfaas_plan.spec.cost import Target
from prfaas_plan.studies.closed_form import Traffic
from prfaas_plan.studies.review import ReviewOptions, cost_frontier, loaded, review, sizing_part, threshold_sweep
from prfaas_plan.studies.verify import VerifyOptions
from prfaas_plan.throughput import stage_model

ROOT = Path(__file__).resolve().parents[2]
SMALL = VerifyOptions(replications=2, requests=3000, max_requests=20_000)
OPTIONS = ReviewOptions(verify=SMALL, quick=True, sensitivity=False)


def _targeted(name: str) -> Any:
    """A quick review of a built-in scenario given its target: the plain review, then the target's parts
    (loaded at the target rate, sizing, frontier) without the slow N-1 search."""
    spec = load_scenario(resolve_scenario_path(name))
    assert spec.target is not None
    target = Target(rate_req_per_s=spec.target.rate_req_per_s, ttft_slo_s=spec.target.ttft_slo_s)
    plain = review(spec, target=None, ttft_slo_s=None, options=OPTIONS)
    model, prices = stage_model(spec), unit_prices(spec)
    traffic = Traffic(output_lengths=spec.traffic.output_length)
    sized = sizing_part(model, prices, target, traffic, verify=replace(SMALL, verify=False))
    at_target = loaded(model, plain.comparison, traffic, target, SMALL, target.ttft_slo)
    frontier = cost_frontier(
        model, prices, sized, None, neighbours=((-1, 0), (1, 0), (0, 2), (1, 2)), resolution_tokens=256.0
    )
    # The threshold sweep's egress at the target needs the target: swept again.
    fig5b = threshold_sweep(model, plain.comparison.plan.n_pd_prefill, target.rate_req_per_s)
    return replace(
        plain,
        target=target,
        ttft_slo_s=target.ttft_slo_s,
        sizing=sized,
        frontier=frontier,
        loaded=at_target,
        threshold_sweep=fig5b,
    )


@pytest.fixture(
    scope="module",
    params=[
        "paper-case-study",
        # roofline-costed pools: the saw-tooth, P50s below 1 s, a target near Λ_max (about 20 s more: slow tier)
        pytest.param("workloads/qwen3-next-b200-h100.yaml", marks=pytest.mark.validation),
    ],
)
def drawn(request: pytest.FixtureRequest) -> Iterator[tuple[Any, dict[str, Figure]]]:
    r = _targeted(request.param)
    figures = {f.name.removesuffix(".png"): f for f in review_figures(r, keep=True)}
    yield r, figures
    for f in figures.values():
        plt.close(f.drawing)


def _ax(figure: Figure) -> Any:
    assert figure.drawing is not None
    figure.drawing.draw_without_rendering()
    return figure.drawing.axes[0]


def _overlap(a: Any, b: Any) -> bool:
    return bool(a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1)


def test_point_names_cover_no_name_no_point_and_no_legend(drawn: tuple[Any, dict[str, Figure]]) -> None:
    _, figures = drawn
    ax = _ax(figures["cost_goodput_pareto"])
    renderer = ax.figure.canvas.get_renderer()
    names = [t for t in ax.texts if t.get_gid() == "point-name"]
    assert names, "no point is named"
    boxes = [t.get_window_extent(renderer) for t in names]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not _overlap(a, b), (a, b)
    radius = {}
    markers = []
    for line in ax.get_lines():
        if line.get_marker() in ("None", None, "") or line.get_linestyle() not in ("None", "none", ""):
            continue
        for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True):
            cx, cy = ax.transData.transform((x, y))
            r = 0.5 * line.get_markersize() * ax.figure.dpi / 72.0
            radius[(cx, cy)] = r
            markers.append((cx, cy, r))
    assert markers
    for box in boxes:
        for cx, cy, r in markers:
            assert not (box.x0 < cx + r and cx - r < box.x1 and box.y0 < cy + r and cy - r < box.y1), (box, cx, cy)
    legend = ax.get_legend()
    assert legend is not None
    for box in boxes:
        assert not _overlap(box, legend.get_window_extent(renderer))
        assert _overlap(box, ax.get_window_extent(renderer))  # inside the frame, not clipped away


def _drawn_in_view(ax: Any, artist: Any) -> bool:
    """Whether an artist shows something inside the axes' limits."""
    x0, x1 = sorted(ax.get_xlim())
    y0, y1 = sorted(ax.get_ylim())
    if isinstance(artist, ErrorbarContainer):
        artist = artist.lines[0]
    if isinstance(artist, Line2D):
        x = np.asarray(artist.get_xdata(), dtype=np.float64)
        y = np.asarray(artist.get_ydata(), dtype=np.float64)
        if artist.get_transform() != ax.transData:  # axhline / axvline: one coordinate in axes units
            xs = x if np.all((x >= x0) & (x <= x1)) and x.size and x[0] == x[-1] and x[0] not in (0, 1) else None
            if xs is not None:
                return True
            return bool(np.any((y >= y0) & (y <= y1)) or np.any((x >= x0) & (x <= x1)))
        inside = np.isfinite(x) & np.isfinite(y) & (x >= x0) & (x <= x1) & (y >= y0) & (y <= y1)
        return bool(inside.any())
    return True


def test_every_legend_entry_has_something_drawn(drawn: tuple[Any, dict[str, Figure]]) -> None:
    _, figures = drawn
    for name, figure in figures.items():
        assert figure.drawing is not None
        for ax in figure.drawing.axes:
            legend = ax.get_legend()
            if legend is None:
                continue
            handles, labels = ax.get_legend_handles_labels()
            for handle, label in zip(handles, labels, strict=True):
                assert _drawn_in_view(ax, handle), (name, label)
            assert "off the plot" not in " ".join(labels), name


def test_the_target_is_marked_and_simulated_at_its_rate(drawn: tuple[Any, dict[str, Figure]]) -> None:
    r, figures = drawn
    rate = r.target.rate_req_per_s
    for name in ("ttft_vs_load", "cost_goodput_pareto"):
        ax = _ax(figures[name])
        labels = ax.get_legend_handles_labels()[1]
        assert any(f"{rate:g} req/s" in label for label in labels), (name, labels)
    ax = _ax(figures["ttft_vs_load"])
    at_rate = [
        c
        for c in ax.containers
        if isinstance(c, ErrorbarContainer) and np.allclose(np.asarray(c.lines[0].get_xdata()), rate)
    ]
    check = r.loaded.checks["plan"]
    if check.simulated is not None:
        assert len(at_rate) == 3  # P50, P90, P99 simulated at the target rate
        lo, hi = sorted(ax.get_xlim())
        assert lo <= rate <= hi


def test_the_log_time_axis_has_labelled_ticks_where_the_p50s_are(drawn: tuple[Any, dict[str, Figure]]) -> None:
    r, figures = drawn
    ax = _ax(figures["ttft_vs_load"])
    p50 = [c.figure_closed("overall", "p50") for c in r.load_curve.closed]
    p50 += [c.simulated.figures["overall"]["p50"].value for c in r.load_curve.simulated if c.simulated]
    values = [v for v in p50 if v is not None and math.isfinite(v)]
    lo, hi = sorted(ax.get_ylim())
    assert all(lo <= v <= hi for v in values)
    ticks = [(t.get_loc(), t.label1.get_text()) for t in ax.yaxis.get_major_ticks()]
    labelled = [loc for loc, text in ticks if text and lo <= loc <= hi]
    assert len(labelled) >= 2
    if min(values) < 1.0:
        assert any(loc < 1.0 for loc in labelled), ticks


def test_the_egress_at_the_target_is_drawn_above_the_chosen_star(drawn: tuple[Any, dict[str, Figure]]) -> None:
    _, figures = drawn
    ax = _ax(figures["egress_vs_threshold"])
    lines = {line.get_label(): line for line in ax.get_lines()}
    star = next(line for label, line in lines.items() if label.startswith("chosen"))
    target = next((line for label, line in lines.items() if label.startswith("egress at the target")), None)
    if target is None:  # the target is carried at no threshold: the title says so instead of an empty curve
        assert "carried at no t" in ax.get_title()
        return
    assert target.get_zorder() > star.get_zorder()


def _falls_before_the_optimum(path: Path) -> list[float]:
    """Thresholds (tokens) below the throughput-optimal one where Λ_max against t falls."""
    model = stage_model(load_scenario(path))
    plan_t, n_p, _ = best_plan(model, 64.0)
    sweep = threshold_sweep(model, n_p, None)
    t = np.asarray(sweep.threshold_tokens)
    d = np.diff(np.asarray(sweep.throughput_req_per_s))
    return [float(t[i]) for i in range(d.size) if d[i] < 0 and t[i + 1] < 0.9 * plan_t]


def test_the_saw_tooth_is_chunked_prefill(tmp_path: Path) -> None:
    """The cause the caption names, checked: with one chunk spanning the whole context the teeth vanish. (Priced
    with the paper-fit serving defaults, whose 1.95 ms per layer per chunk makes the teeth plain; SGLang's profile
    charges a tenth of that.)"""
    text = (ROOT / "workloads" / "qwen3-next-b200-h100.yaml").read_text()
    pool = "    method: roofline\n"
    assert text.count(pool) == 2
    source = tmp_path / "paper-fit.yaml"
    source.write_text(text.replace(pool, pool + "    engine: paper-fit\n"))
    one_chunk = tmp_path / "one-chunk.yaml"
    one_chunk.write_text(source.read_text().replace(pool, pool + "    roofline: {prefill_chunk_tokens: 131072}\n"))
    assert len(_falls_before_the_optimum(source)) >= 3
    assert _falls_before_the_optimum(one_chunk) == []


def test_the_saw_tooth_is_explained_where_there_is_one(drawn: tuple[Any, dict[str, Figure]]) -> None:
    r, figures = drawn
    caption = figures["fig5b_threshold"].caption
    lam = np.asarray(r.threshold_sweep.throughput_req_per_s)
    d = np.diff(lam)
    falls = [i for i in range(1, d.size - 1) if d[i] < 0 < d[i - 1] and np.any(d[i + 1 : i + 4] > 0)]
    assert ("chunked prefill" in caption) == bool(falls)
