"""Which error band an engine profile given by path carries (``io.error_bands.profile_band``)."""

from __future__ import annotations

from pathlib import Path

from prfaas_plan.io.error_bands import builtin_band, load_error_bands, profile_band
from tests.conftest import REPO

ENGINES = REPO / "hardware_profiles" / "serving" / "engines"


def test_a_copy_of_a_built_in_carries_its_band_and_an_edited_copy_does_not(tmp_path: Path) -> None:
    """A byte copy of vLLM's profile prices as vLLM and carries its cross-validated band; the same file with its
    per-request cost set to 50 s keeps `key: vllm` but no longer prices as vLLM, so it borrows the widest
    built-in band and says which terms differ (it carried vLLM's 1.33x band before)."""
    text = (ENGINES / "vllm.yaml").read_text()
    copy = tmp_path / "copy.yaml"
    copy.write_text(text)
    vllm = builtin_band("vllm")
    assert profile_band(copy) == vllm
    lines = text.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.strip() == "request_overhead_s:")
    assert lines[at + 1].strip().startswith("value:")
    lines[at + 1] = "    value: 50.0\n"
    edited = tmp_path / "edited.yaml"
    edited.write_text("".join(lines))
    band = profile_band(edited)
    _, _, table = load_error_bands()
    widest = max((k for k in table if k != "defaults"), key=lambda k: table[k]["prefill"].factor)
    for phase in ("prefill", "decode"):
        mine = getattr(band, phase)
        assert mine.borrowed_from and mine.factor >= getattr(vllm, phase).factor
        assert "whose request_overhead_s differs from built-in vllm's" in mine.basis
    assert band.prefill.borrowed_from == widest


def test_kv_says_an_edited_profile_was_never_cross_validated(tmp_path: Path) -> None:
    """`kv --engine` with a hand-edited copy of a built-in says, in --json and on the screen, that its band is
    borrowed; the built-in itself says nothing of the kind."""
    import json

    from tests.conftest import run_cli

    lines = (ENGINES / "vllm.yaml").read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.strip() == "request_overhead_s:")
    lines[at + 1] = "    value: 50.0\n"
    edited = tmp_path / "edited.yaml"
    edited.write_text("".join(lines))
    flags = ("--model", "llama-3.1-70b", "--hardware", "h200", "--gpus", "8", "--length", "1000")
    mine = run_cli("kv", *flags, "--engine", str(edited), "--json")
    assert mine.returncode == 0 and "never cross-validated" in json.loads(mine.stdout)["band_borrowed"]
    assert "never cross-validated" in run_cli("kv", *flags, "--engine", str(edited)).stdout
    builtin = run_cli("kv", *flags, "--engine", "vllm", "--json")
    assert builtin.returncode == 0 and "band_borrowed" not in json.loads(builtin.stdout)
