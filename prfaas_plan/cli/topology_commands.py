"""What ``optimize``, ``evaluate``, ``size``, ``headroom``, ``simulate``, ``sweep`` and ``review`` do when their
SCENARIO argument names a topology (``io.file_kind.topology_argument``; issue 23). A flag that only means
something for one PrfaaS cluster, one PD cluster and one link is refused (exit 2, naming it), never ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from prfaas_plan.cli.common import emit, handled
from prfaas_plan.errors import InputError, Problem
from prfaas_plan.io.paths import display_path

#: The review's loaded figures (closed form, and simulated with --verify): this fraction of the global plan's λ.
REVIEW_LOAD = 0.7


def refuse(command: str, path: Path, given: Mapping[str, bool]) -> None:
    """Exit 2 naming the first flag given that a topology has no meaning for."""
    for flag, was_given in given.items():
        if was_given:
            raise InputError(
                Problem(
                    field=flag,
                    message=f"{command}: {display_path(path)} is a topology; {flag} applies to a single-cluster "
                    "scenario only",
                )
            )


def _note(text: str, quiet: bool) -> None:
    if not quiet:
        from prfaas_plan.cli.render import console

        console(stderr=True).print(text, style="dim")


def optimize(path: Path, *, load: float | None, given: Mapping[str, bool], json_output: bool) -> None:
    """The global plan, its bound and its two alternatives (as ``topology plan``); with ``--load``, each region's
    closed-form loaded TTFT at that fraction of the global plan's λ."""
    from prfaas_plan.cli.topology import _render
    from prfaas_plan.report.topology import topology_study_dict
    from prfaas_plan.studies.topology import study_file

    with handled(json_output):
        refuse("optimize", path, given)
        _check_load(load)
        payload = {"input": "topology", **topology_study_dict(study_file(path, ttft_load=load))}
    if json_output:
        emit(payload)
        return
    _render(payload)


def _check_load(load: float | None) -> None:
    if load is not None and not 0.01 <= load <= 1.5:
        raise InputError(Problem(field="--load", message=f"must be in [0.01, 1.5] for a topology, got {load}"))


def evaluate(
    path: Path,
    *,
    threshold_tokens: float,
    n_pd: tuple[int | None, int | None],
    given: Mapping[str, bool],
    json_output: bool,
) -> None:
    """Every PD cluster at ``--threshold``, the routing LP's shares and each cluster's own split, beside the
    global plan."""
    from prfaas_plan.io.topology import load_topology
    from prfaas_plan.report.topology import topology_plan_dict, topology_study_dict
    from prfaas_plan.studies.topology import plan_price, study_file
    from prfaas_plan.studies.topology_points import plan_at_threshold

    with handled(json_output):
        refuse("evaluate", path, given)
        if not threshold_tokens >= 0:
            raise InputError(Problem(field="--threshold", message=f"must be >= 0, got {threshold_tokens:g}"))
        topology = load_topology(path)
        plan = plan_at_threshold(topology, threshold_tokens)
        study = study_file(path)
        study = replace(study, prices={**study.prices, plan.label: plan_price(topology, plan)})
        whole = topology_study_dict(study)
        payload = {
            "input": "topology",
            "topology": whole["topology"],
            "file": whole["file"],
            "threshold_tokens": threshold_tokens,
            "split_note": "each PD cluster's prefill/decode split is chosen at its threshold (as the global plan's); "
            "--n-pd-prefill/--n-pd-decode are not applied to a topology",
            "given_plan": topology_plan_dict(study, plan),
            "global_plan": whole["global_plan"],
            "given_over_global": plan.scale / study.comparison.plan.scale,
            "bound_scale": study.comparison.search.bound,
        }
    ignored = " / ".join(
        f"{flag} {v}" for flag, v in zip(("--n-pd-prefill", "--n-pd-decode"), n_pd, strict=True) if v is not None
    )
    _note(
        f"note: {display_path(path)} is a topology: every PD cluster routes at --threshold "
        f"{threshold_tokens:g}; its split is chosen at that threshold"
        + (f" ({ignored}: not applied)" if ignored else ""),
        json_output,
    )
    if json_output:
        emit(payload)
        return
    _render_plans(payload, [payload["given_plan"], payload["global_plan"]])


def _render_plans(payload: dict[str, Any], plans: list[dict[str, Any]]) -> None:
    from prfaas_plan.cli.render import DataTable, console
    from prfaas_plan.cli.topology import regions_table

    out = console()
    best = payload["global_plan"]["scale"]
    summary = DataTable(
        title=f"{payload['topology']}: at --threshold {payload['threshold_tokens']:g}, beside the global plan"
    )
    for column in ("plan", "scale λ", "carried (req/s)", "USD/h", "vs global"):
        summary.add_column(column, justify="left" if column == "plan" else "right")
    for p in plans:
        total = p["price"]["total_usd_per_hour"]
        summary.add_row(
            p["label"],
            f"{p['scale']:.4g}",
            f"{p['throughput_req_per_s']:.2f}",
            "—" if total is None else f"${total:,.0f}",
            f"{p['scale'] / best:.3f}",
        )
        summary.add_data(
            {
                "plan": p["label"],
                "scale": p["scale"],
                "throughput_req_per_s": p["throughput_req_per_s"],
                "total_usd_per_hour": total,
                "scale_over_global": p["scale"] / best,
            }
        )
    out.print(summary)
    for p in plans:
        out.print(regions_table(p, lambda r, _shares: {k: v for k, v in r.items() if not isinstance(v, dict)}))


def simulate(
    path: Path, *, load: float | None, requests: int, seed: int, given: Mapping[str, bool], json_output: bool
) -> None:
    """The global plan simulated by the topology simulator at ``load`` x λ, ``requests`` per region."""
    from prfaas_plan.cli.topology import _render_simulation
    from prfaas_plan.report.topology import topology_study_dict
    from prfaas_plan.studies.topology import SimulationRequest, study_file

    with handled(json_output):
        refuse("simulate", path, given)
        fraction = 0.7 if load is None else load
        if not 0.01 <= fraction <= 1.5:
            raise InputError(
                Problem(field="--load", message=f"must be in [0.01, 1.5] for a topology, got {fraction:g}")
            )
        if not 100 <= requests <= 1_000_000:
            raise InputError(Problem(field="--requests", message=f"must be in [100, 1000000], got {requests}"))
        request = SimulationRequest(load=fraction, requests_per_region=requests, seed=seed)
        whole = topology_study_dict(study_file(path, simulate=request, ttft_load=fraction))
        payload = {
            "input": "topology",
            "topology": whole["topology"],
            "file": whole["file"],
            "rates_req_per_s": whole["rates_req_per_s"],
            "global_plan": whole["global_plan"],
            "simulation": whole["simulation"],
            "loaded_ttft": whole["loaded_ttft"],
        }
    if json_output:
        emit(payload)
        return
    _render_simulation(payload)
    from prfaas_plan.cli.topology import _render_loaded

    _render_loaded(payload)


def headroom(path: Path, *, given: Mapping[str, bool], json_output: bool) -> None:
    """N-1 on the global plan: each PrfaaS site lost (rerouted, or kept local), each link lost, each PD cluster
    drained (``optimize.topology_faults``; fluid throughput)."""
    from prfaas_plan.cli.topology import _render_faults
    from prfaas_plan.report.topology import topology_study_dict
    from prfaas_plan.studies.topology import study_file

    with handled(json_output):
        refuse("headroom", path, given)
        whole = topology_study_dict(study_file(path, faults=True))
        payload = {
            "input": "topology",
            "topology": whole["topology"],
            "file": whole["file"],
            "rates_req_per_s": whole["rates_req_per_s"],
            "global_plan": whole["global_plan"],
            "n_minus_one": whole["n_minus_one"],
        }
    if json_output:
        emit(payload)
        return
    _render_faults(payload)


def size(path: Path, *, ttft_p90_s: float | None, given: Mapping[str, bool], json_output: bool) -> None:
    """``topology size``: instance counts per cluster and links that carry every region's own rate at the lowest
    whole price found, within the P90 TTFT SLO (``--ttft-p90-s``, default the topology's slo)."""
    from prfaas_plan.cli.topology import size as size_topology

    with handled(json_output):
        refuse("size", path, given)
        if ttft_p90_s is not None and not 0.001 <= ttft_p90_s < float("inf"):
            raise InputError(Problem(field="--ttft-p90-s", message=f"must be >= 0.001 s, got {ttft_p90_s}"))
    size_topology(str(path), slo_p90=ttft_p90_s, json_output=json_output)


def sweep(
    path: Path, *, sets: list[str], grid: Path | None, out: str, given: Mapping[str, bool], json_output: bool
) -> None:
    """Each point of a grid of topology fields (``--set clusters[0].instances=2,4``) planned globally; one row
    per point (λ, what all regions carry, and what each PD cluster carries), written whole at the end, one
    point after another (no workers, no --resume for a topology yet)."""
    import hashlib
    import json
    import sys
    import time

    from prfaas_plan.cli.sweep_grid import grid_from_options
    from prfaas_plan.errors import InfeasibleError
    from prfaas_plan.io.topology import load_topology
    from prfaas_plan.io.topology_points import load_topology_point, read_topology_document
    from prfaas_plan.report import sweep_rows
    from prfaas_plan.report.files import is_stdout, write_file
    from prfaas_plan.studies.topology_points import global_plan

    with handled(json_output):
        refuse("sweep", path, given)
        kind = sweep_rows.rows_format(out, field="--out")
        the_grid = grid_from_options(sets, grid)
        base_topology = load_topology(path)  # the base loads as it is (errors with their lines) before any point
        regions = [t.cluster for t in base_topology.traffic]
        base = read_topology_document(path)
        digest = hashlib.sha256(
            ("topology\n" + json.dumps(base.data, sort_keys=True, default=str)).encode()
        ).hexdigest()[:16]
        names = [axis.name for axis in the_grid.axes]
        carried = [f"carried_req_per_s.{r}" for r in regions]
        header = ["point_id", "run_digest", *names, "status", "message", "scale", "throughput_req_per_s", *carried]
        start = time.perf_counter()
        lines: list[str] = []
        statuses: dict[str, int] = {}
        for point in the_grid.points():
            row: dict[str, Any] = {"point_id": sweep_rows.point_id(point), "run_digest": digest, "params": point}
            edits = {axis.path: point[axis.name] for axis in the_grid.axes}
            try:
                plan, _bound = global_plan(load_topology_point(base, path, edits))
            except InputError as exc:
                row |= {
                    "status": "invalid",
                    "message": "; ".join(f"{p.field}: {p.message}" if p.field else p.message for p in exc.problems),
                }
            except InfeasibleError as exc:
                row |= {"status": "infeasible", "message": str(exc)}
            else:
                by_region = {r.cluster: r.carried_req_per_s for r in plan.regions}
                row |= {"status": "ok", "message": None, "scale": plan.scale}
                row |= {"throughput_req_per_s": plan.throughput_req_per_s}
                row |= {f"carried_req_per_s.{r}": by_region.get(r) for r in regions}
            statuses[row["status"]] = statuses.get(row["status"], 0) + 1
            lines.append(sweep_rows.format_row(row, kind, header))
        text = ("" if kind == "jsonl" else ",".join(header) + "\n") + "".join(lines)
        if is_stdout(out):
            sys.stdout.write(text)
            sys.stdout.flush()
        else:
            write_file(out, text, owner=sweep_rows.OWNERS[kind])
        summary = {
            "input": "topology",
            "topology": base_topology.name,
            "points": the_grid.size,
            "statuses": statuses,
            "wall_s": time.perf_counter() - start,
            "out": out,
        }
    if json_output and not is_stdout(out):
        emit(summary)
        return
    from prfaas_plan.cli.render import console

    shown = ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))
    console(stderr=is_stdout(out)).print(
        f"{summary['points']} topology points ({shown}); {summary['wall_s']:.1f} s, one after another -> {out}"
    )


def review(
    path: Path,
    *,
    output: str | None,
    force: bool,
    verify: bool,
    requests: int,
    seed: int,
    given: Mapping[str, bool],
    json_output: bool,
) -> None:
    """A review directory: the global plan, its alternatives, N-1, per-region and per-link tables (Markdown, CSV,
    JSON), each region's closed-form loaded TTFT at 0.7 x λ and the global plan drawn (topology.png); with
    --verify the global plan simulated at 0.7 x λ,
    ``requests`` per region."""
    from prfaas_plan.io.topology import load_topology
    from prfaas_plan.report.review_dir import check_review_dir, write_review_dir
    from prfaas_plan.report.topology import topology_study_dict
    from prfaas_plan.report.topology_review import topology_review_files
    from prfaas_plan.studies.topology import SimulationRequest, topology_study

    with handled(json_output):
        refuse("review", path, given)
        topology = load_topology(path)
        directory = output if output is not None else f"{topology.name}-review"
        try:
            check_review_dir(directory, force=force)
        except InputError as exc:  # a problem with the directory names the flag
            raise InputError(
                [replace(p, file=None, field="--output", message=f"{p.file}: {p.message}") for p in exc.problems]
            ) from None
        request = SimulationRequest(load=REVIEW_LOAD, requests_per_region=requests, seed=seed) if verify else None
        _note(
            f"review: {topology.name}: global plan, alternatives, N-1{', simulation' if verify else ''} ...",
            json_output,
        )
        study = topology_study(topology, faults=True, simulate=request, ttft_load=REVIEW_LOAD)
        payload = {"input": "topology", **topology_study_dict(study)}
        files = topology_review_files(payload)
        written = write_review_dir(directory, files, force=force)
    if json_output:
        emit({"directory": directory, "files": [p.name for p in written], "input": "topology"})
        return
    from prfaas_plan.cli.render import console

    console().print(f"review of topology {topology.name} written to {directory}/ ({len(written)} files)")
