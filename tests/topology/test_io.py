"""Reading topologies: the shipped example loads; every broken field is reported with its file, line and
path (the scenario loader's own checks); the command exits 2 on bad input and prints JSON with --json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prfaas_plan.errors import InputError
from prfaas_plan.io.topology import load_topology
from tests.conftest import REPO, run_cli

EXAMPLE = REPO / "workloads" / "topologies" / "three-regions.yaml"


def test_the_example_loads() -> None:
    topo = load_topology(EXAMPLE)
    assert [c.name for c in topo.pd_clusters] == ["pd-us-east", "pd-us-west", "pd-eu-west"]
    assert [c.name for c in topo.prfaas_clusters] == ["prfaas-virginia", "prfaas-oregon"]
    assert {t.cluster for t in topo.traffic} == {c.name for c in topo.pd_clusters}
    link = topo.link("prfaas-virginia", "pd-eu-west")
    assert link is not None and link.rtt_s == pytest.approx(0.070) and link.pricing.egress_usd_per_gb == 0.04


# (what is broken, text to replace in the example, its replacement, the field reported, a word of the message)
_BROKEN = [
    (
        "unknown key",
        "gpus_per_instance: 8, instances: 2}",
        "gpus_per_instance: 8, instances: 2, nodes: 3}",
        "clusters[0].nodes",
        "unknown key",
    ),
    (
        "unknown cluster",
        "prfaas: prfaas-oregon\n    pd: pd-us-west",
        "prfaas: prfaas-orgon\n    pd: pd-us-west",
        "links[3].prfaas",
        "did you mean 'prfaas-oregon'",
    ),
    (
        "wrong kind",
        "prfaas: prfaas-oregon\n    pd: pd-us-west",
        "prfaas: pd-us-east\n    pd: pd-us-west",
        "links[3].prfaas",
        "is a pd cluster",
    ),
    (
        "bandwidth below the limit",
        "bandwidth_gbit_per_s: 25",
        "bandwidth_gbit_per_s: -1",
        "links[2].bandwidth_gbit_per_s",
        "must be > 0",
    ),
    ("rtt over the limit", "rtt_ms: 70", "rtt_ms: 20000", "links[2].rtt_ms", "must be <= 10000"),
    (
        "no traffic for a pd cluster",
        "  - cluster: pd-us-west\n",
        "  - cluster: pd-us-east\n",
        "traffic[1].cluster",
        "second traffic entry",
    ),
    (
        "duplicate cluster",
        "{name: pd-us-west, kind: pd",
        "{name: pd-us-east, kind: pd",
        "clusters[3].name",
        "duplicate cluster name",
    ),
    ("bad hardware", "hardware: h20, method", "hardware: h2O, method", "clusters[4].hardware", "hardware profile"),
    ("bad rate", "rate_req_per_s: 2 ", "rate_req_per_s: 0 ", "traffic[1].rate_req_per_s", "must be > 0"),
]


@pytest.mark.parametrize(("what", "old", "new", "field", "word"), _BROKEN, ids=[b[0] for b in _BROKEN])
def test_broken_fields_are_reported_with_file_line_and_path(
    tmp_path: Path, what: str, old: str, new: str, field: str, word: str
) -> None:
    text = EXAMPLE.read_text()
    assert old in text, what
    path = tmp_path / "topologies" / "broken.yaml"
    path.parent.mkdir()
    (tmp_path / "traces").symlink_to(REPO / "workloads" / "traces")
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(InputError) as caught:
        load_topology(path)
    hits = [p for p in caught.value.problems if p.field == field]
    assert hits, [str(p) for p in caught.value.problems]
    assert word in hits[0].message
    assert hits[0].file is not None and hits[0].file.endswith("broken.yaml") and hits[0].line is not None
    line = path.read_text().splitlines()[hits[0].line - 1]
    assert f"{field.split('.')[-1]}:" in line


def test_the_command_exits_2_on_bad_input_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(EXAMPLE.read_text().replace("bandwidth_gbit_per_s: 25", "bandwidth_gbit_per_s: -1"))
    done = run_cli("topology", "plan", str(path))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "links[2].bandwidth_gbit_per_s: must be > 0" in done.stderr


def test_the_command_prints_the_plan_and_both_alternatives_as_json() -> None:
    done = run_cli("topology", "plan", "three-regions", "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    best = payload["global_plan"]["scale"]
    for alternative in payload["alternatives"].values():
        assert alternative["scale"] <= best * (1 + 1e-9)
    assert payload["bound"]["scale"] >= best * (1 - 1e-9)
    assert payload["gain"]["vs_no_sharing"] == pytest.approx(best / payload["alternatives"]["no_sharing"]["scale"])


def test_a_scenario_is_planned_as_a_topology() -> None:
    done = run_cli("topology", "plan", "paper-case-study", "--json")
    assert done.returncode == 0, done.stderr
    region = json.loads(done.stdout)["global_plan"]["regions"][0]
    assert (region["n_pd_prefill"], region["n_pd_decode"]) == (3, 5)


def test_the_command_simulates_the_plan_and_every_loss_without_dropping_a_request() -> None:
    done = run_cli("topology", "plan", "paper-case-study", "--faults", "--simulate", "--requests", "300", "--json")
    assert done.returncode == 0, done.stderr
    runs = json.loads(done.stdout)["simulation"]
    assert runs[0]["run"] == "no loss" and len(runs) == 4  # no loss, site x 2, link
    assert all(r["conserved"] and r["regions"][0]["completed"] == 300 for r in runs)


def _full_mesh(sites: int, regions: int) -> str:
    """A topology of ``sites`` PrfaaS and ``regions`` PD clusters with every link, as YAML text."""
    head = EXAMPLE.read_text().split("clusters:")[0]
    clusters = [
        f"  - {{name: p{i}, kind: prfaas, region: r{i}, hardware: h200, method: roofline, gpus_per_instance: 8, "
        "instances: 2}"
        for i in range(sites)
    ] + [
        f"  - {{name: d{j}, kind: pd, region: s{j}, hardware: h100, method: roofline, gpus_per_instance: 8, "
        "instances: 4}"
        for j in range(regions)
    ]
    links = [
        f"  - {{prfaas: p{i}, pd: d{j}, bandwidth_gbit_per_s: 10, rtt_ms: 5}}"
        for i in range(sites)
        for j in range(regions)
    ]
    traffic = [
        f"  - {{cluster: d{j}, rate_req_per_s: 1, input_length: {{distribution: fixed, tokens: 4096}}, "
        "output_length: {distribution: fixed, tokens: 256}}"
        for j in range(regions)
    ]
    return "\n".join([head + "clusters:", *clusters, "links:", *links, "traffic:", *traffic, ""])


def test_the_size_bounds_are_what_a_plan_finishes_in_a_minute(tmp_path: Path) -> None:
    """64 clusters and 1,024 links are read (32 x 32, full mesh); one cluster or link more is refused with one
    line naming the bound, not a cascade of errors about the clusters it did not read. (The bounds are measured:
    io/topology.py MAX_CLUSTERS.)"""
    from prfaas_plan.io.topology import MAX_CLUSTERS, MAX_LINKS

    at_bound = tmp_path / "at.yaml"
    at_bound.write_text(_full_mesh(32, 32))
    topo = load_topology(at_bound)
    assert len(topo.clusters) == MAX_CLUSTERS and len(topo.links) == MAX_LINKS
    clusters_past = tmp_path / "clusters.yaml"
    clusters_past.write_text(_full_mesh(33, 32))
    with pytest.raises(InputError) as refused:
        load_topology(clusters_past)
    assert [p.field for p in refused.value.problems] == ["clusters"]
    assert "at most 64 clusters, got 65" in refused.value.problems[0].message
    # 32 x 32 is the most links distinct pairs of 64 clusters make; a list longer than that repeats pairs, and is
    # refused by its length before any entry is read.
    links_past = tmp_path / "links.yaml"
    text = _full_mesh(32, 32)
    head, tail = text.rsplit("\ntraffic:\n", 1)
    extra = "  - {prfaas: p0, pd: d0, bandwidth_gbit_per_s: 10, rtt_ms: 5}"
    links_past.write_text(f"{head}\n{extra}\ntraffic:\n{tail}")
    with pytest.raises(InputError) as refused:
        load_topology(links_past)
    assert [p.field for p in refused.value.problems] == ["links"]
    assert refused.value.problems[0].message.startswith("at most 1,024 entries, got 1,025")
