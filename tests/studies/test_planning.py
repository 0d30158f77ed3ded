"""studies.planning: the stage model of a trace's traffic refuses traffic with nothing to prefill or decode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prfaas_plan.errors import InputError
from prfaas_plan.io.traces import read_trace
from prfaas_plan.studies.planning import trace_model
from prfaas_plan.throughput import StageModel
from tests.conftest import run_cli


def _trace(tmp_path: Path, input_tokens: int, output_tokens: int) -> Path:
    path = tmp_path / "t.jsonl"
    rows = [{"timestamp": 250 * i, "input_length": input_tokens, "output_length": output_tokens} for i in range(40)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.parametrize(
    ("inputs", "outputs", "words"), [(0, 100, "nothing to prefill"), (900, 0, "nothing to decode")]
)
def test_a_trace_of_zero_lengths_is_refused(
    tmp_path: Path, paper_model: StageModel, inputs: int, outputs: int, words: str
) -> None:
    with pytest.raises(InputError, match=words):
        trace_model(paper_model, read_trace(_trace(tmp_path, inputs, outputs)))


def test_a_trace_with_some_input_is_modelled(tmp_path: Path, paper_model: StageModel) -> None:
    model = trace_model(paper_model, read_trace(_trace(tmp_path, 900, 100)))
    assert model.output_tokens_mean == 100.0


def test_all_zero_inputs_through_the_cli_exit_2_instead_of_a_threshold_of_minus_one(tmp_path: Path) -> None:
    result = run_cli("optimize", "--trace", str(_trace(tmp_path, 0, 100)), "--json")
    assert result.returncode == 2 and "nothing to prefill" in result.stderr
    assert "-1.0" not in result.stdout
