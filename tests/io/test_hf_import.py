"""`prfaas-plan model import`: a config.json of each supported family becomes the hand-written card's architecture;
the written card reads back unchanged; unmapped fields are listed; bad configs fail with one line per problem."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from prfaas_plan.errors import InputError
from prfaas_plan.io.hf_families import FAMILIES
from prfaas_plan.io.hf_import import import_hf_config
from prfaas_plan.io.models import load_model_card
from prfaas_plan.physics.memory import kv_bytes_per_token, linear_state_bytes, window_bytes
from prfaas_plan.report.card import card_yaml, write_card
from prfaas_plan.spec.model import Architecture
from tests.conftest import REPO, run_cli

FIXTURES = REPO / "tests" / "fixtures" / "hf_configs"
MODELS = REPO / "workloads" / "models"
CONFIGS = sorted(p.stem for p in FIXTURES.glob("*.json"))

# Fields each fixture carries that a card cannot express: the import must name them.
MUST_LIST = {
    "deepseek-v3": {"rope_scaling", "num_key_value_heads"},
    "kimi-linear-48b-a3b": {"mla_use_nope", "routed_scaling_factor"},
    "llama-3.1-8b": {"rope_scaling", "rope_theta", "max_position_embeddings", "hidden_act"},
    "llama-3.1-70b": {"rope_theta"},
    "mimo-v2-flash": {"add_swa_attention_sink_bias", "num_nextn_predict_layers", "swa_rope_theta"},
    "minimax-m2.5": {"num_mtp_modules", "use_mtp", "rotary_dim", "use_qk_norm"},
    "qwen3-235b-a22b": {"intermediate_size", "rope_theta"},
    "qwen3-next-80b-a3b": {"partial_rotary_factor", "intermediate_size"},
    "qwen3.5-397b-a17b": {"vision_config"},
}


def _arch(path: Path) -> Architecture:
    arch = load_model_card(path).architecture
    assert arch is not None
    return arch


def _shape(arch: Architecture) -> tuple[Any, ...]:
    """Everything the physics reads, with layer groups as a multiset (cards may list groups in any order)."""
    groups = Counter({(g.attention, g.ffn): g.count for g in arch.layers})
    mtp = Counter({(g.attention, g.ffn): g.count for g in arch.mtp_layers})
    return arch.hidden_size, arch.vocab_size, arch.tie_embeddings, arch.dtypes, groups, mtp


def test_every_family_has_a_fixture() -> None:
    """Each supported model_type is exercised by at least one fixture, and each fixture has a hand-written card."""
    families = {json.loads((FIXTURES / f"{c}.json").read_text())["model_type"] for c in CONFIGS}
    assert families == set(FAMILIES)
    assert all((MODELS / f"{c}.yaml").is_file() for c in CONFIGS)


@pytest.mark.parametrize("key", CONFIGS)
def test_import_matches_the_hand_written_card(key: str) -> None:
    """The imported architecture equals the hand-written card's: same groups, dtypes, KV per token and state."""
    imported = import_hf_config(FIXTURES / f"{key}.json").card.architecture
    assert imported is not None
    card = _arch(MODELS / f"{key}.yaml")
    assert _shape(imported) == _shape(card)
    assert kv_bytes_per_token(imported) == kv_bytes_per_token(card)
    assert linear_state_bytes(imported) == linear_state_bytes(card)
    assert float(window_bytes(imported, 1e6)) == float(window_bytes(card, 1e6))


@pytest.mark.parametrize("key", CONFIGS)
def test_written_card_reads_back_unchanged(key: str, tmp_path: Path) -> None:
    """card_yaml -> write_card -> load_model_card gives back the imported architecture exactly (group order too),
    and the file names each unmapped field in a comment."""
    imported = import_hf_config(FIXTURES / f"{key}.json")
    path = tmp_path / f"{key}.yaml"
    text = card_yaml(imported)
    write_card(path, text)
    assert _arch(path) == imported.card.architecture
    listed = {u.field for u in imported.unmapped}
    assert MUST_LIST[key] <= listed, MUST_LIST[key] - listed
    comments = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    assert all(f"- {field} = " in comments for field in listed)
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


def test_layer_placement_is_commented() -> None:
    """Each layer group's comment says which 0-based layers it covers (the card schema keeps only counts)."""
    imported = import_hf_config(FIXTURES / "kimi-linear-48b-a3b.json")
    assert imported.group_notes == (
        "layer 0 (0-based)",
        "layers 1-2, 4-6, 8-10, 12-14, 16-18, 20-22, 24-25 (0-based)",
        "layers 3, 7, 11, 15, 19, 23, 26 (0-based)",
    )


def test_name_option_and_default_name() -> None:
    """--name sets the card's name; without it the name comes from the file (or its folder for config.json)."""
    assert import_hf_config(FIXTURES / "llama-3.1-8b.json").card.name == "llama-3.1-8b"
    assert import_hf_config(FIXTURES / "llama-3.1-8b.json", name="Llama-3.1-8B").card.name == "Llama-3.1-8B"


# Bad configs: one problem each, naming file, line and field.
BASE = json.loads((FIXTURES / "llama-3.1-8b.json").read_text())


def _write(tmp_path: Path, config: dict[str, Any] | str, name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_text(config if isinstance(config, str) else json.dumps(config, indent=2))
    return path


def _problems(path: Path) -> list[str]:
    with pytest.raises(InputError) as info:
        import_hf_config(path)
    return [str(p) for p in info.value.problems]


def _line(path: Path, needle: str) -> int:
    return next(i for i, text in enumerate(path.read_text().splitlines(), 1) if needle in text)


def test_unsupported_family(tmp_path: Path) -> None:
    """A model_type outside the supported families names the field, its line and the families."""
    path = _write(tmp_path, {**BASE, "model_type": "gpt2"})
    line = _line(path, '"model_type"')
    assert _problems(path) == [f"{path}:{line} model_type: unsupported family 'gpt2'; supported: {', '.join(FAMILIES)}"]


def test_malformed_json(tmp_path: Path) -> None:
    """Malformed JSON is reported at its line and column, not as a traceback."""
    path = _write(tmp_path, '{\n  "model_type": "llama",\n  "hidden_size": 4096\n  "vocab_size": 1\n}\n')
    assert _problems(path) == [f"{path}:4: malformed JSON: Expecting ',' delimiter (column 3)"]


def test_missing_required_field(tmp_path: Path) -> None:
    """A missing field the family needs is named (no line: it is not in the file)."""
    path = _write(tmp_path, {k: v for k, v in BASE.items() if k != "num_hidden_layers"})
    assert _problems(path) == [f"{path} num_hidden_layers: missing, needed for a llama card"]


def test_heads_not_divisible_by_kv_heads(tmp_path: Path) -> None:
    """Query heads must split evenly over the KV heads."""
    path = _write(tmp_path, {**BASE, "num_key_value_heads": 5})
    line = _line(path, '"num_key_value_heads"')
    assert _problems(path) == [f"{path}:{line} num_key_value_heads: num_attention_heads (32) must be divisible by 5"]


def test_wrong_type(tmp_path: Path) -> None:
    """A number written as a string is refused with its value."""
    path = _write(tmp_path, {**BASE, "intermediate_size": "14336"})
    line = _line(path, '"intermediate_size"')
    assert _problems(path) == [f'{path}:{line} intermediate_size: expected an integer >= 1, got "14336"']


def test_kimi_layer_lists_must_cover_every_layer_once(tmp_path: Path) -> None:
    """Kimi's 1-based kda_layers and full_attn_layers must partition the layers."""
    config = json.loads((FIXTURES / "kimi-linear-48b-a3b.json").read_text())
    config["linear_attn_config"]["full_attn_layers"] = [4, 8, 12, 16, 20, 24]  # layer 27 now in neither list
    path = _write(tmp_path, config)
    line = _line(path, '"kda_layers"')
    assert _problems(path) == [
        f"{path}:{line} linear_attn_config.kda_layers: kda_layers and full_attn_layers (1-based) must list each "
        "of 1..27 exactly once"
    ]


def test_mimo_pattern_must_have_one_entry_per_layer(tmp_path: Path) -> None:
    """MiMo's hybrid_layer_pattern needs one 0/1 entry per layer."""
    config = json.loads((FIXTURES / "mimo-v2-flash.json").read_text())
    config["hybrid_layer_pattern"] = config["hybrid_layer_pattern"][:-1]
    path = _write(tmp_path, config)
    line = _line(path, '"hybrid_layer_pattern"')
    (problem,) = _problems(path)
    assert problem.startswith(f"{path}:{line} hybrid_layer_pattern: expected 48 entries of 0 or 1 (one per layer)")


def test_minimax_lightning_layers_are_refused(tmp_path: Path) -> None:
    """MiniMax lightning-attention layers (attn_type_list 0) have no card shape and are refused."""
    config = json.loads((FIXTURES / "minimax-m2.5.json").read_text())
    config["attn_type_list"][0] = 0
    path = _write(tmp_path, config)
    line = _line(path, '"attn_type_list"')
    assert _problems(path) == [
        f"{path}:{line} attn_type_list: lightning-attention layers (0) are not supported; minimax_m2 cards need all 1"
    ]


def test_not_an_object_and_no_file(tmp_path: Path) -> None:
    """A JSON list is not a config; a missing file is named."""
    path = _write(tmp_path, "[1, 2]\n")
    assert _problems(path) == [f"{path}:1: expected a JSON object of config fields"]
    assert _problems(tmp_path / "absent.json") == [f"{tmp_path / 'absent.json'}: file not found"]


def test_every_problem_is_reported(tmp_path: Path) -> None:
    """Problems are collected, not stopped at the first: two bad fields give two lines."""
    path = _write(tmp_path, {**BASE, "num_key_value_heads": 0, "vocab_size": -1})
    assert sorted(p.split(" ", 1)[1].split(":")[0] for p in _problems(path)) == ["num_key_value_heads", "vocab_size"]


# The command line, in a fresh interpreter.
def test_cli_prints_a_loadable_card_and_lists_unmapped_fields(tmp_path: Path) -> None:
    """Without --out the card goes to stdout (loadable as is) and the unmapped list to stderr."""
    result = run_cli("model", "import", str(FIXTURES / "deepseek-v3.json"))
    assert result.returncode == 0, result.stderr
    path = tmp_path / "deepseek-v3.yaml"
    path.write_text(result.stdout)
    assert kv_bytes_per_token(_arch(path)) == 70_272
    assert "not mapped (6 fields" in result.stderr and "rope_scaling = " in result.stderr
    assert "mtp_layers:" in result.stdout  # num_nextn_predict_layers is mapped


def test_cli_writes_out_and_gives_json(tmp_path: Path) -> None:
    """--out writes the card; --json gives {model_type, out, card_yaml, unmapped}."""
    out = tmp_path / "q.yaml"
    result = run_cli("model", "import", str(FIXTURES / "qwen3.5-397b-a17b.json"), "--out", str(out), "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload.keys() == {"model_type", "out", "card_yaml", "unmapped"}
    assert payload["model_type"] == "qwen3_5_moe" and payload["out"] == str(out)
    assert out.read_text() == payload["card_yaml"]
    assert linear_state_bytes(_arch(out)) == 192_061_440
    assert {"field", "value", "reason"} == set(payload["unmapped"][0])


def test_cli_bad_config_exits_2_with_one_line(tmp_path: Path) -> None:
    """A bad config through the CLI: exit 2, the one problem line on stderr, no traceback, nothing on stdout."""
    path = _write(tmp_path, {**BASE, "model_type": "mistral"})
    result = run_cli("model", "import", str(path))
    assert result.returncode == 2
    line = _line(path, '"model_type"')
    assert result.stderr.splitlines() == [
        f"error: {path}:{line} model_type: unsupported family 'mistral'; supported: {', '.join(FAMILIES)}"
    ]
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_qwen_sliding_and_dense_layers_are_placed(tmp_path: Path) -> None:
    """Qwen's use_sliding_window slides layers from max_window_layers on; mlp_only_layers get the dense FFN; a
    config.json takes its folder's name."""
    config = json.loads((FIXTURES / "qwen3-235b-a22b.json").read_text())
    config.update(use_sliding_window=True, max_window_layers=90, sliding_window=4096, mlp_only_layers=[0])
    (tmp_path / "Qwen3-Variant").mkdir()
    imported = import_hf_config(_write(tmp_path / "Qwen3-Variant", config))
    arch = imported.card.architecture
    assert arch is not None and imported.card.name == "Qwen3-Variant"
    kinds = [(g.count, g.attention.kind, g.attention.window, g.ffn.kind) for g in arch.layers]
    assert kinds == [(1, "gqa", 0, "dense"), (89, "gqa", 0, "moe"), (4, "swa", 4096, "moe")]
    assert imported.group_notes[2] == "layers 90-93 (0-based)"


def test_a_key_given_twice_in_a_config_is_refused(tmp_path: Path) -> None:
    """`hidden_size` given twice was read as its last value (8192 for Llama-3.1-8B's 4096) without a word; now
    exit 2 naming the file, the line of the second and the key."""
    text = (FIXTURES / "llama-3.1-8b.json").read_text()
    assert text.count('"hidden_size": 4096') == 1
    twice = tmp_path / "config.json"
    twice.write_text(text.replace('"hidden_size": 4096', '"hidden_size": 4096, "hidden_size": 8192'))
    done = run_cli("model", "import", str(twice))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"{twice}:" in done.stderr and "hidden_size: duplicate key" in done.stderr
