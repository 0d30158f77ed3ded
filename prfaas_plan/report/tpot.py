"""JSON of the tokens/s per GPU against tokens/s per user table (``optimize.token_rates``)."""

from __future__ import annotations

from typing import Any

from prfaas_plan.optimize.token_rates import TokenRates
from prfaas_plan.report.jsonsafe import finite


def token_rates_to_dict(rows: list[TokenRates]) -> list[dict[str, Any]]:
    """One object per plan, rates as given (tokens/s, req/s, s); null where a figure is undefined."""
    return [
        {
            "plan": r.label,
            "rate_req_per_s": r.rate_req_per_s,
            "gpus": r.gpus,
            "tokens_per_s_per_gpu": finite(r.tokens_per_s_per_gpu),
            "tokens_per_s_per_user": finite(r.tokens_per_s_per_user),
            "tpot_mean_s": finite(r.tpot_mean_s),
            "tpot_p90_s": finite(r.tpot_p90_s),
            "decode_load": finite(r.decode_load),
        }
        for r in rows
    ]
