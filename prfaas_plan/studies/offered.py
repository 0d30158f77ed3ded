"""What a plan is offered (``Traffic``): a trace, or the model's lengths and arrival process. Apart from the
closed form (``studies.closed_form``) that scores it, so that a command builds it without loading the
loaded-TTFT law."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prfaas_plan._frozen import frozen
from prfaas_plan.lengths import Fixed, LengthDistribution

if TYPE_CHECKING:
    from prfaas_plan.spec.trace import Trace
    from prfaas_plan.throughput import StageModel


@frozen
class Traffic:
    """What is offered: a trace (replayed, rescaled to the rate), or the model's lengths and arrival process
    with ``output_lengths`` (None: every request has the model's mean output length)."""

    trace: Trace | None = None
    output_lengths: LengthDistribution | None = None

    def outputs(self, model: StageModel) -> LengthDistribution:
        """The output-length distribution of synthetic traffic."""
        return self.output_lengths if self.output_lengths is not None else Fixed(tokens=model.output_tokens_mean)
