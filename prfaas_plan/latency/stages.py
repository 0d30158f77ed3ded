"""Every stage of a PrfaaS-PD plan as a queue, vectorised over candidate plans (numpy broadcasting).

A plan (t, N_p, N_d) at total arrival rate Λ. Requests with uncached length L > t (a fraction p = P(L > t))
are offloaded, the rest prefilled locally; routing by length is independent of arrival times.

- **PrfaaS prefill pool**: G/G/c, c = N_prfaas, arrival rate pΛ, service T_prfaas(L) for L > t. Its mean
  and SCV come from the first two moments E[T | L > t], E[T² | L > t] (``curve.expect``, power 1 and 2),
  not from T at one representative length. Waiting law: Whitt's (1993) refinement of Allen-Cunneen for the
  mean, Erlang C for P(W > 0), exponential conditional wait (``tests.queueing_oracles.ggc_wait``, whose
  docstring tabulates the error against simulation).
- **Cross-datacenter link**: the offloaded transfers, S_kv(L)/B seconds of work each, share B fairly
  (processor sharing, what TCP flows on one link approximate). For M/G/1-PS a transfer of work x takes
  x / (1 - ρ) on average, for any work distribution (Kleinrock 1976, Queueing Systems Vol. 2, ch. 4), so
  sharing stretches each transfer by κ = 1 + ρ/(1 - ρ). For renewal arrivals the stretch uses the mean
  number of concurrent transfers of the heavy-traffic limit (state-space collapse: the workload is
  that of any work-conserving queue, Kingman's ρ E[S] (ca² + cs²) / (2(1 - ρ)), and the transfers in
  progress have the equilibrium residual mean E[S](1 + cs²)/2; Gromoll 2004, Ann. Appl. Probab. 14(2)):
  κ = 1 + ρ/(1 - ρ) · (ca² + cs²)/(1 + cs²), exact for Poisson arrivals. The stretch is applied to each
  request's own transfer time (the PS mean given its size), so the link adds no variance of its own: at
  the paper's link loads (≤ 15 %) it moves TTFT by milliseconds; a link-bound plan's percentiles are
  under-dispersed. Layer-wise transfers are visible only where κ S/B outlasts the prefill (``unloaded``).
- **Local prefill pool**: G/G/c as the PrfaaS pool, c = N_p, arrival rate (1 - p)Λ, service T_local(L),
  L <= t. The intra-cluster transfer (when its bandwidth is given) is added to TTFT but does not hold the
  prefill instance (the transfer is asynchronous and each instance has its own NIC; at 100 GB/s a 2.4 GB
  cache takes 24 ms against seconds of prefill, so its queue is not modelled).
- **Decode admission**: N_d · BS_max slots, each held for L_out · T_decode (the SLO-governed step time of
  Eq. 5), arrival rate Λ: a G/G/c wait for a slot with c = N_d · BS_max, service SCV that of the output
  length (0 for the paper's fixed 1,024 tokens).

Arrival variability. Bernoulli routing (probability p) of a renewal process with inter-arrival time X,
SCV ca², gives a renewal process whose inter-arrival time is a sum of N ~ Geometric(p) copies of X:
E = E[X]/p and Var = Var[X]/p + E[X]²(1 - p)/p², so its SCV is exactly p·ca² + (1 - p) (the splitting
rule of Whitt 1983, The Queueing Network Analyzer, Bell Syst. Tech. J. 62(9)). The link and the decode
stage are fed by the prefill pools' departures; their SCV is taken as that of the pools' arrivals (exact
for Poisson arrivals into exponential servers, Burke's theorem). QNA's departure approximation
c_d² = 1 + (1 - ρ²)(ca² - 1) + ρ²(cs² - 1)/√c differs from ca² by ρ²((cs² - 1)/√c - (ca² - 1)): for
the paper's pools (cs² 0.1-0.3, c = 3-4) departures are smoother than Poisson by 0.1 at half load and
0.3-0.4 at 90 %, so the link and slot waits are slightly overstated; both are insensitive to it (the link
is <= 15 % busy, the decode stage has 100+ slots).

Stability: a stage is unstable when its utilisation ρ >= 1. Because T is convex in l, E[T(L)] > T(E[L]),
so a prefill pool saturates slightly *before* the paper's Λ_max (Eqs. 3-4 use T at the mean length).

The routes' service moments, the utilisations and the stability limit are ``latency.moments`` (what scoring a
plan needs without its queues; re-exported here).
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.latency.moments import RouteMoments as RouteMoments
from prfaas_plan.latency.moments import route_moments as route_moments
from prfaas_plan.latency.moments import stability_limit_req_per_s as stability_limit_req_per_s
from prfaas_plan.latency.moments import utilization as utilization_at
from prfaas_plan.throughput import STAGES, StageModel

if TYPE_CHECKING:  # annotations only (start-up time)
    from prfaas_plan.spec.plan import Plan

Array = NDArray[np.float64]


# --------------------------------------------------------------------------------------------------------
# Vectorised G/G/c primitives: the one implementation (tests check it against tests.queueing_oracles)
# --------------------------------------------------------------------------------------------------------


#: Pools of at most this many servers get Erlang B as a ratio of Poisson terms summed in log space (exact to
#: rounding, memory c + 1 floats per element); larger pools use the Poisson pmf over its CDF (O(1) per element).
_LOG_SUM_MAX_SERVERS = 256
# Elements evaluated together by the log-space sum (its (elements, c + 1) array stays under 20 MB).
_LOG_SUM_BLOCK = 8192


@lru_cache(maxsize=8)
def _log_factorials(top: int) -> tuple[Array, Array]:
    """k = 0..top and ln k! (read-only; cached: every call of one search asks for the same pools)."""
    k = np.arange(top + 1, dtype=np.float64)
    log_factorial = np.concatenate(([0.0], np.cumsum(np.log(k[1:]))))
    k.setflags(write=False)
    log_factorial.setflags(write=False)
    return k, log_factorial


def _erlang_b_log_sum(c: Array, a: Array) -> Array:
    """B(c, a) = (a^c / c!) / Σ_{k<=c} a^k / k! as a log-sum-exp over k = 0..c, for 1 <= c <= 256, 0 < a."""
    k, log_factorial = _log_factorials(int(np.max(c)))
    out = np.empty(c.shape)
    for start in range(0, c.size, _LOG_SUM_BLOCK):
        block = slice(start, start + _LOG_SUM_BLOCK)
        c_b, log_a = c[block, None], np.log(a[block])[:, None]
        log_terms = np.where(k <= c_b, k * log_a - log_factorial, -np.inf)
        peak = np.max(log_terms, axis=-1, keepdims=True)
        log_last = np.take_along_axis(log_terms, c_b.astype(np.int64), axis=-1)
        out[block] = (np.exp(log_last - peak) / np.sum(np.exp(log_terms - peak), axis=-1, keepdims=True))[:, 0]
    return out


def _erlang_b_large(c: Array, a: Array) -> Array:
    """B(c, a) = P(X = c) / P(X <= c) for X ~ Poisson(a), for c > 256 and 0 < a < c.

    The CDF is ``scipy.special.pdtr`` (the regularised incomplete gamma Q(c + 1, a), >= about 1/2 here, so the
    ratio is well conditioned). The pmf is taken in the form that avoids cancelling terms of size c log c:
    ln P(X = c) = c (ln(1 - x) + x) - ln(2πc)/2 - r(c), x = (c - a)/c, with Stirling's series
    r(c) = 1/(12c) - 1/(360c³) + 1/(1260c⁵) (its next term is below 1e-20 for c > 256).
    Source: Abramowitz & Stegun (1964), 6.1.40 and 26.4.21.
    """
    from scipy.special import pdtr  # imported only for pools past the log-sum range (start-up time)

    x = (c - a) / c
    # ln(1 - x) = ln(a / c): log1p where x is small (near saturation), the plain ratio where a << c.
    log_rho = np.where(x < 0.5, np.log1p(-np.minimum(x, 0.5)), np.log(a / c))
    stirling = 1.0 / (12.0 * c) - 1.0 / (360.0 * c**3) + 1.0 / (1260.0 * c**5)
    log_pmf = c * (log_rho + x) - 0.5 * np.log(2.0 * np.pi * c) - stirling
    return np.asarray(np.exp(log_pmf) / pdtr(c, a), dtype=np.float64)


def erlang_c(servers: ArrayLike, offered_load_erlangs: ArrayLike) -> Array:
    """Erlang C, P(W > 0) in M/M/c, elementwise: C = c B / (c - a (1 - B)) (dimensionless).

    B(c, a) = (a^c / c!) / Σ_{k<=c} a^k / k! is the Erlang B loss probability. Up to 256 servers it is
    evaluated as a ratio of Poisson terms in log space (log-sum-exp over k = 0..c); above, as the Poisson pmf
    over the Poisson CDF (``_erlang_b_large``, relative error about 1e-13), so time and memory per element do
    not grow with c. Domain: integer c >= 0 and 0 <= a < c; 0 where c = 0 or a = 0.
    Source: Kleinrock (1975), Eq. 3.40; Tijms (2003), Sec. 5.2.
    """
    c = np.asarray(servers, dtype=np.float64)
    a = np.asarray(offered_load_erlangs, dtype=np.float64)
    c, a = np.broadcast_arrays(c, a)
    active = (c >= 1) & (a > 0) & (a < c)
    if not np.any(active):
        return np.zeros(c.shape)
    blocking = np.zeros(c.shape)
    small = active & (c <= _LOG_SUM_MAX_SERVERS)
    large = active & (c > _LOG_SUM_MAX_SERVERS)
    if np.any(small):
        blocking[small] = _erlang_b_log_sum(c[small], a[small])
    if np.any(large):
        blocking[large] = _erlang_b_large(c[large], a[large])
    safe = np.where(active, c - a * (1.0 - blocking), 1.0)
    return np.where(active, c * blocking / safe, 0.0)


def whitt_factor(servers: ArrayLike, utilization: ArrayLike, arrival_scv: ArrayLike, service_scv: ArrayLike) -> Array:
    """Whitt's φ(ρ, ca², cs², c) in W_q(GI/G/c) ≈ φ · (ca² + cs²)/2 · W_q(M/M/c), elementwise.

    The equations of ``tests.queueing_oracles.whitt_correction_factor`` (Whitt 1993, Eqs. 2.24-2.28).
    Domain: c >= 1, 0 < ρ < 1, ca² + cs² > 0; 1 elsewhere (where the wait is zero or undefined anyway).
    """
    c = np.asarray(servers, dtype=np.float64)
    rho = np.asarray(utilization, dtype=np.float64)
    ca2 = np.asarray(arrival_scv, dtype=np.float64)
    cs2 = np.asarray(service_scv, dtype=np.float64)
    valid = (c >= 1) & (rho > 0) & (rho < 1) & (ca2 + cs2 > 0)
    c = np.where(valid, c, 2.0)
    # Below ρ = 1e-9 the factor no longer changes (γ saturates at 0.24, φ3 underflows to 0); clamping keeps
    # the divisions finite for denormal utilisations.
    rho = np.where(valid, np.maximum(rho, 1e-9), 0.5)
    ca2 = np.where(valid, ca2, 1.0)
    cs2 = np.where(valid, cs2, 1.0)
    gamma = np.minimum(0.24, (1.0 - rho) * (c - 1.0) * (np.sqrt(4.0 + 5.0 * c) - 2.0) / (16.0 * c * rho))
    phi1 = 1.0 + gamma
    phi3 = (1.0 - 4.0 * gamma) * np.exp(-2.0 * (1.0 - rho) / (3.0 * rho))
    phi4 = np.minimum(1.0, 0.5 * (phi1 + phi3))
    mean_scv = 0.5 * (ca2 + cs2)
    psi = np.where(mean_scv >= 1.0, 1.0, phi4 ** (2.0 * (1.0 - np.minimum(mean_scv, 1.0))))
    smooth_service = ca2 >= cs2
    denominator = np.where(smooth_service, 4.0 * ca2 - 3.0 * cs2, 2.0 * (ca2 + cs2))
    numerator = np.where(
        smooth_service,
        4.0 * (ca2 - cs2) * phi1 + cs2 * psi,
        (cs2 - ca2) * phi3 + (cs2 + 3.0 * ca2) * psi,
    )
    return np.where(valid, numerator / denominator, 1.0)


@frozen
class Wait:
    """Waiting time in queue: an atom 1 - p_wait at zero and, given W > 0, an exponential of mean
    ``conditional_mean_s`` (arrays over candidates; both 0 where nothing waits)."""

    p_wait: Array
    conditional_mean_s: Array

    @property
    def mean_s(self) -> Array:
        """E[W] = p_wait · E[W | W > 0] (s)."""
        return np.asarray(self.p_wait * self.conditional_mean_s, dtype=np.float64)

    def quantile_s(self, q: float) -> Array:
        """w_q = 0 if 1 - q >= p_wait, else E[W|W>0] · ln(p_wait / (1 - q)) (s); requires 0 <= q < 1."""
        tail = 1.0 - q
        waits = self.p_wait > tail
        ratio = np.where(waits, self.p_wait, 1.0) / tail
        return np.where(waits, self.conditional_mean_s * np.log(np.maximum(ratio, 1.0)), 0.0)


def ggc_wait(
    servers: ArrayLike,
    arrival_rate_per_s: ArrayLike,
    service_mean_s: ArrayLike,
    arrival_scv: ArrayLike,
    service_scv: ArrayLike,
) -> Wait:
    """G/G/c waiting law, elementwise: P(W > 0) = C(c, a), E[W | W > 0] = φ (ca² + cs²)/2 · E[S] / (c - a).

    Whitt's (1993) mean with Erlang C and an exponential conditional wait, as ``queueing.ggc_wait``.
    Defined where 0 <= ρ < 1; elsewhere (and where λ = 0, c = 0 or ca² = cs² = 0) the wait is returned as
    0, so callers must mask unstable candidates themselves.
    """
    c = np.asarray(servers, dtype=np.float64)
    lam = np.asarray(arrival_rate_per_s, dtype=np.float64)
    mean = np.asarray(service_mean_s, dtype=np.float64)
    load = lam * mean
    variability = 0.5 * (np.asarray(arrival_scv, dtype=np.float64) + np.asarray(service_scv, dtype=np.float64))
    active = (c >= 1) & (load > 0) & (load < c) & (variability > 0)
    load = np.where(active, load, 0.0)
    p_wait = erlang_c(c, load)
    rho = np.where(active, load / np.where(c >= 1, c, 1.0), 0.5)
    factor = variability * whitt_factor(c, rho, arrival_scv, service_scv)
    conditional = factor * np.where(active, mean, 0.0) / np.where(active, c - load, 1.0)
    return Wait(p_wait=np.where(active, p_wait, 0.0), conditional_mean_s=np.where(active, conditional, 0.0))


# --------------------------------------------------------------------------------------------------------
# The stages of a plan
# --------------------------------------------------------------------------------------------------------


@frozen
class StageState:
    """Every stage of candidate plans at their arrival rates (arrays broadcast over candidates).

    ``utilization`` per stage name of ``throughput.STAGES`` (0 for a stage with no traffic, +inf for traffic
    into a stage with no servers). Waits and the link stretch are meaningful only where ``stable``.
    """

    rate_req_per_s: Array
    utilization: dict[str, Array]
    stable: Array
    prfaas_wait: Wait
    local_wait: Wait
    decode_wait: Wait
    #: κ >= 1: how much sharing the link lengthens each transfer (processor sharing, see module docstring).
    link_stretch: Array
    #: Mean extra time a transfer spends on the shared link, (κ - 1) E[S/B | L > t] (s).
    link_wait_mean_s: Array


def stage_state(
    model: StageModel,
    moments: RouteMoments,
    n_pd_prefill: ArrayLike,
    n_pd_decode: ArrayLike,
    rate_req_per_s: ArrayLike,
    decode_service_scv: float = 0.0,
) -> StageState:
    """Utilisations, waits and the link stretch of each stage at arrival rate Λ (see the module docstring).

    ``moments`` (per threshold), N_p, N_d and Λ broadcast against each other; N_prfaas is ``model.n_prfaas``.
    """
    lam = np.asarray(rate_req_per_s, dtype=np.float64)
    n_p = np.asarray(n_pd_prefill, dtype=np.float64)
    n_d = np.asarray(n_pd_decode, dtype=np.float64)
    p = moments.offload_fraction
    q = 1.0 - p
    ca2 = model.interarrival_scv
    ca2_offload = p * ca2 + (1.0 - p)
    ca2_local = q * ca2 + (1.0 - q)
    lam_offload = p * lam
    lam_local = q * lam
    n_prfaas = np.asarray(float(model.n_prfaas))
    slots = n_d * model.decode_max_batch
    slot_hold_s = model.output_tokens_mean * model.decode_step_time_s
    utilization = utilization_at(model, moments, n_p, n_d, lam)
    shape = np.broadcast_shapes(*(u.shape for u in utilization.values()))
    # (np.broadcast_to only where a shape differs: it costs more than the rest of a scalar plan's step.)
    utilization = {k: v if v.shape == shape else np.broadcast_to(v, shape) for k, v in utilization.items()}
    stable = np.logical_and.reduce([utilization[s] < 1.0 for s in STAGES])
    rho_link = np.where(stable, utilization["prfaas_link"], 0.0)
    burst = (ca2_offload + moments.link_scv) / (1.0 + moments.link_scv)
    stretch = np.where(stable, 1.0 + burst * rho_link / (1.0 - rho_link), np.nan)

    def stacked(*values: ArrayLike) -> Array:
        out = np.empty((len(values), *shape))
        for i, v in enumerate(values):
            out[i] = v  # broadcast into place: the values of np.stack of the broadcast arrays
        return out

    # The three pools in one vectorised evaluation: PrfaaS prefill, local prefill, decode slots.
    waits = ggc_wait(
        stacked(n_prfaas, n_p, slots),
        stacked(lam_offload, lam_local, lam),
        stacked(moments.prfaas_mean_s, moments.local_mean_s, slot_hold_s),
        stacked(ca2_offload, ca2_local, ca2),
        stacked(moments.prfaas_scv, moments.local_scv, decode_service_scv),
    )
    prfaas_wait, local_wait, decode_wait = (
        Wait(p_wait=waits.p_wait[i], conditional_mean_s=waits.conditional_mean_s[i]) for i in range(3)
    )
    return StageState(
        rate_req_per_s=np.broadcast_to(lam, shape),
        utilization=utilization,
        stable=stable,
        prfaas_wait=prfaas_wait,
        local_wait=local_wait,
        decode_wait=decode_wait,
        link_stretch=stretch,
        link_wait_mean_s=(stretch - 1.0) * moments.link_mean_s,
    )


def stage_utilization(model: StageModel, plan: Plan, rate_req_per_s: float) -> dict[str, float]:
    """Each stage's utilisation ρ for one plan at arrival rate Λ (dimensionless; +inf: traffic, no servers)."""
    moments = route_moments(model, np.asarray(float(plan.threshold_tokens)))
    state = stage_state(model, moments, plan.n_pd_prefill, plan.n_pd_decode, rate_req_per_s)
    return {s: float(state.utilization[s]) for s in STAGES}
