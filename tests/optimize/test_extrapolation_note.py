"""A pool priced from measured prefill points says when the traffic's prompts run past its longest point."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import REPO, run_cli


def test_prompts_past_the_measured_points_are_named_as_extrapolated(tmp_path: Path) -> None:
    """The paper scenario with prompts up to 100M tokens (median about 66M) was priced by the H200 profile's
    degree-2 fit, measured to 128K, with TTFTs of days and not a word; the provenance now says the fit is
    extrapolated and for what share, in --json and in the table's footnote. The shipped scenario says nothing."""
    text = (REPO / "workloads" / "paper-case-study.yaml").read_text()
    assert text.count("max_tokens: 131072 ") == 1 and text.count("mu: 9.90") == 1
    long = tmp_path / "long.yaml"
    long.write_text(text.replace("max_tokens: 131072 ", "max_tokens: 100000000 ").replace("mu: 9.90", "mu: 18"))
    done = run_cli("optimize", str(long), "--no-verify", "--json")
    assert done.returncode == 0, done.stderr
    prefill = json.loads(done.stdout)["provenance"]["prefill (h200, PrfaaS)"]
    assert "extrapolated past its longest point (128,000 tokens) for 100% of the traffic's prompts" in prefill
    assert "extrapolated past" in run_cli("optimize", str(long), "--no-verify").stdout
    shipped = json.loads(run_cli("optimize", "--no-verify", "--json").stdout)["provenance"]
    assert not any("extrapolated" in v for v in shipped.values())
