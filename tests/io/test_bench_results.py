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
# real (ai-dynamo/aiperf example artifacts, AIPerf 0.1.1, Apache-2.0): one run exported as JSON and as CSV
AIPERF_01_JSON = FIXTURES / "aiperf-0.1.1-profile-export-gpt-oss-20b-conc100.json"
AIPERF_01_CSV = FIXTURES / "aiperf-0.1.1-profile-export-gpt-oss-20b-conc100.csv"
# GenAI-Perf's CSV layout (its documented output: "Time To First Token", quoted thousands separators, units
# "per sec"); the figures are this test's, not a measurement.
GENAI_PERF_CSV = """Metric,avg,min,max,p99,p95,p90,p75,p50,p25
Time To First Token (ms),"1,146.31",249.48,"3,485.23","3,457.97","3,349.56","3,215.06","1,330.93",640.07,286.52
Time To Second Token (ms),26.05,0.00,133.51,96.12,36.56,34.88,34.35,33.55,1.78
Request Latency (ms),"6,406.20","5,371.47","9,608.72","9,436.13","9,046.58","9,028.16","6,549.60","5,690.23","5,493.63"
Inter Token Latency (ms),30.35,27.59,35.60,35.23,33.88,32.53,31.05,30.13,29.04
Output Sequence Length (tokens),174.45,164.00,187.00,186.22,183.10,180.10,177.00,174.00,171.75
Input Sequence Length (tokens),"3,000.05","2,999.00","3,001.00","3,001.00","3,001.00",\
"3,000.00","3,000.00","3,000.00","3,000.00"

Metric,Value
Output Token Throughput (per sec),5.77
Request Throughput (per sec),0.15
Request Count (count),40.00
"""


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


def test_aiperf_01_real_files_json_and_csv_agree() -> None:
    """AIPerf 0.1's JSON (metrics under ``records``, TTFT tagged ``ttft``) and its CSV export of the same real run
    (concurrency 100) read alike: TTFT refused as a prefill (22 requests in their TTFT), the median ITL as one
    decode step at batch 2320.7 tok/s x 27.6 ms = 64."""
    from_json, from_csv = read_bench_file(AIPERF_01_JSON), read_bench_file(AIPERF_01_CSV)
    for got in (from_json, from_csv):
        assert got.format == "aiperf" and got.runs == 1 and not got.synthetic
        (decode,) = got.measurements
        assert decode.phase == "decode" and decode.batch == 64
        assert decode.tokens == pytest.approx(550 + 242.97 / 2, abs=0.01)
        assert decode.measured_s == pytest.approx(0.027615, abs=1e-5)  # the CSV rounds to 0.01 ms
        assert len(got.skipped) == 1 and "22.38 requests in their TTFT" in got.skipped[0]
    assert from_json.measurements[0].statistic == "records.inter_token_latency.p50"
    assert from_csv.measurements[0].statistic == "Inter Token Latency (ms).p50"
    assert "concurrency 100" in from_json.measurements[0].assumption
    assert "concurrency not recorded" in from_csv.measurements[0].assumption


def test_vllm_result_without_end_to_end_latency(tmp_path: Path) -> None:
    """A vLLM serving result from before the end-to-end latency keys (vLLM < 0.6) is still read as one, alike."""
    data = {k: v for k, v in json.loads(VLLM.read_text()).items() if "e2el" not in k}
    path = tmp_path / "old-vllm.json"
    path.write_text(json.dumps(data))
    old, new = read_bench_file(path), read_bench_file(VLLM)
    assert old.format == "vllm-serving"
    assert [(m.phase, m.batch, m.measured_s) for m in old.measurements] == [
        (m.phase, m.batch, m.measured_s) for m in new.measurements
    ]


def test_pretty_printed_jsonl_reads_alike(tmp_path: Path) -> None:
    """The real SGLang JSONL pretty-printed (as ``jq .`` prints it: one indented object after another) reads as the
    JSONL does, each run named by the line it starts on; a stream with anything else in it is still refused."""
    runs = [json.loads(line) for line in SGLANG.read_text().splitlines() if line.strip()]
    pretty = tmp_path / "pretty.json"
    pretty.write_text("".join(json.dumps(run, indent=3) + "\n" for run in runs))
    want, got = read_bench_file(SGLANG), read_bench_file(pretty)
    assert got.runs == want.runs == 7
    assert [(m.phase, m.measured_s) for m in got.measurements] == [(m.phase, m.measured_s) for m in want.measurements]
    per_run = len(json.dumps(runs[0], indent=3).splitlines())
    assert got.measurements[0].run == 1 and {m.run for m in got.measurements} >= {1, 1 + per_run}
    broken = tmp_path / "broken.json"
    broken.write_text(pretty.read_text() + "not json\n")
    with pytest.raises(InputError, match="malformed JSON"):
        read_bench_file(broken)


def test_genai_perf_csv_layout(tmp_path: Path) -> None:
    """GenAI-Perf's CSV: thousands separators inside quotes, "Time To First Token", "per sec" throughputs. At
    0.15 req/s x 1.146 s = 0.17 requests in their TTFT the TTFT is read as a prefill of 3,000 tokens."""
    path = tmp_path / "profile_export_genai_perf.csv"
    path.write_text(GENAI_PERF_CSV)
    got = read_bench_file(path)
    prefill, decode = got.measurements
    assert prefill.phase == "prefill" and prefill.tokens == pytest.approx(3000.05)
    assert prefill.measured_s == pytest.approx(1.14631)
    assert prefill.statistic == "Time To First Token (ms).avg"
    assert decode.batch == 1 and decode.measured_s == pytest.approx(0.03013)  # 5.77 tok/s x 30.13 ms = 0.17


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
    "aiperf-01-ttft-not-object": (
        AIPERF_01_JSON.read_text().replace('"ttft": {', '"ttft": 5, "was_ttft": {'),
        "records.ttft: expected a metric object",
    ),
    "csv-row-before-header": ("Metric,avg\n\nTime To First Token (ms),120\n", "comes before any 'Metric,...' header"),
    "csv-text-number": (
        GENAI_PERF_CSV.replace('"1,146.31"', "fast"),
        ":2 Time To First Token (ms).avg: expected a number, got str",
    ),
    "csv-missing-input-length": (
        "\n".join(line for line in GENAI_PERF_CSV.splitlines() if not line.startswith("Input")),
        "input_sequence_length: missing (no row named like 'Input sequence length (unit)')",
    ),
    "aiperf-01-missing-length": (
        AIPERF_01_JSON.read_text().replace('"input_sequence_length": {', '"was_isl": {'),
        "records.input_sequence_length: missing",
    ),
    "csv-too-many-rows": (
        "Metric,avg\n" + "".join(f"M{i} (ms),1\n" for i in range(10_001)),
        "more than 10,000 metric rows",
    ),
    "aiperf-per-request-records": (
        '{"metadata": {"x_request_id": "a"}, "metrics": {"ttft": {"value": 5.0, "unit": "ms"}}, "error": null}\n' * 2,
        "AIPerf's per-request records (profile_export.jsonl)",
    ),
    "vllm-latency-benchmark": (
        json.dumps({"avg_latency": 1.2, "latencies": [1.2, 1.3], "percentiles": {"50": 1.2}}),
        "vLLM's benchmark_latency output",
    ),
    "csv-metric-twice": (GENAI_PERF_CSV.replace("Time To Second", "Time To First"), "a second row of this metric"),
    "csv-long-name": ("Metric,avg\n" + "y" * 5000 + " (ms),1\n", "longer than 200 characters"),
    "csv-unknown-time-unit": (
        GENAI_PERF_CSV.replace("Time To First Token (ms)", "Time To First Token (fortnights)"),
        "unknown time unit",
    ),
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


def _with_second(lines: list[str], after: str, member: str) -> list[str]:
    """``lines`` with ``member`` inserted after the first line holding ``after``."""
    i = next(n for n, line in enumerate(lines) if after in line)
    return [*lines[: i + 1], member, *lines[i + 1 :]]


def test_a_repeated_json_key_is_refused_where_it_is(tmp_path: Path) -> None:
    """A key given twice in one object (json keeps the last, silently) is refused in every layout: the file, the
    repeated member's line and dotted path, and the line it was first given on, as the YAML reader says it. A
    second mean_ttft_ms of 5000 ms once made the run too loaded to time a prefill, with rc 0."""
    run = json.loads(VLLM.read_text())
    one = json.dumps(run)
    pretty = json.dumps(run, indent=2).splitlines()
    twice = _with_second(pretty, '"completed"', '  "completed": 7,')
    first = next(n for n, line in enumerate(pretty, start=1) if '"completed"' in line)
    aiperf = json.dumps(json.loads(AIPERF.read_text()), indent=2).splitlines()
    ttft = next(n for n, line in enumerate(aiperf) if '"time_to_first_token"' in line)
    mean = next(n for n, line in enumerate(aiperf, start=1) if n > ttft and '"avg"' in line)  # its avg's line
    avg = [*aiperf[:mean], '    "avg": 1.0,', *aiperf[mean:]]
    cases = {  # name: (text, line, field, first line)
        "one-line": (one[:-1] + ', "mean_ttft_ms": 5000.0}', 1, "mean_ttft_ms", 1),
        "pretty": ("\n".join(twice), first + 1, "completed", first),
        "jsonl": (f'{one}\n{one[:-1]}, "duration": 3}}\n{one}\n', 2, "duration", 2),
        "pretty-stream": ("\n".join([*pretty, *twice]), len(pretty) + first + 1, "completed", len(pretty) + first),
        "nested": ("\n".join(avg), mean + 1, "time_to_first_token.avg", mean),
    }
    for name, (text, line, field, first_line) in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(text)
        with pytest.raises(InputError) as info:
            read_bench_file(path)
        expected = f"{path}:{line} {field}: duplicate key (first given on line {first_line})"
        assert str(info.value) == expected, name
    done = run_cli("calibrate", str(tmp_path / "one-line.json"), "--model", "minimax-m2.5", "--hardware", "h200")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert (
        done.stderr.strip()
        == f"error: {tmp_path / 'one-line.json'}:1 mean_ttft_ms: duplicate key (first given on line 1)"
    )


def test_a_csv_export_with_another_separator_is_named_as_such(tmp_path: Path) -> None:
    """AIPerf's CSV export rewritten with ';' separators is named as a CSV with the wrong separator, not as
    malformed JSON (what it was called)."""
    source = REPO / "tests" / "fixtures" / "bench_results" / "aiperf-0.1.1-profile-export-gpt-oss-20b-conc100.csv"
    for sep in (";", "\t"):
        path = tmp_path / "export.csv"
        path.write_text(source.read_text().replace(",", sep))
        with pytest.raises(InputError, match=r"CSV export with another separator than the comma") as caught:
            read_bench_file(path)
        assert "JSON" not in str(caught.value)
