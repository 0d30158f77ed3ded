"""`prfaas-plan simulate`, run as a real command: the JSON schema, records, and bad input (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import TRACES, run_cli

MOONCAKE = TRACES / "conversation_trace.jsonl"
FIGURES = {"throughput_req_per_s", "ttft_s", "egress_gbit_per_s", "utilization"}


def test_json_has_the_documented_schema_and_records_are_written(tmp_path: Path) -> None:
    """`--json` prints requests, seed, simulated and closed-form figures with the same keys, relative
    errors, wall time and events/s; `--records` writes one row per request and leaves no temporary file."""
    out = tmp_path / "runs.csv"
    result = run_cli("simulate", "--requests", "3000", "--seed", "4", "--records", str(out), "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload.keys() >= {
        "requests",
        "seed",
        "simulated",
        "closed_form",
        "relative_error",
        "wall_s",
        "events_per_s",
    }
    assert payload["requests"] == 3000 and payload["seed"] == 4
    for side in ("simulated", "closed_form"):
        assert payload[side].keys() >= FIGURES
        assert payload[side]["ttft_s"].keys() == {"mean", "p50", "p90", "p99"}
        assert payload[side]["egress_gbit_per_s"].keys() == {"mean", "peak"}
    assert payload["simulated"]["throughput_req_per_s"] == pytest.approx(payload["rate_req_per_s"], rel=0.1)
    assert abs(payload["relative_error"]["throughput_req_per_s"]) < 0.1
    assert len(out.read_text().splitlines()) == 3001
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.csv"]


def test_table_and_overload_note() -> None:
    """The table shows both sides; past the stability limit a note says queues grow and the run is capped."""
    result = run_cli("simulate", "--requests", "2000", "--load", "1.5")
    assert result.returncode == 0, result.stderr
    assert "simulated" in result.stdout and "closed form" in result.stdout
    assert "Λ_max" in result.stderr and "capped at 2,000 requests" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rate", "1", "--load", "0.5"], "--rate/--load"),
        (["--requests", "20000000"], "more than the 10,000,000"),
        (["--requests", "0"], "must be >= 1"),
        (["--threshold", "19000"], "give all three"),
        (["--load", "-1"], "--load"),
        (["--threshold", "19000", "--n-pd-prefill", "5", "--n-pd-decode", "5"], "exceed the local pool"),
        (["--threshold", "19000", "--n-pd-prefill", "3", "--n-pd-decode", "0"], "--n-pd-decode"),
        (["--decode-kv-gib", "0"], "--decode-kv-gib"),
    ],
)
def test_bad_options_exit_2(args: list[str], message: str) -> None:
    """Contradictory, out-of-range or incomplete options are refused with one line each and exit status 2."""
    result = run_cli("simulate", *args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        ("cols.csv", "TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.6805900,100\n", "cols.csv:1 GeneratedTokens"),
        (
            "neg.jsonl",
            '{"timestamp": 0, "input_length": 5, "output_length": 1}\n'
            '{"timestamp": 1, "input_length": -5, "output_length": 1}\n',
            "neg.jsonl:2 input_length",
        ),
        ("nan.jsonl", '{"timestamp": 0, "input_length": "many", "output_length": 1}\n', "nan.jsonl:1 input_length"),
        (
            "order.jsonl",
            '{"timestamp": 5, "input_length": 5, "output_length": 1}\n'
            '{"timestamp": 1, "input_length": 5, "output_length": 1}\n',
            "order.jsonl:2 timestamp",
        ),
    ],
)
def test_bad_traces_name_the_line(tmp_path: Path, name: str, text: str, where: str) -> None:
    """Missing columns, negative or non-numeric lengths and timestamps that go backwards: exit 2, naming the
    file, the line and the field."""
    (tmp_path / name).write_text(text)
    result = run_cli("simulate", "--trace", name, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert where in result.stderr


def test_trace_replay_at_a_load() -> None:
    """A Mooncake trace replays its first N requests, rescaled to 70 % of the trace plan's Λ_max."""
    result = run_cli("simulate", "--trace", str(MOONCAKE), "--requests", "3000", "--load", "0.7", "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["requests"] == 3000 and payload["trace"] == str(MOONCAKE)
    assert payload["load"] == pytest.approx(0.7, rel=1e-6)
    assert payload["simulated"]["completed_requests"] == 3000


def test_trace_by_built_in_name_from_any_directory(tmp_path: Path) -> None:
    """`--trace azure-conv` replays the shipped Azure file from a directory with no traces in it; an unknown
    name exits 2 with one line that suggests the closest name and lists the built-in ones."""
    result = run_cli("simulate", "--trace", "azure-conv", "--requests", "500", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["trace"] == str(TRACES / "AzureLLMInferenceTrace_conv.csv")
    assert payload["simulated"]["completed_requests"] == 500
    bad = run_cli("simulate", "--trace", "azure-cnv", "--requests", "500", cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
    assert "did you mean 'azure-conv'" in bad.stderr and "mooncake-conversation" in bad.stderr
