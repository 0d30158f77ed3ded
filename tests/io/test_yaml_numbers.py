"""Numbers in every YAML input are read as YAML 1.2's core schema reads them, not as PyYAML's YAML 1.1 resolver
does: ``5e-1`` is 0.5 (1.1: the string '5e-1', refused where a number is expected), and ``1:30`` (1.1: base 60,
90), ``1_000`` (1.1: 1000) and ``017`` (1.1: octal, 15) are not numbers, so a field expecting one refuses them
(exit 2, file, line and field, and what to write) instead of pricing a number the writer may not have meant."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prfaas_plan.io import yaml_parser
from tests.conftest import REPO, run_cli

_ENGINE = REPO / "hardware_profiles" / "serving" / "engines" / "vllm.yaml"


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("5e-1", 0.5),
        ("1e-3", 0.001),
        ("0.5e0", 0.5),
        ("5.0e-1", 0.5),
        ("1e5", 100000.0),
        (".5", 0.5),
        ("-3", -3),
        ("0x10", 16),
        ("1:30", "1:30"),
        ("1_000", "1_000"),
        ("017", "017"),
        ("0b101", "0b101"),
    ],
)
def test_both_loaders_read_numbers_as_yaml_1_2_does(written: str, read: object) -> None:
    """The libyaml route and the pure-Python loader read each form alike, as YAML 1.2's core schema."""
    text = f"a: {written}\n"
    fast = yaml_parser.parse_text(text, "x.yaml").data["a"]
    pure = yaml_parser._pure_document(text, "x.yaml").data["a"]
    assert fast == pure == read and type(fast) is type(pure) is type(read)


def _engine_with_overhead(tmp_path: Path, value: str) -> Path:
    """vllm.yaml with its request_overhead_s value (line 9) written as ``value``."""
    lines = _ENGINE.read_text(encoding="utf-8").split("\n")
    assert lines[7].strip() == "request_overhead_s:" and lines[8].strip().startswith("value: ")
    lines[8] = f"    value: {value}"
    path = tmp_path / "engine.yaml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _overhead(engine: Path) -> float:
    result = run_cli("kv", "--model", "llama-3.1-8b", "--hardware", "h100", "--gpus", "1", "--length", "1000",
                     "--engine", str(engine), "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    return float(json.loads(result.stdout)["rows"][0]["prefill_split"]["overhead_s"])


def test_an_exponent_without_a_point_is_a_number_in_an_engine_profile(tmp_path: Path) -> None:
    """``value: 5e-1`` prices a 0.5 s request overhead, as ``5.0e-1`` does."""
    assert _overhead(_engine_with_overhead(tmp_path, "5e-1")) == _overhead(_engine_with_overhead(tmp_path, "5.0e-1"))
    assert _overhead(_engine_with_overhead(tmp_path, "5e-1")) > 0.5


@pytest.mark.parametrize(
    ("written", "hint"),
    [
        ("1:30", "base-60 notation such as 1:30, which YAML 1.1 reads as 90, is not read as a number"),
        ("1_000", "digits grouped with '_' are not read as a number; write 1000"),
        ("017", "a leading 0, octal in YAML 1.1, is not read as a number"),
    ],
)
def test_base_60_grouped_and_octal_numbers_are_refused_naming_file_line_and_field(
    tmp_path: Path, written: str, hint: str
) -> None:
    """``request_overhead_s: {value: 1:30}`` priced a 90 s overhead; it (and ``1_000``, ``017``) is now refused
    with exit 2, naming the file, line 9 and the field, and saying what to write."""
    engine = _engine_with_overhead(tmp_path, written)
    result = run_cli("kv", "--model", "llama-3.1-8b", "--hardware", "h100", "--gpus", "1", "--engine", str(engine))
    assert result.returncode == 2, result.stdout
    assert f"{engine}:9 terms.request_overhead_s.value: expected a number, got string '{written}' ({hint}" in (
        result.stderr
    )


def test_a_scenario_refuses_a_base_60_number_and_reads_an_exponent(tmp_path: Path) -> None:
    """The same in a scenario (the loader is shared): the example scenario's roofline override
    ``attention_half_context_tokens: 318`` written ``1:30`` is refused at its line and field; its
    ``memory_efficiency: 0.8`` written ``8e-1`` is read."""
    text = (REPO / "workloads" / "example-annotated.yaml").read_text(encoding="utf-8")
    assert text.count("attention_half_context_tokens: 318") == 1 and text.count("memory_efficiency: 0.8 ") == 1
    line = text[: text.index("attention_half_context_tokens: 318")].count("\n") + 1
    sexagesimal = tmp_path / "sexagesimal.yaml"
    sexagesimal.write_text(text.replace("attention_half_context_tokens: 318", "attention_half_context_tokens: 1:30"))
    result = run_cli("fit", str(sexagesimal))
    assert result.returncode == 2, result.stdout
    field = "deployment.prfaas.roofline.attention_half_context_tokens"
    assert f"{sexagesimal}:{line} {field}: expected a number, got string '1:30' (base-60" in result.stderr
    exponent = tmp_path / "exponent.yaml"
    exponent.write_text(text.replace("memory_efficiency: 0.8 ", "memory_efficiency: 8e-1 "))
    result = run_cli("fit", str(exponent), "--json")
    assert result.returncode == 0, result.stderr
