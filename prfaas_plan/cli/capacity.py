"""Capacity commands: ``size`` (the cheapest deployment for a target) and ``cost`` (a plan priced, beside
homogeneous PD at equal GPU count and at equal cost)."""

from __future__ import annotations

import math
import os
import sys
from typing import Annotated, Any

import typer

from prfaas_plan.cli.common import check_finite, emit, handled
from prfaas_plan.errors import InfeasibleError, InputError, Problem
from prfaas_plan.io.limits import MAX_INSTANCES, MAX_LINK_GBIT_PER_S, MAX_RATE_REQ_PER_S, MIN_LINK_GBIT_PER_S

ScenarioArg = Annotated[
    str | None,
    typer.Argument(
        help="Scenario YAML file, or a built-in scenario name (default: paper-case-study).", show_default=False
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of a table.")]
BandOpt = Annotated[
    bool,
    typer.Option(
        "--band/--no-band",
        help="Also size at the edges of the roofline and calibrated pools' error bands (their engine's "
        "cross-validated error): the answer if prefill and decode are that much slower or faster.",
    ),
]
#: The budget of a sequential simulation check (``studies.verify``): replications are added one at a time until
#: the SLO lies outside the interval, or one of these ends.
VerifyMaxRequestsOpt = Annotated[
    int,
    typer.Option(
        "--verify-max-requests",
        min=1000,
        max=100_000_000,
        help="Budget of a simulation check: requests simulated in all before it says 'undecided within budget'.",
    ),
]
VerifyMaxSecondsOpt = Annotated[
    float,
    typer.Option(
        "--verify-max-s",
        min=0.0,
        max=86_400.0,
        help="Budget of a simulation check: seconds before it says 'undecided within budget'.",
    ),
]

#: Link sizes listed in the ``size`` command's knee table beside the sized link (Gbit/s): a fixed decade
#: grid, so that the table spans the same range whatever link sizes the price list offers.
KNEE_GRID_GBIT_PER_S = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 400.0)


def _bandwidths(text: str | None) -> list[float] | None:
    if text is None:
        return None
    values = []
    for part in text.split(","):
        try:
            value = float(part)
        except ValueError:
            raise InputError(
                Problem(field="--bandwidths", message=f"expected comma-separated Gbit/s values, got {part!r}")
            ) from None
        if not (math.isfinite(value) and MIN_LINK_GBIT_PER_S <= value <= MAX_LINK_GBIT_PER_S):
            raise InputError(
                Problem(
                    field="--bandwidths",
                    message=f"each value must be in {MIN_LINK_GBIT_PER_S:g}..{MAX_LINK_GBIT_PER_S:g}, got {part}",
                )
            )
        values.append(value)
    if len(values) > 256:
        raise InputError(Problem(field="--bandwidths", message=f"at most 256 values, got {len(values)}"))
    return values


def target_option(spec: Any, rate: float | None, ttft_p90_s: float | None) -> Any:
    from prfaas_plan.spec.cost import Target

    goal = spec.target
    rate = rate if rate is not None else (goal.rate_req_per_s if goal else None)
    slo = ttft_p90_s if ttft_p90_s is not None else (goal.ttft_slo_s if goal else spec.slo.ttft_p90_s)
    problems = []
    if rate is None:
        problems.append(Problem(field="--rate", message="no target rate: give --rate or a target section"))
    if slo is None:
        problems.append(Problem(field="--ttft-p90-s", message="no TTFT SLO: give --ttft-p90-s, target or slo"))
    for flag, value in (("--rate", rate), ("--ttft-p90-s", slo)):
        if value is not None and not value > 0:
            problems.append(Problem(field=flag, message=f"must be > 0, got {value}"))
    if rate is not None and rate > MAX_RATE_REQ_PER_S:
        problems.append(Problem(field="--rate", message=f"must be <= {MAX_RATE_REQ_PER_S:g} req/s, got {rate}"))
    if problems:
        raise InputError(problems)
    return Target(rate_req_per_s=float(rate), ttft_slo_s=float(slo), quantile=0.9)  # type: ignore[arg-type]


def _priced(spec: Any) -> Any:
    from prfaas_plan.optimize.cost import unit_prices

    prices = unit_prices(spec)
    missing = [
        f"{pool.hardware_key}: {src}"
        for pool, value, src in (
            (
                spec.prfaas,
                prices.prfaas_usd_per_instance_hour,
                prices.sources[f"GPU-hour ({spec.prfaas.hardware_key}, PrfaaS)"],
            ),
            (
                spec.local,
                prices.local_usd_per_instance_hour,
                prices.sources[f"GPU-hour ({spec.local.hardware_key}, local)"],
            ),
        )
        if value is None
    ]
    if missing:
        raise InputError([Problem(file=spec.file, field="cost.gpu_usd_per_hour", message=m) for m in missing])
    return prices


def size(
    scenario: ScenarioArg = None,
    rate: Annotated[
        float | None, typer.Option("--rate", help="Target arrival rate, req/s (default: the scenario's target).")
    ] = None,
    ttft_p90_s: Annotated[
        float | None,
        typer.Option("--ttft-p90-s", help="P90 TTFT SLO, s (default: the scenario's target, then its slo)."),
    ] = None,
    tpot_p90_ms: Annotated[
        float | None,
        typer.Option(
            "--tpot-p90-ms",
            help="P90 TPOT SLO under load, ms, held beside the TTFT SLO (default: the scenario's slo tpot_p90_ms).",
        ),
    ] = None,
    bandwidths: Annotated[
        str | None,
        typer.Option(
            "--bandwidths",
            help="Link sizes to consider, Gbit/s, comma-separated (default: the priced ports' multiples up to "
            "twice the target's full-offload egress; a free link: the scenario's bandwidth).",
        ),
    ] = None,
    max_prfaas: Annotated[
        int | None, typer.Option("--max-prfaas", min=1, max=MAX_INSTANCES, help="Most PrfaaS instances.")
    ] = None,
    max_local: Annotated[
        int | None, typer.Option("--max-local", min=2, max=MAX_INSTANCES, help="Most local instances.")
    ] = None,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify/--no-verify",
            help="Simulate the sized deployments at the target rate until the P90 TTFT's interval is on one side "
            "of the SLO (or the budget ends).",
        ),
    ] = True,
    verify_max_requests: VerifyMaxRequestsOpt = 1_000_000,
    verify_max_s: VerifyMaxSecondsOpt = 60.0,
    write_scenario: Annotated[
        str | None,
        typer.Option(
            "--write-scenario",
            help="Write the sized PrfaaS-PD deployment as a scenario YAML (the input with the sized instances, link "
            "and target; the threshold and split in its header) that evaluate and optimize load.",
        ),
    ] = None,
    band: BandOpt = True,
    json_output: JsonOpt = False,
) -> None:
    """The cheapest deployment (PrfaaS instances, local instances, link, threshold and split) that carries a
    rate within a P90 TTFT SLO, beside the cheapest homogeneous PD; the scenario's own deployment's largest
    rate within the SLO; and what each link size buys the sized deployment.

    Example: prfaas-plan size --rate 3 --ttft-p90-s 5
    Example: prfaas-plan size --rate 3 --ttft-p90-s 5 --tpot-p90-ms 50
    Example: prfaas-plan size --rate 2000 --no-verify --write-scenario fleet.yaml
    """
    from dataclasses import replace

    from prfaas_plan.io.file_kind import topology_argument

    topology = topology_argument(scenario)
    if topology is not None:
        from prfaas_plan.cli import topology_commands

        flags = (rate, tpot_p90_ms, bandwidths, max_prfaas, max_local, write_scenario)
        names = ("--rate", "--tpot-p90-ms", "--bandwidths", "--max-prfaas", "--max-local", "--write-scenario")
        topo_given = {name: value is not None for name, value in zip(names, flags, strict=True)}
        topology_commands.size(topology, ttft_p90_s=ttft_p90_s, given=topo_given, json_output=json_output)
        return
    from prfaas_plan.io.names import resolve_scenario_path
    from prfaas_plan.io.scenario import load_scenario
    from prfaas_plan.optimize.shape_choice import for_target
    from prfaas_plan.optimize.sizing import SIZING_RESOLUTION_TOKENS
    from prfaas_plan.report.capacity import size_to_dict
    from prfaas_plan.report.shapes import shape_choice_to_dict
    from prfaas_plan.studies.closed_form import Traffic
    from prfaas_plan.studies.review import SIZING_CHECK, sizing_part
    from prfaas_plan.throughput import stage_model
    from prfaas_plan.units import GBIT_PER_S

    with handled(json_output):
        check_finite({"--rate": rate, "--ttft-p90-s": ttft_p90_s, "--tpot-p90-ms": tpot_p90_ms})
        given = _bandwidths(bandwidths)
        if write_scenario is not None:
            _check_scenario_output(write_scenario)
        spec_path = resolve_scenario_path(scenario)
        if tpot_p90_ms is None:
            spec = load_scenario(spec_path)
        else:  # through the loader, so that the flag meets the file's limits
            from prfaas_plan.cli.common import load_with_flags

            spec = load_with_flags(scenario, {"--tpot-p90-ms": tpot_p90_ms})
        target = target_option(spec, rate, ttft_p90_s)
        _priced(spec)
        links = None if given is None else [b * GBIT_PER_S for b in given]
        scv = spec.traffic.output_length.scv
        shapes = for_target(
            spec,
            target,
            bandwidths_bytes_per_s=links,
            max_prfaas=max_prfaas,
            max_local=max_local,
            decode_service_scv=scv,
        )
        spec = shapes.scenario  # the pools in the shapes chosen (as given when no pool says shape: auto)
        prices = _priced(spec)
        part = sizing_part(
            stage_model(spec),
            prices,
            target,
            Traffic(output_lengths=spec.traffic.output_length),
            decode_service_scv=scv,
            bandwidths_bytes_per_s=links,
            max_prfaas=max_prfaas,
            max_local=max_local,
            resolution_tokens=SIZING_RESOLUTION_TOKENS,
            knee_bandwidths_bytes_per_s=[g * GBIT_PER_S for g in KNEE_GRID_GBIT_PER_S],
            verify=replace(SIZING_CHECK, verify=verify, max_requests=verify_max_requests, max_wall_s=verify_max_s),
        )
        payload = size_to_dict(spec, part)
        payload["shapes"] = shape_choice_to_dict(shapes)
        if part.sizing.prfaas_pd is None and part.sizing.homogeneous_pd is None:
            raise InfeasibleError(list(part.sizing.reasons))
        if write_scenario is not None:
            from prfaas_plan.cli.capacity_render import shape_line

            shape_note = [shape_line(payload["shapes"])] if shapes.choosing else []
            payload["written_scenario"] = _write_sized(write_scenario, spec_path, part.sizing, shape_note)
        if band:
            payload["error_band"] = _size_band(spec, prices, target, part.sizing)
    if json_output:
        emit(payload)
        return
    if write_scenario is not None:
        from prfaas_plan.report.files import commits_held

        if sys.stderr is not None:  # a closed stderr: nothing said (print would fall back to stdout)
            held = " (held until the command has printed its tables)" if commits_held() else ""
            print(f"{'will write' if held else 'wrote'} {payload['written_scenario']}{held}", file=sys.stderr)
    _print_size(spec, part, payload)


def _print_size(spec: Any, part: Any, payload: dict[str, Any]) -> None:
    """The sizing's tables, its shape line (a note: left out of --format csv) and the error band's edges."""
    from prfaas_plan.cli.capacity_render import print_sizing, shape_line
    from prfaas_plan.cli.render import console

    print_sizing(spec, part.sizing, payload, payload.get("simulation_check"))
    console().print(shape_line(payload["shapes"]))
    if payload.get("error_band"):
        from prfaas_plan.cli.band_render import print_size_band

        print_size_band(payload["error_band"])


def _size_band(spec: Any, prices: Any, target: Any, sizing: Any) -> dict[str, Any] | None:
    """The sizing at both edges of the pools' error bands (``optimize.uncertainty``); None when no pool has
    one (measured pools)."""
    from prfaas_plan.optimize.uncertainty import EDGES, banded, size_edge, verdict
    from prfaas_plan.report.uncertainty import edges_to_dict
    from prfaas_plan.studies.uncertainty import banded_scenario

    spec = banded_scenario(spec)
    if not banded(spec):
        return None
    scv = spec.traffic.output_length.scv
    edges = tuple(size_edge(spec, prices, target, sizing, e, decode_service_scv=scv) for e in EDGES)
    return edges_to_dict(spec, verdict(sizing), edges)


def _check_scenario_output(path: str) -> None:
    """Before the sizing: --write-scenario can be written (a new file, or one this option wrote)."""
    from dataclasses import replace

    from prfaas_plan.report.scenario import check_scenario_output

    try:
        check_scenario_output(path)
    except InputError as exc:
        raise InputError([replace(p, field="--write-scenario") for p in exc.problems]) from None


def _write_sized(path: str, spec_path: Any, sizing: Any, shape_note: list[str] | None = None) -> str:
    """Write the sized PrfaaS-PD deployment as a scenario (``report.scenario``); its path as written. With
    ``shape: auto`` the file keeps ``auto`` and ``shape_note`` (the shapes chosen) goes in its header."""
    from prfaas_plan.report.scenario import sized_plan, write_sized_scenario

    found = sizing.prfaas_pd
    if found is None:
        raise InfeasibleError(
            ["no PrfaaS-PD deployment carries the target: nothing to write to --write-scenario", *sizing.reasons]
        )
    notes = list(shape_note or [])
    cheaper = sizing.homogeneous_pd
    if cheaper is not None and cheaper.usd_per_hour < found.usd_per_hour:
        notes.append(
            f"The cheapest homogeneous PD ({cheaper.n_local} instances, {cheaper.usd_per_hour:,.2f} USD/h) costs less; "
            "this file holds the PrfaaS-PD deployment."
        )
    return str(write_sized_scenario(path, spec_path, sized_plan(found, sizing.target, notes)))


def cost(
    scenario: ScenarioArg = None,
    resolution_tokens: Annotated[
        float, typer.Option("--resolution-tokens", min=0.001, help="Resolution of the threshold search.")
    ] = 10.0,
    json_output: JsonOpt = False,
) -> None:
    """The throughput-optimal plan priced (per hour, per million tokens), beside homogeneous PD at equal GPU
    count (the paper's Table 6) and at equal cost, and the equal-cost gain at every price ratio.

    Example: prfaas-plan cost
    """
    from prfaas_plan.io.names import resolve_scenario_path
    from prfaas_plan.io.scenario import load_scenario
    from prfaas_plan.optimize import search
    from prfaas_plan.optimize.economics import cost_comparison
    from prfaas_plan.report.capacity import cost_comparison_to_dict
    from prfaas_plan.throughput import stage_model

    with handled(json_output):
        check_finite({"--resolution-tokens": resolution_tokens})
        spec = load_scenario(resolve_scenario_path(scenario))
        prices = _priced(spec)
        model = stage_model(spec)
        plan = search(model, resolution_tokens)
        result = cost_comparison(
            model,
            prices,
            plan,
            prfaas_gpus_per_instance=spec.prfaas.gpus_per_instance,
            local_gpus_per_instance=spec.local.gpus_per_instance,
        )
        payload = {"scenario": spec.name, **cost_comparison_to_dict(result, spec.local.hardware_key)}
    if json_output:
        emit(payload)
        return
    from prfaas_plan.cli.capacity_render import print_cost

    print_cost(spec, result)


def hardware_names(text: str, flag: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise InputError(Problem(field=flag, message="expected comma-separated hardware names"))
    return names


def matrix(
    scenario: ScenarioArg = None,
    prefill: Annotated[
        str, typer.Option("--prefill", help="PrfaaS (prefill) hardware, comma-separated names.")
    ] = "h200,b200,h100,mi300x",
    local: Annotated[str, typer.Option("--local", help="Local PD hardware, comma-separated names.")] = "h20,h800,h100",
    rate: Annotated[float | None, typer.Option("--rate", help="Target rate, req/s (default: the scenario's).")] = None,
    ttft_p90_s: Annotated[
        float | None, typer.Option("--ttft-p90-s", help="P90 TTFT SLO, s (default: the scenario's).")
    ] = None,
    band: BandOpt = True,
    json_output: JsonOpt = False,
) -> None:
    """Size every (prefill hardware x local hardware) pair to the same target, each pool from the best
    evidence for it (measured, calibrated roofline, roofline), and the Pareto frontier of cost against
    goodput and against throughput.

    Example: prfaas-plan matrix --prefill h200,b200 --local h20,h100 --rate 3 --ttft-p90-s 5
    """
    from dataclasses import replace

    from prfaas_plan.io.names import resolve_scenario_path
    from prfaas_plan.io.scenario import load_scenario
    from prfaas_plan.optimize.matrix import hardware_matrix
    from prfaas_plan.report.capacity import matrix_to_dict
    from prfaas_plan.studies.matrix_inputs import matrix_inputs

    with handled(json_output):
        check_finite({"--rate": rate, "--ttft-p90-s": ttft_p90_s})
        spec = load_scenario(resolve_scenario_path(scenario))
        target = target_option(spec, rate, ttft_p90_s)
        try:
            inputs = matrix_inputs(spec, hardware_names(prefill, "--prefill"), hardware_names(local, "--local"))
        except InputError as exc:  # the library names its arguments; the command names its flags
            raise InputError(
                [replace(p, field=f"--{p.field}") if p.field in ("prefill", "local") else p for p in exc.problems]
            ) from None
        result = hardware_matrix(
            inputs, target, decode_service_scv=spec.traffic.output_length.scv, workers=min(os.cpu_count() or 1, 8)
        )
        payload = {"scenario": spec.name, **matrix_to_dict(result)}
        if band:
            from prfaas_plan.report.uncertainty import matrix_band_to_dict
            from prfaas_plan.studies.uncertainty import matrix_band

            axes = (hardware_names(prefill, "--prefill"), hardware_names(local, "--local"))
            workers = min(os.cpu_count() or 1, 8)
            scv = spec.traffic.output_length.scv
            found = matrix_band(spec, *axes, target, result, decode_service_scv=scv, workers=workers)
            payload["error_band"] = matrix_band_to_dict(found)
    if json_output:
        emit(payload)
        return
    from prfaas_plan.cli.capacity_render import print_matrix

    print_matrix(spec, result)
    if "error_band" in payload:
        from prfaas_plan.cli.band_render import print_matrix_band

        print_matrix_band(payload["error_band"])


def headroom(
    scenario: ScenarioArg = None,
    rate: Annotated[float | None, typer.Option("--rate", help="Target rate, req/s (default: the scenario's).")] = None,
    ttft_p90_s: Annotated[
        float | None, typer.Option("--ttft-p90-s", help="P90 TTFT SLO, s (default: the scenario's).")
    ] = None,
    step: Annotated[
        float, typer.Option("--step", min=0.01, max=0.9, help="Relative move of each input in the tornado.")
    ] = 0.2,
    bandwidth_quantile: Annotated[
        float,
        typer.Option(
            "--bandwidth-quantile",
            min=0.001,
            max=0.999,
            help="With a dynamics.link profile: plan for goodput at this quantile of the link's bandwidth.",
        ),
    ] = 0.1,
    json_output: JsonOpt = False,
) -> None:
    """How much the scenario's deployment can lose: a tornado of Λ_max, goodput and cost per million tokens
    against each input (±step, t and split re-optimised), and N-1 (one PrfaaS instance, one local instance,
    half the link) with whether the target is still carried and its P90 TTFT; with a link profile in the
    scenario's dynamics, the plan that maximises goodput at a low quantile of the bandwidth (robust) beside
    the one planned at the mean.

    Example: prfaas-plan headroom --rate 2 --ttft-p90-s 5
    """
    from prfaas_plan.io.file_kind import topology_argument

    topology = topology_argument(scenario)
    if topology is not None:
        from prfaas_plan.cli import topology_commands

        given = {"--rate": rate is not None, "--ttft-p90-s": ttft_p90_s is not None, "--step": step != 0.2}
        given |= {"--bandwidth-quantile": bandwidth_quantile != 0.1}
        topology_commands.headroom(topology, given=given, json_output=json_output)
        return
    from prfaas_plan.io.names import resolve_scenario_path
    from prfaas_plan.io.scenario import load_scenario
    from prfaas_plan.optimize.headroom import n_minus_one, tornado
    from prfaas_plan.report.capacity import headroom_to_dict
    from prfaas_plan.throughput import stage_model

    with handled(json_output):
        check_finite({"--rate": rate, "--ttft-p90-s": ttft_p90_s, "--step": step})
        spec = load_scenario(resolve_scenario_path(scenario))
        target = target_option(spec, rate, ttft_p90_s)
        prices = _priced(spec)
        model = stage_model(spec)
        scv = spec.traffic.output_length.scv
        bars = tornado(model, prices, target.ttft_slo, step=step, decode_service_scv=scv)
        failures = n_minus_one(model, target, decode_service_scv=scv)
        robust = None
        if spec.dynamics is not None and spec.dynamics.bandwidth is not None:
            from prfaas_plan.optimize.robust import robust_plan

            robust = robust_plan(
                model,
                spec.dynamics.bandwidth,
                bandwidth_quantile,
                target.ttft_slo,
                decode_service_scv=scv,
            )
        payload = {"scenario": spec.name, **headroom_to_dict(target, bars, failures, robust)}
    if json_output:
        emit(payload)
        return
    from prfaas_plan.cli.capacity_render import print_headroom

    print_headroom(spec, target, bars, failures, robust)
