"""A topology drawn as PNG bytes (matplotlib, Agg backend): PrfaaS sites on the left, PD clusters on the right,
every link an edge whose width follows its utilisation, labelled with the long requests it carries, its KV
bandwidth used and the share of the PD cluster's long requests it takes. Works on the ``topology plan --json``
plan mapping (``report.topology.topology_plan_dict``) and cluster list, so what is drawn is what is reported."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")  # a file backend, chosen before pyplot is imported: no display is needed

import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch

DPI = 130
_SITE = "#dbe9f6"
_PD = "#fde9d2"
_BOX_W = 0.34
_BOX_H = 0.2


def _box(ax: Any, x: float, y: float, colour: str, title: str, lines: Sequence[str]) -> None:
    ax.add_patch(
        FancyBboxPatch(
            (x - _BOX_W / 2, y - _BOX_H / 2),
            _BOX_W,
            _BOX_H,
            boxstyle="round,pad=0.01,rounding_size=0.02",
            facecolor=colour,
            edgecolor="#555555",
            linewidth=1.0,
            zorder=3,
        )
    )
    ax.text(x, y + 0.07, title, ha="center", va="center", fontsize=10, fontweight="bold", zorder=4)
    ax.text(x, y + 0.045, "\n".join(lines), ha="center", va="top", fontsize=8, zorder=4, linespacing=1.3)


def _rows(n: int) -> list[float]:
    """Vertical centres of n boxes, top to bottom."""
    if n == 1:
        return [0.5]
    return [0.88 - i * 0.76 / (n - 1) for i in range(n)]


def topology_png(topology: str, clusters: Sequence[dict[str, Any]], plan: dict[str, Any]) -> bytes:
    """The drawing of ``plan`` (one plan mapping) over the topology's ``clusters`` (``topology_study_dict``)."""
    sites = [c for c in clusters if c["kind"] == "prfaas"]
    pds = [c for c in clusters if c["kind"] == "pd"]
    n = max(len(sites), len(pds))
    fig, ax = plt.subplots(figsize=(11.0, max(4.5, 2.0 * n + 1.5)))
    ax.set_xlim(-0.05, 1.45)
    ax.set_ylim(-0.02, 1.02)
    ax.axis("off")
    ax.set_title(
        f"{topology}: {plan['label']}, λ = {plan['scale']:.3g} x the traffic mix, "
        f"{plan['throughput_req_per_s']:.2f} req/s carried in all",
        fontsize=11,
    )
    x_site, x_pd = 0.2, 1.2
    site_y = dict(zip((c["name"] for c in sites), _rows(len(sites)), strict=True))
    pd_y = dict(zip((c["name"] for c in pds), _rows(len(pds)), strict=True))
    regions = {r["cluster"]: r for r in plan["regions"]}
    links = list(plan["links"])
    for lk in links:
        y0, y1 = site_y[lk["prfaas"]], pd_y[lk["pd"]]
        used = lk["req_per_s"] > 1e-12
        width = 1.0 + 7.0 * min(max(lk["utilization"], 0.0), 1.0) if used else 0.8
        x0, x1 = x_site + _BOX_W / 2, x_pd - _BOX_W / 2
        ax.plot(
            [x0, x1],
            [y0, y1],
            color="#1f77b4" if used else "#aaaaaa",
            linestyle="-" if used else "--",
            linewidth=width,
            alpha=0.8,
            zorder=1,
            solid_capstyle="butt",
        )
        share = regions[lk["pd"]]["long_share_by_site"].get(lk["prfaas"], 0.0)
        # labels near the site's end, where its edges fan out (crossing edges meet nearer the middle)
        t = 0.3 if used else 0.5
        label = (
            f"{lk['req_per_s']:.2f} req/s, {lk['kv_gbit_per_s']:.3g} of {lk['bandwidth_gbit_per_s']:g} Gbit/s "
            f"({lk['utilization']:.0%})\n{share:.0%} of {lk['pd']}'s long requests"
            if used
            else f"unused ({lk['bandwidth_gbit_per_s']:g} Gbit/s)"
        )
        ax.text(
            x0 + t * (x1 - x0),
            y0 + t * (y1 - y0),
            label,
            ha="center",
            va="center",
            fontsize=7.5,
            color="#123b5e" if used else "#777777",
            bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none", "alpha": 0.9},
            zorder=2,
        )
    for c in sites:
        use = plan["site_utilization"].get(c["name"], 0.0)
        _box(
            ax,
            x_site,
            site_y[c["name"]],
            _SITE,
            c["name"],
            [
                f"PrfaaS, {c['region']}",
                f"{c['instances']} x {c['gpus_per_instance']} {c['hardware']}",
                f"busy {use:.0%}",
            ],
        )
    for c in pds:
        r = regions.get(c["name"])
        lines = [f"PD, {c['region']}", f"{c['instances']} x {c['gpus_per_instance']} {c['hardware']}"]
        if r is not None:
            lines.append(
                f"t = {r['threshold_tokens']:,.0f} tok, N_p/N_d {r['n_pd_prefill']}/{r['n_pd_decode']}\n"
                f"{r['carried_req_per_s']:.2f} req/s, offload {r['offload_fraction']:.1%}"
            )
        _box(ax, x_pd, pd_y[c["name"]], _PD, c["name"], lines)
    ax.text(
        0.0,
        -0.01,
        "edge width: link utilisation (KV Gbit/s over bandwidth); dashed: a link the plan does not use",
        fontsize=7.5,
        color="#555555",
        transform=ax.transAxes,
    )
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight", pad_inches=0.15)
    plt.close(fig)
    return buffer.getvalue()
