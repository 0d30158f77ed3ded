"""Run the cluster on a workload: static, or in a changing world (``sim.dynamic.DynamicWorld``: lost and
restored instances, the dual-timescale scheduler, caches that move) when the configuration or the workload
asks for it; with a decode step that follows the batch, the decoder ``sim.batch_decode.BatchDecode``. The
cluster module imports neither."""

from __future__ import annotations

import math
from collections.abc import Callable

from prfaas_plan.sim.batch_decode import BatchDecode
from prfaas_plan.sim.cluster import Cluster, ClusterConfig
from prfaas_plan.sim.dynamic import DynamicWorld
from prfaas_plan.sim.records import SimResult
from prfaas_plan.sim.workload import Workload


def simulate(
    config: ClusterConfig,
    workload: Workload,
    *,
    horizon_s: float = math.inf,
    progress: Callable[[int], None] | None = None,
) -> SimResult:
    """Run the cluster on a workload until every request has finished or until ``horizon_s``.

    A stage model whose decode step varies with the batch runs ``sim.batch_decode`` (the step follows each
    instance's batch; a changing world keeps the fixed step T_decode). Deterministic: the workload carries
    all randomness. ``progress`` (optional) is called with the number of arrivals so far, every
    ``PROGRESS_EVERY`` arrivals. Raises InputError when the plan leaves routed traffic without servers or a
    request can never be admitted to decode.
    """
    if config.dynamic or workload.moves_caches:
        return Cluster(config, workload, progress, DynamicWorld()).run(horizon_s)
    if not config.model.decode_step_flat:  # the decode step follows each instance's batch
        return Cluster(config, workload, progress, decoder=BatchDecode()).run(horizon_s)
    return Cluster(config, workload, progress).run(horizon_s)
