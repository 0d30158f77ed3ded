"""The routing LP of a topology at fixed thresholds (``optimize.topology``), kept in one HiGHS instance so that
the threshold search re-solves it warm: only the coefficients that changed are passed, and the previous basis
is the start. A solve costs about a millisecond instead of the 10-15 ms of ``scipy.optimize.linprog``, which
rebuilds and re-validates the model every call.

HiGHS is reached through the bindings SciPy ships (``scipy.optimize._highspy``, SciPy >= 1.15); they are not a
public SciPy API, so when they are missing or behave differently every solve falls back to ``linprog`` (same
solver, same answers; tests/topology/test_lp.py checks that the two agree).

Variables: x_0 = λ, x_1+q = y_q, the long requests per second of linked pair q (region j_q -> site k_q). Rows:
one per site (Σ_q T_q y_q <= N_k), then one per region (Σ_q y_q - λ r_j p_j = 0).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from prfaas_plan.errors import PlanError

Array = NDArray[np.float64]


class SolverError(PlanError):
    """HiGHS gave no optimum for one of the topology's LPs, which always have one (λ = 0 and no flow is
    feasible, λ is bounded by the local pools): numerics, not the input's feasibility. Exit status 1."""

    def __init__(self, which: str, message: str) -> None:
        super().__init__(
            f"the topology's {which} could not be solved (HiGHS: {message}); its coefficients may span too many "
            "orders of magnitude (traffic rates far apart, or a link or site orders of magnitude from the rest)"
        )


#: HiGHS's feasibility tolerances (default 1e-7, absolute on rows of order N_k instances): tightened so that
#: λ is exact to about 1e-10 relative and a warm and a cold solve of one LP agree to that.
_TOLERANCES = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}


def _bindings() -> Any:
    try:
        from scipy.optimize._highspy import _core
    except ImportError:
        return None
    needed = ("_Highs", "HighsLp", "MatrixFormat", "HighsModelStatus", "kHighsInf")
    return _core if all(hasattr(_core, name) for name in needed) else None


class RoutingLP:
    """max λ subject to the routing LP's rows, for one topology's pairs; ``solve`` takes each region's long
    rate r_j p_j and λ's cap, each pair's T_q and its flow cap B_q / S_q."""

    def __init__(
        self, pair_region: NDArray[np.int64], pair_site: NDArray[np.int64], n_regions: int, site_instances: Array
    ) -> None:
        self.pair_region = pair_region
        self.pair_site = pair_site
        self.n_regions = n_regions
        self.site_instances = site_instances
        self.n_sites = site_instances.size
        self._core = _bindings()
        self._highs: Any = None
        self._last: tuple[Array, Array] | None = None

    def _build(self, long_rate: Array, seconds: Array, upper: Array) -> None:
        core = self._core
        n_pairs = self.pair_region.size
        k, j = self.n_sites, self.n_regions
        lp = core.HighsLp()
        lp.num_col_ = n_pairs + 1
        lp.num_row_ = k + j
        lp.a_matrix_.num_col_ = n_pairs + 1
        lp.a_matrix_.num_row_ = k + j
        lp.a_matrix_.format_ = core.MatrixFormat.kColwise
        cost = np.zeros(n_pairs + 1)
        cost[0] = -1.0
        lp.col_cost_ = cost
        lp.col_lower_ = np.zeros(n_pairs + 1)
        lp.col_upper_ = np.where(np.isfinite(upper), upper, core.kHighsInf)
        lp.row_lower_ = np.concatenate((np.full(k, -core.kHighsInf), np.zeros(j)))
        lp.row_upper_ = np.concatenate((self.site_instances, np.zeros(j)))
        lp.a_matrix_.start_ = np.concatenate(([0], j + 2 * np.arange(n_pairs + 1))).astype(np.int32)
        lp.a_matrix_.index_ = np.concatenate(
            (k + np.arange(j), np.column_stack((self.pair_site, k + self.pair_region)).ravel())
        ).astype(np.int32)
        lp.a_matrix_.value_ = np.concatenate((-long_rate, np.column_stack((seconds, np.ones(n_pairs))).ravel()))
        highs = core._Highs()
        highs.setOptionValue("output_flag", False)
        for name, value in _TOLERANCES.items():
            highs.setOptionValue(name, value)
        highs.passModel(lp)
        self._highs = highs

    def _fast(self, long_rate: Array, seconds: Array, upper: Array) -> Array | None:
        core = self._core
        if self._highs is None:
            self._build(long_rate, seconds, upper)
        else:
            assert self._last is not None
            old_rate, old_seconds = self._last
            for row in np.flatnonzero(long_rate != old_rate):
                self._highs.changeCoeff(int(self.n_sites + row), 0, float(-long_rate[row]))
            for q in np.flatnonzero(seconds != old_seconds):
                self._highs.changeCoeff(int(self.pair_site[q]), int(q + 1), float(seconds[q]))
            n = upper.size
            self._highs.changeColsBounds(
                n, np.arange(n, dtype=np.int32), np.zeros(n), np.where(np.isfinite(upper), upper, core.kHighsInf)
            )
        self._last = (long_rate.copy(), seconds.copy())
        self._highs.run()
        if self._highs.getModelStatus() != core.HighsModelStatus.kOptimal:
            self._highs = None  # start the next solve from scratch; this one goes to linprog
            return None
        return np.asarray(self._highs.getSolution().col_value, dtype=np.float64)

    def _slow(self, long_rate: Array, seconds: Array, upper: Array) -> Array:
        from scipy.optimize import linprog
        from scipy.sparse import csr_array

        n_pairs = self.pair_region.size
        cols = np.arange(1, n_pairs + 1)
        rows = np.arange(self.n_regions)
        a_eq = csr_array(
            (
                np.concatenate((-long_rate, np.ones(n_pairs))),
                (np.concatenate((rows, self.pair_region)), np.concatenate((np.zeros(self.n_regions), cols))),
            ),
            shape=(self.n_regions, n_pairs + 1),
        )
        a_ub = csr_array((seconds, (self.pair_site, cols)), shape=(self.n_sites, n_pairs + 1))
        objective = np.zeros(n_pairs + 1)
        objective[0] = -1.0
        result = linprog(
            objective,
            A_ub=a_ub,
            b_ub=self.site_instances,
            A_eq=a_eq,
            b_eq=np.zeros(self.n_regions),
            bounds=np.column_stack((np.zeros(n_pairs + 1), upper)),
            method="highs",
            options=dict(_TOLERANCES),
        )
        if result.status != 0:  # λ = 0, y = 0 is feasible and λ bounded: a solver failure, not the input's
            raise SolverError("routing LP", str(result.message))
        return np.asarray(result.x, dtype=np.float64)

    def solve(self, long_rate: Array, cap: float, seconds: Array, flow_cap: Array, *, fast: bool = True) -> Array:
        """x = (λ, y_1, ...) at the optimum. ``fast=False`` forces ``linprog``."""
        upper = np.concatenate(([cap], flow_cap))
        if fast and self._core is not None:
            x = self._fast(long_rate, seconds, upper)
            if x is not None:
                return x
        return self._slow(long_rate, seconds, upper)
