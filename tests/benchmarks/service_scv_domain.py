"""Where the stationary closed form's waits stop holding as prefill service times grow more variable: the data
behind ``DOMAIN_MAX_SERVICE_SCV`` (prfaas_plan/latency/profile.py).

The closed form takes each prefill pool's conditional wait as exponential with an Allen-Cunneen-style mean
(``latency.stages.ggc_wait``). With few servers and very variable service (wide length laws, steep prefill
curves) the real wait tail is heavier and the closed form's P90 runs low. This script draws a family of small
stage models in the ranges of ``tests/strategies.py`` (length sigma 0.5-2, 1-3 PrfaaS and 2-6 local
instances), picks the throughput-optimal plan, and simulates it at 50 % and 80 % of its capacity exactly as
tests/validation/test_sim_ttft.py does (60,000 requests by default, 10 % warm-up, link utilisation <= 30 %).
For each case: the service-time SCV, servers and utilisation of both prefill pools, and the P50/P90 error of
the closed form against the simulation with the simulation's 95 % half-width.

``--family-seed`` draws the models and seeds the simulation. The limit was *set* on one seed (``--set``:
the largest pool SCV up to which every P90 error stays within 10 % + half-width) and *judged* on another
(``--limit X``: in-domain cases outside the tolerance, flagged cases inside it). Figures only.

    python3 -m tests.benchmarks.service_scv_domain --family-seed 1 --set
    python3 -m tests.benchmarks.service_scv_domain --family-seed 2 --limit 2.0
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict, dataclass

import numpy as np

from prfaas_plan.errors import InfeasibleError
from prfaas_plan.latency import loaded_ttft, route_moments
from prfaas_plan.lengths import TruncatedLogNormal
from prfaas_plan.optimize import search
from prfaas_plan.physics.curves import PolyCurve
from prfaas_plan.spec.plan import Plan
from prfaas_plan.studies.simulate import run_study
from prfaas_plan.throughput import StageModel
from prfaas_plan.units import GBIT_PER_S, MIB

TOLERANCE = 0.10
LINK_DOMAIN = 0.30
LOADS = (0.5, 0.8)


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """One drawn model at one load: the prefill pools and the closed form's errors against the simulation."""

    index: int
    load: float
    sigma: float
    prfaas_scv: float
    prfaas_servers: int
    prfaas_utilization: float
    local_scv: float
    local_servers: int
    local_utilization: float
    p50_error: float
    p50_half: float
    p90_error: float
    p90_half: float
    in_domain: bool
    reasons: tuple[str, ...]

    @property
    def scv(self) -> float:
        """The larger service SCV of the prefill pools that carry traffic."""
        return max(self.prfaas_scv, self.local_scv)

    @property
    def p90_within(self) -> bool:
        """The P90 agrees within the test's tolerance plus the simulation's half-width."""
        return abs(self.p90_error) <= TOLERANCE + self.p90_half

    @property
    def within(self) -> bool:
        """P50 and P90 both agree (what the validation test asserts)."""
        return self.p90_within and abs(self.p50_error) <= TOLERANCE + self.p50_half


def _curve(c0_s: float, rate_tokens_per_s: float, quad: float) -> PolyCurve:
    """A prefill curve as in ``tests.strategies.prefill_curves``."""
    slope = 1.0 / rate_tokens_per_s
    return PolyCurve(
        coefficients=(c0_s, slope, quad * (128_000 * slope) / 128_000**2), provenance="assumed", source="test"
    )


def draw_model(rng: np.random.Generator) -> tuple[StageModel, float]:
    """One stage model in the ranges of ``tests.strategies.stage_models``, with sigma 0.5-2 and small pools."""
    sigma = float(rng.uniform(0.5, 2.0))
    low = float(rng.uniform(16.0, 512.0))
    lengths = TruncatedLogNormal(
        mu=float(rng.uniform(5.0, 11.0)),
        sigma=sigma,
        lower_tokens=low,
        upper_tokens=low * float(rng.uniform(50.0, 4000.0)),
    )
    fast, slow = (
        _curve(float(rng.uniform(0.05, 1.0)), float(rng.uniform(5e3, 2e5)), float(rng.uniform(0.0, 4.0)))
        for _ in range(2)
    )
    kv = PolyCurve(
        coefficients=(float(rng.uniform(0.0, 500.0)) * MIB, float(rng.uniform(2.0, 300.0)) * 1024.0),
        provenance="assumed",
        source="test",
    )
    model = StageModel(
        lengths=lengths,
        prfaas_prefill=fast,
        local_prefill=slow,
        kv_bytes=kv,
        decode_max_batch=20,
        decode_step_time_s=0.025,
        output_tokens_mean=800.0 / float(rng.uniform(0.05, 5.0)),
        link_bandwidth_bytes_per_s=float(rng.uniform(1.0, 400.0)) * GBIT_PER_S,
        n_prfaas=int(rng.integers(1, 4)),
        n_local=int(rng.integers(2, 7)),
    )
    return model, sigma


def run_case(index: int, model: StageModel, sigma: float, load: float, requests: int, seed: int) -> Case | None:
    """The test's procedure on one model at one load; None where it would skip the draw."""
    try:
        plan = search(model)
    except InfeasibleError:
        return None
    if plan.threshold_tokens is None:
        return None
    chosen = Plan(threshold_tokens=plan.threshold_tokens, n_pd_prefill=plan.n_pd_prefill, n_pd_decode=plan.n_pd_decode)
    limit = loaded_ttft(model, chosen, 0.0)
    rate = load * min(limit.stability_limit_req_per_s, plan.throughput_req_per_s)
    closed = loaded_ttft(model, chosen, rate)
    if closed.utilization["prfaas_link"] > LINK_DOMAIN:
        return None
    moments = route_moments(model, np.asarray(float(plan.threshold_tokens)))
    study = run_study(model, plan, rate_req_per_s=rate, requests=requests, seed=seed)
    errors: dict[str, tuple[float, float]] = {}
    for stat in ("p50", "p90"):
        simulated = getattr(study.summary.ttft, f"{stat}_s")
        reference = study.closed.ttft_s[stat]
        if reference is None or not reference > 0:
            return None
        errors[stat] = (simulated.value / reference - 1.0, simulated.half_width / reference)
    return Case(
        index=index,
        load=load,
        sigma=sigma,
        prfaas_scv=float(np.asarray(moments.prfaas_scv).reshape(-1)[0]),
        prfaas_servers=model.n_prfaas,
        prfaas_utilization=closed.utilization["prfaas_compute"],
        local_scv=float(np.asarray(moments.local_scv).reshape(-1)[0]),
        local_servers=plan.n_pd_prefill,
        local_utilization=closed.utilization["pd_prefill"],
        p50_error=errors["p50"][0],
        p50_half=errors["p50"][1],
        p90_error=errors["p90"][0],
        p90_half=errors["p90"][1],
        in_domain=study.closed.validity.in_domain,
        reasons=study.closed.validity.reasons,
    )


def family(family_seed: int, models: int, requests: int) -> list[Case]:
    """``models`` drawn models at every load in ``LOADS`` (skipped draws left out)."""
    rng = np.random.default_rng(family_seed)
    cases = []
    for index in range(models):
        model, sigma = draw_model(rng)
        for load in LOADS:
            case = run_case(index, model, sigma, load, requests, family_seed)
            if case is not None:
                cases.append(case)
    return cases


def set_limit(cases: list[Case]) -> float:
    """The largest pool SCV up to which every P90 error stays within tolerance (inf: no miss at all)."""
    misses = [c.scv for c in cases if not c.p90_within]
    if not misses:
        return math.inf
    first = min(misses)
    below = [c.scv for c in cases if c.scv < first]
    return max(below) if below else 0.0


def format_cases(cases: list[Case]) -> str:
    """One line per case, by increasing SCV."""
    lines = [
        f"{'#':>3} {'load':>4} {'sigma':>5} {'scv pf/loc':>12} {'c pf/loc':>8} {'rho pf/loc':>10} "
        f"{'P50 err±hw':>13} {'P90 err±hw':>13}  flag"
    ]
    for c in sorted(cases, key=lambda c: c.scv):
        mark = "" if c.p90_within else "  P90 OUT"
        lines.append(
            f"{c.index:>3} {c.load:4.0%} {c.sigma:5.2f} {c.prfaas_scv:5.2f}/{c.local_scv:<6.2f} "
            f"{c.prfaas_servers:>3}/{c.local_servers:<4} {c.prfaas_utilization:4.2f}/{c.local_utilization:<5.2f} "
            f"{c.p50_error:+6.1%}±{c.p50_half:<5.1%} {c.p90_error:+6.1%}±{c.p90_half:<5.1%}  "
            f"{'in' if c.in_domain else 'flagged'}{mark}"
        )
    return "\n".join(lines)


def judge(cases: list[Case], limit: float) -> str:
    """The confusion of a limit on these cases: by SCV alone and by the tool's own validity flag."""
    out = []
    verdicts = {
        f"scv <= {limit:g}": [c.scv <= limit for c in cases],
        "tool's validity": [c.in_domain for c in cases],
    }
    for name, inside in verdicts.items():
        ins = [c for c, i in zip(cases, inside, strict=True) if i]
        flagged = [c for c, i in zip(cases, inside, strict=True) if not i]
        out.append(
            f"{name}: in domain {len(ins)} (P90 outside {sum(not c.p90_within for c in ins)}, "
            f"P50 or P90 outside {sum(not c.within for c in ins)}); flagged {len(flagged)} "
            f"(P90 outside {sum(not c.p90_within for c in flagged)}, within {sum(c.p90_within for c in flagged)})"
        )
    return "\n".join(out)


def main() -> None:
    """Draw the family, simulate it, print every case and the limit's figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family-seed", type=int, default=1)
    parser.add_argument("--models", type=int, default=60)
    parser.add_argument("--requests", type=int, default=60_000)
    parser.add_argument("--set", action="store_true", help="derive the limit from this seed's cases")
    parser.add_argument("--limit", type=float, default=None, help="judge this limit on this seed's cases")
    parser.add_argument("--json", default=None, help="write every case here")
    options = parser.parse_args()
    cases = family(options.family_seed, options.models, options.requests)
    print(
        f"family seed {options.family_seed}: {options.models} models, {len(cases)} cases, "
        f"{options.requests:,} requests each"
    )
    print(format_cases(cases))
    if options.set:
        print(f"largest SCV up to which every P90 is within {TOLERANCE:.0%} + half-width: {set_limit(cases):.3g}")
    if options.limit is not None:
        print(judge(cases, options.limit))
    if options.json:
        with open(options.json, "w") as out:
            json.dump([{**asdict(c), "scv": c.scv, "p90_within": c.p90_within} for c in cases], out, indent=1)


if __name__ == "__main__":
    main()
