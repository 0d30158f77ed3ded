"""Speed of the reference kernel, and its time against the roofline. Figures only, never pass/fail on time:

    python3 -m pytest tests/benchmarks/test_bench_kernel.py --benchmark-enable \
        --benchmark-columns=min,median,mean,max,rounds

The end-to-end run's predicted and measured seconds per case, and the median |ln(predicted/measured)|, are in
each benchmark's ``extra_info`` (``--benchmark-json``) and come from `prfaas-plan validate kernel --json`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from prfaas_plan.io.models import load_model_card
from prfaas_plan.reference.cache import Cache
from prfaas_plan.reference.conditions import steady
from prfaas_plan.reference.kernel import decode, prefill
from prfaas_plan.reference.model import ReferenceModel, build_model
from prfaas_plan.reference.timing import timing_architecture
from tests.conftest import REPO


@pytest.fixture(scope="module")
def small_model() -> ReferenceModel:
    """Qwen3-Next shrunk to the 'small' timing caps (40M parameters, fp32), float32 compute."""
    arch = load_model_card(REPO / "workloads" / "models" / "qwen3-next-80b-a3b.yaml").architecture
    assert arch is not None
    return build_model(timing_architecture(arch, "small"), np.random.default_rng(0), compute=np.float32)


def test_prefill_128_tokens(benchmark: BenchmarkFixture, small_model: ReferenceModel) -> None:
    """One prefill of 128 tokens on the small timing card (BLAS on one thread, heap retained)."""
    tokens = np.random.default_rng(1).integers(0, small_model.arch.vocab_size, size=128)
    with steady():
        logits, cache = benchmark(prefill, small_model, tokens)
    assert cache.length == 128 and np.all(np.isfinite(logits))


def test_decode_step_after_512_tokens(benchmark: BenchmarkFixture, small_model: ReferenceModel) -> None:
    """One decode step of one sequence with 512 tokens cached (the cache copied, untimed, before each step)."""
    _, cached = prefill(small_model, np.random.default_rng(2).integers(0, small_model.arch.vocab_size, size=512))

    def setup() -> tuple[tuple[ReferenceModel, list[Cache], list[int]], dict[str, object]]:
        return (small_model, [cached.copy()], [7]), {}

    with steady():
        logits = benchmark.pedantic(decode, setup=setup, rounds=5, iterations=1)
    assert logits.shape == (1, small_model.arch.vocab_size)


def test_validate_kernel_end_to_end(benchmark: BenchmarkFixture, tmp_path: Path) -> None:
    """`prfaas-plan validate kernel --json` in a fresh interpreter: count checks, machine peaks, timing cases."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    profile = tmp_path / "this-machine.yaml"

    def run() -> dict[str, object]:
        out = subprocess.run(
            [sys.executable, "-m", "prfaas_plan", "validate", "kernel", "--json", "--profile-out", str(profile)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        payload: dict[str, object] = json.loads(out.stdout)
        return payload

    payload = benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info.update(payload)
    assert payload["count_checks"] == {
        "flops_exact": True,
        "kv_bytes_exact": True,
        "cache_sufficient": True,
        "bytes_exact": True,
    }
    assert profile.is_file()
