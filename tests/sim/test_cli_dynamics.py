"""`prfaas-plan simulate --dynamics FILE`: caches, faults, link profile and scheduler from YAML, as a command."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli

DYNAMICS = """\
dynamics:
  prefix_cache:
    rule: switch
    prfaas: {nodes: 4, dram_gib_per_node: 64, load_gb_per_s: 50}
    local:  {nodes: 8, dram_gib_per_node: 64, load_gb_per_s: 50}
  link:
    steps: [{at_s: 0, gbit_per_s: 100}, {at_s: 300, gbit_per_s: 30}, {at_s: 600, gbit_per_s: 100}]
    outages: [{start_s: 900, duration_s: 60}]
  faults:
    - {pool: prfaas, at_s: 400, restore_s: 700}
    - {pool: decode, at_s: 800}
  scheduler:
    threshold: {interval_s: 10, window_requests: 500}
    roles: {period_s: 300, switch_s: 30}
"""


def test_dynamics_file_runs_and_accounts_for_every_request(tmp_path: Path) -> None:
    """The JSON gains a ``dynamics`` object: arrived = completed + in flight + dropped, cache hit rates per
    cluster, cache transfer bytes, scheduler moves; ``--cache-rule`` overrides the file's rule."""
    path = tmp_path / "dynamics.yaml"
    path.write_text(DYNAMICS)
    for rule in ("scarce", "abundant"):
        result = run_cli(
            "simulate",
            "--trace",
            "mooncake-conversation",
            "--requests",
            "3000",
            "--dynamics",
            str(path),
            "--cache-rule",
            rule,
            "--json",
        )
        assert result.returncode == 0, result.stderr
        section = json.loads(result.stdout)["dynamics"]
        acc = section["accounting"]
        assert acc["arrived"] == acc["completed"] + acc["in_flight"] + acc["dropped"]
        assert acc["dropped"] == 0
        assert section["cache_hit_rates"].keys() == {"prfaas", "local", "all"}
        assert section["scheduler"]["threshold_changes"] > 0
        moved = section["cache_transfer_bytes"]
        assert (moved["to_prfaas"] + moved["to_local"] == 0) == (rule == "scarce")
        # The simulated run moves the prefixes of its own requests (the first 3,000) across the link.
        assert (section["cache_moved_bytes"] > 0) == (rule == "abundant")


def test_bad_dynamics_file_and_flags_exit_2(tmp_path: Path) -> None:
    """A bad field: one line with file, line and path; caches without a trace, or a bad rule: exit 2."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("dynamics:\n  faults:\n    - {pool: decod, at_s: 1}\n")
    result = run_cli("simulate", "--requests", "100", "--dynamics", str(bad))
    assert result.returncode == 2
    assert f"{bad}:3 dynamics.faults[0].pool" in result.stderr
    good = tmp_path / "good.yaml"
    good.write_text(DYNAMICS)
    result = run_cli("simulate", "--requests", "100", "--dynamics", str(good))
    assert result.returncode == 2 and "need --trace" in result.stderr
    result = run_cli("simulate", "--requests", "100", "--dynamics", str(good), "--cache-rule", "eager")
    assert result.returncode == 2 and "--cache-rule" in result.stderr
