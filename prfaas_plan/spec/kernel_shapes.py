"""An accelerator's measured kernel shape curves (the ``kernel_shapes`` section of a hardware profile).

Apart from ``spec.hardware`` (which names it lazily), so that reading a profile without kernel shapes never builds
the class (start-up time).
"""

from __future__ import annotations

from prfaas_plan._frozen import frozen

#: The ``RooflineParams`` fields a hardware profile's kernel shapes set: measurements of one accelerator.
SHAPE_FIELDS = ("gemm_half_rows", "attention_half_context_tokens", "moe_load_skew", "memory_efficiency")
#: How ``RooflineParams.with_kernel_shapes`` names the curves it put into a source (``kernel_shapes_note``).
SHAPES_NOTE = "; kernel shapes from the hardware profile"


@frozen
class KernelShapes:
    """Measured shape curves of an accelerator's kernels (``RooflineParams`` defines each): ``gemm_half_rows``
    is the row count at which a GEMM reaches half its large-M rate, ``attention_half_context_tokens`` the mean
    context (keys per query) at which an attention core reaches half its long-context rate, and
    ``moe_load_skew`` the busiest expert's excess share of the routed tokens over the mean."""

    gemm_half_rows: float
    source: str
    attention_half_context_tokens: float = 0.0
    moe_load_skew: float = 0.0
    #: Sustained fraction of the profile's memory bandwidth that one-row products reach reading weights
    #: (``RooflineParams.memory_efficiency``); None where not measured (the serving default applies).
    memory_efficiency: float | None = None
