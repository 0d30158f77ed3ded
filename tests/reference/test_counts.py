"""Instrumented counts of the reference kernel against physics.ops, operation by operation.

Law: for every (layer group, operation) and every field (matmul and element-wise FLOPs, weight, activation and
cache bytes), the kernel's count equals ``physics.ops.forward_ops`` (relative 1e-12), for prefill with and
without cached tokens and for batched decode steps, on random small cards of every layer type and dtype;
the only departures are the documented ``CONTRACT_GAPS`` (checked exactly in test_contract_gaps.py).
Element-wise work the contract does not model is bounded: at most ``EXTRA_PER_ACTIVATION`` FLOPs per
activation element the operation moves.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.physics.ops import ACTIVATION_BYTES
from prfaas_plan.reference.checks import compare_counts
from prfaas_plan.reference.counter import Counter, OpCount
from prfaas_plan.reference.kernel import decode, empty_cache, prefill
from prfaas_plan.reference.model import build_model
from prfaas_plan.spec.model import ATTENTION_KINDS, DTYPE_BYTES, Architecture
from tests.conftest import examples
from tests.strategies_models import architectures, one_of_each

# Rotary embeddings (3 per rotated element), q/k L2 norms and gates, SiLU after the convolution and on the
# output gate (4 per element), residual adds and MoE combines (1-2 per element): at most 4 per element moved.
EXTRA_PER_ACTIVATION = 4.0


def _passes(
    arch: Architecture, seed: int, cached: int, new: int, batch: int
) -> list[tuple[Counter, dict[str, object]]]:
    """Counted passes: a prefill of ``new`` after ``cached``, and a decode step of ``batch`` sequences."""
    rng = np.random.default_rng(seed)
    model = build_model(arch, rng)
    draw = lambda n: rng.integers(0, arch.vocab_size, size=n)  # noqa: E731
    out: list[tuple[Counter, dict[str, object]]] = []
    cache = prefill(model, draw(cached))[1] if cached else None
    counter = Counter()
    prefill(model, draw(new), cache, counter=counter)
    out.append((counter, {"cached": cached, "new": new}))
    caches = [prefill(model, draw(cached))[1] if cached else None for _ in range(batch)]
    counter = Counter()
    decode(
        model,
        [c if c is not None else empty_cache(model) for c in caches],
        [int(t) for t in draw(batch)],
        counter=counter,
    )
    out.append((counter, {"cached": cached, "new": 1, "batch": batch, "decode": True}))
    return out


def _assert_counts_match(arch: Architecture, seed: int, cached: int, new: int, batch: int) -> None:
    for counter, shape in _passes(arch, seed, cached, new, batch):
        unexplained = [m for m in compare_counts(arch, counter.ops(), **shape) if not m.known]  # type: ignore[arg-type]
        assert not unexplained, [str(m) for m in unexplained]
        for op in counter.ops():
            _assert_extra_bounded(op)


def _assert_extra_bounded(op: OpCount) -> None:
    moved = op.activation_bytes / ACTIVATION_BYTES
    assert op.extra_elementwise_flops <= EXTRA_PER_ACTIVATION * moved, op


@pytest.mark.parametrize("kind", ATTENTION_KINDS)
@given(data=st.data())
@settings(max_examples=examples(20), deadline=None)
def test_counts_equal_physics_ops(kind: str, data: st.DataObject) -> None:
    """Every counted field of every operation equals physics.ops (cards built around ``kind``, any FFN/dtype)."""
    arch = data.draw(architectures(attention_kinds=(kind,)) | architectures())
    _assert_counts_match(
        arch,
        seed=data.draw(st.integers(0, 2**16)),
        cached=data.draw(st.integers(0, 6)),
        new=data.draw(st.integers(1, 6)),
        batch=data.draw(st.integers(1, 3)),
    )


@pytest.mark.parametrize("dtype", DTYPE_BYTES)
def test_counts_equal_physics_ops_in_every_dtype(dtype: str) -> None:
    """The fixed card with every layer type, all storage in ``dtype``: counts equal physics.ops."""
    _assert_counts_match(one_of_each(dtype), seed=3, cached=5, new=4, batch=2)


def test_moe_weight_bytes_follow_the_routing() -> None:
    """MoE expert weight bytes are those of the experts the routing touched (experts_touched from the kernel)."""
    arch = one_of_each()
    counter = _passes(arch, 0, 0, 1, 1)[0][0]
    experts = {op.group: op for op in counter.ops() if op.name == "moe.experts"}
    for group, op in experts.items():
        ffn = arch.layers[group].ffn
        per_expert = 3 * arch.hidden_size * ffn.expert_intermediate * DTYPE_BYTES[arch.dtypes.weights]
        assert op.weight_bytes == op.experts_touched * per_expert
        assert op.experts_touched == arch.layers[group].count * ffn.active_experts  # one token: k experts
