"""Rendering of the tokens/s per GPU against tokens/s per user table (``optimize.token_rates``)."""

from __future__ import annotations

import math

from prfaas_plan.cli.render import DataTable
from prfaas_plan.optimize.token_rates import TokenRates
from prfaas_plan.report.tpot import token_rates_to_dict


def _fmt(value: float, spec: str) -> str:
    return format(value, spec) if math.isfinite(value) else "—"


def token_rates_table(rows: list[TokenRates]) -> DataTable:
    """Each plan at its goodput: GPUs, tokens/s per GPU, tokens/s per user and TPOT (mean, P90) under load."""
    table = DataTable(title="Tokens/s per GPU against tokens/s per user, each plan at its goodput")
    names = ("plan", "rate (req/s)", "GPUs", "tok/s per GPU", "tok/s per user", "TPOT mean/P90 (ms)", "decode load")
    for name in names:
        table.add_column(name, justify="left" if name == "plan" else "right")
    for r in rows:
        table.add_row(
            r.label,
            f"{r.rate_req_per_s:.2f}",
            str(r.gpus),
            _fmt(r.tokens_per_s_per_gpu, ".1f"),
            _fmt(r.tokens_per_s_per_user, ".1f"),
            f"{_fmt(r.tpot_mean_s * 1e3, '.1f')} / {_fmt(r.tpot_p90_s * 1e3, '.1f')}",
            _fmt(r.decode_load * 100, ".0f") + ("%" if math.isfinite(r.decode_load) else ""),
        )
        data = token_rates_to_dict([r])[0]
        data["decode_load_fraction"] = data.pop("decode_load")  # the CSV column names its unit
        table.add_data(data)
    return table
