"""Tests of prfaas_plan.io.traces: the shipped traces against their recorded statistics, prefix caching, and every
bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from prfaas_plan.errors import InputError
from prfaas_plan.io.traces import MAX_PROBLEMS, read_trace
from prfaas_plan.spec.trace import Trace
from tests.conftest import TRACES


def _problems(path: Path, *, prefix_cache: bool = False) -> list[str]:
    """The problem lines a bad trace is refused with."""
    with pytest.raises(InputError) as caught:
        read_trace(path, prefix_cache=prefix_cache)
    return [str(problem) for problem in caught.value.problems]


def _jsonl(path: Path, records: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def _request(timestamp: float, input_length: object = 1000, output_length: object = 100) -> dict[str, object]:
    return {"timestamp": timestamp, "input_length": input_length, "output_length": output_length}


# -- the shipped traces (workloads/traces/PROVENANCE.md) ----------------------------------------------------
# Statistics computed independently of this reader when the traces were collected (percentiles with linear
# interpolation); Mooncake's FAST25-release/README.md gives the same request counts and mean lengths.


@pytest.mark.parametrize(
    ("name", "rows", "span_s", "rate", "input_mean", "input_median", "input_p90", "output_mean"),
    [
        ("conversation_trace.jsonl", 12_031, 3_537.0, 3.401, 12_035, 6_909, 27_367, 342.6),
        ("synthetic_trace.jsonl", 3_993, 1_022.0, 3.907, 15_325, 11_587, 38_611, 149.1),
        ("AzureLLMInferenceTrace_code.csv", 8_819, 3_435.9, 2.567, 2_048, 1_469, 5_188, 27.9),
        ("AzureLLMInferenceTrace_conv.csv", 19_366, 3_501.7, 5.530, 1_155, 1_020, 2_734, 211.1),
    ],
)
def test_real_traces_match_sources_table(
    name: str,
    rows: int,
    span_s: float,
    rate: float,
    input_mean: float,
    input_median: float,
    input_p90: float,
    output_mean: float,
) -> None:
    """Row count, span, mean rate and length statistics agree with the recorded figures to the digits given."""
    trace = read_trace(TRACES / name)
    assert trace.n_requests == rows
    assert round(trace.duration_s, 1) == span_s
    assert round(trace.mean_rate_req_per_s, 3) == rate
    assert round(float(trace.input_tokens.mean())) == input_mean
    assert np.median(trace.input_tokens) == input_median
    # The recorded P90s are rounded to whole tokens; the Azure conv P90 is 2,734.5, recorded as 2,734.
    assert abs(np.percentile(trace.input_tokens, 90) - input_p90) <= 0.6
    assert round(float(trace.output_tokens.mean()), 1) == output_mean
    assert trace.arrival_s[0] == 0.0
    assert np.all(np.diff(trace.arrival_s) >= 0.0)
    assert trace.cached_tokens is None
    assert trace.uncached_tokens is trace.input_tokens
    assert trace.source == str(TRACES / name)
    assert trace.interarrival_scv > 0.0


@pytest.mark.parametrize(
    ("name", "mean", "median", "p90", "p99", "token_hit_ratio", "total_blocks"),
    [
        ("conversation_trace.jsonl", 7_539, 2_470, 19_012, 71_888, 0.3736, 288_500),
        ("synthetic_trace.jsonl", 5_345, 374, 19_176, 49_769, 0.6512, 121_877),
    ],
)
def test_mooncake_prefix_cache_matches_sources(
    name: str, mean: float, median: float, p90: float, p99: float, token_hit_ratio: float, total_blocks: int
) -> None:
    """An infinite prefix cache replayed in arrival order gives the recorded uncached-length statistics."""
    trace = read_trace(TRACES / name, prefix_cache=True)
    assert trace.cached_tokens is not None
    uncached = trace.uncached_tokens
    assert np.all((trace.cached_tokens >= 0) & (trace.cached_tokens <= trace.input_tokens))
    # The recorded conversation mean is 7,539; the replay gives 7,538.48 while matching every other
    # recorded figure (blocks, unique blocks, both hit ratios, median, P90, P99), so allow one token.
    assert abs(float(uncached.mean()) - mean) < 1.0
    assert np.median(uncached) == median
    assert round(float(np.percentile(uncached, 90))) == p90
    assert round(float(np.percentile(uncached, 99))) == p99
    assert round(1.0 - uncached.sum() / trace.input_tokens.sum(), 4) == token_hit_ratio
    n_blocks = -(-trace.input_tokens // 512)  # ceil(input / 512) blocks per request (Mooncake's 512-token blocks)
    assert int(n_blocks.sum()) == total_blocks


# -- small well-formed traces --------------------------------------------------------------------------------


def test_prefix_cache_counts_only_leading_blocks_seen_in_earlier_requests(tmp_path: Path) -> None:
    """A block hits only if it and all blocks before it appeared in an earlier request; cached tokens are
    capped at the input length."""
    path = _jsonl(
        tmp_path / "t.jsonl",
        [
            {**_request(0, 1500), "hash_ids": [1, 2, 3]},
            {**_request(10, 1400), "hash_ids": [1, 2, 4]},  # blocks 1, 2 hit -> 1024
            {**_request(20, 1500), "hash_ids": [5, 1, 2]},  # block 5 is new, so nothing after it counts
            {**_request(30, 1000), "hash_ids": [1, 2, 3]},  # 3 hits = 1536 > 1000 -> capped at 1000
            {**_request(40, 1024), "hash_ids": [7, 7]},  # a block repeated inside one request is no hit
        ],
    )
    trace = read_trace(path, prefix_cache=True)
    assert trace.cached_tokens is not None
    assert trace.cached_tokens.tolist() == [0, 1024, 0, 1000, 0]
    assert trace.uncached_tokens.tolist() == [1500, 376, 1500, 0, 1024]
    assert trace.arrival_s.tolist() == [0.0, 0.01, 0.02, 0.03, 0.04]
    assert read_trace(path).cached_tokens is None


def test_mooncake_times_are_seconds_since_the_first_request(tmp_path: Path) -> None:
    """Millisecond timestamps become seconds relative to the first; blank lines are ignored."""
    path = _jsonl(tmp_path / "t.jsonl", [_request(5000), "", _request(5500), _request(5500.0, 512.0), _request(7000)])
    trace = read_trace(path)
    assert trace.arrival_s.tolist() == [0.0, 0.5, 0.5, 2.0]
    assert trace.input_tokens.tolist() == [1000, 1000, 512, 1000]
    assert trace.duration_s == 2.0
    assert trace.mean_rate_req_per_s == 2.0
    assert trace.interarrival_scv == pytest.approx(np.var([0.5, 0, 1.5]) / np.mean([0.5, 0, 1.5]) ** 2)


def test_azure_timestamps_keep_100ns_digits_across_midnight(tmp_path: Path) -> None:
    """Seven fractional digits are parsed exactly enough to resolve 100 ns, also across a day boundary."""
    path = tmp_path / "t.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 23:59:59.9999999,100,10\n"
        "2023-11-17 00:00:00.0000001,200,20\n"
        "2023-11-17 00:00:01,300,30\n"
    )
    trace = read_trace(path)
    assert trace.arrival_s[1] == pytest.approx(2e-7, abs=1e-10)
    assert trace.arrival_s[2] == pytest.approx(1.0000001, abs=1e-10)
    assert trace.input_tokens.tolist() == [100, 200, 300]
    assert trace.output_tokens.tolist() == [10, 20, 30]


def test_azure_columns_in_any_order(tmp_path: Path) -> None:
    """Columns are found by name, so their order and extra columns do not matter."""
    path = tmp_path / "t.csv"
    path.write_text("GeneratedTokens,Extra,TIMESTAMP,ContextTokens\n7,x,2023-11-16 18:00:00.5,70\n")
    trace = read_trace(path)
    assert (trace.input_tokens.tolist(), trace.output_tokens.tolist()) == ([70], [7])


def test_trace_is_frozen_with_read_only_arrays(tmp_path: Path) -> None:
    """A read trace is an immutable value."""
    trace = read_trace(_jsonl(tmp_path / "t.jsonl", [_request(0), _request(1000)]))
    assert isinstance(trace, Trace)
    with pytest.raises(AttributeError):
        trace.source = "x"  # type: ignore[misc]
    with pytest.raises(ValueError):
        trace.input_tokens[0] = 1
    assert math.isnan(trace.interarrival_scv)  # one gap has no variance to speak of


# -- bad input: one problem per bad line, with file, line and field ------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    """A missing file is one problem naming the path as given."""
    path = tmp_path / "absent.jsonl"
    assert _problems(path) == [f"{path}: no such file"]


def test_unknown_extension_and_prefix_cache_on_csv(tmp_path: Path) -> None:
    """The format comes from the extension; Azure CSV has no block hashes for a prefix cache."""
    path = tmp_path / "t.txt"
    path.write_text("x\n")
    assert "unknown trace format '.txt'" in _problems(path)[0]
    csv_path = tmp_path / "t.csv"
    csv_path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00,1,1\n")
    assert "prefix caching needs block hashes" in _problems(csv_path, prefix_cache=True)[0]


def test_mooncake_bad_lines_are_all_reported(tmp_path: Path) -> None:
    """Malformed JSON, missing keys, non-numeric and negative lengths and non-objects each name their line."""
    path = _jsonl(
        tmp_path / "t.jsonl",
        [
            _request(0),
            '{"timestamp": 1, "input_length": 5',
            {"timestamp": 2, "input_length": 5},
            _request(3, input_length="abc"),
            _request(4, output_length=-5),
            _request(5, input_length=1.5),
            "[1, 2]",
            {"timestamp": "soon", "input_length": 1, "output_length": 1},
            _request(9, input_length=True),
        ],
    )
    problems = _problems(path)
    assert problems[0].startswith(f"{path}:2: malformed JSON")
    assert problems[1] == f"{path}:3 output_length: missing key"
    assert problems[2].startswith(f"{path}:4 input_length: must be a non-negative integer")
    assert problems[3].startswith(f"{path}:5 output_length: must be a non-negative integer")
    assert "got -5" in problems[3]
    assert problems[4].startswith(f"{path}:6 input_length:")
    assert problems[5] == f"{path}:7: expected a JSON object, got list"
    assert problems[6].startswith(f"{path}:8 timestamp: must be a number of milliseconds")
    assert problems[7].startswith(f"{path}:9 input_length:")
    assert len(problems) == 8


def test_mooncake_timestamps_going_backwards(tmp_path: Path) -> None:
    """A timestamp earlier than the latest one before it is an error naming both lines."""
    path = _jsonl(tmp_path / "t.jsonl", [_request(0), _request(2000), _request(1000), _request(3000)])
    assert _problems(path) == [
        f"{path}:3 timestamp: goes backwards: 1000 ms is earlier than 2000 ms on line 2 "
        "(requests must be in arrival order)"
    ]


def test_mooncake_prefix_cache_needs_hash_ids(tmp_path: Path) -> None:
    """With prefix caching on, every line needs a list of block ids."""
    path = _jsonl(
        tmp_path / "t.jsonl",
        [
            {**_request(0), "hash_ids": [1, 2]},
            _request(1),
            {**_request(2), "hash_ids": "12"},
            {**_request(3), "hash_ids": [1, [2]]},
        ],
    )
    problems = _problems(path, prefix_cache=True)
    assert problems[0].startswith(f"{path}:2 hash_ids: missing key")
    assert problems[1] == f"{path}:3 hash_ids: must be a list of block ids"
    assert problems[2] == f"{path}:4 hash_ids: must be a list of block ids"
    assert read_trace(path).n_requests == 4  # without prefix caching hash_ids are not read


def test_empty_traces(tmp_path: Path) -> None:
    """A trace without requests is refused, whatever the format."""
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n\n")
    assert _problems(blank) == [f"{blank}: trace has no requests"]
    header_only = tmp_path / "header.csv"
    header_only.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n")
    assert _problems(header_only) == [f"{header_only}: trace has no requests"]
    empty_csv = tmp_path / "empty.csv"
    empty_csv.write_text("")
    assert "empty file" in _problems(empty_csv)[0]


def test_many_bad_lines_are_capped(tmp_path: Path) -> None:
    """After MAX_PROBLEMS listed problems the rest are counted in one closing line."""
    path = _jsonl(tmp_path / "t.jsonl", [_request(i, input_length=-1) for i in range(MAX_PROBLEMS + 15)])
    problems = _problems(path)
    assert len(problems) == MAX_PROBLEMS + 1
    assert problems[-2].startswith(f"{path}:{MAX_PROBLEMS} input_length:")
    assert problems[-1] == f"{path}: ... and 15 more problems"


def test_azure_missing_column(tmp_path: Path) -> None:
    """A header without a required column is reported on line 1 under that column's name."""
    path = tmp_path / "t.csv"
    path.write_text("TIMESTAMP,ContextTokens\n2023-11-16 18:00:00,1\n")
    problems = _problems(path)
    assert len(problems) == 1
    assert problems[0].startswith(f"{path}:1 GeneratedTokens: missing column")


def test_azure_bad_rows_are_all_reported(tmp_path: Path) -> None:
    """Bad timestamps, non-numeric or negative counts, short or long rows and backward times each name their
    line."""
    path = tmp_path / "t.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:00:01.0000000,10,1\n"
        "2023-11-16 18:00:02.0000000,ten,1\n"
        "2023-11-16 18:00:03.0000000,10,-1\n"
        "16/11/2023 18:00:04,10,1\n"
        "2023-11-16 25:00:05.0000000,10,1\n"
        "2023-11-16 18:00:06.0000000,10\n"
        "2023-11-16 18:00:00.5000000,10,1\n"
        "2023-02-30 18:00:07.0000000,10,1\n"
        "2023-11-16 18:00:08.0000000,10,1,7\n"
    )
    problems = _problems(path)
    count = "must be a non-negative integer number of tokens"
    assert problems[0] == f"{path}:3 ContextTokens: {count}, got 'ten'"
    assert problems[1] == f"{path}:4 GeneratedTokens: {count}, got '-1'"
    assert problems[2].startswith(f"{path}:5 TIMESTAMP: not a timestamp")
    assert problems[3].startswith(f"{path}:6 TIMESTAMP: not a timestamp")
    assert problems[4] == f"{path}:7: expected 3 comma-separated fields (the header's), got 2"
    assert problems[5] == (
        f"{path}:8 TIMESTAMP: goes backwards: 2023-11-16 18:00:00.5000000 is earlier than "
        "2023-11-16 18:00:03.0000000 on line 4 (requests must be in arrival order)"
    )
    assert problems[6].startswith(f"{path}:9 TIMESTAMP: not a timestamp")
    assert problems[7] == f"{path}:10: expected 3 comma-separated fields (the header's), got 4"  # one too many
    assert len(problems) == 8


def test_a_trace_file_over_the_size_limit_is_refused_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prfaas_plan.io import traces

    path = tmp_path / "big.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 10, "output_length": 5}\n' * 50)
    monkeypatch.setattr(traces, "MAX_TRACE_BYTES", 100)
    with pytest.raises(InputError) as info:
        traces.read_trace(path)
    assert "at most" in str(info.value.problems[0]) and "big.jsonl" in str(info.value.problems[0])


def test_a_key_given_twice_on_a_trace_line_is_refused(tmp_path: Path) -> None:
    """A Mooncake line giving input_length twice (5, then 500000) was read as 500,000 tokens; now the line and
    key are named."""
    lines = (TRACES / "conversation_trace.jsonl").read_text().splitlines()[:200]
    stamp = json.loads(lines[49])["timestamp"]
    lines[50] = (
        f'{{"timestamp": {stamp}, "input_length": 5, "input_length": 500000, "output_length": 5, "hash_ids": []}}'
    )
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"trace\.jsonl:51 input_length: duplicate key"):
        read_trace(path)
