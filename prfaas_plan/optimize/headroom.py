"""Headroom: how Λ_max, goodput and cost move with each input (a tornado table), and what the deployment
still carries when something fails (N-1).

Tornado: each input is moved down and up by a relative step (default ±20 %) with everything else held, the
threshold and split re-optimised at each end, and Λ_max (``search``) and goodput (``best_goodput_plan``,
re-scored with the link's spread) reported with the cost per million tokens at goodput. Inputs:

- link bandwidth B;
- length location: every uncached input length scaled by (1 ± step) (lognormal: μ + ln(1 ± step));
- length spread: the lognormal σ scaled by (1 ± step) (lognormal traffic only);
- output length: L_out scaled (decode holds a slot L_out steps);
- prefill speed: both pools' prefill times divided by (1 ± step);
- decode batch: BS_max scaled (rounded, at least 1);
- prices: every price scaled (cost moves, throughput does not).

N-1: one PrfaaS instance down, one local instance down, the link at half bandwidth; each re-optimised for
goodput on the same hardware, with whether it still carries the target and the closed-form P90 TTFT at the
target rate (None when the target rate is beyond the degraded plan's stability limit).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from prfaas_plan._frozen import frozen
from prfaas_plan.latency import loaded_ttft
from prfaas_plan.lengths import TruncatedLogNormal
from prfaas_plan.optimize.carrier import Carried
from prfaas_plan.optimize.cost import UnitPrices, deployment_cost, token_cost
from prfaas_plan.optimize.sizing import max_rate
from prfaas_plan.optimize.throughput_search import search
from prfaas_plan.physics.curves import Curve, PolyCurve
from prfaas_plan.spec.cost import Target
from prfaas_plan.spec.plan import Plan, TtftSlo
from prfaas_plan.throughput import StageModel, egress_bytes_per_s, link_bought_bytes_per_s, routing, with_link_rate

#: Default relative step of the tornado.
TORNADO_STEP = 0.2


def _scaled(curve: Curve, factor: float) -> Curve:
    if isinstance(curve, PolyCurve):
        return replace(curve, coefficients=tuple(c * factor for c in curve.coefficients))
    return replace(curve, knot_values=tuple(v * factor for v in curve.knot_values))


def _lengths_scaled(model: StageModel, factor: float) -> StageModel | None:
    lengths = model.lengths
    if isinstance(lengths, TruncatedLogNormal):
        moved = replace(
            lengths,
            mu=lengths.mu + math.log(factor),
            lower_tokens=lengths.lower_tokens * factor,
            upper_tokens=lengths.upper_tokens * factor,
        )
        return replace(model, lengths=moved)
    return None


def _spread_scaled(model: StageModel, factor: float) -> StageModel | None:
    lengths = model.lengths
    if isinstance(lengths, TruncatedLogNormal):
        return replace(model, lengths=replace(lengths, sigma=lengths.sigma * factor))
    return None


Perturbation = Callable[[StageModel, float], StageModel | None]

#: name -> how the model moves with a factor (None: the input does not apply to this traffic).
PERTURBATIONS: dict[str, Perturbation] = {
    "link bandwidth": lambda m, f: with_link_rate(m, link_bought_bytes_per_s(m) * f),
    "input length location": _lengths_scaled,
    "input length spread (σ)": _spread_scaled,
    "output length": lambda m, f: replace(m, output_tokens_mean=m.output_tokens_mean * f),
    "prefill speed": lambda m, f: replace(
        m, prfaas_prefill=_scaled(m.prfaas_prefill, 1 / f), local_prefill=_scaled(m.local_prefill, 1 / f)
    ),
    "decode batch": lambda m, f: replace(m, decode_max_batch=max(1, round(m.decode_max_batch * f))),
}


@frozen
class Bar:
    """One input's bar: Λ_max, goodput and USD per million tokens (at goodput) at the low and high ends."""

    input: str
    low_factor: float
    high_factor: float
    throughput_req_per_s: tuple[float, float]
    goodput_req_per_s: tuple[float, float]
    usd_per_million_tokens: tuple[float, float]


@frozen
class Tornado:
    """The base figures and one bar per input, widest goodput swing first; ``skipped`` names inputs that do
    not apply (e.g. σ for non-lognormal traffic)."""

    step: float
    throughput_req_per_s: float
    goodput_req_per_s: float
    usd_per_million_tokens: float
    bars: tuple[Bar, ...]
    skipped: tuple[str, ...]


def _usd_per_million(model: StageModel, prices: UnitPrices, carried: Carried, price_factor: float = 1.0) -> float:
    if carried.goodput_req_per_s <= 0:
        return math.nan
    route = routing(model.lengths, carried.threshold_tokens)
    egress = float(egress_bytes_per_s(model, route, carried.goodput_req_per_s)) if model.n_prfaas > 0 else 0.0
    cost = deployment_cost(
        prices,
        n_prfaas=model.n_prfaas,
        n_local=model.n_local,
        bandwidth_bytes_per_s=link_bought_bytes_per_s(model),
        egress_bytes_per_s=egress,
    )
    tokens = token_cost(
        cost.total_usd_per_hour * price_factor,
        carried.goodput_req_per_s,
        model.lengths.mean_tokens,
        model.output_tokens_mean,
    )
    return tokens.usd_per_million_tokens


def tornado(
    model: StageModel,
    prices: UnitPrices,
    slo: TtftSlo,
    *,
    step: float = TORNADO_STEP,
    resolution_tokens: float = 64.0,
    decode_service_scv: float = 0.0,
) -> Tornado:
    """Move each input by ±``step`` (re-optimising t and the split) and report Λ_max, goodput and cost."""
    if not 0 < step < 1:
        raise ValueError(f"step must be in (0, 1), got {step}")
    options = {"resolution_tokens": resolution_tokens, "decode_service_scv": decode_service_scv}

    def figures(m: StageModel, price_factor: float = 1.0) -> tuple[float, float, float]:
        carried = max_rate(m, slo, **options)
        throughput = search(m, resolution_tokens).throughput_req_per_s
        return throughput, carried.goodput_req_per_s, _usd_per_million(m, prices, carried, price_factor)

    base = figures(model)
    bars, skipped = [], []
    low, high = 1 - step, 1 + step
    for name, move in PERTURBATIONS.items():
        down, up = move(model, low), move(model, high)
        if down is None or up is None:
            skipped.append(name)
            continue
        a, b = figures(down), figures(up)
        bars.append(
            Bar(
                input=name,
                low_factor=low,
                high_factor=high,
                throughput_req_per_s=(a[0], b[0]),
                goodput_req_per_s=(a[1], b[1]),
                usd_per_million_tokens=(a[2], b[2]),
            )
        )
    bars.append(
        Bar(
            input="prices",
            low_factor=low,
            high_factor=high,
            throughput_req_per_s=(base[0], base[0]),
            goodput_req_per_s=(base[1], base[1]),
            usd_per_million_tokens=(base[2] * low, base[2] * high),
        )
    )
    bars.sort(key=lambda b: -abs(b.goodput_req_per_s[1] - b.goodput_req_per_s[0]))
    return Tornado(
        step=step,
        throughput_req_per_s=base[0],
        goodput_req_per_s=base[1],
        usd_per_million_tokens=base[2],
        bars=tuple(bars),
        skipped=tuple(skipped),
    )


@frozen
class Failure:
    """The deployment with one thing failed, re-optimised for goodput."""

    case: str
    n_prfaas: int
    n_local: int
    link_bandwidth_bytes_per_s: float
    throughput_req_per_s: float
    carried: Carried
    carries_target: bool
    ttft_p90_at_target_s: float | None


def n_minus_one(
    model: StageModel,
    target: Target,
    *,
    resolution_tokens: float = 64.0,
    decode_service_scv: float = 0.0,
) -> tuple[Failure, ...]:
    """The intact deployment and each single failure (one PrfaaS instance, one local instance, half the
    link), re-optimised for goodput on the same hardware."""
    cases: list[tuple[str, StageModel]] = [("intact", model)]
    if model.n_prfaas >= 1:
        cases.append(("one PrfaaS instance down", replace(model, n_prfaas=model.n_prfaas - 1)))
    if model.n_local >= 3:
        cases.append(("one local instance down", replace(model, n_local=model.n_local - 1)))
    cases.append(("link at half bandwidth", with_link_rate(model, link_bought_bytes_per_s(model) / 2)))
    out = []
    for case, m in cases:
        carried = max_rate(
            m, target.ttft_slo, resolution_tokens=resolution_tokens, decode_service_scv=decode_service_scv
        )
        p90 = None
        if carried.goodput_req_per_s > 0 and target.rate_req_per_s < carried.stability_limit_req_per_s:
            plan = Plan(
                threshold_tokens=carried.threshold_tokens,
                n_pd_prefill=carried.n_pd_prefill,
                n_pd_decode=m.n_local - carried.n_pd_prefill,
            )
            loaded = loaded_ttft(m, plan, target.rate_req_per_s, decode_service_scv=decode_service_scv)
            p90 = loaded.ttft.p90_s if loaded.ttft is not None else None
        out.append(
            Failure(
                case=case,
                n_prfaas=m.n_prfaas,
                n_local=m.n_local,
                link_bandwidth_bytes_per_s=m.link_bandwidth_bytes_per_s,
                throughput_req_per_s=search(m, resolution_tokens).throughput_req_per_s if m.n_prfaas > 0 else math.nan,
                carried=carried,
                carries_target=carried.goodput_req_per_s >= target.rate_req_per_s,
                ttft_p90_at_target_s=p90,
            )
        )
    return tuple(out)
