"""The service moments of a plan's routes, each stage's utilisation and the plan's stability limit: what
``optimize.plans`` scores a plan with, without the queues of ``latency.stages`` (which builds on these).

A plan (t, N_p, N_d) at total arrival rate Λ offloads a fraction p = P(L > t). Each route's service time has
its mean and SCV from the curves' first two partial expectations; a stage's utilisation is linear in Λ, so the
rate at which it reaches 1 is the stage's stability limit. Because T is convex in l, E[T(L)] > T(E[L]), so a
prefill pool saturates slightly *before* the paper's Λ_max (Eqs. 3-4 use T at the mean length).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.throughput import STAGES, StageModel

Array = NDArray[np.float64]


@frozen
class RouteMoments:
    """Per threshold (arrays of the thresholds' shape): the routing split and each stage's service moments.

    Means in seconds, SCVs dimensionless; a route with no traffic has mean 0 and SCV 0.
    """

    threshold_tokens: Array
    offload_fraction: Array
    prfaas_mean_s: Array
    prfaas_scv: Array
    link_mean_s: Array
    link_scv: Array
    local_mean_s: Array
    local_scv: Array


def _conditional(first: Array, second: Array, mass: Array) -> tuple[Array, Array]:
    """Mean and SCV from E[y; A], E[y²; A] and P(A) (0, 0 where P(A) = 0)."""
    has = mass > 0
    safe = np.where(has, mass, 1.0)
    mean = np.where(has, first / safe, 0.0)
    mean_safe = np.where(mean > 0, mean, 1.0)
    scv = np.where(has & (mean > 0), np.maximum(second / safe / mean_safe**2 - 1.0, 0.0), 0.0)
    return mean, scv


def route_moments(model: StageModel, threshold_tokens: ArrayLike) -> RouteMoments:
    """E[T_prfaas | L > t], E[S_kv/B | L > t], E[T_local | L <= t] and their SCVs, from the curves' first
    and second partial expectations (exact for polynomial and piecewise-linear curves)."""
    t_all = np.asarray(threshold_tokens, dtype=np.float64)
    if t_all.size > 1:
        # Searches pass every (threshold, split) pair; the moments depend on the threshold alone.
        unique, inverse = np.unique(t_all, return_inverse=True)
        if unique.size < t_all.size:
            m = route_moments(model, unique)
            shape = t_all.shape

            def spread(values: Array) -> Array:
                return np.asarray(values)[inverse].reshape(shape)

            return RouteMoments(
                threshold_tokens=t_all,
                offload_fraction=spread(m.offload_fraction),
                prfaas_mean_s=spread(m.prfaas_mean_s),
                prfaas_scv=spread(m.prfaas_scv),
                link_mean_s=spread(m.link_mean_s),
                link_scv=spread(m.link_scv),
                local_mean_s=spread(m.local_mean_s),
                local_scv=spread(m.local_scv),
            )
    lengths = model.lengths
    t = t_all
    lo, hi = lengths.lower_tokens, lengths.upper_tokens
    above = np.maximum(t, lo - 1.0)
    p = np.asarray(lengths.partial_moment(0, above, np.full_like(above, hi)), dtype=np.float64)
    q = np.asarray(lengths.partial_moment(0, np.full_like(t, lo - 1.0), t), dtype=np.float64)
    bandwidth = model.link_bandwidth_bytes_per_s
    prfaas = _conditional(
        model.prfaas_prefill.expect(lengths, above, hi), model.prfaas_prefill.expect(lengths, above, hi, power=2), p
    )
    link = _conditional(
        model.kv_bytes.expect(lengths, above, hi) / bandwidth,
        model.kv_bytes.expect(lengths, above, hi, power=2) / bandwidth**2,
        p,
    )
    local = _conditional(
        model.local_prefill.expect(lengths, lo - 1.0, t), model.local_prefill.expect(lengths, lo - 1.0, t, power=2), q
    )
    return RouteMoments(
        threshold_tokens=t,
        offload_fraction=p,
        prfaas_mean_s=prfaas[0],
        prfaas_scv=prfaas[1],
        link_mean_s=link[0],
        link_scv=link[1],
        local_mean_s=local[0],
        local_scv=local[1],
    )


def _per_server(load: Array, servers: Array) -> Array:
    """Utilisation load / c; +inf where c = 0 carries load, 0 where nothing arrives."""
    has = servers > 0
    return np.where(has, load / np.where(has, servers, 1.0), np.where(load > 0, np.inf, 0.0))


def utilization(model: StageModel, moments: RouteMoments, n_p: Array, n_d: Array, lam: Array) -> dict[str, Array]:
    """ρ of every stage at arrival rate Λ (the first step of ``latency.stages.stage_state``, without the waits)."""
    p = moments.offload_fraction
    lam_offload = p * lam
    lam_local = (1.0 - p) * lam
    slot_hold_s = model.output_tokens_mean * model.decode_step_time_s
    return {
        "prfaas_compute": _per_server(lam_offload * moments.prfaas_mean_s, np.asarray(float(model.n_prfaas))),
        "prfaas_link": np.asarray(lam_offload * moments.link_mean_s, dtype=np.float64),
        "pd_prefill": _per_server(lam_local * moments.local_mean_s, n_p),
        "pd_decode": _per_server(lam * slot_hold_s, n_d * model.decode_max_batch),
    }


def stability_limit_req_per_s(
    model: StageModel, moments: RouteMoments, n_pd_prefill: ArrayLike, n_pd_decode: ArrayLike
) -> tuple[Array, dict[str, Array]]:
    """Λ at which each stage's utilisation reaches 1 (utilisation is linear in Λ), and the smallest of them.

    Returns (the plan's limit, {stage: limit}); +inf for a stage that receives no traffic.
    """
    n_p = np.asarray(n_pd_prefill, dtype=np.float64)
    n_d = np.asarray(n_pd_decode, dtype=np.float64)
    at_one = utilization(model, moments, n_p, n_d, np.asarray(1.0))
    shape = np.broadcast_shapes(*(u.shape for u in at_one.values()))
    at_one = {k: np.broadcast_to(v, shape) for k, v in at_one.items()}
    limits = {s: np.where(u > 0, 1.0 / np.where(u > 0, u, 1.0), np.inf) for s, u in at_one.items()}
    return np.minimum.reduce([limits[s] for s in STAGES]), limits
