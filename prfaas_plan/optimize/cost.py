"""What a deployment costs per hour and per million tokens.

    cost/h = N_prfaas · g_prfaas · price_prfaas + N_local · g_local · price_local      (GPU-hours)
           + link_fixed(B)                                                          (ports, committed Gbit/s)
           + Λ · E[egress bytes per request] · USD/GB / 1e9 · 3600                  (egress, at the rate carried)

price_x is USD per GPU-hour: the scenario's override or the hardware profile's figure, plus electricity
(TDP · PUE · USD/kWh) when the scenario prices it. A link of bandwidth B bought as ports costs the cheapest
k · port price over the port sizes with k · size >= B; committed bandwidth costs B in Gbit/s times the
monthly price over ``HOURS_PER_MONTH``.

Cost per million tokens at a rate Λ: cost/h / (Λ · 3600 · E[tokens per request] / 1e6), with the input
(uncached prefill) tokens, the output tokens and their sum each reported; a figure per kind of token
divides the whole cost by that kind alone (the convention of per-token price sheets that quote one kind).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import field
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.spec.cost import HOURS_PER_MONTH, CostInputs, LinkPricing
from prfaas_plan.spec.hardware import Accelerator
from prfaas_plan.spec.scenario import Pool, Scenario
from prfaas_plan.units import GB, GBIT_PER_S

FloatOrArray = TypeVar("FloatOrArray", float, NDArray[np.float64])

_SECONDS_PER_HOUR = 3600.0
_W_PER_KW = 1000.0


@frozen
class UnitPrices:
    """Price of one instance-hour of each pool and the link's pricing; None where no price is known."""

    prfaas_usd_per_instance_hour: float | None
    local_usd_per_instance_hour: float | None
    link: LinkPricing
    #: Where each price came from (quantity -> provenance line).
    sources: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)

    @property
    def complete(self) -> bool:
        """Both pools priced (the link may be free)."""
        return self.prfaas_usd_per_instance_hour is not None and self.local_usd_per_instance_hour is not None


def gpu_hour_price(hardware_key: str, accelerator: Accelerator, cost: CostInputs) -> tuple[float | None, str]:
    """USD per GPU-hour of one accelerator (scenario override, else the profile's price) plus electricity when
    priced, and the provenance line. (None, reason) when neither gives a price."""
    if hardware_key in cost.gpu_usd_per_hour:
        price = float(cost.gpu_usd_per_hour[hardware_key])
        source = cost.gpu_price_sources.get(hardware_key) or cost.source or "scenario cost.gpu_usd_per_hour"
    elif accelerator.price_usd_per_gpu_hour is not None:
        price = float(accelerator.price_usd_per_gpu_hour)
        source = f"hardware profile '{hardware_key}' price_usd_per_gpu_hour"
    else:
        return None, f"no price for '{hardware_key}' (set cost.gpu_usd_per_hour.{hardware_key} in the scenario)"
    if cost.electricity_usd_per_kwh is not None and accelerator.tdp_w is not None:
        power = accelerator.tdp_w / _W_PER_KW * cost.pue * cost.electricity_usd_per_kwh
        price += power
        source += f" + electricity {accelerator.tdp_w:g} W x PUE {cost.pue:g} x {cost.electricity_usd_per_kwh:g} $/kWh"
    return price, source


def _instance_price(pool: Pool, cost: CostInputs) -> tuple[float | None, str]:
    price, source = gpu_hour_price(pool.hardware_key, pool.accelerator, cost)
    return (None if price is None else price * pool.gpus_per_instance), source


def unit_prices(scenario: Scenario) -> UnitPrices:
    """Instance-hour prices of the scenario's two pools and its link pricing, with provenance."""
    prfaas, prfaas_src = _instance_price(scenario.prfaas, scenario.cost)
    local, local_src = _instance_price(scenario.local, scenario.cost)
    sources = {
        f"GPU-hour ({scenario.prfaas.hardware_key}, PrfaaS)": prfaas_src,
        f"GPU-hour ({scenario.local.hardware_key}, local)": local_src,
        "link": scenario.cost.link.source if scenario.cost.link.priced else "not priced (free)",
    }
    return UnitPrices(
        prfaas_usd_per_instance_hour=prfaas,
        local_usd_per_instance_hour=local,
        link=scenario.cost.link,
        sources=sources,
    )


def link_fixed_usd_per_hour(link: LinkPricing, bandwidth_bytes_per_s: float) -> float:
    """Hourly price of a link of ``bandwidth_bytes_per_s``: cheapest whole number of one port size that
    covers it (when ports are priced), plus committed bandwidth. 0 for a zero bandwidth (no link)."""
    if bandwidth_bytes_per_s <= 0:
        return 0.0
    ports = 0.0
    if link.ports:
        ports = min(
            math.ceil(bandwidth_bytes_per_s / p.bandwidth_bytes_per_s - 1e-9) * p.usd_per_hour for p in link.ports
        )
    committed = bandwidth_bytes_per_s / GBIT_PER_S * link.committed_usd_per_gbit_per_s_month / HOURS_PER_MONTH
    return ports + committed


def egress_usd_per_hour(link: LinkPricing, egress_bytes_per_s: FloatOrArray) -> FloatOrArray:
    """Hourly price of ``egress_bytes_per_s`` of cross-datacenter egress (a number or an array of them)."""
    return egress_bytes_per_s / GB * link.egress_usd_per_gb * _SECONDS_PER_HOUR


def link_options(link: LinkPricing, low_bytes_per_s: float, high_bytes_per_s: float, grid: int = 24) -> list[float]:
    """Bandwidths worth buying between ``low`` and ``high`` (bytes/s), ascending.

    With ports: every k · size in range (k whole), plus the first one at or above ``high``. Without ports:
    a geometric grid of ``grid`` points from ``low`` to ``high`` (committed bandwidth is priced linearly,
    so any value can be bought; the grid bounds the search).
    """
    if high_bytes_per_s < low_bytes_per_s:
        raise ValueError("link_options: high must be >= low")
    if not link.ports:
        if high_bytes_per_s == low_bytes_per_s:
            return [float(low_bytes_per_s)]
        return [float(b) for b in np.geomspace(low_bytes_per_s, high_bytes_per_s, grid)]
    sizes: set[float] = set()
    for port in link.ports:
        first = max(1, math.ceil(low_bytes_per_s / port.bandwidth_bytes_per_s - 1e-9))
        last = max(first, math.ceil(high_bytes_per_s / port.bandwidth_bytes_per_s - 1e-9))
        if last - first > 4096:  # bound the candidate list: spread the multiples geometrically
            ks = np.unique(np.round(np.geomspace(first, last, 256)).astype(np.int64))
        else:
            ks = np.arange(first, last + 1)
        sizes.update(float(k) * port.bandwidth_bytes_per_s for k in ks)
    # A size is worth considering only if no larger size is as cheap.
    ordered = sorted(sizes)
    prices = [link_fixed_usd_per_hour(link, b) for b in ordered]
    keep = [b for i, b in enumerate(ordered) if all(prices[i] < p for p in prices[i + 1 :])]
    return keep


@frozen
class CostBreakdown:
    """USD per hour of a deployment at a given rate, by component."""

    prfaas_usd_per_hour: float
    local_usd_per_hour: float
    link_usd_per_hour: float
    egress_usd_per_hour: float

    @property
    def total_usd_per_hour(self) -> float:
        """Sum of the components."""
        return self.prfaas_usd_per_hour + self.local_usd_per_hour + self.link_usd_per_hour + self.egress_usd_per_hour


def deployment_cost(
    prices: UnitPrices,
    *,
    n_prfaas: int,
    n_local: int,
    bandwidth_bytes_per_s: float,
    egress_bytes_per_s: float = 0.0,
) -> CostBreakdown:
    """Hourly cost of N_prfaas + N_local instances and a link of the given bandwidth (0: no link) carrying
    ``egress_bytes_per_s``. Raises ValueError when a pool in use has no price (check ``prices.complete``)."""
    if n_prfaas > 0 and prices.prfaas_usd_per_instance_hour is None:
        raise ValueError("the PrfaaS pool has no price")
    if n_local > 0 and prices.local_usd_per_instance_hour is None:
        raise ValueError("the local pool has no price")
    prfaas = n_prfaas * (prices.prfaas_usd_per_instance_hour or 0.0)
    local = n_local * (prices.local_usd_per_instance_hour or 0.0)
    link = link_fixed_usd_per_hour(prices.link, bandwidth_bytes_per_s) if n_prfaas > 0 else 0.0
    egress = egress_usd_per_hour(prices.link, egress_bytes_per_s)
    return CostBreakdown(
        prfaas_usd_per_hour=prfaas, local_usd_per_hour=local, link_usd_per_hour=link, egress_usd_per_hour=egress
    )


@frozen
class TokenCost:
    """Cost per million tokens at ``rate_req_per_s`` (USD); NaN at a zero rate."""

    rate_req_per_s: float
    usd_per_hour: float
    usd_per_million_input_tokens: float
    usd_per_million_output_tokens: float
    usd_per_million_tokens: float


def token_cost(
    usd_per_hour: float, rate_req_per_s: float, input_tokens_mean: float, output_tokens_mean: float
) -> TokenCost:
    """USD per million input, output and all tokens when ``usd_per_hour`` carries ``rate_req_per_s``."""
    per_hour = rate_req_per_s * _SECONDS_PER_HOUR / 1e6
    nan = float("nan")

    def per_million(tokens: float) -> float:
        return usd_per_hour / (per_hour * tokens) if per_hour * tokens > 0 else nan

    return TokenCost(
        rate_req_per_s=rate_req_per_s,
        usd_per_hour=usd_per_hour,
        usd_per_million_input_tokens=per_million(input_tokens_mean),
        usd_per_million_output_tokens=per_million(output_tokens_mean),
        usd_per_million_tokens=per_million(input_tokens_mean + output_tokens_mean),
    )
