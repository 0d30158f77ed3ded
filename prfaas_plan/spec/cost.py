"""What a deployment costs and what it must carry: unit prices with their provenance, and a sizing target.

Prices are per GPU-hour (USD), per link port-hour or per Gbit/s-month of committed bandwidth, and per GB of
egress, the ways cloud providers bill. A scenario may override any accelerator's price; otherwise the
hardware profile's figure is used (``hardware.price_usd_per_gpu_hour``, with the profile's source).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import TYPE_CHECKING

from prfaas_plan._frozen import frozen

if TYPE_CHECKING:  # annotations only: built on demand (``ttft_slo``), so loading a scenario leaves spec.plan unloaded
    from prfaas_plan.spec.plan import TtftSlo

#: Hours in a billing month (365.25 · 24 / 12), to turn a monthly committed-bandwidth price into an hourly one.
HOURS_PER_MONTH = 730.5


@frozen
class LinkPort:
    """One purchasable cross-datacenter port (e.g. a dedicated interconnect of 10 or 100 Gbit/s).

    A link of bandwidth B is bought as k ports of one size (k · bandwidth >= B); ports of different sizes are
    not mixed.
    """

    bandwidth_bytes_per_s: float
    usd_per_hour: float


@frozen
class LinkPricing:
    """How the cross-datacenter link is billed: ports and/or committed bandwidth (fixed per hour) plus egress
    per byte (proportional to traffic). All zero: the link is free (reported as such)."""

    ports: tuple[LinkPort, ...] = ()
    committed_usd_per_gbit_per_s_month: float = 0.0
    egress_usd_per_gb: float = 0.0
    source: str = ""

    @property
    def priced(self) -> bool:
        """Whether any term of the link's price is given."""
        return bool(self.ports) or self.committed_usd_per_gbit_per_s_month > 0 or self.egress_usd_per_gb > 0


@frozen
class CostInputs:
    """A scenario's prices: per-accelerator GPU-hour overrides (hardware key -> USD), the link's pricing,
    and optionally electricity (added to GPU-hour prices as TDP x PUE x USD/kWh when given)."""

    gpu_usd_per_hour: Mapping[str, float] = field(default_factory=dict)
    gpu_price_sources: Mapping[str, str] = field(default_factory=dict)
    link: LinkPricing = field(default_factory=LinkPricing)
    electricity_usd_per_kwh: float | None = None
    pue: float = 1.0
    source: str = ""


@frozen
class Target:
    """What a sized deployment must carry: ``rate_req_per_s`` with the TTFT ``quantile`` within ``ttft_slo_s``."""

    rate_req_per_s: float
    ttft_slo_s: float
    quantile: float = 0.9

    @property
    def ttft_slo(self) -> TtftSlo:
        """The TTFT percentile target alone (``ttft_slo_s`` at ``quantile``)."""
        from prfaas_plan.spec.plan import TtftSlo

        return TtftSlo(limit_s=self.ttft_slo_s, quantile=self.quantile)
