"""`prfaas-plan validate kernel`: bad input exits 2 naming the problem; the JSON has the documented keys.

The full run (about half a minute) is exercised once, in tests/benchmarks/test_bench_kernel.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from prfaas_plan.cli.validate import kernel_payload
from prfaas_plan.reference.checks import CountChecks
from prfaas_plan.reference.machine import MachinePeaks
from prfaas_plan.reference.timing import TimingResult, TimingStudy
from tests.conftest import run_cli
from tests.strategies_models import one_of_each


def _peaks(**given: float) -> MachinePeaks:
    """Fixed machine peaks standing for a measurement (each rate overridable by keyword)."""
    rates: dict[str, float] = {
        "matmul_flop_per_s": 1e10,
        "memory_bytes_per_s": 1e10,
        "copy_bytes_per_s": 1e10,
        "elementwise_flop_per_s": 1e9,
        "launch_overhead_s": 1e-6,
    }
    return MachinePeaks(**(rates | given), steady=True, source="")  # type: ignore[arg-type]


def test_a_card_too_large_is_refused_with_exit_2_naming_the_limit() -> None:
    """The unshrunk Qwen3-Next card (80B parameters) is refused before anything runs."""
    result = run_cli("validate", "kernel", "--model", "qwen3-next-80b-a3b")
    assert result.returncode == 2
    assert "limit of 300M" in result.stderr and "--shrink" in result.stderr


def test_an_unknown_size_is_refused_with_exit_2() -> None:
    """--size must be small, medium or large."""
    result = run_cli("validate", "kernel", "--size", "huge")
    assert result.returncode == 2 and "--size" in result.stderr


def test_help_has_an_example() -> None:
    """The command documents itself with an example."""
    result = run_cli("validate", "kernel", "--help")
    assert result.returncode == 0 and "Example: prfaas-plan validate kernel" in result.stdout


def test_json_payload_has_the_documented_schema() -> None:
    """count_checks has the three verdicts; each timing case has case, predicted_s, measured_s and ratio."""
    verdicts = CountChecks(
        flops_exact=True, bytes_exact=True, kv_bytes_exact=True, cache_sufficient=True, contract_gaps=(), problems=()
    )
    peaks = _peaks()
    result = TimingResult(
        case="c",
        predicted_s=2.0,
        measured_s=1.0,
        roofline_s=1.5,
        launch_s=0.3,
        elementwise_s=0.2,
        launches=5,
        bound="compute",
    )
    payload = kernel_payload(
        verdicts, TimingStudy(arch=one_of_each(), peaks=peaks, results=(result,)), Path("p.yaml"), ["c"]
    )
    assert {"flops_exact", "kv_bytes_exact", "cache_sufficient"} <= payload["count_checks"].keys()
    assert {"case", "predicted_s", "measured_s", "ratio"} <= payload["timing"][0].keys()
    assert payload["timing"][0]["ratio"] == 2.0
    assert payload["median_abs_log_ratio"] > 0


def test_validate_gpu_without_a_device_exits_1_naming_why() -> None:
    """``validate gpu`` is the GPU timing entry point: on a machine without torch or a CUDA device it exits 1
    with one line saying which (no traceback); an unknown profile is an input error (exit 2)."""
    import importlib.util

    result = run_cli("validate", "gpu", "--hardware", "h200", "--size", "small")
    has_torch = importlib.util.find_spec("torch") is not None
    if result.returncode == 1:
        assert ("torch is not installed" in result.stderr) != has_torch or "no CUDA device" in result.stderr
    else:  # a machine with a GPU: one JSON object
        assert result.returncode == 0, result.stderr
        assert "median_abs_log_ratio" in result.stdout
    assert "Traceback" not in result.stderr
    unknown = run_cli("validate", "gpu", "--hardware", "no-such-accelerator")
    assert unknown.returncode == 2 and "--hardware" in unknown.stderr


def test_a_disturbed_weight_read_is_refused_before_a_profile_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A weight-read rate beyond io.hardware.MAX_MEASURED_MEMORY_EFFICIENCY times the dot product's is no cache
    effect: the command exits 1 saying the measurement was disturbed, and writes no profile that its own loader
    would refuse (the measurement is replaced here by one five times the dot product's rate)."""
    from typer.testing import CliRunner

    from prfaas_plan.cli.app import app
    from prfaas_plan.io.hardware import MAX_MEASURED_MEMORY_EFFICIENCY
    from prfaas_plan.reference import machine

    def disturbed(*args: object, **kwargs: object) -> MachinePeaks:
        return _peaks(weight_read_bytes_per_s=(MAX_MEASURED_MEMORY_EFFICIENCY + 1) * 1e10)

    monkeypatch.setattr(machine, "measure_peaks", disturbed)
    out = tmp_path / "this-machine.yaml"
    result = CliRunner().invoke(app, ["validate", "kernel", "--json", "--profile-out", str(out)])
    assert result.exit_code == 1, result.output
    assert "disturbed" in result.output and "5.00 x" in result.output
    assert "count checks, which time nothing: 4 of 4 passed" in result.output
    assert not out.exists()


def test_the_profile_timed_against_is_the_one_just_written_even_while_it_is_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """review21 F2: `validate kernel` writes its measured profile, then times against it as the loader reads it
    back. Under --table N the file is held until the command has printed (report.files.hold_commits); the read-back
    takes the held file, not the target (absent: "file not found"; an older profile: timed against the wrong
    peaks). The measurement and the timing are replaced here by fixed peaks and a stop once the accelerator is
    read."""
    from typer.testing import CliRunner

    from prfaas_plan.cli.app import app
    from prfaas_plan.reference import machine, timing
    from prfaas_plan.report import files

    peaks = _peaks(matmul_flop_per_s=3e10, weight_read_bytes_per_s=0.8e10)
    read: list[float] = []

    class Stop(Exception):
        pass

    def timed(_base: object, _size: object, accelerator: object, *_args: object) -> None:
        read.append(accelerator.dense_flop_per_s["fp32"])  # type: ignore[attr-defined]
        raise Stop

    monkeypatch.setattr(machine, "measure_peaks", lambda *a, **k: peaks)
    monkeypatch.setattr(timing, "run_timing", timed)
    out = tmp_path / "this-machine.yaml"
    out.write_text("")  # an empty file: replaced at a commit, never read
    files.hold_commits()
    try:
        result = CliRunner().invoke(app, ["validate", "kernel", "--profile-out", str(out)])
        assert isinstance(result.exception, Stop), result.output
        assert read == [pytest.approx(3e10)] and out.read_text() == ""
    finally:
        files.release_commits(commit=False)
    assert list(tmp_path.iterdir()) == [out]
