"""Validation: the conditional sojourn law of ``latency.link_spread`` against the simulated link (``SharedLink``).

A PS link of bandwidth 1 (so bytes are seconds of work) is driven by a small event loop: transfer starts
from the simulator's ``Poisson`` / gamma ``Renewal`` processes (SCV 1, 0.5, 3), work log-normal of SCV 0.3
or 1.5 or exponential, mean 1 s, utilisation 0.3, 0.6, 0.85. Transfers are binned by the deciles of the
work law; per bin the simulated mean, standard deviation, P50, P90 and P99 of the sojourn are compared with
the model's law for the same transfers (the mixture over the bin of T = x + Gamma matched by
``ps_sojourn``; quantiles by bisection on the mixture CDF).

Tolerances. Each run gives one estimate per bin and statistic; REPLICATIONS independent runs give their
mean and its standard error SE. A check passes when |model/sim - 1| <= band + T · SE/sim, T the two-sided
99.9 % Student quantile with REPLICATIONS - 1 degrees of freedom: the replication interval, widened by
``band``, the model's own error. The band is 0 where the model is exact (Poisson arrivals: every mean, and
the standard deviation for exponential work); elsewhere it is the accuracy the module claims, measured by
``tests/benchmarks/link_spread_table.py`` with 10x the transfers (``BANDS``). Each check also requires
SE/sim below ``MAX_RELATIVE_SE``, so that no check passes only because the simulation is noisy. The exact
statistics are also checked pooled over the bins of each run (a tighter interval), and a negative control
shows that the same checks reject the mean-stretch-only law of ``stages`` (no spread).

The table (sim vs model per bin, errors and SE in %) prints with ``pytest -s``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from statistics import NormalDist

import numpy as np
import numpy.typing as npt
import pytest

from prfaas_plan.latency.link_spread import ps_alone_probability, ps_sojourn
from prfaas_plan.sim.arrivals import ArrivalProcess, Poisson, Renewal
from prfaas_plan.sim.link import SharedLink

FloatArray = npt.NDArray[np.float64]

REPLICATIONS = 8
#: Transfers per run by utilisation: a busier link remembers longer, so it needs longer runs for the same SE.
TRANSFERS = {0.3: 30_000, 0.6: 50_000, 0.85: 100_000}
MEAN_WORK_S = 1.0
BINS = 10
LEVELS = (0.5, 0.9, 0.99)
STATISTICS = ("mean", "sd", "p50", "p90", "p99")
#: Two-sided confidence of each check.
CONFIDENCE = 0.999
#: A check is meaningful only when the simulation pins the statistic down to this relative standard error.
MAX_RELATIVE_SE = 0.12
#: The pooled check of the exact statistics must pin them down to this relative half-width (it is about 1 %
#: for the mean at ρ = 0.3 and 5-8 % at ρ = 0.85, where a run's mean sojourn wanders for longest).
MAX_POOLED_HALF_WIDTH = 0.10
#: Transfers per bin at which the model's mixture is evaluated (evenly spaced in the bin's sorted sizes).
MODEL_POINTS = 400
# Mixture-quantile bisection steps (the bracket shrinks 2^-60).
_BISECTION_STEPS = 60


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """One link configuration: utilisation, the starts' inter-arrival SCV and the work law."""

    utilization: float
    arrival_scv: float
    work_law: str  # "exp" or "lognormal"
    work_scv: float

    @property
    def label(self) -> str:
        """Short name, e.g. rho0.6-ca3-ln1.5."""
        law = "exp" if self.work_law == "exp" else f"ln{self.work_scv:g}"
        return f"rho{self.utilization:g}-ca{self.arrival_scv:g}-{law}"

    def arrivals(self) -> ArrivalProcess:
        """Transfer starts at rate ρ/E[S]."""
        rate = self.utilization / MEAN_WORK_S
        if self.arrival_scv == 1.0:
            return Poisson(rate_req_per_s=rate)
        return Renewal(rate_req_per_s=rate, scv=self.arrival_scv)

    def sample_work(self, rng: np.random.Generator, n: int) -> FloatArray:
        """n transfer works (s) of mean MEAN_WORK_S and SCV work_scv."""
        if self.work_law == "exp":
            return rng.exponential(MEAN_WORK_S, n)
        sigma2 = math.log1p(self.work_scv)
        return rng.lognormal(math.log(MEAN_WORK_S) - sigma2 / 2, math.sqrt(sigma2), n)

    def decile_edges(self) -> FloatArray:
        """The work law's quantiles at 0.1, ..., 0.9 (s): the bin edges, the same for every run."""
        q = np.arange(1, BINS) / BINS
        if self.work_law == "exp":
            return np.asarray(-MEAN_WORK_S * np.log1p(-q), dtype=np.float64)
        sigma2 = math.log1p(self.work_scv)
        z = np.array([NormalDist().inv_cdf(float(p)) for p in q])
        return np.asarray(MEAN_WORK_S * np.exp(-sigma2 / 2 + math.sqrt(sigma2) * z), dtype=np.float64)


WORK_LAWS = (("lognormal", 0.3), ("exp", 1.0), ("lognormal", 1.5))
SCENARIOS = [
    Scenario(utilization=rho, arrival_scv=ca2, work_law=law, work_scv=cs2)
    for ca2 in (1.0, 0.5, 3.0)
    for rho in (0.3, 0.6, 0.85)
    for law, cs2 in WORK_LAWS
]

#: The model's claimed accuracy |model/sim - 1| for (mean, sd, P50, P90, P99), by (arrival SCV, ρ): the
#: largest error over the three work laws and ten deciles in tests/benchmarks/link_spread_table.py (10x the
#: transfers of this test, other seeds), plus 3 points, rounded up. Poisson: the mean is exact (Kleinrock),
#: the sd exact for exponential work (CMT; ``bands`` zeroes it) and within a few percent otherwise;
#: quantiles carry the atom + shifted gamma's shape error. Renewal arrivals: the gamma-gap occupancy and
#: the relaxation bridges of the module docstring, least accurate at light load.
BANDS: dict[tuple[float, float], tuple[float, float, float, float, float]] = {
    (1.0, 0.3): (0.0, 0.08, 0.04, 0.12, 0.08),
    (1.0, 0.6): (0.0, 0.07, 0.09, 0.06, 0.07),
    (1.0, 0.85): (0.0, 0.05, 0.05, 0.05, 0.06),
    (0.5, 0.3): (0.11, 0.28, 0.10, 0.32, 0.12),
    (0.5, 0.6): (0.15, 0.14, 0.24, 0.18, 0.08),
    (0.5, 0.85): (0.11, 0.10, 0.15, 0.10, 0.10),
    (3.0, 0.3): (0.21, 0.19, 0.28, 0.20, 0.17),
    (3.0, 0.6): (0.20, 0.16, 0.25, 0.17, 0.16),
    (3.0, 0.85): (0.14, 0.12, 0.18, 0.11, 0.13),
}


def simulate_link(starts_s: FloatArray, work_s: FloatArray) -> FloatArray:
    """Sojourn (s) of each transfer on a processor-sharing link of bandwidth 1, starts in time order."""
    link = SharedLink(1.0, bin_s=1e18)
    start, finish_due, next_finish = link.start, link.finish_due, link.next_finish_s
    n = len(starts_s)
    starts, works = starts_s.tolist(), work_s.tolist()
    departure = np.empty(n)
    i, now, due = 0, 0.0, math.inf
    while i < n or link.in_flight:
        arrival = starts[i] if i < n else math.inf
        if arrival <= due:
            now = arrival
            start(now, works[i], i)
            i += 1
        else:
            now = due
            for done in finish_due(now):
                departure[done] = now
        due = next_finish(now)
    return departure - starts_s


def bin_statistics(work_s: FloatArray, sojourn_s: FloatArray, edges: FloatArray) -> FloatArray:
    """(BINS, 5): mean, sd, P50, P90, P99 of the sojourn of the transfers in each work decile."""
    index = np.searchsorted(edges, work_s)
    out = np.empty((BINS, len(STATISTICS)))
    for b in range(BINS):
        t = sojourn_s[index == b]
        out[b, 0], out[b, 1] = t.mean(), t.std(ddof=1)
        out[b, 2:] = np.quantile(t, LEVELS)
    return out


def model_statistics(work_s: FloatArray, scenario: Scenario, atom: bool = True) -> FloatArray:
    """The model's mean, sd, P50, P90, P99 for a bin whose transfers have works ``work_s`` (the mixture).

    Each transfer's law is an atom at x of mass ``ps_alone_probability`` plus x + Gamma matched to the rest of
    ``ps_sojourn``'s moments (``atom=False``: the plain shifted gamma, for comparison)."""
    from scipy.special import gammainc

    args = (scenario.utilization, MEAN_WORK_S, scenario.work_scv, scenario.arrival_scv)
    every_mean, every_var = ps_sojourn(work_s, *args)  # moments of the mixture: every transfer counts
    out = [float(np.mean(every_mean)), math.sqrt(float(np.mean(every_var) + np.var(every_mean)))]
    # Quantiles: the mixture over the bin's sizes at the midpoints of MODEL_POINTS equal-probability cells.
    cells = ((np.arange(MODEL_POINTS) + 0.5) / MODEL_POINTS * len(work_s)).astype(int)
    x = np.sort(work_s)[cells]
    mean, var = ps_sojourn(x, *args)
    extra = mean - x
    p = np.minimum(ps_alone_probability(x, *args), var / (var + extra**2)) if atom else np.zeros_like(x)
    extra_plus = extra / (1 - p)
    var_plus = (var * (1 - p) - p * extra**2) / (1 - p) ** 2
    shape, scale = extra_plus**2 / var_plus, var_plus / extra_plus
    levels = np.asarray(LEVELS)[:, None]
    low = np.full((len(LEVELS), 1), float(x.min()))
    high = np.full((len(LEVELS), 1), float(np.max(mean + 30.0 * np.sqrt(var))))
    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (low + high)
        above = np.maximum(mid - x, 0.0)
        cdf = np.mean(p * (mid >= x) + (1 - p) * gammainc(shape, above / scale), axis=1, keepdims=True)
        below = cdf < levels
        low, high = np.where(below, mid, low), np.where(below, high, mid)
    out += (0.5 * (low + high)).ravel().tolist()
    return np.asarray(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """Per bin and statistic (BINS, 5): simulated mean over runs, its standard error, the model; and the
    bins' mean work (s)."""

    scenario: Scenario
    bin_work_s: FloatArray
    sim: FloatArray
    standard_error: FloatArray
    model: FloatArray
    #: (runs, BINS, 5): each run's statistics, for checks that pool bins within a run.
    runs: FloatArray

    @property
    def relative_error(self) -> FloatArray:
        """model/sim - 1."""
        return np.asarray(self.model / self.sim - 1.0, dtype=np.float64)

    @property
    def relative_se(self) -> FloatArray:
        """SE/sim."""
        return np.asarray(self.standard_error / self.sim, dtype=np.float64)


def compare(scenario: Scenario, replications: int, transfers: int, seed: int = 2024, atom: bool = True) -> Comparison:
    """Simulate ``replications`` independent runs of ``transfers`` (10 % warm-up dropped) and set the per-bin
    statistics beside the model's."""
    edges = scenario.decile_edges()
    per_run, works, sojourns = [], [], []
    for child in np.random.SeedSequence(seed).spawn(replications):
        rng = np.random.default_rng(child)
        starts = scenario.arrivals().sample(rng, transfers)
        work = scenario.sample_work(rng, transfers)
        sojourn = simulate_link(starts, work)[transfers // 10 :]
        work = work[transfers // 10 :]
        per_run.append(bin_statistics(work, sojourn, edges))
        works.append(work)
        sojourns.append(sojourn)
    runs = np.stack(per_run)
    all_work = np.concatenate(works)
    index = np.searchsorted(edges, all_work)
    model = np.stack([model_statistics(all_work[index == b], scenario, atom) for b in range(BINS)])
    return Comparison(
        scenario=scenario,
        bin_work_s=np.array([all_work[index == b].mean() for b in range(BINS)]),
        sim=runs.mean(axis=0),
        standard_error=runs.std(axis=0, ddof=1) / math.sqrt(replications),
        model=model,
        runs=runs,
    )


def format_table(comparison: Comparison) -> str:
    """Rows per bin: work, then sim/model/error for each statistic (errors in %)."""
    head = f"{comparison.scenario.label}\n  {'x_s':>6} " + " ".join(
        f"{name + ' sim':>9} {'model':>8} {'err%':>6} {'±se%':>5}" for name in STATISTICS
    )
    rows = [head]
    err, se = 100.0 * comparison.relative_error, 100.0 * comparison.relative_se
    for b in range(BINS):
        cells = " ".join(
            f"{comparison.sim[b, s]:9.3f} {comparison.model[b, s]:8.3f} {err[b, s]:+6.1f} {se[b, s]:5.1f}"
            for s in range(len(STATISTICS))
        )
        rows.append(f"  {comparison.bin_work_s[b]:6.3f} {cells}")
    return "\n".join(rows)


def bands(scenario: Scenario) -> FloatArray:
    """(5,) model-error allowance per statistic for this scenario (0 where the model is exact)."""
    band = np.array(BANDS[scenario.arrival_scv, scenario.utilization])
    if scenario.arrival_scv == 1.0 and scenario.work_law == "exp":
        band[1] = 0.0  # Coffman, Muntz & Trotter: exact
    return band


def student_quantile(level: float, dof: int) -> float:
    """Two-sided Student t quantile at ``level`` with ``dof`` degrees of freedom."""
    from scipy.special import stdtrit

    return float(stdtrit(dof, 0.5 + level / 2))


@cache
def _comparison(scenario: Scenario) -> Comparison:
    return compare(scenario, REPLICATIONS, TRANSFERS[scenario.utilization])


@pytest.mark.validation
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.label for s in SCENARIOS])
def test_sojourn_law_matches_the_simulated_link(scenario: Scenario) -> None:
    """Per work decile, mean/sd/P50/P90/P99 of the model are within the claimed band of the simulated link,
    widened by the 99.9 % replication interval; exact statistics (Poisson mean, exponential-work sd) get no
    band at all."""
    comparison = _comparison(scenario)
    print("\n" + format_table(comparison))
    t = student_quantile(CONFIDENCE, REPLICATIONS - 1)
    allowed = bands(scenario)[None, :] + t * comparison.relative_se
    error = np.abs(comparison.relative_error)
    assert np.all(comparison.relative_se < MAX_RELATIVE_SE), comparison.relative_se.max(axis=0)
    failures = [
        f"bin {b} {STATISTICS[s]}: err {comparison.relative_error[b, s]:+.3f} > {allowed[b, s]:.3f}"
        for b, s in zip(*np.nonzero(error > allowed), strict=True)
    ]
    assert not failures, failures


@pytest.mark.validation
@pytest.mark.parametrize(
    "scenario", [s for s in SCENARIOS if s.arrival_scv == 1.0], ids=[s.label for s in SCENARIOS if s.arrival_scv == 1.0]
)
def test_exact_statistics_pooled_over_bins(scenario: Scenario) -> None:
    """Poisson arrivals: the bin-averaged relative error of the mean (and of the sd for exponential work) is
    zero within the 99.9 % replication interval of that average (each run gives one bin average, so the
    correlation between the bins of a run is in the interval), an interval under MAX_POOLED_HALF_WIDTH."""
    comparison = _comparison(scenario)
    exact = [0, 1] if scenario.work_law == "exp" else [0]
    per_run = np.mean(comparison.runs[:, :, exact] / comparison.model[None, :, exact] - 1.0, axis=1)
    # model/sim - 1 and sim/model - 1 agree to first order; the latter averages linearly over runs.
    centre = per_run.mean(axis=0)
    half = student_quantile(CONFIDENCE, REPLICATIONS - 1) * per_run.std(axis=0, ddof=1) / math.sqrt(REPLICATIONS)
    assert np.all(half < MAX_POOLED_HALF_WIDTH), half
    assert np.all(np.abs(centre) <= half), (centre, half)


@pytest.mark.validation
def test_mean_stretch_alone_is_rejected() -> None:
    """Negative control: the law of ``stages`` (every transfer takes κ x, no spread) fails the same P99 check
    on a busy Poisson link, by far more than the band, so the check can tell a spread from none."""
    scenario = Scenario(utilization=0.85, arrival_scv=1.0, work_law="exp", work_scv=1.0)
    comparison = _comparison(scenario)
    stretch_only_p99 = comparison.bin_work_s / (1 - scenario.utilization)  # κ = 1/(1 - ρ) for Poisson
    error = np.abs(stretch_only_p99 / comparison.sim[:, 4] - 1.0)
    t = student_quantile(CONFIDENCE, REPLICATIONS - 1)
    allowed = bands(scenario)[4] + t * comparison.relative_se[:, 4]
    assert np.all(error > allowed + 0.5)
