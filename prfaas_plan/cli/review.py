"""``review``: the whole capacity review of a scenario, written atomically as a directory (report.md, PNG
figures, review.json and a CSV per table)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from prfaas_plan.cli.capacity import (
    JsonOpt,
    ScenarioArg,
    VerifyMaxRequestsOpt,
    VerifyMaxSecondsOpt,
    hardware_names,
    target_option,
)
from prfaas_plan.cli.common import check_finite, emit, handled


def review(
    scenario: ScenarioArg = None,
    output: Annotated[
        str | None,
        typer.Option("--output", "-o", help="Directory to write (default: ./<scenario>-review).", show_default=False),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing non-empty output directory.")] = False,
    quick: Annotated[
        bool,
        typer.Option(
            "--quick", help="Fewer simulated loads and coarser sensitivity and N-1 searches (about half the time)."
        ),
    ] = False,
    verify: Annotated[
        bool,
        typer.Option("--verify/--no-verify", help="Check the closed forms by simulation (points with 95 % intervals)."),
    ] = True,
    replications: Annotated[
        int,
        typer.Option(
            "--replications", min=2, max=100, help="Simulated realisations per check before adding them one at a time."
        ),
    ] = 3,
    verify_requests: Annotated[
        int, typer.Option("--verify-requests", min=1000, max=1_000_000, help="Requests per simulated realisation.")
    ] = 20_000,
    verify_max_requests: VerifyMaxRequestsOpt = 1_000_000,
    verify_max_s: VerifyMaxSecondsOpt = 60.0,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**63 - 1, help="Seed of the simulated workloads.")] = 0,
    rate: Annotated[float | None, typer.Option("--rate", help="Target rate, req/s (default: the scenario's).")] = None,
    ttft_p90_s: Annotated[
        float | None,
        typer.Option("--ttft-p90-s", help="P90 TTFT SLO, s (default: the scenario's target, then its slo)."),
    ] = None,
    matrix: Annotated[
        bool,
        typer.Option("--matrix/--no-matrix", help="Size hardware alternatives too (each pair is a sizing: 10-60 s)."),
    ] = False,
    prefill: Annotated[
        str, typer.Option("--prefill", help="--matrix: PrfaaS hardware, comma-separated.")
    ] = "h200,b200",
    local: Annotated[str, typer.Option("--local", help="--matrix: local PD hardware, comma-separated.")] = "h20,h100",
    sensitivity: Annotated[
        bool,
        typer.Option("--sensitivity/--no-sensitivity", help="Run the sensitivity tornado (about a third of the time)."),
    ] = True,
    json_output: JsonOpt = False,
) -> None:
    """Run the whole capacity review of a scenario (best plan and baselines, TTFT under load checked by
    simulation, goodput, sizing to the target, cost, hardware alternatives, sensitivity, N-1: whatever the
    scenario gives inputs for) and write it as a directory: report.md, PNG figures, review.json and a CSV per
    table. The directory appears whole or not at all.

    Example: prfaas-plan review paper-case-study -o review-q3
    Example: prfaas-plan review qwen3.5-capacity --quick --no-verify -o /tmp/qwen-review
    """
    from prfaas_plan.io.file_kind import topology_argument

    topology = topology_argument(scenario)
    if topology is not None:
        from prfaas_plan.cli import topology_commands

        flags = {"--rate": rate, "--ttft-p90-s": ttft_p90_s}
        given = {k: v is not None for k, v in flags.items()} | {"--quick": quick, "--matrix": matrix}
        topology_commands.review(
            topology,
            output=output,
            force=force,
            verify=verify,
            requests=verify_requests,
            seed=seed,
            given=given,
            json_output=json_output,
        )
        return
    from prfaas_plan.io.names import resolve_scenario_path
    from prfaas_plan.io.scenario import load_scenario
    from prfaas_plan.report.review_data import review_tables, review_to_dict, table_csv
    from prfaas_plan.report.review_dir import check_review_dir, write_review_dir
    from prfaas_plan.report.review_markdown import report_markdown
    from prfaas_plan.studies.review import ReviewOptions
    from prfaas_plan.studies.review import review as run_review
    from prfaas_plan.studies.verify import VerifyOptions

    with handled():
        check_finite({"--rate": rate, "--ttft-p90-s": ttft_p90_s})
        pairs = _matrix_axes(prefill, local) if matrix else None
        spec = load_scenario(resolve_scenario_path(scenario))
        directory = output if output is not None else f"{spec.name}-review"
        _check_directory(directory, force, check_review_dir)
        target = target_option(spec, rate, ttft_p90_s) if rate is not None or spec.target is not None else None
        slo = target.ttft_slo_s if target is not None else ttft_p90_s if ttft_p90_s is not None else spec.slo.ttft_p90_s
        options = ReviewOptions(
            verify=VerifyOptions(
                verify=verify,
                replications=replications,
                requests=verify_requests,
                seed=seed,
                max_requests=verify_max_requests,
                max_wall_s=verify_max_s,
            ),
            quick=quick,
            matrix=pairs,
            sensitivity=sensitivity,
        )
        cells = None
        if pairs is not None:
            from prfaas_plan.studies.matrix_inputs import matrix_inputs

            cells = matrix_inputs(spec, *pairs)
        result = run_review(
            spec,
            target=target,
            ttft_slo_s=slo,
            options=options,
            progress=_progress(json_output),
            matrix_cells=cells,
        )
        from prfaas_plan.report.figures import review_figures

        figures = review_figures(result)
        tables = review_tables(result)
        files: dict[str, str | bytes] = {
            "report.md": report_markdown(result, tables, [(f.name, f.caption, f.provenance) for f in figures]),
            "review.json": _json(review_to_dict(result)),
        }
        files.update({f.name: f.png for f in figures})
        files.update({f"{t.name}.csv": table_csv(t) for t in tables})
        written = _named_by_flag(lambda: write_review_dir(directory, files, force=force))
    if json_output:
        emit({"directory": directory, "files": [p.name for p in written], "skipped": dict(result.skipped)})
        return
    from prfaas_plan.cli.render import console

    out = console()
    out.print(
        f"review of {spec.name} written to {directory}/ ({len(written)} files): report.md, review.json, "
        f"{len(figures)} figures, {len(tables)} tables"
    )
    for part, why in result.skipped.items():
        out.print(f"  not reviewed: {part}: {why}", style="dim")


def _matrix_axes(prefill: str, local: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The --matrix axes, each name checked (before any work) to be a hardware profile."""
    from prfaas_plan.errors import InputError, Problem
    from prfaas_plan.io.names import load_named_hardware

    axes = (tuple(hardware_names(prefill, "--prefill")), tuple(hardware_names(local, "--local")))
    problems: list[Problem] = []
    for flag, names in zip(("--prefill", "--local"), axes, strict=True):
        for name in names:
            try:
                load_named_hardware(name, field=flag)
            except InputError as exc:
                problems += exc.problems
    if problems:
        raise InputError(problems)
    return axes


def _check_directory(directory: str, force: bool, check: Any) -> None:
    """The output directory is checked before any work; a problem names the flag."""
    _named_by_flag(lambda: check(directory, force=force))


def _named_by_flag(action: Any) -> Any:
    """``action()``, its problems with the output directory named by the flag (``--output: DIR: ...``): at the
    check before any work, and at the write after it (where another run may have taken the name meanwhile)."""
    from dataclasses import replace

    from prfaas_plan.errors import InputError

    try:
        return action()
    except InputError as exc:
        raise InputError(
            [
                p if p.file is None else replace(p, file=None, field="--output", message=f"{p.file}: {p.message}")
                for p in exc.problems
            ]
        ) from None


def _progress(quiet: bool) -> Any:
    """Each part's name on stderr as it starts (nothing with --json)."""
    if quiet:
        return None
    from prfaas_plan.cli.render import console

    err = console(stderr=True)
    return lambda part: err.print(f"review: {part} ...", style="dim")


def _json(payload: dict[str, Any]) -> str:
    import json

    return json.dumps(payload, indent=2, allow_nan=False) + "\n"
