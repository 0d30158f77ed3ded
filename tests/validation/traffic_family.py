"""A family of traffic the windowed TTFT model (``latency.profile``) was not tuned on, and the comparison of its
P90/P99 TTFT with the simulator's on each cell (issue 21: is the validity flag right?).

Cells: an arrival pattern x a length regime x a load (50/70/90 % of the plan's capacity on that traffic), on
the paper scenario's throughput-optimal plan (``optimize.search``; the plan `prfaas-plan optimize` reports):

- two-rate Markov-modulated Poisson (``mmpp``): rates h and l, h/l the ratio (1.5, 3, 10), each state held an
  exponential time of mean period/2 (30 s, 2 min, 10 min), mean rate λ;
- ON/OFF (``onoff``, ``sim.arrivals.OnOff``): peak/mean ratio 1.5, 3, 10 (ON a third, ... of the time), cycles of
  mean 30 s, 2 min, 10 min;
- diurnal ramps (``sim.arrivals.Diurnal``, compressed: amplitude 0.5 over 1 h, 0.8 over 30 min);
- batches (``sim.arrivals.Batched``: Poisson epochs, geometric sizes of mean 4 and 16);
- quantised timestamps: Poisson arrivals whose logged times are floored to 1 s and 3 s buckets. The simulator
  runs the true times; the closed form sees only the logged ones (as a user with such a trace would);
- length regimes under Poisson arrivals: the scenario's lengths x 0.4 (short), x 2.5 (long), and a bimodal
  mixture (80 % x 0.3, 20 % x 3).

The load of a cell is the largest stage utilisation (prefill pools, link, decode) its sampled requests give at
the mean rate, so every cell loads the plan's bottleneck to the stated fraction. Each cell is run on
``replications`` seeds (children of one ``SeedSequence``): per seed one workload, simulated and priced; the
cell's figures are means over seeds, with the simulator's 95 % t half-width. The closed form's validity flag is
the majority over seeds. Seed sets: ``TUNING_SEED`` set the flag's rules, ``JUDGING_SEED`` judges them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from prfaas_plan.latency.profile import profile_ttft
from prfaas_plan.optimize import PlanEvaluation
from prfaas_plan.sim.arrivals import Batched, Diurnal, OnOff, Poisson
from prfaas_plan.sim.cluster import ClusterConfig
from prfaas_plan.sim.run import simulate
from prfaas_plan.sim.summary import confidence_half_width
from prfaas_plan.sim.workload import Workload
from prfaas_plan.spec.plan import Plan
from prfaas_plan.throughput import StageModel

FloatArray = npt.NDArray[np.float64]

TUNING_SEED = 2101
JUDGING_SEED = 2102
LOADS = (0.5, 0.7, 0.9)
TOLERANCE = 0.2
PERIODS_S = (30.0, 120.0, 600.0)
RATIOS = (1.5, 3.0, 10.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class Pattern:
    """One arrival pattern and length regime (``kind`` selects the generator, ``a`` and ``b`` its parameters)."""

    name: str
    kind: str
    a: float = 0.0
    b: float = 0.0
    lengths: str = "scenario"


def family() -> list[Pattern]:
    """Every pattern of the family (module docstring), in a fixed order."""
    patterns = [Pattern(name=f"mmpp {r:g}x {p:g}s", kind="mmpp", a=p, b=r) for p in PERIODS_S for r in RATIOS]
    patterns += [Pattern(name=f"onoff {r:g}x {p:g}s", kind="onoff", a=p, b=r) for p in PERIODS_S for r in RATIOS]
    patterns += [
        Pattern(name="diurnal 0.5/1h", kind="diurnal", a=0.5, b=3600.0),
        Pattern(name="diurnal 0.8/30min", kind="diurnal", a=0.8, b=1800.0),
        Pattern(name="batches of 4", kind="batch", a=4.0),
        Pattern(name="batches of 16", kind="batch", a=16.0),
        Pattern(name="quantised 1s", kind="quantised", a=1.0),
        Pattern(name="quantised 3s", kind="quantised", a=3.0),
        Pattern(name="short lengths", kind="poisson", lengths="short"),
        Pattern(name="long lengths", kind="poisson", lengths="long"),
        Pattern(name="bimodal lengths", kind="poisson", lengths="bimodal"),
    ]
    return patterns


def _lengths(model: StageModel, regime: str, rng: np.random.Generator, n: int) -> FloatArray:
    base = model.lengths.sample(rng, n)
    if regime == "short":
        return np.maximum(0.4 * base, 1.0)
    if regime == "long":
        return 2.5 * base
    if regime == "bimodal":
        return np.where(rng.random(n) < 0.8, np.maximum(0.3 * base, 1.0), 3.0 * base)
    return base


def _mmpp(rng: np.random.Generator, rate: float, period_s: float, ratio: float, n: int) -> FloatArray:
    low, high = 2.0 * rate / (1.0 + ratio), 2.0 * rate * ratio / (1.0 + ratio)
    times: list[FloatArray] = []
    clock, count, state = 0.0, 0, int(rng.integers(2))
    while count < n:
        hold = rng.exponential(period_s / 2.0)
        lam = high if state else low
        k = int(rng.poisson(lam * hold))
        times.append(clock + np.sort(rng.uniform(0.0, hold, k)))
        clock, count, state = clock + hold, count + k, 1 - state
    return np.concatenate(times)[:n]


def arrivals(pattern: Pattern, rng: np.random.Generator, rate: float, n: int) -> tuple[FloatArray, FloatArray]:
    """(true arrival times, logged arrival times) of ``n`` requests at mean rate ``rate``; the two differ only
    for quantised timestamps."""
    if pattern.kind == "mmpp":
        true = _mmpp(rng, rate, pattern.a, pattern.b, n)
    elif pattern.kind == "onoff":
        true = OnOff(rate_req_per_s=rate, on_fraction=1.0 / pattern.b, mean_cycle_s=pattern.a).sample(rng, n)
    elif pattern.kind == "diurnal":
        true = Diurnal(rate_req_per_s=rate, amplitude=pattern.a, period_s=pattern.b).sample(rng, n)
    elif pattern.kind == "batch":
        epochs = Poisson(rate_req_per_s=rate / pattern.a)
        true = Batched(epochs=epochs, batch_size_mean=pattern.a).sample(rng, n)
    else:
        true = Poisson(rate_req_per_s=rate).sample(rng, n)
    true = np.asarray(true, dtype=np.float64) - float(true[0])
    logged = np.floor(true / pattern.a) * pattern.a if pattern.kind == "quantised" else true
    return true, logged


def _capacity_rate(model: StageModel, plan: PlanEvaluation, lengths: FloatArray, outputs: FloatArray) -> float:
    """The mean rate at which the busiest stage is fully loaded by requests like these (req/s)."""
    assert plan.threshold_tokens is not None
    offload = lengths > plan.threshold_tokens
    prfaas = float(np.sum(model.prfaas_prefill(lengths[offload]))) / max(model.n_prfaas, 1)
    local = float(np.sum(model.local_prefill(lengths[~offload]))) / max(plan.n_pd_prefill, 1)
    link = float(np.sum(model.kv_bytes(lengths[offload]))) / model.link_bandwidth_bytes_per_s
    decode = float(np.sum(outputs)) * model.decode_step_time_s / (plan.n_pd_decode * model.decode_max_batch)
    return lengths.size / max(prfaas, local, link, decode)


@dataclass(frozen=True, slots=True, kw_only=True)
class CellResult:
    """One cell: the closed form's and the simulator's P90/P99 (means over seeds), the flag (majority over
    seeds) with the reasons of the first seed that has any, and the pool features behind the flag (first
    seed), for setting and judging rules."""

    pattern: str
    load: float
    closed_p90_s: float
    closed_p99_s: float
    sim_p90_s: float
    sim_p99_s: float
    sim_p90_half_width_s: float
    sim_p99_half_width_s: float
    in_domain: bool
    reasons: tuple[str, ...]
    features: dict[str, float] = field(default_factory=dict)

    @property
    def error(self) -> float:
        """The larger relative error of the closed form's P90 and P99 against the simulator's."""
        return max(abs(self.closed_p90_s / self.sim_p90_s - 1.0), abs(self.closed_p99_s / self.sim_p99_s - 1.0))

    @property
    def within(self) -> bool:
        """Both percentiles within ``TOLERANCE``."""
        return self.error <= TOLERANCE


def run_cell(
    model: StageModel, plan: PlanEvaluation, pattern: Pattern, load: float, seed: int, replications: int, n: int
) -> CellResult:
    """Simulate and price one cell on ``replications`` seeds of ``n`` requests (module docstring)."""
    assert plan.threshold_tokens is not None
    config = ClusterConfig(
        model=model,
        threshold_tokens=plan.threshold_tokens,
        n_pd_prefill=plan.n_pd_prefill,
        n_pd_decode=plan.n_pd_decode,
    )
    sim: list[tuple[float, float]] = []
    closed: list[tuple[float, float]] = []
    flags: list[bool] = []
    reasons: tuple[str, ...] = ()
    features: dict[str, float] = {}
    cell_seed = [seed, LOADS.index(load) if load in LOADS else int(1000 * load), *(ord(c) for c in pattern.name)]
    for child in np.random.SeedSequence(cell_seed).spawn(replications):
        rng = np.random.default_rng(child)
        lengths = _lengths(model, pattern.lengths, rng, n)
        outputs = np.full(n, model.output_tokens_mean)
        rate = load * _capacity_rate(model, plan, lengths, outputs)
        true, logged = arrivals(pattern, rng, rate, n)
        result = simulate(config, Workload.of(true, lengths, outputs))
        ttft = result.records.ttft_s
        sim.append((float(np.percentile(ttft, 90)), float(np.percentile(ttft, 99))))
        chosen = Plan(
            threshold_tokens=plan.threshold_tokens, n_pd_prefill=plan.n_pd_prefill, n_pd_decode=plan.n_pd_decode
        )
        priced = profile_ttft(model, chosen, logged, lengths, outputs)
        summary = priced.loaded.ttft
        closed.append((summary.p90_s, summary.p99_s) if summary is not None else (math.inf, math.inf))
        flags.append(priced.validity.in_domain)
        if not reasons:
            reasons = priced.validity.reasons  # the first seed's that has any
        if not features:
            for stage, pool in priced.pools.items():
                if pool.fluid_delay_s.size:
                    features.update(
                        {
                            f"{stage}.utilization": pool.utilization,
                            f"{stage}.arrival_scv": pool.arrival_scv,
                            f"{stage}.overload_fraction": pool.overload_fraction,
                            f"{stage}.peak_utilization": pool.peak_utilization,
                            f"{stage}.shrinkage": pool.shrinkage,
                            f"{stage}.relaxations": float(logged[-1]) / max(pool.relaxation_s, 1e-300),
                            f"{stage}.window_s": pool.window_s,
                            f"{stage}.mean_batch": pool.mean_batch,
                        }
                    )
    s = np.array(sim)
    c = np.array(closed)
    return CellResult(
        pattern=pattern.name,
        load=load,
        closed_p90_s=float(c[:, 0].mean()),
        closed_p99_s=float(c[:, 1].mean()),
        sim_p90_s=float(s[:, 0].mean()),
        sim_p99_s=float(s[:, 1].mean()),
        sim_p90_half_width_s=confidence_half_width(s[:, 0]),
        sim_p99_half_width_s=confidence_half_width(s[:, 1]),
        in_domain=sum(flags) * 2 > len(flags),
        reasons=reasons,
        features=features,
    )


def confusion(cells: list[CellResult]) -> dict[str, int]:
    """Counts of the four outcomes: in domain / flagged x within / outside the tolerance."""
    out = {"in domain, within": 0, "in domain, outside": 0, "flagged, within": 0, "flagged, outside": 0}
    for cell in cells:
        out[f"{'in domain' if cell.in_domain else 'flagged'}, {'within' if cell.within else 'outside'}"] += 1
    return out
