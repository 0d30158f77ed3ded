"""`kv` says where the configuration it prices cannot run (``does_not_run`` on a row or the decode step, a note
line in the table), and keeps its numbers: weights or KV that do not fit the instance, tensor parallelism the
model's heads do not allow, PCIe parts whose profile does not model tensor parallelism, an engine the hardware
cannot run."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import run_cli


def _kv_json(*flags: str) -> dict[str, Any]:
    result = run_cli("kv", "--json", *flags)
    assert result.returncode == 0, result.stderr
    payload: dict[str, Any] = json.loads(result.stdout)
    return payload


def _parts(payload: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """Every row and the decode step of a kv payload (what the notes are set on)."""
    return (*payload["rows"], payload["decode"])


def _kv_table(*flags: str) -> str:
    result = run_cli("kv", *flags)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_kv_says_the_weights_do_not_fit_the_instance_on_every_row_and_the_decode_step() -> None:
    """DeepSeek-V3 (about 680 GB of weights) on one 80 GB H100: priced, but every row and the decode step says
    the weights exceed the instance's usable memory (the planner's wording, ``physics.fit.memory_fit``)."""
    flags = ("--model", "deepseek-v3", "--hardware", "h100", "--gpus", "1", "--length", "1000", "--decode-batch", "64")
    payload = _kv_json(*flags)
    (row,) = payload["rows"]
    assert row["prefill_s"] > 0  # still priced: kv is a what-if calculator
    for part in (row, payload["decode"]):
        why = part["does_not_run"]
        assert why.startswith("1 x h100: weights ") and "usable 72 GB" in why
        assert "would fit: 16 GPUs per instance" in why
    assert "no batch of 64" in payload["decode"]["does_not_run"]
    table = _kv_table(*flags)
    assert "note: does not run at 1,000 tokens: 1 x h100: weights " in table
    assert "note: decode step does not run: 1 x h100: weights " in table


def test_kv_says_when_one_requests_kv_or_the_batchs_does_not_fit_beside_the_weights() -> None:
    """Llama-2-7B's MHA cache: one request of 131,072 tokens (69 GB) does not fit beside the 13 GB of weights on
    one H100, 8,000 tokens do; on one L40S (43 GB usable) a batch of 128 at 32,768 tokens (17 GB each) does not
    fit, the note names the largest batch that does (1), and that batch carries no note."""
    payload = _kv_json(
        "--model", "llama-2-7b", "--hardware", "h100", "--gpus", "1", "--length", "8000", "--length", "131072"
    )
    short, long = payload["rows"]
    assert "does_not_run" not in short
    assert "one request's cache 68.7 GB exceed the 1 GPUs' usable 72 GB" in long["does_not_run"]
    flags = ("--model", "llama-2-7b", "--hardware", "l40s", "--gpus", "1", "--engine", "vllm", "--length", "1000")
    flags += ("--context", "32768")
    big = _kv_json(*flags, "--decode-batch", "128")["decode"]
    assert big["step_s"] > 1.0  # still priced
    assert "the batch's cache 128 x 17.18 GB" in big["does_not_run"]
    assert big["does_not_run"].endswith("the largest batch that fits at 32,768 tokens is 1")
    assert "does_not_run" not in _kv_json(*flags, "--decode-batch", "1")["decode"]
    assert "does_not_run" in _kv_json(*flags, "--decode-batch", "2")["decode"]


def test_kv_adds_nothing_to_a_configuration_that_runs() -> None:
    """Llama-3.1-70B on 8 x H200 at 8,000 tokens and a decode batch of 8 runs: no row or step says otherwise, and
    the table prints no such note."""
    flags = ("--model", "llama-3.1-70b", "--hardware", "h200", "--gpus", "8", "--length", "8000", "--decode-batch", "8")
    payload = _kv_json(*flags)
    assert all("does_not_run" not in part for part in _parts(payload))
    assert "does not run" not in _kv_table(*flags)


def test_kv_says_when_tensor_parallelism_does_not_divide_or_exceeds_the_attention_heads() -> None:
    """Llama-3.1-70B has 64 query and 8 KV heads: TP 3, 7 and 1,000 are refused by vLLM and SGLang, and every
    row says so; TP 8 and 64 divide them. MiniMax-M2.5's 48 query heads divide by 6, its 8 KV heads do not. The
    paper's 1T hybrid on 8 GPUs (60 linear-attention heads, run data-parallel, 64 MLA heads) carries no note."""
    for gpus, why in (
        ("3", "does not divide the model's 64 attention heads"),
        ("7", "does not divide"),
        ("1000", "exceeds the model's 64 attention heads"),
    ):
        payload = _kv_json("--model", "llama-3.1-70b", "--hardware", "h200", "--gpus", gpus, "--length", "128000")
        (row,) = payload["rows"]
        assert row["does_not_run"].startswith(f"tensor parallelism over {gpus} GPUs {why}")
        assert "refuse" in row["does_not_run"]
    for gpus in ("8", "64"):
        payload = _kv_json("--model", "llama-3.1-70b", "--hardware", "h200", "--gpus", gpus, "--length", "128000")
        assert "does_not_run" not in payload["rows"][0]
    minimax = _kv_json("--model", "minimax-m2.5", "--hardware", "h200", "--gpus", "6", "--length", "8000")
    assert "does not divide the model's 8 KV heads" in minimax["rows"][0]["does_not_run"]
    paper = _kv_json("--model", "paper-1t-hybrid", "--hardware", "h200", "--gpus", "8", "--length", "32768")
    assert "does_not_run" not in paper["rows"][0]
    table = _kv_table("--model", "llama-3.1-70b", "--hardware", "h200", "--gpus", "3", "--length", "128000")
    assert "note: does not run: tensor parallelism over 3 GPUs does not divide" in table


def test_kv_says_tensor_parallelism_over_pcie_is_not_modelled() -> None:
    """The RTX PRO 6000 and L40S profiles have a one-GPU scale-up domain and no scale-out ("PCIe TP is not
    modelled as scale-up"): more than one GPU is priced all the same, and every row and the decode step say it
    is not modelled (``not_modelled``, a note line in the table); one GPU, or 8 NVLink H200s, say nothing."""
    flags = ("--model", "gpt-oss-120b", "--engine", "trtllm", "--weights-dtype", "fp4", "--kv-dtype", "fp8")
    flags += ("--length", "16384", "--decode-batch", "4")
    for hardware in ("rtx-pro-6000", "l40s"):
        payload = _kv_json(*flags, "--hardware", hardware, "--gpus", "2")
        for part in _parts(payload):
            assert part["not_modelled"].startswith(f"{hardware}'s profile has a scale-up domain of 1 GPU")
            assert "tensor parallelism over 2 GPUs" in part["not_modelled"]
    for hardware, gpus in (("rtx-pro-6000", "1"), ("h200", "8")):
        payload = _kv_json(*flags, "--hardware", hardware, "--gpus", gpus)
        assert all("not_modelled" not in part for part in _parts(payload))
    table = _kv_table(*flags, "--hardware", "l40s", "--gpus", "4")
    assert "note: not modelled: l40s's profile has a scale-up domain of 1 GPU" in table


def test_kv_says_tensorrt_llm_does_not_run_on_an_amd_part() -> None:
    """--engine trtllm on an MI300X or MI325X (CDNA 3) is priced, but every row and the decode step say that
    TensorRT-LLM runs on NVIDIA GPUs only; on an H100, or SGLang on an MI300X, nothing is said."""
    flags = ("--model", "llama-3.1-8b", "--gpus", "1", "--length", "1000", "--decode-batch", "4")
    for hardware in ("mi300x", "mi325x"):
        payload = _kv_json(*flags, "--hardware", hardware, "--engine", "trtllm")
        for part in _parts(payload):
            assert (
                part["does_not_run"] == f"TensorRT-LLM runs on NVIDIA GPUs only, and {hardware} is an AMD CDNA 3 part"
            )
    for hardware, engine in (("h100", "trtllm"), ("mi300x", "sglang")):
        payload = _kv_json(*flags, "--hardware", hardware, "--engine", engine)
        assert all("does_not_run" not in part for part in _parts(payload))
    table = _kv_table(*flags, "--hardware", "mi300x", "--engine", "trtllm")
    assert "note: does not run: TensorRT-LLM runs on NVIDIA GPUs only" in table


def test_kv_names_fp32_weights_and_kv_priced_at_the_bf16_peak_in_its_source() -> None:
    """The hardware profiles hold no fp32 tensor rate, so fp32 weights and KV are priced at the bf16 peak (the
    same compute time as bf16): the source line says so, as it does fp8 on a part without an fp8 peak, with an engine
    and with the serving defaults; the card's bf16 says nothing."""
    flags = ("--model", "llama-3.1-70b", "--hardware", "h200", "--length", "8000")
    fp32 = _kv_json(*flags, "--weights-dtype", "fp32", "--kv-dtype", "fp32")["rows"][0]
    bf16 = _kv_json(*flags)["rows"][0]
    assert fp32["prefill_split"]["compute_s"] == bf16["prefill_split"]["compute_s"]  # both at the bf16 peak
    assert "e_c 0.75 (fp32 at the bf16 peak), e_a 0.76 (fp32 KV at the bf16 peak)" in fp32["source"]
    assert "at the bf16 peak" not in bf16["source"]
    paper = _kv_json(*flags, "--weights-dtype", "fp32", "--kv-dtype", "fp32", "--engine", "paper-fit")["rows"][0]
    assert "serving defaults (fp32 weights at the bf16 peak; fp32 KV at the bf16 peak)" in paper["source"]
    assert "source: prefill: roofline (engine sglang on hopper" in _kv_table(*flags, "--weights-dtype", "fp32")
    assert "(fp32 at the bf16 peak)" in _kv_table(*flags, "--weights-dtype", "fp32").replace("\n", "")
