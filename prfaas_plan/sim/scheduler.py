"""What the dual-timescale scheduler (PrfaaS paper §3.4.3) decides, as pure functions of what it measured:
the threshold that maximises Eq. 6 over a window of recent incremental lengths with the instances alive and
the bandwidth seen now, and the local prefill/decode split that does (scored with ``prfaas_plan.throughput``).

On an empirical window Λ_max(t) is constant between consecutive observed lengths, so scoring t at the
window's distinct values (thinned to ``grid_points`` quantiles), below its minimum (everything offloaded)
and at its maximum (everything local), then at every observed value between the best point's neighbours,
finds the window's optimum (Λ_max is steep beside a kink where two bounds cross: 1.5 % in t can cost 2 % in
Λ, so the second pass matters). Ties in Λ_max
(a binding decode stage makes Λ flat in t) go to the largest prefill-side bound, as ``optimize.search``
breaks them, then to the smallest t.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import numpy.typing as npt

from prfaas_plan._frozen import frozen
from prfaas_plan.lengths import Empirical
from prfaas_plan.throughput import (
    StageModel,
    max_throughput,
    routing,
    stage_bounds,
    stage_throughputs,
    with_link_rate,
)

#: Thresholds scored per decision (quantiles of the window); 256 resolves the window's CDF to 0.4 %.
GRID_POINTS = 256
#: Bandwidth used for scoring during an outage (bytes/s): positive so that Eq. 3 stays finite, small enough
#: that any offloading scores as worthless and the optimum routes everything locally.
_OUTAGE_BYTES_PER_S = 1.0


@frozen
class Choice:
    """A scored decision: threshold t (tokens), local split, and its Eq. 6 Λ_max (req/s) on the window."""

    threshold_tokens: float
    n_pd_prefill: int
    n_pd_decode: int
    throughput_req_per_s: float


def _scores(
    model: StageModel,
    window: npt.NDArray[np.float64],
    lengths: Empirical,
    n_prfaas: int,
    n_p: npt.NDArray[np.float64],
    n_local: int,
    bandwidth_bytes_per_s: float,
    grid_points: int,
    around: tuple[float, float] | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    if around is None:
        levels = np.linspace(0.0, 1.0, grid_points)
        grid = np.unique(np.concatenate([[-1.0], np.quantile(window, levels)]))
    else:
        # Second pass: every observed length between the coarse optimum's neighbours (at most grid_points).
        inside = np.unique(window[(window >= around[0]) & (window <= around[1])])
        if inside.size > grid_points:
            inside = inside[np.linspace(0, inside.size - 1, grid_points).astype(np.int64)]
        grid = np.unique(np.concatenate([[around[0], around[1]], inside]))
    scored = with_link_rate(
        replace(model, lengths=lengths, n_prfaas=n_prfaas, n_local=n_local),
        max(bandwidth_bytes_per_s, _OUTAGE_BYTES_PER_S),
    )
    route = routing(lengths, grid)
    theta = stage_throughputs(scored, route, n_p[:, np.newaxis])
    bounds = stage_bounds(theta, route)
    lam = max_throughput(bounds)
    prefill = np.minimum.reduce([bounds["prfaas_compute"], bounds["prfaas_link"], bounds["pd_prefill"]])
    return grid, lam, np.broadcast_to(prefill, lam.shape)


def _pick(
    grid: npt.NDArray[np.float64], lam: npt.NDArray[np.float64], prefill: npt.NDArray[np.float64]
) -> tuple[int, int]:
    top = float(np.max(lam))
    ties = lam >= top * (1 - 1e-9)
    score = np.where(ties, prefill, -np.inf)
    best = float(np.max(score))
    rows, cols = np.nonzero(score >= best * (1 - 1e-9) if np.isfinite(best) else ties)
    k = int(np.argmin(cols + rows * grid.size))
    return int(rows[k]), int(cols[k])


def best_threshold(
    model: StageModel,
    window: npt.ArrayLike,
    *,
    n_prfaas: int,
    n_pd_prefill: int,
    n_pd_decode: int,
    bandwidth_bytes_per_s: float,
    grid_points: int = GRID_POINTS,
) -> Choice:
    """The t maximising Eq. 6 on ``window`` (recent incremental lengths) for the given instances and
    bandwidth (module docstring for the grid and ties)."""
    values = np.asarray(window, dtype=np.float64)
    n_p = np.array([float(n_pd_prefill)])
    n_local = n_pd_prefill + n_pd_decode
    lengths = Empirical(values=values)
    grid, lam, prefill = _scores(model, values, lengths, n_prfaas, n_p, n_local, bandwidth_bytes_per_s, grid_points)
    _, col = _pick(grid, lam, prefill)
    around = (float(grid[max(col - 1, 0)]), float(grid[min(col + 1, grid.size - 1)]))
    grid, lam, prefill = _scores(
        model, values, lengths, n_prfaas, n_p, n_local, bandwidth_bytes_per_s, grid_points, around=around
    )
    _, col = _pick(grid, lam, prefill)
    return Choice(
        threshold_tokens=float(grid[col]),
        n_pd_prefill=n_pd_prefill,
        n_pd_decode=n_pd_decode,
        throughput_req_per_s=float(lam[0, col]),
    )


def best_split(
    model: StageModel,
    window: npt.ArrayLike,
    *,
    n_prfaas: int,
    n_local: int,
    bandwidth_bytes_per_s: float,
    grid_points: int = GRID_POINTS,
) -> Choice:
    """The (t, N_p) maximising Eq. 6 on ``window`` over N_p in 0..n_local−1 (at least one decode instance),
    the long-term scheduler's re-optimisation of Eqs. 7-8."""
    values = np.asarray(window, dtype=np.float64)
    n_p = np.arange(0, max(n_local, 1), dtype=np.float64)
    lengths = Empirical(values=values)
    grid, lam, prefill = _scores(model, values, lengths, n_prfaas, n_p, n_local, bandwidth_bytes_per_s, grid_points)
    row, _ = _pick(grid, lam, prefill)
    split = int(n_p[row])
    return best_threshold(
        model,
        values,
        n_prfaas=n_prfaas,
        n_pd_prefill=split,
        n_pd_decode=n_local - split,
        bandwidth_bytes_per_s=bandwidth_bytes_per_s,
        grid_points=grid_points,
    )
