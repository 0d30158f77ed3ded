"""The reference kernel: a numpy forward pass of any model card at small sizes, instrumented, with the cache
it leaves, to check ``physics`` (counts, cache sizes, sufficiency) and to time it against the roofline.

    model = build_model(shrink_architecture(card.architecture), np.random.default_rng(0))
    logits, cache = prefill(model, tokens)            # cache: per-layer KV / window / states, storage dtypes
    next_logits = decode(model, [cache], [token])     # one step; the cache grows in place
    Cache.from_bytes(cache.to_bytes())                # what crosses the link, and back

Timing lives in ``reference.timing`` (and ``reference.gpu_timing``, run by ``validate gpu`` with torch),
imported on demand.
"""

from prfaas_plan.reference.cache import Cache, LayerCache
from prfaas_plan.reference.checks import CONTRACT_GAPS, CountChecks, compare_counts, run_count_checks
from prfaas_plan.reference.counter import Counter, OpCount
from prfaas_plan.reference.kernel import decode, empty_cache, prefill
from prfaas_plan.reference.model import MAX_REFERENCE_PARAMETERS, ReferenceModel, build_model, check_reference_size
from prfaas_plan.reference.shrink import ShrinkTarget, shrink_architecture

__all__ = [
    "CONTRACT_GAPS",
    "MAX_REFERENCE_PARAMETERS",
    "Cache",
    "CountChecks",
    "Counter",
    "LayerCache",
    "OpCount",
    "ReferenceModel",
    "ShrinkTarget",
    "build_model",
    "check_reference_size",
    "compare_counts",
    "decode",
    "empty_cache",
    "prefill",
    "run_count_checks",
    "shrink_architecture",
]
