"""A topology study as plain JSON-ready data (display units named in every key)."""

from __future__ import annotations

from typing import Any

from prfaas_plan.optimize.topology import TopologyPlan
from prfaas_plan.report.jsonsafe import finite
from prfaas_plan.studies.topology import TopologyStudy
from prfaas_plan.studies.topology_size import SizedTopology
from prfaas_plan.units import GBIT_PER_S


def topology_plan_dict(study: TopologyStudy, plan: TopologyPlan) -> dict[str, Any]:
    """One plan: λ, what every region carries and how, every link's load, every site's utilisation, price."""
    price = study.prices[plan.label]
    return {
        "label": plan.label,
        "scale": plan.scale,
        "throughput_req_per_s": plan.throughput_req_per_s,
        "regions": [
            {
                "cluster": r.cluster,
                "threshold_tokens": r.threshold_tokens,
                "offload_fraction": r.offload_fraction,
                "n_pd_prefill": r.n_pd_prefill,
                "n_pd_decode": r.n_pd_decode,
                "carried_req_per_s": r.carried_req_per_s,
                "local_bound_req_per_s": finite(r.local_bound_req_per_s),
                "long_req_per_s_by_site": r.long_req_per_s_by_site,
                "long_share_by_site": r.shares,
            }
            for r in plan.regions
        ],
        "links": [
            {
                "prfaas": lk.prfaas,
                "pd": lk.pd,
                "req_per_s": lk.req_per_s,
                "kv_gbit_per_s": lk.kv_bytes_per_s / GBIT_PER_S,
                "bandwidth_gbit_per_s": lk.bandwidth_bytes_per_s / GBIT_PER_S,
                "utilization": lk.utilization,
            }
            for lk in plan.links
        ],
        "site_utilization": plan.site_utilization,
        "price": {
            "gpu_usd_per_hour": price.gpu_usd_per_hour,
            "link_usd_per_hour": price.link_usd_per_hour,
            "egress_usd_per_hour": price.egress_usd_per_hour,
            "total_usd_per_hour": price.total_usd_per_hour(),
            "usd_per_million_requests": study.usd_per_million_requests(plan),
            "unpriced": list(price.unpriced),
        },
        "lp_solves": plan.lp_solves,
    }


def topology_study_dict(study: TopologyStudy) -> dict[str, Any]:
    """The ``topology plan --json`` object."""
    c = study.comparison
    topo = study.topology
    return {
        "topology": topo.name,
        "file": topo.file,
        "clusters": [
            {
                "name": cl.name,
                "kind": cl.kind,
                "region": cl.region,
                "hardware": cl.pool.hardware_key,
                "instances": cl.pool.instances,
                "gpus_per_instance": cl.pool.gpus_per_instance,
                "method": cl.pool.method,
            }
            for cl in topo.clusters
        ],
        "rates_req_per_s": {t.cluster: t.rate_req_per_s for t in topo.traffic},
        "global_plan": topology_plan_dict(study, c.plan),
        "bound": {
            "scale": c.search.bound,
            "gap": c.search.gap,
            "method": "cell relaxation: each region's traffic split over threshold cells priced at their most "
            "favourable ends, local split continuous (optimize.topology.topology_bound)",
        },
        "alternatives": {
            "nearest_site_only": topology_plan_dict(study, c.nearest.plan),
            "no_sharing": topology_plan_dict(study, c.no_sharing.plan),
        },
        "gain": {"vs_no_sharing": c.sharing_gain, "vs_nearest_site_only": c.nearest_gain},
        "n_minus_one": [
            {
                "fault": f.fault,
                "kind": f.kind,
                "scale": f.scale,
                "throughput_req_per_s": f.throughput_req_per_s,
                "throughput_vs_plan": f.throughput_req_per_s / c.plan.throughput_req_per_s,
                "carried_req_per_s": f.carried_req_per_s,
            }
            for f in study.faults
        ],
        "loaded_ttft": _loaded(study),
        "simulation": [
            {
                "run": run.label,
                "load": run.load,
                "conserved": run.conserved,
                "moved_by_faults": run.moved_by_faults,
                "regions": [
                    {
                        "cluster": r.cluster,
                        "offered_req_per_s": r.offered_req_per_s,
                        "ttft_mean_s": finite(r.mean_s),
                        "ttft_p50_s": finite(r.p50_s),
                        "ttft_p90_s": finite(r.p90_s),
                        "arrived": r.arrived,
                        "completed": r.completed,
                    }
                    for r in run.regions
                ],
            }
            for run in study.simulations
        ],
    }


def _loaded(study: TopologyStudy) -> dict[str, Any] | None:
    """The closed-form loaded TTFT per region (None unless asked for)."""
    loaded = study.loaded
    if loaded is None:
        return None
    return {
        "load": loaded.load,
        "method": "closed form (optimize.topology_ttft): each site a G/G/c pool loaded by every region routed to "
        "it, each link processor sharing of its routed KV bytes, local prefill and decode as one pair; each "
        "region's law the mixture of its local route and its share-weighted offload routes (stages independent)",
        "site_utilization": dict(loaded.site_utilization),
        "regions": [
            {
                "cluster": r.cluster,
                "rate_req_per_s": r.rate_req_per_s,
                "offload_fraction": r.offload_fraction,
                "long_share_by_site": dict(r.shares),
                "unstable_stage": r.unstable,
                "utilization": {k: finite(v) for k, v in r.utilization.items()},
                "ttft_mean_s": None if r.ttft is None else r.ttft.mean_s,
                "ttft_p50_s": None if r.ttft is None else r.ttft.p50_s,
                "ttft_p90_s": None if r.ttft is None else r.ttft.p90_s,
                "ttft_p99_s": None if r.ttft is None else r.ttft.p99_s,
            }
            for r in loaded.regions
        ],
    }


def topology_size_dict(sized: SizedTopology, topology_name: str) -> dict[str, Any]:
    """The ``topology size --json`` object."""
    return {
        "topology": topology_name,
        "slo_ttft_p90_s": sized.slo_p90_s,
        "instances": dict(sized.counts),
        "scale_at_counts": sized.scale,
        "links_bought": list(sized.links_bought),
        "usd_per_hour": {
            "gpu": sized.gpu_usd_per_hour,
            "links": sized.link_usd_per_hour,
            "egress_at_targets": sized.egress_usd_per_hour,
            "total": sized.total_usd_per_hour,
        },
        "lower_bound": {
            "gpu_usd_per_hour": sized.lower_bound_gpu_usd_per_hour,
            "instances": dict(sized.lower_bound_instances),
            "gpu_cost_over_bound": sized.gap_to_bound,
            "method": "fluid relaxation over threshold cells (whole PD instances, fractional site instances; links, "
            "egress and the SLO left out): studies.topology_size.lower_bound",
        },
        "search": {
            "evaluations": sized.evaluations,
            "method": "greedy add (most gain per USD/h of GPUs) then prune (dearest first) and descent on the whole "
            "price (GPUs + links + egress at the targets, one instance more or fewer per step): a local minimum; "
            "feasibility: global search λ* >= 1 and every region's closed-form P90 at the targets within the SLO "
            "(heuristic)",
        },
        "regions": [
            {
                "cluster": r.cluster,
                "rate_req_per_s": r.rate_req_per_s,
                "threshold_tokens": p.threshold_tokens,
                "n_pd_prefill": p.n_pd_prefill,
                "n_pd_decode": p.n_pd_decode,
                "long_share_by_site": dict(r.shares),
                "ttft_p50_s": None if r.ttft is None else r.ttft.p50_s,
                "ttft_p90_s": None if r.ttft is None else r.ttft.p90_s,
                "ttft_p99_s": None if r.ttft is None else r.ttft.p99_s,
            }
            for r, p in zip(sized.loaded.regions, sized.plan.regions, strict=True)
        ],
    }
