"""Benchmark result readers (``io.bench_results``): every format's example file, and one clear line (file, line,
key) with exit status 2 for bad or partial files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from prfaas_plan.errors import InputError
from prfaas_plan.io.bench_results import BENCH_LIMITS, read_bench_file
from tests.conftest import REPO, run_cli

FIXTURES = REPO / "tests" / "fixtures" / "bench_results"
VLLM = FIXTURES / "vllm-bench-serve-minimax-m2.5-conc4.json"  # real (InferenceX, Apache-2.0)
SGLANG = FIXTURES / "sglang-bench-serving-llama-3.3-70b-4xh200.jsonl"  # real (datacrunch-research, MIT)
ONE_BATCH = FIXTURES / "synthetic-sglang-bench-one-batch.jsonl"  # SYNTHETIC: hand-written layout
AIPERF = FIXTURES / "synthetic-aiperf-profile-export.json"  # SYNTHETIC: hand-written layout


def test_vllm_real_file() -> None:
    """A real vLLM run at concurrency 4: TTFT used as a prefill (light load), median ITL at batch ~4."""
    got = read_bench_file(VLLM)
    assert got.format == "vllm-serving" and got.runs == 1 and not got.synthetic
    prefill, decode = got.measurements
    assert prefill.phase == "prefill" and prefill.tokens == pytest.approx(40960 / 40)
    assert prefill.measured_s == pytest.approx(0.1171287115837913)
    assert decode.phase == "decode" and decode.batch == 4  # 258.77 tok/s x 15.34 ms = 3.97
    assert decode.tokens == pytest.approx(1024 + 1024 / 2)
    assert len(got.sha256) == 64


def test_sglang_real_file() -> None:
    """A real SGLang sweep of request rates: TTFT used only where requests rarely overlap (Little's law)."""
    got = read_bench_file(SGLANG)
    assert got.format == "sglang-bench-serving" and got.runs == 7
    phases = [m.phase for m in got.measurements]
    assert phases.count("prefill") == 2 and phases.count("decode") == 7
    assert len(got.skipped) == 5 and all("Little's law" in s for s in got.skipped)
    batches = [m.batch for m in got.measurements if m.phase == "decode"]
    assert batches[:3] == sorted(batches[:3])  # more load, larger batch


def test_synthetic_files() -> None:
    """The synthetic examples (hand-written, not measurements) read in their documented layouts."""
    one = read_bench_file(ONE_BATCH)
    assert one.format == "sglang-bench-one-batch"
    assert [m.phase for m in one.measurements] == ["prefill", "decode", "decode", "prefill", "decode"]
    assert not any(m.includes_request_overhead for m in one.measurements)
    aiperf = read_bench_file(AIPERF)
    assert aiperf.format == "aiperf" and aiperf.synthetic
    assert [m.batch for m in aiperf.measurements if m.phase == "decode"] == [4]


def _vllm(**changes: object) -> str:
    data = json.loads(VLLM.read_text())
    for key, value in changes.items():
        if value is ...:
            data.pop(key)
        else:
            data[key] = value
    return json.dumps(data)


BAD = {
    "missing-key": (_vllm(mean_ttft_ms=..., median_ttft_ms=...), "mean_ttft_ms: missing"),
    "wrong-type": (_vllm(completed="forty"), "completed: expected a number, got str"),
    "negative": (_vllm(total_input_tokens=-5), "total_input_tokens: must be in (0, "),
    "nan": (_vllm(mean_ttft_ms="NaN").replace('"NaN"', "NaN"), "mean_ttft_ms: is NaN"),
    "empty": ("", "empty"),
    "garbage": ("\x7fELF garbage }{", "malformed JSON"),
    "list": ("[1, 2, 3]", "expected a JSON object, got list"),
    "unknown-format": (json.dumps({"latency": 1.0, "input_throughput": 5.0}), "not a result of a known benchmark"),
    "mixed-formats": (
        SGLANG.read_text().splitlines()[0] + "\n" + ONE_BATCH.read_text().splitlines()[0] + "\n",
        "one format per file",
    ),
    "aiperf-metric-not-object": (
        json.dumps({**json.loads(AIPERF.read_text()), "time_to_first_token": 5}),
        "time_to_first_token: expected a metric object",
    ),
    "one-batch-no-decode": (
        json.dumps({k: v for k, v in json.loads(ONE_BATCH.read_text().splitlines()[0]).items() if "decode" not in k}),
        "median_decode_latency: missing",
    ),
    "deep": ("[" * 100 + "]" * 100, "nested deeper"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_file_names_file_and_key(tmp_path: Path, name: str) -> None:
    """Each bad or partial file: InputError naming the file and what is wrong."""
    text, expected = BAD[name]
    path = tmp_path / f"{name}.json"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        read_bench_file(path)
    message = str(info.value)
    assert str(path) in message and expected in message, message
    assert len(info.value.problems) == 1


def test_huge_file_refused_unread(tmp_path: Path) -> None:
    """A (sparse) file over the bound is refused before it is read."""
    path = tmp_path / "huge.json"
    with open(path, "wb") as f:
        f.truncate(BENCH_LIMITS.max_bytes + 1)
    with pytest.raises(InputError, match=r"huge\.json"):
        read_bench_file(path)


def test_fifo_refused(tmp_path: Path) -> None:
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    with pytest.raises(InputError, match=r"pipe\.json"):
        read_bench_file(path)


def test_cli_bad_file_exit_2_one_line(tmp_path: Path) -> None:
    """The command: exit 2, one line on stderr naming the file and key, no traceback."""
    path = tmp_path / "partial.json"
    path.write_text(_vllm(total_output_tokens=...))
    done = run_cli("calibrate", str(path), "--model", "minimax-m2.5", "--hardware", "h200", "--gpus", "8")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "total_output_tokens" in lines[0], done.stderr
    assert "Traceback" not in done.stderr
