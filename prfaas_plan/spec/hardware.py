"""What an accelerator is (datasheet), and what was measured or derived of a model running on it (profile)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Provenance = Literal["measured", "derived", "assumed"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Accelerator:
    """Datasheet figures of one accelerator, SI units. Tensor rates are dense (not 2:4-sparse)."""

    key: str
    name: str
    memory_bytes: float
    hbm_bandwidth_bytes_per_s: float
    dense_flop_per_s: Mapping[str, float] = field(hash=False)
    scale_up_bandwidth_bytes_per_s: float | None = None
    scale_out_bandwidth_bytes_per_s: float | None = None
    tdp_w: float | None = None
    price_usd_per_gpu_hour: float | None = None
    confidence: str = "medium"
    source: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfilePoints:
    """Measured or derived (length, value) points and the polynomial degree to fit through them.

    Values are SI: seconds for prefill latency, bytes for KV-cache size.
    """

    lengths_tokens: tuple[float, ...]
    values: tuple[float, ...]
    fit_degree: int
    provenance: Provenance
    source: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DecodeProfile:
    """Decode capacity of one instance: at most ``max_batch`` concurrent requests, one token each per step."""

    max_batch: int
    step_time_s: float
    provenance: Provenance
    source: str


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceProfile:
    """What is known of one model on one instance (accelerator x GPUs): prefill curve, KV size, decode."""

    model: str
    gpus_per_instance: int
    engine: str
    prefill: ProfilePoints
    kv_cache: ProfilePoints | None = None
    decode: DecodeProfile | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HardwareProfile:
    """One ``hardware_profiles/*.yaml`` file: the accelerator and its (model, instance) profiles."""

    accelerator: Accelerator
    profiles: tuple[InstanceProfile, ...] = ()
    file: str = ""

    def find(self, model: str, gpus_per_instance: int) -> InstanceProfile | None:
        """The profile for ``model`` on ``gpus_per_instance`` GPUs, if the file has one."""
        for profile in self.profiles:
            if profile.model == model and profile.gpus_per_instance == gpus_per_instance:
                return profile
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class RooflineParams:
    """Achieved fractions of peak and the fixed per-pass overhead.

    Defaults: e_c = 0.6 and e_m = 0.8 are the typical sustained fractions of dense tensor peak and HBM
    bandwidth for large GEMMs and streaming reads on Hopper-class parts (aiconfigurator's H200 system file
    scales memory bandwidth by 0.8, https://github.com/ai-dynamo/aiconfigurator); e_n = 0.7 for NCCL ring all-reduce
    bus bandwidth against the NVLink figure; overhead 0 (measured single-request latencies carry a large
    fixed part, about 0.35-0.45 s on the paper's setup, which only a calibration can supply). Assumed, not
    measured: calibrate them where measured points exist.

    ``overhead_s`` is charged once per prefill request (scheduling, launch, sampling: what the paper's 1K
    latencies mostly are); ``decode_step_overhead_s`` once per decode step (a CUDA-graph replay costs tens of
    microseconds; 0 by default). A calibration on prefill points fits the first, never the second.
    """

    compute_efficiency: float = 0.6
    memory_efficiency: float = 0.8
    communication_efficiency: float = 0.7
    overhead_s: float = 0.0
    decode_step_overhead_s: float = 0.0
    source: str = "assumed defaults (see RooflineParams docstring)"
