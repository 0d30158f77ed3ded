"""How sure a pool's service times are: a multiplicative error band on its prefill and decode-step times."""

from __future__ import annotations

from dataclasses import dataclass


def span_words(phase: str, tokens: tuple[float, float]) -> str:
    """A band's measured range of tokens in words: prompts (prefill) or contexts (decode) of low-high tokens."""
    return f"{'prompts' if phase == 'prefill' else 'contexts'} of {tokens[0]:,.0f}-{tokens[1]:,.0f} tokens"


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseBand:
    """One phase's band: the true time lies within [priced / ``factor``, priced x ``factor``] for the stated
    share of the held-out measurements ``basis`` names (``points`` of them)."""

    factor: float
    points: int
    basis: str
    #: The range the band's measurements spanned: prompt tokens (prefill) or context tokens (decode), and
    #: decode batches; None where its source does not say.
    tokens: tuple[float, float] | None = None
    batch: tuple[float, float] | None = None

    def beyond(self, phase: str, tokens: float, batch: float | None = None) -> str:
        """A sentence saying that a time at ``tokens`` (and ``batch``) lies outside the range the band was
        measured on; "" inside it, or where the range is unknown."""
        what = "prompt" if phase == "prefill" else "context"
        out = []
        if self.tokens is not None and not self.tokens[0] <= tokens <= self.tokens[1]:
            out.append(f"{tokens:,.0f} {what} tokens")
        if batch is not None and self.batch is not None and not self.batch[0] <= batch <= self.batch[1]:
            out.append(f"batch {batch:,.0f}")
        if not out:
            return ""
        checked = [span_words(phase, self.tokens)] if self.tokens else []
        if self.batch is not None:
            checked.append(f"batches {self.batch[0]:,.0f}-{self.batch[1]:,.0f}")
        return (
            f"{phase} at {' and '.join(out)} is outside what its error band ({self.factor:.2f}x) was measured on "
            f"({', '.join(checked)}): the band does not cover it"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeBand:
    """The error band of a pool priced by roofline or calibration, per phase; ``coverage`` is the share of
    held-out errors each factor covers; ``source`` names where it came from (an engine profile's
    cross-validation, a calibration's residuals)."""

    prefill: PhaseBand
    decode: PhaseBand
    coverage: float
    source: str
