"""Instrumentation: what one forward pass of the reference kernel did, tallied per (layer group, operation).

Operation names are those of ``physics.ops.forward_ops`` so the two can be compared line by line. What is
counted, and how (the contract is the ``physics.ops`` docstring):

- ``matmul_flops``: every ``Tally.matmul`` product, 2·m·k·n (batched products: times the batch); a
  rank-1 update S + k·u^T is one product with k = 1, its accumulation included (an FMA).
- ``elementwise_flops``: the element-wise work the contract models (norms 4 per element, softmax 5 per
  score, SiLU·gate 4 per element, router softmax 3 per logit, recurrent decay 1 per state element,
  convolution 2 per tap).
- ``extra_elementwise_flops``: element-wise work the kernel does that the contract does not model (rotary
  embeddings, residual adds, q/k L2 norms, gates, MoE combine), reported and bounded, never priced.
- ``weight_bytes``: ``nbytes`` of the stored weight arrays an operation reads (each once per call).
- ``activation_bytes``: activation elements read and written x ``ACTIVATION_BYTES`` (the contract's bf16
  activations, whatever float type the kernel computes in): a product reads its input and writes its output;
  a norm reads and writes; an attention core reads its queries and writes its output; element-wise work
  fused into a neighbouring product moves nothing of its own.
- ``cache_bytes``: ``nbytes`` of the stored cache arrays read and written.
- ``launches``: numpy calls made by the counted primitives (a product is one per matrix of a stack, a softmax
  six), the kernel's analogue of kernel launches: a fixed cost each, measured by the timing harness.

Storage rounding (encoding values into their card dtype and back) is emulation and is not counted.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from prfaas_plan._frozen import frozen
from prfaas_plan.physics.ops import ACTIVATION_BYTES


@frozen
class OpCount:
    """Counted work of one operation, summed over the layers of a group (``group`` None: embed, lm_head)."""

    name: str
    group: int | None
    matmul_flops: float
    elementwise_flops: float
    weight_bytes: float
    activation_bytes: float
    cache_bytes: float
    extra_elementwise_flops: float
    launches: int
    experts_touched: int = 0  # MoE: distinct experts hit, summed over the group's layers
    expert_loads: tuple[tuple[int, ...], ...] = ()  # MoE: tokens routed to each expert, per layer call


class Tally:
    """The running counts of one (group, operation); the kernel calls its primitives."""

    __slots__ = (
        "activation_elements",
        "cache_bytes",
        "ew",
        "expert_loads",
        "experts_touched",
        "extra_ew",
        "launches",
        "mm",
        "wb",
    )

    def __init__(self) -> None:
        self.mm = 0
        self.ew = 0
        self.extra_ew = 0
        self.wb = 0
        self.activation_elements = 0
        self.cache_bytes = 0
        self.launches = 0
        self.experts_touched = 0
        self.expert_loads: list[tuple[int, ...]] = []

    def matmul(self, a: NDArray[Any], b: NDArray[Any]) -> NDArray[Any]:
        """``a @ b`` (numpy broadcasting over leading axes), counted 2·k FLOPs per output element and one launch
        per matrix of a stack (numpy calls the BLAS once for each)."""
        assert a.dtype == b.dtype, f"mixed-precision product {a.dtype} @ {b.dtype}"
        out: NDArray[Any] = np.matmul(a, b)
        self.mm += 2 * out.size * a.shape[-1]
        self.launches += out.size // (out.shape[-1] * out.shape[-2]) if out.ndim > 2 else 1
        return out

    def rank1_update(self, state: NDArray[Any], a: NDArray[Any], b: NDArray[Any], scratch: NDArray[Any]) -> None:
        """``state += a b^T`` in place (stacked: a (..., m), b (..., n), state (..., m, n)), counted as the product
        (m x 1) @ (1 x n), 2·m·n FLOPs, its accumulation included (an FMA); ``scratch`` is state-shaped."""
        np.multiply(a[..., :, None], b[..., None, :], out=scratch)
        state += scratch
        self.mm += 2 * state.size
        self.launches += 2

    def elementwise(self, flops: int, *, modelled: bool = True, calls: int = 1) -> None:
        """Element-wise work done in ``calls`` numpy calls: ``modelled`` by the contract, or extra (reported,
        not compared)."""
        if modelled:
            self.ew += flops
        else:
            self.extra_ew += flops
        self.launches += calls

    def route(self, chosen: NDArray[Any], experts: int) -> None:
        """Record one routing decision: ``chosen`` (tokens x top-k expert indices) as tokens per expert."""
        self.expert_loads.append(tuple(int(n) for n in np.bincount(chosen.ravel(), minlength=experts)))

    def weight(self, *stored: NDArray[Any]) -> None:
        """Read of stored weight arrays (their ``nbytes``)."""
        self.wb += sum(s.nbytes for s in stored)

    def weight_bytes(self, nbytes: int) -> None:
        """Read of ``nbytes`` of weights that are not a whole array (gathered embedding rows)."""
        self.wb += nbytes

    def activations(self, elements: int) -> None:
        """Activation elements read or written (priced at ``ACTIVATION_BYTES`` each)."""
        self.activation_elements += elements

    def cache(self, *stored: NDArray[Any]) -> None:
        """Read or write of stored cache arrays (their ``nbytes``)."""
        self.cache_bytes += sum(s.nbytes for s in stored)
        self.launches += 1


class Counter:
    """Tallies of one or more forward passes, keyed by (group, operation name), in first-touched order."""

    def __init__(self) -> None:
        self._tallies: dict[tuple[int | None, str], Tally] = {}

    def at(self, group: int | None, name: str) -> Tally:
        """The tally of ``name`` in layer group ``group`` (created on first use)."""
        key = (group, name)
        tally = self._tallies.get(key)
        if tally is None:
            tally = self._tallies[key] = Tally()
        return tally

    def ops(self) -> list[OpCount]:
        """Frozen per-operation counts."""
        return [
            OpCount(
                name=name,
                group=group,
                matmul_flops=float(t.mm),
                elementwise_flops=float(t.ew),
                weight_bytes=float(t.wb),
                activation_bytes=float(t.activation_elements * ACTIVATION_BYTES),
                cache_bytes=float(t.cache_bytes),
                extra_elementwise_flops=float(t.extra_ew),
                launches=t.launches,
                experts_touched=t.experts_touched,
                expert_loads=tuple(t.expert_loads),
            )
            for (group, name), t in self._tallies.items()
        ]

    @property
    def launches(self) -> int:
        """Counted primitive calls of every operation."""
        return sum(t.launches for t in self._tallies.values())
