"""Bandwidth over time as the simulator's piecewise-constant steps: explicit steps, a periodic profile, a random
process, and outages laid over any of them.

The random process is exp(X) with X an Ornstein-Uhlenbeck process sampled exactly at steps of Δ = ``step_s``
(an AR(1) chain): X_{k+1} = μ + ρ (X_k − μ) + σ_X √(1 − ρ²) ε_k with ρ = exp(−Δ / τ), ε_k standard normal and
X_0 drawn from the stationary law N(μ, σ_X²), so the chain is stationary from the first step. The log-normal
moments fix μ and σ_X from the requested mean m and standard deviation s of the bandwidth:
σ_X² = ln(1 + s²/m²), μ = ln m − σ_X²/2 (so E[exp X] = m, Var[exp X] = s²), and the bandwidth's
autocorrelation is (exp(σ_X² ρ^k) − 1) / (exp(σ_X²) − 1), close to ρ^k when s ≪ m (Gardiner, Handbook of
Stochastic Methods, §3.8.4; log-normal moments from Johnson, Kotz & Balakrishnan, ch. 14).
"""

from __future__ import annotations

import math

import numpy as np

from prfaas_plan.spec.dynamics import (
    BandwidthProfile,
    BandwidthSteps,
    Outage,
    PeriodicBandwidth,
    RandomBandwidth,
)

Steps = tuple[tuple[float, float], ...]

#: Most steps a profile is laid out in over one run: a random process draws one value per step, a periodic one
#: repeats its steps once per period, so the run's length over a short step or period bounds its memory and time.
MAX_PROFILE_STEPS = 2_000_000


def _too_many(count: int, field: str, what: str, horizon_s: float, per_unit: int = 1) -> None:
    """InputError on ``field`` where a profile over ``horizon_s`` would take more than ``MAX_PROFILE_STEPS`` steps."""
    if count <= MAX_PROFILE_STEPS:
        return
    from prfaas_plan.errors import InputError, Problem

    message = (
        f"{count:,} {what} over the {horizon_s:,.0f} s the run simulates, more than the {MAX_PROFILE_STEPS:,} the "
        f"simulator lays out; make it at least {horizon_s * per_unit / MAX_PROFILE_STEPS:.3g} s"
    )
    raise InputError(Problem(field=field, message=message))


def ou_log_bandwidth(rng: np.random.Generator, spec: RandomBandwidth, horizon_s: float) -> Steps:
    """Steps of ``spec.step_s`` seconds covering [0, horizon_s): exp of a stationary OU process on log-bandwidth
    with the spec's mean, standard deviation and correlation time (module docstring). Drawn with ``rng``."""
    if not (spec.mean_bytes_per_s > 0 and spec.std_bytes_per_s >= 0 and spec.correlation_s > 0 and spec.step_s > 0):
        raise ValueError("a random bandwidth needs mean > 0, std >= 0, correlation time > 0 and step > 0")
    if not math.isfinite(horizon_s) or horizon_s < 0:
        raise ValueError(f"a random bandwidth needs a finite horizon, got {horizon_s!r}")
    count = max(1, math.ceil(horizon_s / spec.step_s))
    _too_many(count, "dynamics.link.random.step_s", f"steps of {spec.step_s:g} s", horizon_s)
    var_x = math.log1p((spec.std_bytes_per_s / spec.mean_bytes_per_s) ** 2)
    mu = math.log(spec.mean_bytes_per_s) - var_x / 2
    rho = math.exp(-spec.step_s / spec.correlation_s)
    noise = rng.standard_normal(count)
    x = np.empty(count)
    x[0] = mu + math.sqrt(var_x) * noise[0]
    scale = math.sqrt(var_x * (1 - rho * rho))
    for k in range(1, count):
        x[k] = mu + rho * (x[k - 1] - mu) + scale * noise[k]
    values = np.exp(x)
    return tuple((k * spec.step_s, float(values[k])) for k in range(count))


def periodic(spec: PeriodicBandwidth, horizon_s: float) -> Steps:
    """The period's steps repeated from 0 until ``horizon_s``."""
    if not (spec.period_s > 0 and spec.steps and spec.steps[0][0] == 0.0):
        raise ValueError("a periodic bandwidth needs a period > 0 and steps starting at phase 0")
    if any(not 0 <= phase < spec.period_s for phase, _ in spec.steps):
        raise ValueError("every phase of a periodic bandwidth must lie in [0, period)")
    if not math.isfinite(horizon_s):
        raise ValueError(f"a periodic bandwidth needs a finite horizon, got {horizon_s!r}")
    cycles = max(1, math.ceil(horizon_s / spec.period_s))
    _too_many(
        cycles * len(spec.steps),
        "dynamics.link.periodic.period_s",
        f"steps of periods of {spec.period_s:g} s",
        horizon_s,
        per_unit=len(spec.steps),
    )
    return tuple((c * spec.period_s + phase, bw) for c in range(cycles) for phase, bw in spec.steps)


def with_outages(steps: Steps, outages: tuple[Outage, ...]) -> Steps:
    """``steps`` with the bandwidth forced to 0 inside every outage; after an outage the profile resumes at
    the value it has then. Outages may overlap."""
    if not outages:
        return steps
    edges = sorted({t for t, _ in steps} | {o.start_s for o in outages} | {o.end_s for o in outages})
    times = [t for t, _ in steps]
    out: list[tuple[float, float]] = []
    for t in edges:
        if t < 0:
            continue
        k = int(np.searchsorted(times, t, side="right")) - 1
        value = steps[k][1] if k >= 0 else steps[0][1]
        if any(o.start_s <= t < o.end_s for o in outages):
            value = 0.0
        if not out or out[-1][1] != value:
            out.append((t, value))
    if out[0][0] != 0.0:
        out.insert(0, (0.0, steps[0][1]))
    return tuple(out)


def bandwidth_steps(
    profile: BandwidthProfile | None,
    outages: tuple[Outage, ...],
    *,
    nominal_bytes_per_s: float,
    horizon_s: float,
    rng: np.random.Generator,
) -> Steps:
    """The steps a run's ``ClusterConfig.bandwidth_profile`` takes: the profile (the nominal bandwidth when
    None) with the outages laid over it; empty when neither changes anything."""
    if profile is None and not outages:
        return ()
    if profile is None:
        steps: Steps = ((0.0, nominal_bytes_per_s),)
    elif isinstance(profile, BandwidthSteps):
        steps = profile.steps
    elif isinstance(profile, PeriodicBandwidth):
        steps = periodic(profile, horizon_s)
    else:
        steps = ou_log_bandwidth(rng, profile, horizon_s)
    return with_outages(steps, outages)
