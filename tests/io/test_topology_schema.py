"""The topology's JSON Schema (``prfaas-plan schema topology``) against the topology loader, judged by
``jsonschema``: both accept every built-in topology; broken variants of three-regions are refused by both,
except those the schema's description lists as the loader's alone (relations between entries)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from prfaas_plan.errors import InputError
from prfaas_plan.io.schema import schema
from prfaas_plan.io.topology import load_topology
from tests.conftest import REPO

jsonschema = pytest.importorskip("jsonschema")

FOLDER = REPO / "workloads" / "topologies"

# (what, old text of three-regions, new text); every variant is refused by the loader.
BROKEN = [
    ("unknown key", "  name: three-regions", "  name: three-regions\n  nmae: typo"),
    ("missing required key", "slo:\n  decode_tokens_per_s: 40", "slo:\n  ttft_p90_s: 5"),
    ("not a cluster kind", "kind: prfaas, region: us-east", "kind: edge, region: us-east"),
    ("link bandwidth zero", "bandwidth_gbit_per_s: 100\n    rtt_ms: 2", "bandwidth_gbit_per_s: 0\n    rtt_ms: 2"),
    ("rtt above its bound", "rtt_ms: 65", "rtt_ms: 100000"),
    ("negative rate", "rate_req_per_s: 4 ", "rate_req_per_s: -4 "),
    ("instances not an integer", "gpus_per_instance: 8, instances: 2}", "gpus_per_instance: 8, instances: 2.5}"),
    ("unknown hardware", "hardware: b200", "hardware: b2000"),
    (
        "priced cluster without source",
        "instances: 2}\n  - {name: prfaas-oregon",
        "instances: 2, gpu_usd_per_hour: 3}\n  - {name: prfaas-oregon",
    ),
    (
        "lognormal without mu",
        "{distribution: lognormal, mu: 9.90, sigma: 1.00,",
        "{distribution: lognormal, sigma: 1.00,",
    ),
    ("unknown arrival process", "arrival: {process: poisson}", "arrival: {process: hawkes}"),
    ("empty link list", "links:\n  - prfaas: prfaas-virginia", "links: []\nold_links:\n  - prfaas: prfaas-virginia"),
    (
        "link to an unknown cluster",
        "    pd: pd-us-east\n    bandwidth_gbit_per_s: 100",
        "    pd: pd-us-north\n    bandwidth_gbit_per_s: 100",
    ),
    ("duplicate cluster name", "{name: prfaas-oregon,", "{name: prfaas-virginia,"),
]

#: Variants the schema cannot refuse, each named in its description (relations between entries).
KNOWN = {"link to an unknown cluster": "joins an existing prfaas cluster", "duplicate cluster name": "names are unique"}


def _loader_accepts(path: Path) -> bool:
    try:
        load_topology(path)
    except InputError:
        return False
    return True


def test_the_schema_is_valid_and_accepts_every_builtin_topology() -> None:
    spec = schema("topology")
    jsonschema.Draft202012Validator.check_schema(spec)
    files = sorted(FOLDER.glob("*.yaml"))
    assert files
    for path in files:
        assert _loader_accepts(path), path.name
        assert jsonschema.Draft202012Validator(spec).is_valid(yaml.safe_load(path.read_text())), path.name


def test_broken_variants_are_refused_by_both_except_where_the_schema_says(tmp_path: Path) -> None:
    spec = schema("topology")
    text = (FOLDER / "three-regions.yaml").read_text()
    trace = str(REPO / "workloads" / "traces")
    disagree = []
    for i, (what, old, new) in enumerate(BROKEN):
        assert old in text, what
        edited = text.replace(old, new, 1).replace("../traces", trace)
        path = tmp_path / f"broken{i}.yaml"
        path.write_text(edited)
        assert not _loader_accepts(path), what
        if jsonschema.Draft202012Validator(spec).is_valid(yaml.safe_load(edited)):
            disagree.append(what)
    assert sorted(disagree) == sorted(KNOWN)
    for clause in KNOWN.values():
        assert clause in spec["description"]
