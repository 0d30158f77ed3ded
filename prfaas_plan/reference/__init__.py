"""The reference kernel: a numpy forward pass of any model card at small sizes, instrumented, with the cache
it leaves, to check ``physics`` (counts, cache sizes, sufficiency) and to time it against the roofline.

    model = build_model(shrink_architecture(card.architecture), np.random.default_rng(0))
    logits, cache = prefill(model, tokens)            # cache: per-layer KV / window / states, storage dtypes
    next_logits = decode(model, [cache], [token])     # one step; the cache grows in place
    Cache.from_bytes(cache.to_bytes())                # what crosses the link, and back

Timing lives in ``reference.timing`` (and ``reference.gpu_timing``, run by ``validate gpu`` with torch),
imported on demand.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prfaas_plan._lazy import lazy_getattr

if TYPE_CHECKING:
    from prfaas_plan.reference.cache import Cache, LayerCache
    from prfaas_plan.reference.checks import CONTRACT_GAPS, CountChecks, compare_counts, run_count_checks
    from prfaas_plan.reference.counter import Counter, OpCount
    from prfaas_plan.reference.kernel import decode, empty_cache, prefill
    from prfaas_plan.reference.model import MAX_REFERENCE_PARAMETERS, ReferenceModel, build_model, check_reference_size
    from prfaas_plan.reference.shrink import ShrinkTarget, shrink_architecture

_EXPORTS = {
    "CONTRACT_GAPS": "prfaas_plan.reference.checks",
    "Cache": "prfaas_plan.reference.cache",
    "CountChecks": "prfaas_plan.reference.checks",
    "Counter": "prfaas_plan.reference.counter",
    "LayerCache": "prfaas_plan.reference.cache",
    "MAX_REFERENCE_PARAMETERS": "prfaas_plan.reference.model",
    "OpCount": "prfaas_plan.reference.counter",
    "ReferenceModel": "prfaas_plan.reference.model",
    "ShrinkTarget": "prfaas_plan.reference.shrink",
    "build_model": "prfaas_plan.reference.model",
    "check_reference_size": "prfaas_plan.reference.model",
    "compare_counts": "prfaas_plan.reference.checks",
    "decode": "prfaas_plan.reference.kernel",
    "empty_cache": "prfaas_plan.reference.kernel",
    "prefill": "prfaas_plan.reference.kernel",
    "run_count_checks": "prfaas_plan.reference.checks",
    "shrink_architecture": "prfaas_plan.reference.shrink",
}
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
__getattr__ = lazy_getattr(__name__, _EXPORTS)
