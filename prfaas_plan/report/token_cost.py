"""The one set of names under which every report writes a cost per token.

``optimize.cost.token_cost`` is the one definition: the whole hourly cost of a deployment (GPUs, the link's
fixed price, egress at the rate carried) divided by the tokens it carries in an hour at a named rate, per
million, three ways: over the input (uncached prefill) tokens, over the output tokens, and over both. The rate
is named by the key that holds the figures (``at_throughput``: Λ_max; ``tokens_at_goodput``; ``tokens_at_target``)
or by a suffix (``usd_per_million_tokens_at_goodput``), never left implicit: the same deployment costs more per
token at a lower rate.
"""

from __future__ import annotations

from prfaas_plan.optimize.cost import TokenCost
from prfaas_plan.report.jsonsafe import finite

#: The keys of the three figures, in the order every table shows them.
TOKEN_COST_KEYS = ("usd_per_million_input_tokens", "usd_per_million_output_tokens", "usd_per_million_tokens")


def token_cost_dict(tokens: TokenCost) -> dict[str, float | None]:
    """The three figures of ``tokens`` under ``TOKEN_COST_KEYS`` (null where the rate is zero)."""
    return {
        "usd_per_million_input_tokens": finite(tokens.usd_per_million_input_tokens),
        "usd_per_million_output_tokens": finite(tokens.usd_per_million_output_tokens),
        "usd_per_million_tokens": finite(tokens.usd_per_million_tokens),
    }
