"""Rendering of the tokens/s per GPU against tokens/s per user table (``optimize.token_rates``)."""

from __future__ import annotations

import math

from prfaas_plan.cli.render import DataTable
from prfaas_plan.optimize.token_rates import TokenRates
from prfaas_plan.report.jsonsafe import finite


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
        table.add_data(
            {
                "plan": r.label,
                "rate_req_per_s": r.rate_req_per_s,
                "gpus": r.gpus,
                "tokens_per_s_per_gpu": finite(r.tokens_per_s_per_gpu),
                "tokens_per_s_per_user": finite(r.tokens_per_s_per_user),
                "tpot_mean_s": finite(r.tpot_mean_s),
                "tpot_p90_s": finite(r.tpot_p90_s),
                "decode_load_fraction": finite(r.decode_load),
            }
        )
    return table
