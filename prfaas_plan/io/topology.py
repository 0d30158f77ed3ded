"""Stage two of reading topologies (``spec.topology``): several PrfaaS and PD clusters, the links between them
and every PD cluster's traffic. Every cluster, link and traffic entry is checked by the scenario loader's own
functions (``io.scenario``: pools, length distributions, arrival processes, model cards; ``io.cost``: prices),
so a field means, is bounded and fails the same way in both files.

topology:
  name: three-regions
  description: ...
  source: ...
model: qwen3-235b-a22b                     # as a scenario's
slo: {decode_tokens_per_s: 30}             # as a scenario's
clusters:
  - {name: prfaas-a, kind: prfaas, region: us-central, hardware: h200, gpus_per_instance: 8, instances: 6,
     method: roofline, engine: sglang, gpu_usd_per_hour: 3.7, source: ...}
  - {name: pd-east, kind: pd, region: us-east, hardware: h20, gpus_per_instance: 8, instances: 8}
links:
  - {prfaas: prfaas-a, pd: pd-east, bandwidth_gbit_per_s: 100, rtt_ms: 20, transfer: after_prefill,
     price: {ports: [...], egress_usd_per_gb: 0.02, source: ...}, source: ...}
traffic:
  - {cluster: pd-east, rate_req_per_s: 3, input_length: {...}, output_length: {...}, arrival: {...}}
cost: {gpu_usd_per_hour: {h20: 2.83}, source: ...}   # a scenario's cost section without its link

A scenario file is read as the topology of one PrfaaS cluster, one PD cluster and one link
(``spec.topology.topology_of_scenario``): ``load_topology`` accepts both.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from prfaas_plan.errors import Problem
from prfaas_plan.io.cost import COST_KEYS, _link_pricing, parse_cost
from prfaas_plan.io.limits import (
    MAX_DECODE_TOKENS_PER_S,
    MAX_LINK_GBIT_PER_S,
    MAX_PRICE_USD_PER_HOUR,
    MAX_RATE_REQ_PER_S,
    MAX_TTFT_S,
    MIN_DECODE_TOKENS_PER_S,
    MIN_LINK_GBIT_PER_S,
    MIN_STEP_S,
)
from prfaas_plan.io.names import named
from prfaas_plan.io.paths import display_path
from prfaas_plan.io.scenario import (
    _ARRIVAL_KEYS,
    _POOL_KEYS,
    _POOL_OPTIONAL,
    _arrival,
    _check_shapes,
    _length_distribution,
    _pool,
    _scenario_model,
    scenario_from_document,
)
from prfaas_plan.io.yamlsrc import Checker, Document, Section, load_yaml, suggest
from prfaas_plan.lengths import LengthDistribution
from prfaas_plan.spec.cost import LinkPricing
from prfaas_plan.spec.scenario import TRANSFER_MODES, Arrival, ModelCard, Slo, Traffic
from prfaas_plan.spec.topology import (
    CLUSTER_KINDS,
    Cluster,
    RegionTraffic,
    Topology,
    TopologyLink,
    topology_of_scenario,
)
from prfaas_plan.units import GBIT_PER_S

#: Clusters and links in one topology: what ``topology plan`` (the global plan, its alternatives and the N-1
#: replans) finishes within about a minute and 4 GB. Its time grows about as the cube of the clusters on a full
#: link matrix: 40 PrfaaS x 40 PD clusters with all 1,600 links took 37 s and 0.57 GB, 60 x 60 (3,600 links)
#: 152 s and 1.15 GB, 32 x 32 (1,024 links, the most 64 clusters make) 22 s and 0.40 GB (2-core Xeon VM, the
#: whole command timed; ``tests/benchmarks/topology_scale.py`` times its parts). The paper's architecture has a
#: few PrfaaS and PD clusters; the bounds are set by the time above, not by a survey of deployments.
MAX_CLUSTERS = 64
MAX_LINKS = 1024
_WHY_BOUNDED = "(what a plan finishes in about a minute)"
#: A link's round-trip time, in ms: 10 s is beyond any terrestrial or geostationary path (about 600 ms).
MAX_RTT_MS = 1e4
#: Where built-in topologies live (besides the scenarios, which are topologies of one of each).
TOPOLOGY_DIRS = ("workloads/topologies", "workloads")

_CLUSTER_KEYS = ("name", "kind", "region", *_POOL_KEYS)
_CLUSTER_OPTIONAL = (*_POOL_OPTIONAL, "kv_transfer_gbit_per_s", "gpu_usd_per_hour", "source")
_LINK_KEYS = ("prfaas", "pd", "bandwidth_gbit_per_s")
_LINK_OPTIONAL = ("rtt_ms", "transfer", "price", "source")
_PRICE_KEYS = ("ports", "committed_usd_per_gbit_per_s_month", "egress_usd_per_gb", "source")
_LENGTH_KEYS = ("mu", "sigma", "min_tokens", "max_tokens", "tokens", "trace")
_TOPOLOGY_COST_KEYS = tuple(k for k in COST_KEYS if k != "link")


def resolve_topology_path(name: str, field: str = "TOPOLOGY") -> Path:
    """A topology argument: a YAML path, or the name of a built-in topology or scenario."""
    return named(name, TOPOLOGY_DIRS, "topology or scenario", field)


def load_topology(path: Path) -> Topology:
    """Read a topology file, or a scenario file as the topology of one of each."""
    doc = load_yaml(path, display_path(path))
    if isinstance(doc.data, dict) and "topology" not in doc.data and "scenario" in doc.data:
        return topology_of_scenario(scenario_from_document(doc, path.parent))
    return topology_from_document(doc, path.parent)


def _cluster(sec: Section, base: Path, model: ModelCard | None, name: str | None, kind: str | None) -> Cluster | None:
    """The cluster of ``sec``, whose ``name`` and ``kind`` the caller has read (each field is reported once)."""
    region = sec.string("region")
    price = sec.number("gpu_usd_per_hour", gt=0, le=MAX_PRICE_USD_PER_HOUR)
    source = sec.string("source", default="") or ""
    if price is not None and not source:
        sec.checker.report(sec.path, "a priced cluster needs a 'source' (where gpu_usd_per_hour comes from)")
    if kind == "prfaas" and sec.has("kv_transfer_gbit_per_s"):
        sec.checker.report((*sec.path, "kv_transfer_gbit_per_s"), "applies to pd clusters only")
    pool = None
    if kind is not None:
        pool = _pool(sec, base, model, role="prfaas" if kind == "prfaas" else "local")
    rdma = sec.number("kv_transfer_gbit_per_s", gt=0, ge=MIN_LINK_GBIT_PER_S, le=MAX_LINK_GBIT_PER_S)
    if pool is not None and rdma is not None and kind == "pd":
        pool = replace(pool, kv_transfer_bytes_per_s=rdma * GBIT_PER_S)
    if name is None or kind is None or region is None or pool is None:
        return None
    return Cluster(
        name=name,
        kind="prfaas" if kind == "prfaas" else "pd",
        region=region,
        pool=pool,
        gpu_usd_per_hour=price,
        source=source,
    )


def _link(sec: Section, kinds: dict[str, str], unkinded: set[str]) -> TopologyLink | None:
    """The link of ``sec``; an end naming a cluster of ``unkinded`` (whose kind was already reported) is left
    unreported: it exists."""
    ends: dict[str, str | None] = {}
    for role in ("prfaas", "pd"):
        end = sec.string(role)
        if end is not None and end in unkinded:
            end = None
        elif end is not None and end not in kinds:
            sec.checker.report((*sec.path, role), f"no cluster named '{end}'{suggest(end, kinds)}")
            end = None
        elif end is not None and kinds[end] != role:
            sec.checker.report((*sec.path, role), f"'{end}' is a {kinds[end]} cluster, not a {role} cluster")
            end = None
        ends[role] = end
    bandwidth = sec.number("bandwidth_gbit_per_s", gt=0, ge=MIN_LINK_GBIT_PER_S, le=MAX_LINK_GBIT_PER_S)
    rtt = sec.number("rtt_ms", ge=0, le=MAX_RTT_MS)
    transfer = sec.string("transfer", choices=TRANSFER_MODES, default="after_prefill")
    pricing = _link_pricing(sec.sub("price", optional=_PRICE_KEYS)) if sec.has("price") else LinkPricing()
    source = sec.string("source", default="") or ""
    prfaas, pd = ends["prfaas"], ends["pd"]
    if prfaas is None or pd is None or bandwidth is None or transfer is None:
        return None
    return TopologyLink(
        prfaas=prfaas,
        pd=pd,
        bandwidth_bytes_per_s=bandwidth * GBIT_PER_S,
        rtt_s=None if rtt is None else rtt / 1e3,
        transfer="layerwise" if transfer == "layerwise" else "after_prefill",
        pricing=pricing,
        source=source,
    )


def _traced(sec: Section, base: Path, role: str, already: list[Problem]) -> LengthDistribution | None:
    """``sec``'s length distribution, with the problems of a trace it names (which carry the trace's own file)
    reported at the field that names it, ``<file>:<line> traffic[i].<role>_length.trace``; a problem already
    reported for the entry's other length (one trace named by both) is not repeated."""
    checker = sec.checker
    before = len(checker.problems)
    found = _length_distribution(sec, base, role=role)
    new = checker.problems[before:]
    del checker.problems[before:]
    for problem in new:
        if problem.file == checker.doc.file:
            checker.problems.append(problem)
        elif str(problem) not in {str(p) for p in already}:
            already.append(problem)
            checker.report((*sec.path, "trace"), str(problem))
    return found


def _traffic(sec: Section, base: Path, kinds: dict[str, str], unkinded: set[str]) -> RegionTraffic | None:
    cluster = sec.string("cluster")
    if cluster is not None and cluster in unkinded:
        cluster = None
    elif cluster is not None and kinds.get(cluster) != "pd":
        why = "not a pd cluster" if cluster in kinds else f"no cluster of that name{suggest(cluster, kinds)}"
        sec.checker.report((*sec.path, "cluster"), f"'{cluster}': {why}")
        cluster = None
    rate = sec.number("rate_req_per_s", gt=0, le=MAX_RATE_REQ_PER_S)
    input_sec = sec.sub("input_length", required=("distribution",), optional=(*_LENGTH_KEYS, "prefix_cache"))
    traced: list[Problem] = []
    input_len = None if input_sec.dead else _traced(input_sec, base, "input", traced)
    output_sec = sec.sub("output_length", required=("distribution",), optional=_LENGTH_KEYS)
    output_len = None if output_sec.dead else _traced(output_sec, base, "output", traced)
    arrival = Arrival(process="poisson")
    if sec.has("arrival"):
        arrival = _arrival(sec.checker, sec.sub("arrival", required=("process",), optional=_ARRIVAL_KEYS))
    source = sec.string("source", default="") or ""
    if cluster is None or rate is None or input_len is None or output_len is None:
        return None
    return RegionTraffic(
        cluster=cluster,
        rate_req_per_s=rate,
        traffic=Traffic(input_length=input_len, output_length=output_len, arrival=arrival),
        source=source,
    )


def _listed(root: Section, key: str, most: int) -> list[tuple[tuple[str | int, ...], object]]:
    items = root.items(key)
    if len(items) > most:
        root.checker.report((key,), f"at most {most:,} entries, got {len(items):,} {_WHY_BOUNDED}")
        return []
    return items


def topology_from_document(doc: Document, base: Path) -> Topology:
    """Validate a parsed topology document; the files it names resolve against ``base`` first."""
    checker = Checker(doc)
    root = checker.root(required=("topology", "model", "slo", "clusters", "links", "traffic"), optional=("cost",))
    meta = root.sub("topology", required=("name",), optional=("description", "source"))
    name = meta.string("name")
    description = meta.string("description", default="") or ""
    model = _scenario_model(root, base)
    slo_sec = root.sub(
        "slo", required=("decode_tokens_per_s",), optional=("ttft_p90_s", "ttft_includes_first_decode_step")
    )
    tokens_per_s = slo_sec.number("decode_tokens_per_s", gt=0, ge=MIN_DECODE_TOKENS_PER_S, le=MAX_DECODE_TOKENS_PER_S)
    ttft_p90 = slo_sec.number("ttft_p90_s", gt=0, ge=MIN_STEP_S, le=MAX_TTFT_S)
    first_step = slo_sec.boolean("ttft_includes_first_decode_step", default=False)

    clusters: list[Cluster] = []
    kinds: dict[str, str] = {}
    items = root.items("clusters")
    too_many = len(items) > MAX_CLUSTERS
    if too_many:
        checker.report(("clusters",), f"at most {MAX_CLUSTERS} clusters, got {len(items)} {_WHY_BOUNDED}")
        items = []
    where: dict[str, tuple[str | int, ...]] = {}
    unkinded: set[str] = set()  # named clusters whose kind is reported: links and traffic to them are not
    for path, item in items:
        sec = Section(checker, path, item, required=_CLUSTER_KEYS, optional=_CLUSTER_OPTIONAL)
        cluster_name, kind = sec.string("name"), sec.string("kind", choices=CLUSTER_KINDS)
        if cluster_name is not None and cluster_name in kinds:
            checker.report((*path, "name"), f"duplicate cluster name '{cluster_name}'")
            continue
        if cluster_name is not None and kind is not None:
            kinds[cluster_name] = kind
            where[cluster_name] = path
        elif cluster_name is not None:
            unkinded.add(cluster_name)
        cluster = _cluster(sec, base, model, cluster_name, kind)
        if cluster is not None:
            clusters.append(cluster)
    for kind in CLUSTER_KINDS:
        if items and not unkinded and kind not in kinds.values():
            checker.report(("clusters",), f"needs at least one {kind} cluster")

    links: list[TopologyLink] = []
    seen_pairs: set[tuple[str, str]] = set()
    for path, item in [] if too_many else _listed(root, "links", MAX_LINKS):  # no cascade from unread clusters
        link = _link(Section(checker, path, item, required=_LINK_KEYS, optional=_LINK_OPTIONAL), kinds, unkinded)
        if link is None:
            continue
        if (link.prfaas, link.pd) in seen_pairs:
            checker.report(path, f"a second link from '{link.prfaas}' to '{link.pd}' (one link per pair)")
            continue
        seen_pairs.add((link.prfaas, link.pd))
        links.append(link)

    traffic: list[RegionTraffic] = []
    for path, item in [] if too_many else _listed(root, "traffic", MAX_CLUSTERS):
        sec = Section(
            checker,
            path,
            item,
            required=("cluster", "rate_req_per_s", "input_length", "output_length"),
            optional=("arrival", "source"),
        )
        entry = _traffic(sec, base, kinds, unkinded)
        if entry is None:
            continue
        if any(t.cluster == entry.cluster for t in traffic):
            checker.report((*path, "cluster"), f"a second traffic entry for '{entry.cluster}'")
            continue
        traffic.append(entry)
    given = {t.cluster for t in traffic}
    for pd_name, kind in kinds.items():
        if kind == "pd" and pd_name not in given and not checker.problems:
            checker.report(("traffic",), f"no traffic for pd cluster '{pd_name}'")

    # Measured curves must keep their shape over the lengths each pool is asked to prefill.
    by_name = {c.name: c for c in clusters}
    for entry in traffic:
        pd = by_name.get(entry.cluster)
        if pd is not None:
            _check_shapes(checker, pd.pool, entry.traffic.input_length, where[pd.name])
        for link in links:
            prfaas = by_name.get(link.prfaas)
            if link.pd == entry.cluster and prfaas is not None:
                _check_shapes(checker, prfaas.pool, entry.traffic.input_length, where[prfaas.name])
    cost = parse_cost(root.sub("cost", optional=_TOPOLOGY_COST_KEYS))
    checker.raise_if_any()
    if name is None or model is None or tokens_per_s is None:
        raise RuntimeError(f"{doc.file}: a field was neither read nor reported (a bug in the topology loader)")
    return Topology(
        name=name,
        description=description,
        file=doc.file,
        model=model,
        slo=Slo(
            decode_tokens_per_s=tokens_per_s,
            ttft_p90_s=ttft_p90,
            ttft_includes_first_decode_step=bool(first_step),
        ),
        clusters=tuple(clusters),
        links=tuple(links),
        traffic=tuple(traffic),
        cost=cost,
    )
