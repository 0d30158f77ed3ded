"""Stage two of a scenario's ``cost`` and ``target`` sections (``spec.cost``).

cost:
  source: where the prices come from
  gpu_usd_per_hour: {h20: 2.83}          # overrides a hardware profile's price_usd_per_gpu_hour
  electricity_usd_per_kwh: 0.08          # optional: adds TDP x PUE x price to each GPU-hour
  pue: 1.3
  link:
    ports: [{gbit_per_s: 100, usd_per_hour: 22.5}]   # buy k ports of one size
    committed_usd_per_gbit_per_s_month: 0            # and/or committed bandwidth
    egress_usd_per_gb: 0.02                          # and/or traffic
    source: ...
target:
  rate_req_per_s: 3
  ttft_p90_s: 5                          # default: slo.ttft_p90_s
"""

from __future__ import annotations

from prfaas_plan.io.limits import (
    MAX_LINK_GBIT_PER_S,
    MAX_PRICE_USD_PER_HOUR,
    MAX_RATE_REQ_PER_S,
    MAX_TTFT_S,
    MIN_LINK_GBIT_PER_S,
    MIN_STEP_S,
)
from prfaas_plan.io.yamlsrc import Section, check_number
from prfaas_plan.spec.cost import CostInputs, LinkPort, LinkPricing, Target
from prfaas_plan.units import GBIT_PER_S

#: Largest price per GB of egress and per Gbit/s-month accepted (USD); far above any public price list.
MAX_EGRESS_USD_PER_GB = 100.0
MAX_COMMITTED_USD_PER_GBIT_PER_S_MONTH = 1e6
#: Electricity price bound (USD/kWh) and the power usage effectiveness range (1 = no overhead).
MAX_ELECTRICITY_USD_PER_KWH = 10.0
MAX_PUE = 5.0
#: Largest target rate (req/s): the limits' table's, far above any fleet's traffic.
MAX_TARGET_RATE_REQ_PER_S = MAX_RATE_REQ_PER_S
#: At most this many port sizes in a link's price list.
MAX_PORTS = 32

COST_KEYS = ("source", "gpu_usd_per_hour", "electricity_usd_per_kwh", "pue", "link")
TARGET_KEYS = ("rate_req_per_s", "ttft_p90_s")


def parse_cost(sec: Section) -> CostInputs:
    """The ``cost`` section (dead: no prices beyond the hardware profiles', a free link)."""
    if sec.dead:
        return CostInputs()
    source = sec.string("source", default="") or ""
    prices: dict[str, float] = {}
    overrides = sec.raw("gpu_usd_per_hour")
    if overrides is not None:
        if not isinstance(overrides, dict) or not overrides:
            sec.checker.report(
                (*sec.path, "gpu_usd_per_hour"), "expected a mapping of hardware name -> USD per GPU-hour"
            )
        else:
            for key, value in overrides.items():
                price = check_number(
                    sec.checker, (*sec.path, "gpu_usd_per_hour", str(key)), value, gt=0, le=MAX_PRICE_USD_PER_HOUR
                )
                if price is not None:
                    prices[str(key)] = price
    electricity = sec.number("electricity_usd_per_kwh", ge=0, le=MAX_ELECTRICITY_USD_PER_KWH)
    pue = sec.number("pue", ge=1, le=MAX_PUE, default=1.0)
    link = _link_pricing(
        sec.sub(
            "link",
            optional=("ports", "committed_usd_per_gbit_per_s_month", "egress_usd_per_gb", "source"),
        )
    )
    return CostInputs(
        gpu_usd_per_hour=prices,
        gpu_price_sources={k: source or "scenario cost.gpu_usd_per_hour" for k in prices},
        link=link,
        electricity_usd_per_kwh=electricity,
        pue=1.0 if pue is None else pue,
        source=source,
    )


def _link_pricing(sec: Section) -> LinkPricing:
    if sec.dead:
        return LinkPricing()
    ports = []
    items = sec.items("ports")
    if len(items) > MAX_PORTS:
        sec.checker.report((*sec.path, "ports"), f"at most {MAX_PORTS} port sizes, got {len(items)}")
        items = []
    for path, item in items:
        port = Section(sec.checker, path, item, required=("gbit_per_s", "usd_per_hour"))
        size = port.number("gbit_per_s", gt=0, ge=MIN_LINK_GBIT_PER_S, le=MAX_LINK_GBIT_PER_S)
        price = port.number("usd_per_hour", ge=0, le=MAX_PRICE_USD_PER_HOUR)
        if size is not None and price is not None:
            ports.append(LinkPort(bandwidth_bytes_per_s=size * GBIT_PER_S, usd_per_hour=price))
    committed = sec.number("committed_usd_per_gbit_per_s_month", ge=0, le=MAX_COMMITTED_USD_PER_GBIT_PER_S_MONTH)
    egress = sec.number("egress_usd_per_gb", ge=0, le=MAX_EGRESS_USD_PER_GB)
    pricing = LinkPricing(
        ports=tuple(ports),
        committed_usd_per_gbit_per_s_month=committed or 0.0,
        egress_usd_per_gb=egress or 0.0,
        source=sec.string("source", default="") or "",
    )
    if pricing.priced and not pricing.source:
        sec.checker.report(sec.path, "a priced link needs a 'source' (where the prices come from)")
    return pricing


def parse_target(sec: Section, slo_ttft_p90_s: float | None) -> Target | None:
    """The ``target`` section: a rate and the P90 TTFT it must meet (default: the SLO section's)."""
    if sec.dead:
        return None
    rate = sec.number("rate_req_per_s", gt=0, le=MAX_TARGET_RATE_REQ_PER_S)
    ttft = sec.number("ttft_p90_s", gt=0, ge=MIN_STEP_S, le=MAX_TTFT_S, default=slo_ttft_p90_s)
    if ttft is None and not sec.has("ttft_p90_s"):
        sec.checker.report(sec.path, "needs ttft_p90_s (or slo.ttft_p90_s)")
    if rate is None or ttft is None:
        return None
    return Target(rate_req_per_s=rate, ttft_slo_s=ttft, quantile=0.9)
