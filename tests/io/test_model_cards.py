"""Every card in workloads/models/ through the real loader: KV bytes per token and fixed state equal hand
derivations from the published configs exactly, parameter counts sit near the published totals, KV grows
with length, hybrids carry less than their all-full-attention twins, and bad cards fail with one clear line."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.errors import InputError
from prfaas_plan.io.models import load_model_card
from prfaas_plan.physics.memory import (
    cache_bytes,
    kv_bytes_per_token,
    linear_state_bytes,
    parameter_count,
    window_bytes,
)
from prfaas_plan.spec.model import Architecture
from prfaas_plan.spec.scenario import ModelCard
from tests.conftest import REPO, examples, run_cli

MODELS = REPO / "workloads" / "models"
PROPERTY = settings(max_examples=examples(60), deadline=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Expected:
    """What a card must give: the hand-derived bytes (exact) and the published parameter counts (with a tolerance)."""

    kv_bytes_per_token: int  # BF16 KV of the full-attention layers
    linear_state_bytes: int = 0  # linear-attention state: SSM state FP32, conv state BF16
    window_bytes: int = 0  # SWA windows once the prompt is at least one window long
    parameters_b: float  # published total
    tolerance: float = 0.01  # relative, on the total
    active_b: float  # published active
    gap: str = ""  # why the count and the published figure differ by more than rounding


def _qwen35(kv: int, state: int, total_b: float, active_b: float) -> Expected:
    """A smaller Qwen3.5 size: its card leaves out the multimodal checkpoint's vision encoder and the MTP module."""
    gap = "the vision encoder, the MTP module (and any shared-expert gates) are not in the card"
    return Expected(kv_bytes_per_token=kv, linear_state_bytes=state, parameters_b=total_b, active_b=active_b, gap=gap)


# Hand derivations from each model's published config (the card's source names it), BF16 KV:
#   GQA: full layers x kv_heads x (d_k + d_v) x 2 B, e.g. MiniMax-M2.5 62 x 8 x 256 x 2 = 253,952;
#   MLA: layers x (kv_lora_rank + qk_rope_head_dim) x 2 B, e.g. DeepSeek-V3 61 x 576 x 2 = 70,272;
#   linear: layers x (heads x d_k x d_v x 4 B + conv channels x (kernel - 1) x 2 B), e.g. Qwen3.5-397B
#     45 x (64 x 128 x 128 x 4 + 12,288 x 3 x 2) = 192,061,440;
#   SWA: layers x window x kv_heads x (d_k + d_v) x 2 B, MiMo-V2-Flash 39 x 128 x 8 x 320 x 2 = 25,559,040.
EXPECTED = {
    "minimax-m2.5": Expected(kv_bytes_per_token=253_952, parameters_b=229, active_b=10),
    "qwen3-235b-a22b": Expected(kv_bytes_per_token=192_512, parameters_b=235, active_b=22),
    "qwen3.5-397b-a17b": Expected(
        kv_bytes_per_token=30_720,
        linear_state_bytes=192_061_440,
        parameters_b=397,
        active_b=17,
        gap="the vision encoder is not in the card",
    ),
    # Qwen3.5's smaller sizes (_qwen35): full layers x KV heads x 512 x 2 B; Gated DeltaNet layers x (value heads x 128
    # x 128 x 4 B + (2 x 16 x 128 + value heads x 128) x 3 x 2 B), e.g. 9B 24 x (32 x 65,536 + 8,192 x 6) = 51,511,296.
    "qwen3.5-9b": _qwen35(32_768, 51_511_296, 9, 9),
    "qwen3.5-27b": _qwen35(65_536, 153_944_064, 27, 27),
    "qwen3.5-35b-a3b": _qwen35(20_480, 64_389_120, 35, 3),
    "qwen3-next-80b-a3b": Expected(
        kv_bytes_per_token=24_576, linear_state_bytes=77_266_944, parameters_b=80, active_b=3
    ),
    "mimo-v2-flash": Expected(kv_bytes_per_token=23_040, window_bytes=25_559_040, parameters_b=309, active_b=15),
    "kimi-linear-48b-a3b": Expected(
        kv_bytes_per_token=8_064,
        linear_state_bytes=43_417_600,
        parameters_b=48,
        tolerance=0.03,
        active_b=3,
        gap="the experts alone are 47.1B, so the published 48B is rounded down (or leaves out the embeddings)",
    ),
    "deepseek-v3": Expected(kv_bytes_per_token=70_272, parameters_b=671, active_b=37),
    "llama-3.1-70b": Expected(kv_bytes_per_token=327_680, parameters_b=70.6, active_b=70.6),
    "llama-3.1-8b": Expected(kv_bytes_per_token=131_072, parameters_b=8.0, active_b=8.0),
    # 32 layers x 32 KV heads (MHA) x 128 x 2 (K, V) x 2 B = 524,288.
    "llama-2-7b": Expected(kv_bytes_per_token=524_288, parameters_b=6.74, active_b=6.74),
    # 80 layers x 8 KV heads x 128 x 2 x 2 B = 327,680.
    "llama-2-70b": Expected(kv_bytes_per_token=327_680, parameters_b=69.0, active_b=69.0),
    # 36 layers alternating: 18 full-attention layers x 8 KV heads x 64 x 2 x 2 B = 36,864 per token; 18 sliding
    # layers of 128 tokens: 18 x 8 x 64 x 2 x 2 B x 128 = 4,718,592.
    "gpt-oss-120b": Expected(kv_bytes_per_token=36_864, window_bytes=4_718_592, parameters_b=116.8, active_b=5.1),
    # Inferred, not published: 15 MLA layers x 1,152 B, 45 KDA layers x 60 heads (see the card's comments).
    "paper-1t-hybrid": Expected(
        kv_bytes_per_token=17_280,
        linear_state_bytes=183_168_000,
        parameters_b=1000,
        tolerance=0.02,
        active_b=math.nan,
        gap="the FFN is Kimi-K2's, which at 60 layers gives 1,017B: '1T' is the paper's round figure",
    ),
}
# Qin et al., Prefill-as-a-Service, arXiv 2604.15039, Table 5: S_kv of the internal 1T model in MiB at 1K, 8K,
# 32K and 128K tokens.
TABLE5_MIB = (190.8, 308.9, 701.3, 2316.3)


def _card(key: str) -> ModelCard:
    return load_model_card(MODELS / f"{key}.yaml")


def _arch(key: str) -> Architecture:
    arch = _card(key).architecture
    assert arch is not None, key
    return arch


CARDS = sorted(EXPECTED)
HYBRIDS = [k for k in CARDS if any(g.attention.kind in ("linear", "swa") for g in _arch(k).layers)]


def test_every_card_is_checked() -> None:
    """Each card file has an expected row here (a new card cannot skip the byte checks), and each loads with an
    architecture."""
    assert sorted(p.stem for p in MODELS.glob("*.yaml")) == CARDS
    assert all(_card(k).architecture is not None for k in CARDS)


@pytest.mark.parametrize("key", CARDS)
def test_kv_bytes_per_token_equal_the_hand_derivation(key: str) -> None:
    """The length-growing KV per token equals the hand-derived BF16 figure exactly."""
    assert kv_bytes_per_token(_arch(key)) == EXPECTED[key].kv_bytes_per_token


@pytest.mark.parametrize("key", CARDS)
def test_fixed_state_equals_the_hand_derivation(key: str) -> None:
    """Linear-attention state (FP32 SSM, BF16 conv) and the full SWA windows equal the hand derivation; dense
    and MLA-only models hold none."""
    arch = _arch(key)
    assert linear_state_bytes(arch) == EXPECTED[key].linear_state_bytes
    assert float(window_bytes(arch, 1_000_000)) == EXPECTED[key].window_bytes


@PROPERTY
@given(length=st.integers(128, 10_000_000))
def test_mimo_ships_one_window_for_any_prompt_of_128_or_more(length: int) -> None:
    """For any prompt of at least 128 tokens, MiMo-V2-Flash's SWA layers hold exactly 25,559,040 B."""
    assert float(window_bytes(_arch("mimo-v2-flash"), length)) == 25_559_040


@pytest.mark.parametrize("key", CARDS)
def test_parameter_count_is_near_the_published_total(key: str) -> None:
    """parameter_count is within the stated tolerance of the published total (1% unless a gap is explained)."""
    expected = EXPECTED[key]
    total_b = parameter_count(_arch(key)) / 1e9
    assert total_b == pytest.approx(expected.parameters_b, rel=expected.tolerance), expected.gap
    assert _card(key).parameters_b == expected.parameters_b


@pytest.mark.parametrize("key", [k for k in CARDS if not math.isnan(EXPECTED[k].active_b)])
def test_published_active_count_lies_between_our_counts_without_and_with_embeddings(key: str) -> None:
    """Vendors round active parameters to whole billions and differ on counting the embedding and LM head, so the
    published figure lies within 10% of [active without them, active with them]."""
    arch = _arch(key)
    with_embeddings = parameter_count(arch, active=True) / 1e9
    embeddings = arch.vocab_size * arch.hidden_size * (1 if arch.tie_embeddings else 2) / 1e9
    assert 0.9 * (with_embeddings - embeddings) <= EXPECTED[key].active_b <= 1.1 * with_embeddings


@pytest.mark.parametrize("key", CARDS)
def test_dtypes_follow_the_release(key: str) -> None:
    """KV BF16 everywhere (Table 3 implies it); FP8 weights exactly for the FP8 releases, whose embeddings stay
    BF16; gpt-oss-120b's MXFP4 experts priced as FP4; the inferred 1T model carries 4-bit routed experts beside
    BF16 attention so that it fits 8 x H20; state FP32 with BF16 conv."""
    dtypes = _arch(key).dtypes
    fp8 = ("deepseek-v3", "minimax-m2.5", "mimo-v2-flash")
    assert (dtypes.weights, dtypes.kv_cache, dtypes.state, dtypes.conv_state) == (
        "fp8" if key in fp8 else "bf16",
        "bf16",
        "fp32",
        "bf16",
    )
    # gpt-oss-120b: released with MXFP4 routed experts (the card's source), priced as FP4.
    experts = {"paper-1t-hybrid": "int4", "gpt-oss-120b": "fp4"}.get(key, dtypes.weights)
    assert dtypes.dtype_of("experts") == experts
    assert dtypes.dtype_of("embeddings") == ("bf16" if key in fp8 else dtypes.weights)


@PROPERTY
@given(key=st.sampled_from(CARDS), a=st.integers(0, 2_000_000), b=st.integers(0, 2_000_000))
def test_cache_bytes_never_decrease_with_length(key: str, a: int, b: int) -> None:
    """A longer sequence never holds fewer cache bytes (KV + windows + state are non-decreasing in length)."""
    short, long = sorted((a, b))
    arch = _arch(key)
    assert float(cache_bytes(arch, short)) <= float(cache_bytes(arch, long))


def _full_attention_twin(arch: Architecture) -> Architecture:
    """The same model with every linear and SWA group replaced by the card's full-attention group shape."""
    full = next(g.attention for g in arch.layers if g.attention.grows_with_length)
    layers = tuple(g if g.attention.grows_with_length else replace(g, attention=full) for g in arch.layers)
    return replace(arch, layers=layers)


@PROPERTY
@given(key=st.sampled_from(HYBRIDS), extra=st.integers(0, 10_000_000))
def test_hybrid_carries_less_than_its_full_attention_twin(key: str, extra: int) -> None:
    """A hybrid adds fewer KV bytes per token than its all-full-attention twin, so past the crossover length
    L* = fixed state / (twin per token - hybrid per token) (and past every window) it holds less in all."""
    hybrid = _arch(key)
    twin = _full_attention_twin(hybrid)
    saving = kv_bytes_per_token(twin) - kv_bytes_per_token(hybrid)
    assert saving > 0
    window = max((g.attention.window for g in hybrid.layers), default=0)
    fixed = linear_state_bytes(hybrid) + float(window_bytes(hybrid, window))
    length = max(window, math.ceil(fixed / saving)) + extra
    assert float(cache_bytes(hybrid, length)) <= float(cache_bytes(twin, length))


@pytest.mark.parametrize("k", [1000, 1024])
def test_inferred_1t_reproduces_table5_within_2_percent(k: int) -> None:
    """The inferred 1T card's S_kv(l) = 17,280 B x l + 174.7 MiB is within 2% of each Table 5 point, whether
    "1K" means 1,000 or 1,024 tokens."""
    card = _card("paper-1t-hybrid")
    assert card.inferred
    lengths = np.array([1, 8, 32, 128]) * k
    predicted_mib = cache_bytes(_arch("paper-1t-hybrid"), lengths) / 2**20
    assert np.allclose(predicted_mib, TABLE5_MIB, rtol=0.02), predicted_mib


def test_show_reports_the_derived_sizes() -> None:
    """`model show --json` gives the KV per token, fixed state and parameter counts the physics computes."""
    import json

    result = run_cli("model", "show", "mimo-v2-flash", "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["kv_bytes_per_token"] == 23_040
    assert payload["fixed_state_bytes"] == 25_559_040
    assert [(g["count"], g["attention"], g["ffn"]) for g in payload["layers"]] == [
        (1, "gqa", "dense"),
        (39, "swa", "moe"),
        (8, "gqa", "moe"),
    ]


# Bad cards: each problem is one line naming file, line and field, through the loader and through the CLI.
GOOD = """\
model:
  name: Tiny
  source: test
architecture:
  hidden_size: 64
  vocab_size: 100
  num_layers: 4
  layers:
    - count: 2
      attention: {kind: gqa, heads: 8, kv_heads: 2, head_dim: 16}
      ffn: {kind: dense, intermediate: 128}
    - count: 2
      attention: {kind: linear, heads: 4, key_heads: 2, key_head_dim: 16, value_head_dim: 16, conv_kernel: 4}
      ffn: {kind: dense, intermediate: 128}
"""
BAD = [
    pytest.param(
        "num_layers: 4",
        "num_layers: 5",
        "  layers:",
        "architecture.layers: layer counts add up to 2 + 2 = 4, but num_layers is 5",
        id="counts-do-not-add-up",
    ),
    pytest.param(
        "heads: 8, kv_heads: 2",
        "heads: 8, kv_heads: 3",
        "kind: gqa",
        "architecture.layers[0].attention.kv_heads: heads (8) must be divisible by kv_heads (3)",
        id="heads-not-divisible",
    ),
    pytest.param(
        "{kind: linear, heads: 4, key_heads: 2, key_head_dim: 16, value_head_dim: 16, conv_kernel: 4}",
        "{kind: mamba}",
        "kind: mamba",
        "architecture.layers[1].attention.kind: must be one of gqa, mla, swa, linear; got 'mamba'",
        id="unknown-layer-type",
    ),
]


def _bad_card(tmp_path: Path, old: str, new: str) -> Path:
    assert old in GOOD, old
    path = tmp_path / "tiny.yaml"
    path.write_text(GOOD.replace(old, new, 1))
    return path


def _line(path: Path, needle: str) -> int:
    return next(i for i, text in enumerate(path.read_text().splitlines(), 1) if needle in text)


def test_the_good_tiny_card_loads(tmp_path: Path) -> None:
    """The base of the bad-card tests is itself valid (so each test changes one thing)."""
    path = tmp_path / "tiny.yaml"
    path.write_text(GOOD)
    assert load_model_card(path).architecture is not None


@pytest.mark.parametrize(("old", "new", "needle", "message"), BAD)
def test_bad_card_is_one_line_with_file_line_and_field(
    tmp_path: Path, old: str, new: str, needle: str, message: str
) -> None:
    """The real loader reports exactly one problem, at the file and line of the offending field."""
    path = _bad_card(tmp_path, old, new)
    with pytest.raises(InputError) as info:
        load_model_card(path)
    assert [str(p) for p in info.value.problems] == [f"{path}:{_line(path, needle)} {message}"]


@pytest.mark.parametrize(("old", "new", "needle", "message"), BAD)
def test_bad_card_through_the_cli_exits_2_with_one_line(
    tmp_path: Path, old: str, new: str, needle: str, message: str
) -> None:
    """`prfaas-plan model show BAD.yaml` exits 2 with the same single line on stderr and no traceback."""
    path = _bad_card(tmp_path, old, new)
    result = run_cli("model", "show", str(path))
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [f"error: {path}:{_line(path, needle)} {message}"]
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_unknown_layer_type_with_shape_fields_is_still_one_line(tmp_path: Path) -> None:
    """An unknown kind that carries the usual shape fields is reported once, as the kind, not once per field."""
    path = _bad_card(tmp_path, "{kind: gqa, heads: 8, kv_heads: 2, head_dim: 16}", "{kind: mamba, heads: 8}")
    with pytest.raises(InputError) as info:
        load_model_card(path)
    assert len(info.value.problems) == 1
