"""How sure a pool's service times are: a multiplicative error band on its prefill and decode-step times."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prfaas_plan._frozen import frozen

if TYPE_CHECKING:
    from prfaas_plan.spec.model import Architecture


def span_words(phase: str, tokens: tuple[float, float]) -> str:
    """A band's measured range of tokens in words: prompts (prefill) or contexts (decode) of low-high tokens."""
    return f"{'prompts' if phase == 'prefill' else 'contexts'} of {tokens[0]:,.0f}-{tokens[1]:,.0f} tokens"


@frozen
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

    #: Its measurements per model (``(kind, model, points)``, kind by ``model_kind``) and per GPU generation
    #: (``hardware_profiles/serving/generations.yaml``); () where its source does not say.
    kinds: tuple[tuple[str, str, int], ...] = ()
    generations: tuple[tuple[str, int], ...] = ()
    #: The built-in engine whose band this is, where a pricing with no cross-validation of its own (a custom
    #: engine profile) borrows it: its counts are of that engine's measurements. "" for a band of its own.
    borrowed_from: str = ""

    def beyond(
        self,
        phase: str,
        tokens: float | None,
        batch: float | None = None,
        *,
        kind: str = "",
        model: str = "",
        generation: str = "",
    ) -> str:
        """A sentence saying that a time at ``tokens`` (and ``batch``; None: not checked), of ``model`` (of
        ``kind``) on a GPU of ``generation``, lies outside what the band was measured on: beyond its range of
        tokens or batches; of a kind it holds fewer than ``MIN_POINTS_OF_A_KIND`` measurements of, or whose
        measurements are all of one other model; or of a generation it holds fewer than
        ``MIN_POINTS_OF_A_KIND`` of. "" inside it, or where its source does not say."""
        what = "prompt" if phase == "prefill" else "context"
        at, checked = [], []
        if tokens is not None and self.tokens is not None and not self.tokens[0] <= tokens <= self.tokens[1]:
            at.append(f"{tokens:,.0f} {what} tokens")
        if batch is not None and self.batch is not None and not self.batch[0] <= batch <= self.batch[1]:
            at.append(f"batch {batch:,.0f}")
        if at:
            checked = [span_words(phase, self.tokens)] if self.tokens else []
            if self.batch is not None:
                checked.append(f"batches {self.batch[0]:,.0f}-{self.batch[1]:,.0f}")
        of = ""
        if kind and self.kinds:
            mine = {m: n for k, m, n in self.kinds if k == kind}
            total = sum(n for _, _, n in self.kinds)
            words = KIND_PLURAL.get(kind, kind)
            if sum(mine.values()) < MIN_POINTS_OF_A_KIND:
                named = f" ({', '.join(mine)})" if mine else ""
                of = f" of {KIND_WORDS.get(kind, kind)}"
                checked.append(f"{words}: {_count(sum(mine.values()))} of its {total} points{named}")
            elif len(mine) == 1 and model not in mine:
                (only,) = mine
                of = f" of {KIND_WORDS.get(kind, kind)} other than {only}"
                checked.append(f"{words}: its {mine[only]} points of that kind are all of {only}")
        on = ""
        counts = dict(self.generations)
        if generation and counts and counts.get(generation, 0) < MIN_POINTS_OF_A_KIND:
            gpus = "GPUs of no listed generation" if generation == "other" else f"{generation} GPUs"
            on = f" on {gpus}"
            others = ", ".join(f"{g} {n}" for g, n in self.generations if g != generation)
            checked.append(
                f"{gpus}: {_count(counts.get(generation, 0))} of its {sum(counts.values())} points (others: {others})"
            )
        if not (at or of or on):
            return ""
        where = f" at {' and '.join(at)}" if at else ""
        borrowed = f", borrowed from {self.borrowed_from}" if self.borrowed_from else ""
        return (
            f"{phase}{of}{on}{where} is outside what its error band ({self.factor:.2f}x{borrowed}) was measured on "
            f"({'; '.join(checked)}): the band does not cover it"
        )


#: Below this share of the traffic's prompts past what a pricing was measured on (a band's longest, a measured
#: profile's longest point), nothing is said: a design bound, not a fitted one.
OUTSIDE_SHARE_NOTED = 0.01

#: Fewer measurements than this of a model kind or a GPU generation, and a band's quantile says nothing of it: a
#: design bound, not a fitted one (the 80 % quantile of two errors is all but the larger of them).
MIN_POINTS_OF_A_KIND = 3
#: The model kinds a band counts (``model_kind``), in words.
KIND_WORDS = {"dense": "a dense model", "moe": "a mixture-of-experts model"}
KIND_PLURAL = {"dense": "dense models", "moe": "mixture-of-experts models"}


def model_kind(arch: Architecture) -> str:
    """The kind of model a band counts: ``moe`` when any layer routes to experts, else ``dense``. Attention kinds
    are not counted apart (every hybrid-attention model in the corpus is also a mixture of experts, and its MoE
    points mix MLA, GQA, sliding-window and linear attention)."""
    return "dense" if all(group.ffn.kind == "dense" for group in arch.layers) else "moe"


def _count(n: int) -> str:
    return "none" if n == 0 else f"{n}"


@frozen
class TimeBand:
    """The error band of a pool priced by roofline or calibration, per phase; ``coverage`` is the share of
    held-out errors each factor covers; ``source`` names where it came from (an engine profile's
    cross-validation, a calibration's residuals)."""

    prefill: PhaseBand
    decode: PhaseBand
    coverage: float
    source: str
