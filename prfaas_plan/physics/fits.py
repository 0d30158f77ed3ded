"""How well each pool's cost curves match the points they were made from (the ``fit`` command, error bands):
a polynomial fit's residuals for measured profiles, a roofline calibration's residuals with leave-one-out
predictions for calibrated pools. Apart from ``physics.pools`` so that pricing a pool builds no fit report."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field

import numpy as np

from prfaas_plan._frozen import frozen
from prfaas_plan.physics.curves import fit_profile
from prfaas_plan.spec.hardware import ProfilePoints
from prfaas_plan.spec.scenario import ModelCard, Pool


@frozen
class FitReport:
    """How well one pool's cost curve matches its points: a polynomial fit's residuals, or a roofline
    calibration's residuals with leave-one-out predictions. Values in ``unit`` (s or bytes)."""

    name: str
    method: str
    provenance: str
    unit: str
    lengths_tokens: tuple[float, ...]
    given: tuple[float, ...]
    fitted: tuple[float, ...]
    leave_one_out: tuple[float, ...] = ()
    parameters: Mapping[str, float] = field(default_factory=dict, hash=False)
    source: str = ""


def _poly_report(name: str, points: ProfilePoints, unit: str) -> FitReport:
    curve = fit_profile(points)
    return FitReport(
        name=name,
        method=f"degree-{points.fit_degree} least squares",
        provenance=points.provenance,
        unit=unit,
        lengths_tokens=points.lengths_tokens,
        given=points.values,
        fitted=tuple(float(v) for v in curve(np.asarray(points.lengths_tokens))),
        parameters={f"c{k}": c for k, c in enumerate(curve.coefficients)},
        source=points.source,
    )


def pool_fit_reports(pool: Pool, card: ModelCard, role: str) -> list[FitReport]:
    """Fit reports of one pool: polynomial fits of measured points, or the calibration (with leave-one-out)
    of a calibrated roofline pool. A pure roofline pool has nothing fitted and returns no report."""
    reports: list[FitReport] = []
    if pool.method == "measured" and pool.profile is not None:
        reports.append(_poly_report(f"prefill {pool.hardware_key}", pool.profile.prefill, "s"))
        if role == "prfaas" and pool.profile.kv_cache is not None:
            reports.append(_poly_report(f"kv_cache {pool.hardware_key}", pool.profile.kv_cache, "bytes"))
    elif pool.method == "calibrated" and card.architecture is not None:
        from prfaas_plan.physics.calibration import calibrate
        from prfaas_plan.physics.roofline import Instance

        assert pool.calibration is not None and pool.calibration_accelerator is not None
        points = pool.calibration.prefill
        result = calibrate(
            card.architecture,
            Instance(accelerator=pool.calibration_accelerator, gpus=pool.calibration.gpus_per_instance),
            points.lengths_tokens,
            points.values,
            base=pool.roofline,
        )
        reports.append(
            FitReport(
                name=f"prefill {pool.calibration_accelerator.key} -> {pool.hardware_key} (roofline)",
                method="roofline calibration (least squares, leave-one-out)",
                provenance=points.provenance,
                unit="s",
                lengths_tokens=result.lengths_tokens,
                given=result.measured_s,
                fitted=result.fitted_s,
                leave_one_out=result.leave_one_out_s,
                parameters={
                    "compute_efficiency": result.params.compute_efficiency,
                    "memory_efficiency": result.params.memory_efficiency,
                    "overhead_s": result.params.overhead_s,
                },
                source=points.source,
            )
        )
    return reports
