"""Scalar oracles for the queueing primitives: M/M/c (exact), M/G/1 (exact moments), G/G/c (approximations).

The planner has one queueing implementation, the vectorised one in ``prfaas_plan.latency.stages``; these
scalar, loop-free-of-numpy versions of the same laws live with the tests, which check the two agree and
check these against exact results and simulation. They are the primitives the stage-by-stage TTFT model
composes: a PrfaaS prefill pool of ``servers``
instances with general service times, a cross-datacenter link, a local prefill pool, decode-slot admission.
Every function takes scalars in SI units (rates per second, times in seconds) and returns the waiting time
*in queue* (before service starts), never the sojourn time.

Notation used in the docstrings: ``c`` servers, arrival rate ``λ`` (``arrival_rate_per_s``), mean service
time ``E[S]`` (``service_mean_s``, so ``μ = 1/E[S]``), offered load ``a = λ E[S]`` (Erlangs), utilisation
``ρ = a / c``, squared coefficients of variation ``ca²`` (inter-arrival times) and ``cs²`` (service times).

Domain, shared by every function: ``c`` is an integer >= 1, ``λ >= 0``, ``E[S] > 0``, all finite, and the
queue must be stable (``ρ < 1``); outside it ``ModelDomainError`` names the quantity and its value. At
``λ = 0`` the waiting time is exactly zero.

G/G/c defaults, chosen from a simulation study (``tests/latency/test_stages.py`` tabulates the errors):

- mean wait: Whitt's (1993) refinement of Allen–Cunneen. Allen–Cunneen multiplies the M/M/c wait by
  ``(ca² + cs²)/2``. That is exact for M/M/c and M/G/1, but for Poisson arrivals into c >= 2 servers it
  underestimates low-variability service (M/D/c: up to -27%) and overestimates high-variability service
  (M/G/c with cs² = 4: up to +77%). Whitt's factor ``φ(ρ, ca², cs², c)`` keeps Poisson-arrival errors within
  13% at ρ >= 0.7 and 25% at ρ = 0.5 (mean absolute error 5%), which is the PrfaaS prefill-pool case.
  The price: at c = 1 with cs² > 1 it is not Pollaczek–Khinchine (-19% at ρ = 0.5, cs² = 4; use
  ``mg1_wait`` there), and for ca² != 1 it is not monotone in cs² over ``cs² < ca²`` (its wait can drop as
  cs² rises towards ca²: by at most 2% when ca² > 1, by more for smooth arrivals ca² < 1 in light
  traffic). It is monotone in λ, c and ca², and in cs² when ca² = 1 or ca² <= cs². Allen–Cunneen stays
  available (``approximation="allen_cunneen"``): textbook, monotone in every input, exact for M/G/1.
- probability of waiting: Erlang C of the same offered load (exact for M/M/c; equal to ρ, exact, for
  M/G/1). Non-Poisson arrivals move P(W>0) away from Erlang C, and into many servers neither mean formula
  is reliable: -50% to +180% at ρ >= 0.7, and from -85% to +1600% of a small mean at c = 16, ρ = 0.5.
- conditional wait given ``W > 0``: exponential with the conditional mean ``E[W] / P(W > 0)``, exact for
  M/M/c and the heavy-traffic limit of GI/G/c (Kingman 1961). For M/G/1 the exact second moment (Takács)
  gives a gamma fit instead.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Literal

from prfaas_plan.errors import ModelDomainError

__all__ = [
    "GGcApproximation",
    "WaitEstimate",
    "erlang_b",
    "erlang_c",
    "ggc_wait",
    "ggc_wait_mean_s",
    "ggc_wait_quantile_s",
    "mg1_wait",
    "mg1_wait_mean_s",
    "mg1_wait_second_moment_s2",
    "mmc_wait",
    "mmc_wait_mean_s",
    "mmc_wait_quantile_s",
    "mmc_wait_sf",
    "utilisation",
    "whitt_correction_factor",
]

GGcApproximation = Literal["whitt", "allen_cunneen"]

# Relative slack when checking moment inequalities (E[S²] >= E[S]², E[S³] E[S] >= E[S²]²): a deterministic
# service time passed as (m, m*m, m*m*m) must not be rejected for a rounding error.
_MOMENT_RTOL = 1e-12


# --------------------------------------------------------------------------------------------------------
# Input checks. Each raises ModelDomainError naming the quantity and its value.
# --------------------------------------------------------------------------------------------------------


def _check_servers(servers: int) -> int:
    # operator.index accepts int and numpy integers and rejects floats such as 2.5 (or 4.0).
    try:
        count = operator.index(servers)
    except TypeError:
        count = 0
    if isinstance(servers, bool) or count < 1:
        raise ModelDomainError(f"servers must be an integer >= 1, got {servers!r}")
    return count


def _check_finite(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value):
        raise ModelDomainError(f"{name} must be finite, got {value}")
    return value


def _check_non_negative(name: str, value: float) -> float:
    value = _check_finite(name, value)
    if value < 0.0:
        raise ModelDomainError(f"{name} must be >= 0, got {value}")
    return value


def _check_positive(name: str, value: float) -> float:
    value = _check_finite(name, value)
    if value <= 0.0:
        raise ModelDomainError(f"{name} must be > 0, got {value}")
    return value


def _check_probability_level(q: float) -> float:
    q = _check_finite("quantile level q", q)
    if not 0.0 <= q < 1.0:
        raise ModelDomainError(f"quantile level q must be in [0, 1), got {q}")
    return q


def _check_stable(servers: int, arrival_rate_per_s: float, service_mean_s: float) -> float:
    """Validate the common inputs and return the offered load ``a = λ E[S]`` (Erlangs), ``a < c``."""
    offered_load_erlangs = arrival_rate_per_s * service_mean_s
    if not math.isfinite(offered_load_erlangs) or offered_load_erlangs >= servers:
        rho = offered_load_erlangs / servers
        raise ModelDomainError(
            f"utilisation must be < 1, got {rho:.6g} (arrival_rate_per_s={arrival_rate_per_s:.6g}, "
            f"service_mean_s={service_mean_s:.6g}, servers={servers})"
        )
    return offered_load_erlangs


def utilisation(servers: int, arrival_rate_per_s: float, service_mean_s: float) -> float:
    """Server utilisation ``ρ = λ E[S] / c`` (dimensionless).

    Domain: ``c >= 1`` integer, ``λ >= 0``, ``E[S] > 0``; any value of ``ρ`` is returned (no stability check).
    Source: Kleinrock (1975), Queueing Systems Vol. 1, Eq. 2.30.
    """
    servers = _check_servers(servers)
    arrival_rate_per_s = _check_non_negative("arrival_rate_per_s", arrival_rate_per_s)
    service_mean_s = _check_positive("service_mean_s", service_mean_s)
    return arrival_rate_per_s * service_mean_s / servers


# --------------------------------------------------------------------------------------------------------
# Erlang formulas
# --------------------------------------------------------------------------------------------------------


def erlang_b(servers: int, offered_load_erlangs: float) -> float:
    """Erlang B blocking probability of the M/G/c/c loss system (dimensionless).

    ``B(0, a) = 1``, ``B(k, a) = a B(k-1, a) / (k + a B(k-1, a))`` for ``k = 1..c``. The recursion never
    forms ``a^c`` or ``c!``, so it is stable for thousands of servers; cost is O(c).
    Domain: ``c >= 1`` integer, ``a >= 0`` Erlangs (any load: a loss system is always stable).
    Source: Tijms (2003), A First Course in Stochastic Models, Sec. 5.2; Gross & Harris, Sec. 2.6.
    """
    servers = _check_servers(servers)
    offered_load_erlangs = _check_non_negative("offered_load_erlangs", offered_load_erlangs)
    blocking = 1.0
    for k in range(1, servers + 1):
        carried = offered_load_erlangs * blocking
        blocking = carried / (k + carried)
    return blocking


def erlang_c(servers: int, offered_load_erlangs: float) -> float:
    """Erlang C: probability that an arrival waits in M/M/c, ``P(W > 0)`` (dimensionless).

    ``C(c, a) = c B(c, a) / (c - a (1 - B(c, a)))`` with ``B`` the Erlang B recursion, equal to
    ``[a^c / c! · c/(c-a)] / [Σ_{k<c} a^k/k! + a^c/c! · c/(c-a)]`` without the overflow.
    Domain: ``c >= 1`` integer, ``0 <= a < c`` Erlangs (utilisation < 1). Returns exactly 0 at ``a = 0``.
    Source: Kleinrock (1975), Eq. 3.40; Tijms (2003), Sec. 5.2.
    """
    servers = _check_servers(servers)
    offered_load_erlangs = _check_non_negative("offered_load_erlangs", offered_load_erlangs)
    if offered_load_erlangs >= servers:
        raise ModelDomainError(
            f"utilisation must be < 1, got {offered_load_erlangs / servers:.6g} "
            f"(offered_load_erlangs={offered_load_erlangs:.6g}, servers={servers})"
        )
    blocking = erlang_b(servers, offered_load_erlangs)
    return servers * blocking / (servers - offered_load_erlangs * (1.0 - blocking))


# --------------------------------------------------------------------------------------------------------
# Waiting-time distribution with an atom at zero
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class WaitEstimate:
    """Waiting time in queue as an atom at zero plus a gamma-distributed conditional wait.

    ``P(W > 0) = p_wait``; given ``W > 0``, ``W`` is gamma with mean ``conditional_mean_s`` (s) and squared
    coefficient of variation ``conditional_scv`` (1: exponential, the M/M/c law; 0: a point mass).
    Exact for M/M/c; a moment fit for M/G/1 and an approximation for G/G/c.
    """

    p_wait: float
    conditional_mean_s: float
    conditional_scv: float = 1.0

    def __post_init__(self) -> None:
        p_wait = _check_finite("p_wait", self.p_wait)
        if not 0.0 <= p_wait <= 1.0:
            raise ModelDomainError(f"p_wait must be in [0, 1], got {p_wait}")
        _check_non_negative("conditional_mean_s", self.conditional_mean_s)
        _check_non_negative("conditional_scv", self.conditional_scv)

    @property
    def mean_s(self) -> float:
        """Mean wait ``E[W] = p_wait · E[W | W > 0]`` (s)."""
        return self.p_wait * self.conditional_mean_s

    @property
    def second_moment_s2(self) -> float:
        """Second moment ``E[W²] = p_wait · E[W | W>0]² · (1 + conditional_scv)`` (s²)."""
        return self.p_wait * self.conditional_mean_s**2 * (1.0 + self.conditional_scv)

    def sf(self, wait_s: float) -> float:
        """Survival function ``P(W > x)`` for ``x = wait_s`` seconds (1 for ``x < 0``)."""
        wait_s = _check_finite("wait_s", wait_s)
        if wait_s < 0.0:
            return 1.0
        if self.p_wait == 0.0 or self.conditional_mean_s == 0.0:
            return 0.0
        if self.conditional_scv == 0.0:
            return self.p_wait if wait_s < self.conditional_mean_s else 0.0
        if self.conditional_scv == 1.0:
            return self.p_wait * math.exp(-wait_s / self.conditional_mean_s)
        shape = 1.0 / self.conditional_scv
        return self.p_wait * _gamma_sf(shape, wait_s * shape / self.conditional_mean_s)

    def quantile_s(self, q: float) -> float:
        """Wait quantile ``w_q = inf{x : P(W <= x) >= q}`` (s); 0 when ``q <= 1 - p_wait`` (the atom).

        Domain: ``0 <= q < 1`` (the top quantile of an unbounded wait is infinite).
        """
        q = _check_probability_level(q)
        tail = 1.0 - q
        if tail >= self.p_wait or self.conditional_mean_s == 0.0:
            return 0.0
        conditional_tail = tail / self.p_wait
        if self.conditional_scv == 0.0:
            return self.conditional_mean_s
        if self.conditional_scv == 1.0:
            return self.conditional_mean_s * -math.log(conditional_tail)
        shape = 1.0 / self.conditional_scv
        return self.conditional_mean_s * _gamma_isf(shape, conditional_tail) / shape


# --------------------------------------------------------------------------------------------------------
# M/M/c, exact
# --------------------------------------------------------------------------------------------------------


def mmc_wait(servers: int, arrival_rate_per_s: float, service_mean_s: float) -> WaitEstimate:
    """Exact M/M/c waiting-time law: ``P(W > x) = C(c, a) · exp(-(cμ - λ) x)``, ``x >= 0``.

    So ``p_wait = C(c, a)`` and ``W | W > 0`` is exponential with mean ``1/(cμ - λ) = E[S]/(c - a)`` (s).
    Domain: ``c >= 1``, ``λ >= 0``, ``E[S] > 0``, ``ρ < 1``.
    Source: Kleinrock (1975), Eq. 3.40 and Exercise 3.9; Gross & Harris, Sec. 2.3.
    """
    servers = _check_servers(servers)
    arrival_rate_per_s = _check_non_negative("arrival_rate_per_s", arrival_rate_per_s)
    service_mean_s = _check_positive("service_mean_s", service_mean_s)
    offered_load_erlangs = _check_stable(servers, arrival_rate_per_s, service_mean_s)
    return WaitEstimate(
        p_wait=erlang_c(servers, offered_load_erlangs),
        conditional_mean_s=service_mean_s / (servers - offered_load_erlangs),
        conditional_scv=1.0,
    )


def mmc_wait_mean_s(servers: int, arrival_rate_per_s: float, service_mean_s: float) -> float:
    """Exact M/M/c mean wait in queue ``W_q = C(c, a) / (cμ - λ) = C(c, a) E[S] / (c - a)`` (s).

    Domain: ``c >= 1``, ``λ >= 0``, ``E[S] > 0``, ``ρ < 1``. M/M/1 special case: ``ρ / (μ - λ)``.
    Source: Kleinrock (1975), Eq. 3.43; Gross & Harris, Sec. 2.3.
    """
    return mmc_wait(servers, arrival_rate_per_s, service_mean_s).mean_s


def mmc_wait_sf(servers: int, arrival_rate_per_s: float, service_mean_s: float, wait_s: float) -> float:
    """Exact M/M/c tail ``P(W > x) = C(c, a) exp(-(cμ - λ) x)`` for ``x = wait_s >= 0`` (1 for ``x < 0``).

    Domain: ``c >= 1``, ``λ >= 0``, ``E[S] > 0``, ``ρ < 1``, finite ``wait_s``.
    Source: Kleinrock (1975), Sec. 3.4; Gross & Harris, Sec. 2.3.
    """
    return mmc_wait(servers, arrival_rate_per_s, service_mean_s).sf(wait_s)


def mmc_wait_quantile_s(servers: int, arrival_rate_per_s: float, service_mean_s: float, q: float) -> float:
    """Exact M/M/c wait quantile (s): ``0`` if ``q <= 1 - C``, else ``ln(C / (1 - q)) / (cμ - λ)``.

    ``W`` has an atom ``1 - C(c, a)`` at zero, so low quantiles are exactly zero.
    Domain: ``c >= 1``, ``λ >= 0``, ``E[S] > 0``, ``ρ < 1``, ``0 <= q < 1``.
    Source: inverse of Kleinrock (1975), Sec. 3.4.
    """
    return mmc_wait(servers, arrival_rate_per_s, service_mean_s).quantile_s(q)


# --------------------------------------------------------------------------------------------------------
# M/G/1, exact moments
# --------------------------------------------------------------------------------------------------------


def _check_mg1(
    arrival_rate_per_s: float, service_mean_s: float, service_second_moment_s2: float
) -> tuple[float, float, float, float]:
    arrival_rate_per_s = _check_non_negative("arrival_rate_per_s", arrival_rate_per_s)
    service_mean_s = _check_positive("service_mean_s", service_mean_s)
    service_second_moment_s2 = _check_positive("service_second_moment_s2", service_second_moment_s2)
    if service_second_moment_s2 < service_mean_s**2 * (1.0 - _MOMENT_RTOL):
        raise ModelDomainError(
            f"service_second_moment_s2 must be >= service_mean_s² = {service_mean_s**2:.6g}, "
            f"got {service_second_moment_s2:.6g}"
        )
    rho = _check_stable(1, arrival_rate_per_s, service_mean_s)
    return arrival_rate_per_s, service_mean_s, service_second_moment_s2, rho


def mg1_wait_mean_s(arrival_rate_per_s: float, service_mean_s: float, service_second_moment_s2: float) -> float:
    """Pollaczek–Khinchine mean wait in queue ``W_q = λ E[S²] / (2 (1 - ρ))`` (s), ``ρ = λ E[S]``.

    Exact for M/G/1 FCFS. Inputs: ``E[S]`` (s) and ``E[S²]`` (s²), ``E[S²] = E[S]² (1 + cs²)``.
    Domain: ``λ >= 0``, ``E[S] > 0``, ``E[S²] >= E[S]²``, ``ρ < 1``.
    Source: Kleinrock (1975), Eq. 5.105; Gross & Harris, Sec. 5.1.
    """
    arrival_rate_per_s, _, service_second_moment_s2, rho = _check_mg1(
        arrival_rate_per_s, service_mean_s, service_second_moment_s2
    )
    return arrival_rate_per_s * service_second_moment_s2 / (2.0 * (1.0 - rho))


def mg1_wait_second_moment_s2(
    arrival_rate_per_s: float,
    service_mean_s: float,
    service_second_moment_s2: float,
    service_third_moment_s3: float,
) -> float:
    """Takács second moment of the M/G/1 wait ``E[W²] = 2 W_q² + λ E[S³] / (3 (1 - ρ))`` (s²).

    Exact for M/G/1 FCFS; with ``W_q`` from Pollaczek–Khinchine it fixes a two-moment fit of ``W``.
    Useful third moments: gamma service ``E[S]³ (1 + cs²)(1 + 2 cs²)``, lognormal ``E[S]³ (1 + cs²)³``,
    deterministic ``E[S]³``.
    Domain: as ``mg1_wait_mean_s``, plus ``E[S³] E[S] >= E[S²]²`` (Lyapunov's inequality).
    Source: Takács (1962); Kleinrock (1975), Eq. 5.114; Gross & Harris, Sec. 5.1.
    """
    arrival_rate_per_s, service_mean_s, service_second_moment_s2, rho = _check_mg1(
        arrival_rate_per_s, service_mean_s, service_second_moment_s2
    )
    service_third_moment_s3 = _check_positive("service_third_moment_s3", service_third_moment_s3)
    lower_bound_s3 = service_second_moment_s2**2 / service_mean_s
    if service_third_moment_s3 < lower_bound_s3 * (1.0 - _MOMENT_RTOL):
        raise ModelDomainError(
            f"service_third_moment_s3 must be >= E[S²]²/E[S] = {lower_bound_s3:.6g}, got {service_third_moment_s3:.6g}"
        )
    wait_mean_s = arrival_rate_per_s * service_second_moment_s2 / (2.0 * (1.0 - rho))
    return 2.0 * wait_mean_s**2 + arrival_rate_per_s * service_third_moment_s3 / (3.0 * (1.0 - rho))


def mg1_wait(
    arrival_rate_per_s: float,
    service_mean_s: float,
    service_second_moment_s2: float,
    service_third_moment_s3: float | None = None,
) -> WaitEstimate:
    """M/G/1 wait: exact ``P(W > 0) = ρ`` and exact mean; the conditional wait is a moment fit.

    ``E[W | W > 0] = W_q / ρ`` (Pollaczek–Khinchine). With ``service_third_moment_s3`` (s³) the conditional
    law is the gamma matching ``E[W² | W > 0] = E[W²] / ρ`` (Takács), otherwise exponential.
    Domain: as ``mg1_wait_second_moment_s2``.
    Source: Kleinrock (1975), Sec. 5.6-5.7 (P(W > 0) = ρ by PASTA); gamma fit as in Tijms (2003), Sec. 2.2.
    """
    wait_mean_s = mg1_wait_mean_s(arrival_rate_per_s, service_mean_s, service_second_moment_s2)
    if wait_mean_s == 0.0:
        return WaitEstimate(p_wait=0.0, conditional_mean_s=0.0)
    rho = arrival_rate_per_s * service_mean_s
    conditional_scv = 1.0
    if service_third_moment_s3 is not None:
        wait_second_moment_s2 = mg1_wait_second_moment_s2(
            arrival_rate_per_s, service_mean_s, service_second_moment_s2, service_third_moment_s3
        )
        # E[W²|W>0] / E[W|W>0]² - 1 >= 0 in exact arithmetic; clip the rounding residue.
        conditional_scv = max(0.0, rho * wait_second_moment_s2 / wait_mean_s**2 - 1.0)
    return WaitEstimate(p_wait=rho, conditional_mean_s=wait_mean_s / rho, conditional_scv=conditional_scv)


# --------------------------------------------------------------------------------------------------------
# G/G/c, approximations
# --------------------------------------------------------------------------------------------------------


def whitt_correction_factor(servers: int, server_utilisation: float, arrival_scv: float, service_scv: float) -> float:
    """Whitt's factor ``φ(ρ, ca², cs², c)`` in ``W_q(GI/G/c) ≈ φ · (ca² + cs²)/2 · W_q(M/M/c)``.

    With ``γ = min(0.24, (1-ρ)(c-1)(√(4+5c) - 2) / (16 c ρ))``, ``φ1 = 1 + γ``,
    ``φ3 = (1 - 4γ) exp(-2(1-ρ)/(3ρ))``, ``φ4 = min(1, (φ1 + φ3)/2)``, ``Ψ(x) = 1`` for ``x >= 1`` and
    ``φ4^(2(1-x))`` for ``x < 1``, and ``v = (ca² + cs²)/2``:

    - ``ca² >= cs²``: ``φ = 4(ca² - cs²)/(4ca² - 3cs²) · φ1 + cs²/(4ca² - 3cs²) · Ψ(v)``
    - ``ca² <= cs²``: ``φ = (cs² - ca²)/(2ca² + 2cs²) · φ3 + (cs² + 3ca²)/(2ca² + 2cs²) · Ψ(v)``

    ``φ = 1`` for M/M/c; ``φ < 1`` for low-variability service, which Allen–Cunneen overestimates.
    Dimensionless. Domain: ``c >= 1``, ``0 < ρ < 1``, ``ca², cs² >= 0`` not both 0.
    Source: Whitt (1993), Approximations for the GI/G/m queue, POM 2(2), Eqs. 2.24-2.28.
    """
    servers = _check_servers(servers)
    rho = _check_finite("server_utilisation", server_utilisation)
    if not 0.0 < rho < 1.0:
        raise ModelDomainError(f"server_utilisation must be in (0, 1), got {rho}")
    arrival_scv = _check_non_negative("arrival_scv", arrival_scv)
    service_scv = _check_non_negative("service_scv", service_scv)
    if arrival_scv + service_scv == 0.0:
        raise ModelDomainError("arrival_scv + service_scv must be > 0 (D/D/c never waits), got 0")
    gamma = min(0.24, (1.0 - rho) * (servers - 1) * (math.sqrt(4.0 + 5.0 * servers) - 2.0) / (16.0 * servers * rho))
    phi1 = 1.0 + gamma
    phi3 = (1.0 - 4.0 * gamma) * math.exp(-2.0 * (1.0 - rho) / (3.0 * rho))
    phi4 = min(1.0, 0.5 * (phi1 + phi3))
    mean_scv = 0.5 * (arrival_scv + service_scv)
    psi = 1.0 if mean_scv >= 1.0 else phi4 ** (2.0 * (1.0 - mean_scv))
    if arrival_scv >= service_scv:
        denominator = 4.0 * arrival_scv - 3.0 * service_scv
        return (4.0 * (arrival_scv - service_scv) * phi1 + service_scv * psi) / denominator
    denominator = 2.0 * (arrival_scv + service_scv)
    return ((service_scv - arrival_scv) * phi3 + (service_scv + 3.0 * arrival_scv) * psi) / denominator


def ggc_wait(
    servers: int,
    arrival_rate_per_s: float,
    service_mean_s: float,
    arrival_scv: float = 1.0,
    service_scv: float = 1.0,
    approximation: GGcApproximation = "whitt",
) -> WaitEstimate:
    """Approximate G/G/c waiting-time law: atom ``1 - C(c, a)`` at zero, exponential conditional wait.

    Mean (``approximation``):

    - ``"allen_cunneen"``: ``W_q ≈ (ca² + cs²)/2 · C(c, a) E[S] / (c - a)`` (Allen 1990, Eq. 6.32);
      exact for M/M/c and for M/G/1 (Pollaczek–Khinchine).
    - ``"whitt"`` (default): the same times ``φ(ρ, ca², cs², c)`` (Whitt 1993, Eq. 2.24); closer to simulation
      for multi-server pools with low-variability service (see the module docstring).

    ``P(W > 0) ≈ C(c, a)`` (Erlang C) and ``E[W | W > 0] = W_q / C(c, a)``, conditional law exponential
    (exact for M/M/c; heavy-traffic limit of GI/G/c, Kingman 1961). Times in s, SCVs dimensionless.
    Domain: ``c >= 1``, ``λ >= 0``, ``E[S] > 0``, ``ca², cs² >= 0``, ``ρ < 1``; ``ca² = cs² = 0`` (D/D/c)
    gives 0.
    Source: Allen (1990), Probability, Statistics and Queueing Theory, Sec. 6.4; Whitt (1993).
    """
    servers = _check_servers(servers)
    arrival_rate_per_s = _check_non_negative("arrival_rate_per_s", arrival_rate_per_s)
    service_mean_s = _check_positive("service_mean_s", service_mean_s)
    arrival_scv = _check_non_negative("arrival_scv", arrival_scv)
    service_scv = _check_non_negative("service_scv", service_scv)
    if approximation not in ("whitt", "allen_cunneen"):
        raise ModelDomainError(f"approximation must be 'whitt' or 'allen_cunneen', got {approximation!r}")
    offered_load_erlangs = _check_stable(servers, arrival_rate_per_s, service_mean_s)
    variability = 0.5 * (arrival_scv + service_scv)
    if offered_load_erlangs == 0.0 or variability == 0.0:
        return WaitEstimate(p_wait=0.0, conditional_mean_s=0.0)
    mmc_conditional_mean_s = service_mean_s / (servers - offered_load_erlangs)
    factor = variability
    if approximation == "whitt":
        factor *= whitt_correction_factor(servers, offered_load_erlangs / servers, arrival_scv, service_scv)
    return WaitEstimate(
        p_wait=erlang_c(servers, offered_load_erlangs),
        conditional_mean_s=factor * mmc_conditional_mean_s,
        conditional_scv=1.0,
    )


def ggc_wait_mean_s(
    servers: int,
    arrival_rate_per_s: float,
    service_mean_s: float,
    arrival_scv: float = 1.0,
    service_scv: float = 1.0,
    approximation: GGcApproximation = "whitt",
) -> float:
    """Approximate G/G/c mean wait in queue ``W_q`` (s); see ``ggc_wait`` for equations and domain.

    Source: Allen (1990), Sec. 6.4 (Allen–Cunneen); Whitt (1993), Eq. 2.24 (default).
    """
    return ggc_wait(servers, arrival_rate_per_s, service_mean_s, arrival_scv, service_scv, approximation).mean_s


def ggc_wait_quantile_s(
    q: float,
    servers: int,
    arrival_rate_per_s: float,
    service_mean_s: float,
    arrival_scv: float = 1.0,
    service_scv: float = 1.0,
    approximation: GGcApproximation = "whitt",
) -> float:
    """Approximate G/G/c wait quantile (s): 0 if ``q <= 1 - C``, else ``E[W|W>0] · ln(C / (1 - q))``.

    Domain: ``0 <= q < 1`` and that of ``ggc_wait``.
    Source: as ``ggc_wait``; exact for M/M/c.
    """
    estimate = ggc_wait(servers, arrival_rate_per_s, service_mean_s, arrival_scv, service_scv, approximation)
    return estimate.quantile_s(q)


# --------------------------------------------------------------------------------------------------------
# Regularised upper incomplete gamma Q(k, x) and its inverse, for the gamma-shaped conditional wait.
# Written here rather than imported from scipy.special to keep scipy off the import path (start-up cost).
# Series for x < k + 1, Lentz continued fraction otherwise: Abramowitz & Stegun 6.5.29 and 6.5.31.
# --------------------------------------------------------------------------------------------------------

_GAMMA_RTOL = 1e-15
_GAMMA_MAX_TERMS = 100_000
_LENTZ_TINY = 1e-300


def _gamma_sf(shape: float, x: float) -> float:
    """``Q(k, x) = Γ(k, x) / Γ(k)``, the survival function of a unit-scale gamma with shape ``k > 0``."""
    if x <= 0.0:
        return 1.0
    log_prefactor = shape * math.log(x) - x - math.lgamma(shape)
    if x < shape + 1.0:
        term = 1.0 / shape
        total = term
        denominator = shape
        for _ in range(_GAMMA_MAX_TERMS):
            denominator += 1.0
            term *= x / denominator
            total += term
            if term <= total * _GAMMA_RTOL:
                return max(0.0, 1.0 - total * math.exp(log_prefactor))
        raise ArithmeticError(f"incomplete-gamma series did not converge (shape={shape}, x={x})")
    b = x + 1.0 - shape
    c = 1.0 / _LENTZ_TINY
    d = 1.0 / b
    fraction = d
    for i in range(1, _GAMMA_MAX_TERMS):
        a_i = -i * (i - shape)
        b += 2.0
        d = a_i * d + b
        d = d if abs(d) >= _LENTZ_TINY else _LENTZ_TINY
        c = b + a_i / c
        c = c if abs(c) >= _LENTZ_TINY else _LENTZ_TINY
        d = 1.0 / d
        step = d * c
        fraction *= step
        if abs(step - 1.0) <= _GAMMA_RTOL:
            return math.exp(log_prefactor) * fraction
    raise ArithmeticError(f"incomplete-gamma continued fraction did not converge (shape={shape}, x={x})")


def _gamma_isf(shape: float, tail: float) -> float:
    """The ``x >= 0`` with ``Q(k, x) = tail`` for ``0 < tail < 1``: safeguarded Newton on a bracket."""
    low, high = 0.0, max(shape, 1.0)
    while _gamma_sf(shape, high) > tail:
        low, high = high, 2.0 * high
    x = 0.5 * (low + high)
    for _ in range(200):
        residual = _gamma_sf(shape, x) - tail
        if residual > 0.0:
            low = x
        else:
            high = x
        density = math.exp((shape - 1.0) * math.log(x) - x - math.lgamma(shape)) if x > 0.0 else 0.0
        candidate = x + residual / density if density > 0.0 else -1.0
        next_x = candidate if low < candidate < high else 0.5 * (low + high)
        if abs(next_x - x) <= 1e-14 * max(next_x, 1e-300) or high - low <= 1e-15 * high:
            return next_x
        x = next_x
    return x
