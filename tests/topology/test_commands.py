"""Every command given a topology (issue 23, "in every output") on workloads/topologies/three-regions.yaml."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from prfaas_plan.cli.app import app
from prfaas_plan.io.file_kind import topology_argument
from prfaas_plan.io.topology import load_topology

EXAMPLE = Path(__file__).resolve().parents[2] / "workloads" / "topologies" / "three-regions.yaml"
_runner = CliRunner()


def _run(*args: str) -> Any:
    return _runner.invoke(app, list(args))


def _json(*args: str) -> dict[str, Any]:
    result = _run(*args, "--json")
    assert result.exit_code == 0, result.output
    payload: dict[str, Any] = json.loads(result.stdout)
    return payload


def test_which_kind(tmp_path: Path) -> None:
    assert topology_argument("three-regions") is not None
    assert topology_argument(str(EXAMPLE)) == EXAMPLE
    assert topology_argument("paper-case-study") is None
    assert topology_argument(None) is None
    broken = tmp_path / "broken.yaml"
    broken.write_text("clusters: [\n")
    assert topology_argument(str(broken)) is None  # left to the scenario loader, which reports it


def test_optimize_gives_the_global_plan_and_refuses_single_cluster_flags() -> None:
    payload = _json("optimize", "three-regions", "--load", "0.5")
    assert payload["input"] == "topology"
    assert payload["loaded_ttft"]["load"] == 0.5
    assert all(r["ttft_p90_s"] > 0 for r in payload["loaded_ttft"]["regions"])
    best = payload["global_plan"]["scale"]
    assert {r["cluster"] for r in payload["global_plan"]["regions"]} == {
        t.cluster for t in load_topology(EXAMPLE).traffic
    }
    for alternative in payload["alternatives"].values():
        assert alternative["scale"] <= best * (1 + 1e-9)
    assert best <= payload["bound"]["scale"] * (1 + 1e-9)
    refused = _run("optimize", "three-regions", "--rate", "3")
    assert refused.exit_code == 2
    assert "--rate" in refused.output and "topology" in refused.output and "Traceback" not in refused.output


def test_evaluate_routes_every_region_at_the_threshold_under_the_bound() -> None:
    payload = _json("evaluate", "three-regions", "--threshold", "20000", "--n-pd-prefill", "2", "--n-pd-decode", "4")
    given = payload["given_plan"]
    assert [r["threshold_tokens"] for r in given["regions"]] == [20000.0] * 3
    for lk in given["links"]:
        assert lk["utilization"] <= 1 + 1e-9
    for r in given["regions"]:
        shares = sum(r["long_share_by_site"].values())
        assert shares == 0 or abs(shares - 1) < 1e-9
    assert given["scale"] <= payload["bound_scale"] * (1 + 1e-9)  # the proven bound over every threshold
    assert abs(payload["given_over_global"] - given["scale"] / payload["global_plan"]["scale"]) < 1e-12


def test_simulate_runs_the_topology_simulator_and_completes_every_request() -> None:
    payload = _json("simulate", "three-regions", "--requests", "200", "--load", "0.5")
    (run,) = payload["simulation"]
    assert run["conserved"] and run["load"] == 0.5
    assert payload["loaded_ttft"]["load"] == 0.5  # the closed form beside, at the same load
    for r in run["regions"]:
        assert r["arrived"] == r["completed"] > 0
        assert r["ttft_p90_s"] is not None and r["ttft_p90_s"] > 0


def test_headroom_is_n_minus_one_on_the_global_plan() -> None:
    payload = _json("headroom", "three-regions")
    topo = load_topology(EXAMPLE)
    faults = payload["n_minus_one"]
    assert sum(f["kind"].startswith("link") for f in faults) == len(topo.links)
    for cluster in (c.name for c in topo.clusters if c.kind == "pd"):
        (drained,) = [f for f in faults if f["fault"] == f"{cluster} drained"]
        assert drained["carried_req_per_s"][cluster] == 0


def test_size_is_topology_size() -> None:
    payload = _json("size", "three-regions")
    assert payload["scale_at_counts"] >= 1 - 1e-9  # the sized counts carry every region's own rate
    assert payload["usd_per_hour"]["gpu"] >= payload["lower_bound"]["gpu_usd_per_hour"] * (1 - 1e-9)
    refused = _run("size", "three-regions", "--rate", "3")
    assert refused.exit_code == 2
    assert "--rate" in refused.output and "Traceback" not in refused.output


def test_sweep_rows_carry_lambda_and_each_region(tmp_path: Path) -> None:
    out = tmp_path / "rows.csv"
    result = _run("sweep", "three-regions", "--set", "clusters[0].instances=1,2,0", "-o", str(out))
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(out.read_text().splitlines()))
    assert [r["status"] for r in rows] == ["ok", "ok", "invalid"]
    assert "clusters[0].instances" in rows[2]["message"]
    rates = {t.cluster: t.rate_req_per_s for t in load_topology(EXAMPLE).traffic}
    for row in rows[:2]:
        scale = float(row["scale"])
        for cluster, rate in rates.items():
            assert abs(float(row[f"carried_req_per_s.{cluster}"]) - scale * rate) < 1e-9 * scale * rate
        assert abs(float(row["throughput_req_per_s"]) - scale * sum(rates.values())) < 1e-9 * scale * sum(
            rates.values()
        )


def test_review_writes_tables_and_the_drawing(tmp_path: Path) -> None:
    out = tmp_path / "rev"
    result = _run("review", "three-regions", "-o", str(out), "--no-verify")
    assert result.exit_code == 0, result.output
    names = {p.name for p in out.iterdir()}
    assert {
        "report.md",
        "review.json",
        "topology.png",
        "plans.csv",
        "regions.csv",
        "links.csv",
        "n_minus_one.csv",
        "loaded_ttft.csv",
    } <= names
    assert (out / "topology.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    regions = list(csv.DictReader((out / "regions.csv").read_text().splitlines()))
    assert len(regions) == 3 * 3  # three plans x three PD clusters
    review = json.loads((out / "review.json").read_text())
    assert review["gain"]["vs_no_sharing"] >= 1 - 1e-9
    assert "](topology.png)" in (out / "report.md").read_text()
