"""Our simulator beside an independent one: ciw (https://github.com/CiwPython/Ciw, a maintained discrete-event
queueing-network library, PyPI ``ciw``), on the two queues our cluster is built from.

- **M/G/c prefill pool**: the cluster with only local traffic (threshold above every length) and a decode pool
  that never binds, against ciw's FCFS node with c servers. Poisson arrivals, lognormal service (mean 1 s,
  SCV 2). Statistics: mean wait in the queue, P50/P90/P99 of the sojourn (arrival to prefill end).
- **Processor-sharing link**: the cluster with every request offloaded to a PrfaaS pool with more instances
  than requests in flight and a prefill of 1e-12 s/token (so a transfer joins the link on arrival: layer-wise
  mode), against ciw's ``PSNode`` (limited processor sharing) with unlimited capacity, i.e. M/G/1-PS. Transfer
  times S/B lognormal (mean 1 s, SCV 2). Statistics: mean sojourn, mean sojourn over transfer time, and P50/P90/
  P99 of the sojourn; the closed forms E[T] = E[x]/(1 - ρ) and E[T | x] = x/(1 - ρ) (so E[T/x] = 1/(1 - ρ))
  hold for M/G/1-PS whatever the size distribution (Kleinrock, Queueing Systems vol. 2, §4.4).

Each side samples its own traffic with its own generator (ciw draws from Python's ``random`` through
``ciw.seed``), so the two agree only as distributions. Each replication drops its first 10 % of requests; the
table gives the mean over replications with a 95 % t half-width, and the gap in units of its standard error.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from prfaas_plan.sim.cluster import ClusterConfig
from prfaas_plan.sim.run import simulate
from prfaas_plan.sim.summary import confidence_half_width
from prfaas_plan.sim.workload import Workload
from tests.sim.helpers import queue_model

#: Lognormal service (s): mean 1, SCV e^{σ²} - 1 = 2.
SIGMA = math.sqrt(math.log(3.0))
MU = -0.5 * SIGMA**2
WARMUP = 0.1
POOL_SERVERS = 4
POOL_LOAD = 0.8
LINK_LOAD = 0.7
#: queue_model's local curve is 1e-4 s per token: a service of x seconds is 1e4·x tokens.
TOKENS_PER_S = 1e4
#: Link bandwidth for the link case (bytes/s) with 1 byte per token: a transfer of x seconds is 1e4·x tokens.
LINK_BYTES_PER_S = 1e4

FloatArray = npt.NDArray[np.float64]
POOL_STATS = ("mean wait", "P50 sojourn", "P90 sojourn", "P99 sojourn")
LINK_STATS = ("mean sojourn", "mean T/x", "P50 sojourn", "P90 sojourn", "P99 sojourn")


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One statistic from both simulators over replications: means, 95 % half-widths, the gap in standard
    errors of the difference, and the closed form where one exists (NaN otherwise)."""

    case: str
    statistic: str
    ours: float
    ours_half_width: float
    ciw: float
    ciw_half_width: float
    z: float
    closed_form: float = math.nan


def _stats(wait: FloatArray, sojourn: FloatArray, work: FloatArray | None) -> list[float]:
    p50, p90, p99 = np.percentile(sojourn, [50, 90, 99])
    if work is None:
        return [float(wait.mean()), float(p50), float(p90), float(p99)]
    return [float(sojourn.mean()), float(np.mean(sojourn / work)), float(p50), float(p90), float(p99)]


def _workload(rng: np.random.Generator, rate: float, n: int) -> Workload:
    arrival = np.cumsum(rng.exponential(1.0 / rate, n))
    tokens = TOKENS_PER_S * rng.lognormal(MU, SIGMA, n)
    return Workload.of(arrival - arrival[0], tokens, np.ones(n))


def ours_pool(rng: np.random.Generator, customers: int) -> list[float]:
    """One replication of the M/G/c pool through our cluster: the statistics of ``POOL_STATS``."""
    model = queue_model(n_local=POOL_SERVERS)
    config = ClusterConfig(model=model, threshold_tokens=math.inf, n_pd_prefill=POOL_SERVERS, n_pd_decode=1)
    rec = simulate(config, _workload(rng, POOL_LOAD * POOL_SERVERS, customers)).records
    keep = slice(int(WARMUP * customers), customers)
    wait = (rec.prefill_start_s - rec.arrival_s)[keep]
    return _stats(wait, (rec.prefill_end_s - rec.arrival_s)[keep], None)


def ours_link(rng: np.random.Generator, customers: int) -> list[float]:
    """One replication of the PS link through our cluster: the statistics of ``LINK_STATS``."""
    model = queue_model(
        n_prfaas=customers, bandwidth_bytes_per_s=LINK_BYTES_PER_S, transfer="layerwise", prfaas_per_token=1e-12
    )
    config = ClusterConfig(model=model, threshold_tokens=-1.0, n_pd_prefill=0, n_pd_decode=1)
    workload = _workload(rng, LINK_LOAD, customers)
    rec = simulate(config, workload).records
    keep = slice(int(WARMUP * customers), customers)
    sojourn = (rec.kv_ready_s - rec.transfer_start_s)[keep]
    return _stats(np.zeros(0), sojourn, (rec.input_tokens / LINK_BYTES_PER_S)[keep])


def _ciw_run(seed: int, customers: int, *, link: bool) -> list[float]:
    import ciw  # the test extra; imported here so that collecting the module needs no ciw

    rate = LINK_LOAD if link else POOL_LOAD * POOL_SERVERS
    drawn: dict[int, float] = {}

    class Recorded(ciw.dists.Lognormal):  # type: ignore[misc]
        """ciw's lognormal, remembering each request's draw: a PS node's records keep only the sojourn."""

        def sample(self, t: float | None = None, ind: object = None) -> float:
            value = float(super().sample(t, ind))
            drawn[ind.id_number] = value  # type: ignore[attr-defined]
            return value

    network = ciw.create_network(
        arrival_distributions=[ciw.dists.Exponential(rate=rate)],
        service_distributions=[Recorded(mean=MU, sd=SIGMA)],
        number_of_servers=[math.inf if link else POOL_SERVERS],
    )
    ciw.seed(seed)
    sim = ciw.Simulation(network, node_class=ciw.PSNode if link else None)
    # Arrivals run for `customers` mean gaps; a tail of 20 % more lets the window's requests finish.
    arrivals_end = customers / rate
    sim.simulate_until_max_time(1.2 * arrivals_end)
    records = sorted(sim.get_all_records(), key=lambda r: r.arrival_date)
    window = [r for r in records if WARMUP * arrivals_end <= r.arrival_date <= arrivals_end]
    unfinished = [i for i in sim.nodes[1].all_individuals if i.arrival_date <= arrivals_end]
    if unfinished:
        raise RuntimeError(f"{len(unfinished)} ciw requests of the window did not finish")
    wait = np.array([r.waiting_time for r in window])
    sojourn = np.array([r.exit_date - r.arrival_date for r in window])
    work = np.array([drawn[r.id_number] for r in window]) if link else None
    return _stats(wait, sojourn, work)


def compare(replications: int, customers: int, seed: int) -> list[Row]:
    """Both cases, ``replications`` each of ``customers`` requests on each side: the table's rows."""
    children = np.random.SeedSequence(seed).spawn(2 * replications)
    rows: list[Row] = []
    rho = LINK_LOAD  # E[x] = 1 s
    cases: tuple[
        tuple[str, tuple[str, ...], Callable[[np.random.Generator, int], list[float]], bool, dict[str, float]], ...
    ] = (
        ("M/G/4 pool", POOL_STATS, ours_pool, False, {}),
        ("M/G/1-PS link", LINK_STATS, ours_link, True, {"mean sojourn": 1.0 / (1.0 - rho), "mean T/x": 1 / (1 - rho)}),
    )
    for k, (case, names, ours_run, link, closed) in enumerate(cases):
        seeds = children[k * replications : (k + 1) * replications]
        ours = np.array([ours_run(np.random.default_rng(s), customers) for s in seeds])
        theirs = np.array([_ciw_run(int(s.generate_state(1)[0]), customers, link=link) for s in seeds])
        for j, name in enumerate(names):
            a, b = ours[:, j], theirs[:, j]
            se = math.sqrt(statistics.variance(a) / a.size + statistics.variance(b) / b.size)
            rows.append(
                Row(
                    case=case,
                    statistic=name,
                    ours=float(a.mean()),
                    ours_half_width=confidence_half_width(a),
                    ciw=float(b.mean()),
                    ciw_half_width=confidence_half_width(b),
                    z=(float(a.mean()) - float(b.mean())) / se if se > 0 else math.nan,
                    closed_form=closed.get(name, math.nan),
                )
            )
    return rows


def format_table(rows: list[Row]) -> str:
    """The rows as a fixed-width text table (times in s)."""
    lines = [
        f"{'case':<14} {'statistic':<13} {'ours':>16} {'ciw':>16} {'gap/se':>7} {'closed form':>11}",
    ]
    for r in rows:
        closed = f"{r.closed_form:11.3f}" if math.isfinite(r.closed_form) else f"{'':>11}"
        lines.append(
            f"{r.case:<14} {r.statistic:<13} {r.ours:8.3f} ± {r.ours_half_width:5.3f} "
            f"{r.ciw:8.3f} ± {r.ciw_half_width:5.3f} {r.z:7.2f} {closed}"
        )
    return "\n".join(lines)
