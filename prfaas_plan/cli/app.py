"""The ``prfaas-plan`` command line: thin commands that parse options, call the library once and render."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Annotated, Any

import typer
import typer.main
from typer.core import TyperGroup

from prfaas_plan._lazy import lazy_getattr
from prfaas_plan.errors import InputError, Problem
from prfaas_plan.io.limits import MAX_RATE_REQ_PER_S, MAX_TOKENS

if TYPE_CHECKING:
    from typer._click import Command

#: Every command and command group in the order ``--help`` lists them, and the attribute of this module that
#: defines it (a function for a command, a ``typer.Typer`` for a group). The commands of other modules are this
#: module's lazy exports (``_EXPORTS``, ``prfaas_plan._lazy``): a command's module is imported, and its click command
#: built from the function's signature, only when the command is looked up, so running ``optimize`` loads neither
#: the other commands' modules nor their option parsers; ``--help`` builds them all to list them.
COMMANDS: dict[str, str] = {
    "optimize": "optimize",
    "evaluate": "evaluate",
    "fit": "fit",
    "schema": "schema",
    "kv": "kv",
    "simulate": "simulate",
    "size": "size",
    "cost": "cost",
    "matrix": "matrix",
    "headroom": "headroom",
    "review": "review",
    "sweep": "sweep",
    "calibrate": "calibrate",
    "model": "model_app",
    "validate": "validate_app",
    "topology": "topology_app",
}
_EXPORTS = {
    "kv": "prfaas_plan.cli.kv",
    "simulate": "prfaas_plan.cli.simulate",
    "size": "prfaas_plan.cli.capacity",
    "cost": "prfaas_plan.cli.capacity",
    "matrix": "prfaas_plan.cli.capacity",
    "headroom": "prfaas_plan.cli.capacity",
    "review": "prfaas_plan.cli.review",
    "sweep": "prfaas_plan.cli.sweep",
    "calibrate": "prfaas_plan.cli.calibrate",
    "model_app": "prfaas_plan.cli.model",
    "validate_app": "prfaas_plan.cli.validate",
    "topology_app": "prfaas_plan.cli.topology",
}
__getattr__ = lazy_getattr(__name__, _EXPORTS)


def _build(name: str) -> Command:
    """The click command (or group) of ``COMMANDS[name]``, built as ``app.command()`` / ``app.add_typer`` would
    have built it when the whole tree was registered up front (the same typer calls, with the root's settings)."""
    target = getattr(sys.modules[__name__], COMMANDS[name])
    holder = typer.Typer()
    if isinstance(target, typer.Typer):
        holder.add_typer(target, name=name)
        built: Command = typer.main.get_group_from_info(
            holder.registered_groups[0],
            pretty_exceptions_short=app.pretty_exceptions_short,
            rich_markup_mode=app.rich_markup_mode,
            suggest_commands=app.suggest_commands,
        )
    else:
        holder.command()(target)
        built = typer.main.get_command_from_info(
            holder.registered_commands[0],
            pretty_exceptions_short=app.pretty_exceptions_short,
            rich_markup_mode=app.rich_markup_mode,
        )
    if built.name != name:  # pragma: no cover - a COMMANDS entry that names a function of another name
        raise RuntimeError(f"COMMANDS[{name!r}] builds the command {built.name!r}")
    return built


class _LazyCommands(Mapping[str, "Command"]):
    """The root group's commands by name: the names are known up front, each command is built on first lookup."""

    def __init__(self) -> None:
        self._built: dict[str, Command] = {}

    def __getitem__(self, name: str) -> Command:
        command = self._built.get(name)
        if command is None:
            if name not in COMMANDS:
                raise KeyError(name)
            command = self._built[name] = _build(name)
        return command

    def __iter__(self) -> Iterator[str]:
        return iter(COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS)


class _LazyGroup(TyperGroup):
    """The root group: ``commands`` resolves a name to its command on demand (``_LazyCommands``), and listing
    the names (``--help``, "did you mean") builds nothing until a command's help text is needed."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _LazyCommands()  # type: ignore[assignment]

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)


app = typer.Typer(
    cls=_LazyGroup,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Capacity planning for Prefill-as-a-Service (PrfaaS) with PD disaggregation.",
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        from prfaas_plan import __version__

        try:
            installed = version("prfaas-plan")
        except PackageNotFoundError:  # running from a source checkout that is not installed
            installed = __version__
        typer.echo(f"prfaas-plan {installed}")
        raise typer.Exit()


@app.callback()
def _main(
    ctx: typer.Context,
    show_version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = False,
    table_format: Annotated[
        str,
        typer.Option(
            "--format",
            help="How tables print: table (boxes), md (Markdown, to paste into a document) or csv (one table "
            "as data: the command's first, or the one --table picks). Goes before the command: prfaas-plan --format "
            "md optimize.",
        ),
    ] = "table",
    table_pick: Annotated[
        int | None,
        typer.Option(
            "--table",
            min=1,
            help="With --format csv or md: print only the command's N-th table (1, 2, ...; csv prints the first "
            "and names the others on stderr).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Capacity planning for Prefill-as-a-Service (PrfaaS) with PD disaggregation."""
    if table_format == "table" and table_pick is None and "prfaas_plan.cli.render" not in sys.modules:
        return  # the default, and no command in this process has set another (rich stays unloaded for --json)
    from prfaas_plan.cli.render import TABLE_FORMATS, set_table_format

    if table_format not in TABLE_FORMATS:
        print(f"error: --format: must be one of {', '.join(TABLE_FORMATS)}, got {table_format!r}", file=sys.stderr)
        raise typer.Exit(2)
    if table_pick is not None:
        problem = _table_pick_problem(table_format, ctx.invoked_subcommand, sys.argv[1:])
        if problem is not None:
            print(f"error: --table: {problem}", file=sys.stderr)
            raise typer.Exit(2)
        if _UNDER_MAIN:  # main() checks the pick once the command has printed, and only then commits its files
            from prfaas_plan.report.files import hold_commits

            hold_commits()
    set_table_format(table_format, table_pick)


#: Commands that print no table on stdout (they write files, JSON or a schema): ``--table`` has nothing to pick.
_NO_TABLES = {("review",), ("sweep",), ("schema",), ("model", "import"), ("validate", "gpu")}


def _table_pick_problem(table_format: str, command: str | None, argv: list[str]) -> str | None:
    """Why ``--table N`` cannot apply to this command line, known before any work (None where it may): a table
    format, a command that prints tables, no --json. (Whether the command prints N tables is known only once it
    has run.)"""
    if table_format == "table":
        return "picks a table of --format csv or md (prfaas-plan --format csv --table 2 ...)"
    if "--json" in argv:
        return "picks a table, and --json prints none"
    words: tuple[str, ...] = ()
    if command is not None and command in argv:
        after = [a for a in argv[argv.index(command) + 1 :] if not a.startswith("-")]
        words = (command, *after[:1])
    for name in _NO_TABLES:
        if words[: len(name)] == name:
            return f"'{' '.join(name)}' prints no table"
    return None


ScenarioArg = Annotated[
    str | None,
    typer.Argument(
        help="Scenario YAML file, or a built-in scenario name (default: paper-case-study).",
        show_default=False,
    ),
]
BandwidthOpt = Annotated[
    float | None, typer.Option("--bandwidth-gbit-per-s", help="Override the cross-datacenter link bandwidth.")
]
NPrfaasOpt = Annotated[int | None, typer.Option("--n-prfaas", help="Override the number of PrfaaS instances.")]
NLocalOpt = Annotated[
    int | None,
    typer.Option("--n-local", help="Override the local PD pool's instance count (split into N_p + N_d)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of a table.")]
ResolutionOpt = Annotated[
    float, typer.Option("--resolution-tokens", help="Resolution of the threshold search.", min=0.001)
]
RateOpt = Annotated[
    float | None,
    typer.Option(
        "--rate",
        help="Add TTFT under load at this arrival rate (req/s; every plan at the same rate).",
        max=MAX_RATE_REQ_PER_S,
    ),
]
LoadOpt = Annotated[
    float | None,
    typer.Option("--load", help="Add TTFT under load at this fraction of each plan's Λ_max (e.g. 0.7)."),
]
CurveOpt = Annotated[bool, typer.Option("--curve", help="Add the plan's TTFT percentiles at 10%..95% of its Λ_max.")]
TraceOpt = Annotated[
    str | None,
    typer.Option(
        "--trace",
        help="Offer a trace's traffic (its uncached lengths, output lengths and arrival times, rescaled to the "
        "rate): a Mooncake .jsonl or Azure .csv file, or a built-in name: mooncake-conversation, "
        "mooncake-synthetic, azure-code, azure-conv.",
    ),
]
PrefixCacheOpt = Annotated[
    bool, typer.Option("--prefix-cache", help="Mooncake traces: prefill only what an infinite prefix cache misses.")
]
VerifyOpt = Annotated[
    bool,
    typer.Option(
        "--verify/--no-verify",
        help="Check loaded figures (and goodput) by simulation, side by side with the closed form; --no-verify "
        "keeps the closed form alone.",
    ),
]
ReplicationsOpt = Annotated[
    int,
    typer.Option(
        "--replications", min=2, max=100, help="Simulated realisations per check (a trace: recorded + resamples)."
    ),
]
VerifyRequestsOpt = Annotated[
    int,
    typer.Option("--verify-requests", min=1000, max=1_000_000, help="Requests per simulated realisation."),
]
SeedOpt = Annotated[
    int,
    typer.Option(
        "--seed", min=0, max=2**63 - 1, help="Seed of the simulated workloads (a trace: of its bootstrap resamples)."
    ),
]


def _scenario(
    name: str | None,
    bandwidth: float | None,
    n_prfaas: int | None,
    n_local: int | None,
    tpot_p90_ms: float | None = None,
) -> Any:
    """The scenario with the flags that set its fields, validated by its loader (``cli.common.load_with_flags``)."""
    from prfaas_plan.cli.common import load_with_flags

    flags = {
        "--bandwidth-gbit-per-s": bandwidth,
        "--n-prfaas": n_prfaas,
        "--n-local": n_local,
        "--tpot-p90-ms": tpot_p90_ms,
    }
    return load_with_flags(name, flags)


def optimize(
    scenario: ScenarioArg = None,
    bandwidth_gbit_per_s: BandwidthOpt = None,
    n_prfaas: NPrfaasOpt = None,
    n_local: NLocalOpt = None,
    resolution_tokens: ResolutionOpt = 10.0,
    objective: Annotated[
        str,
        typer.Option(
            "--objective", help="throughput (the paper's Λ_max) or goodput (the largest rate within the TTFT SLO)."
        ),
    ] = "throughput",
    ttft_p90_s: Annotated[
        float | None,
        typer.Option("--ttft-p90-s", help="P90 TTFT SLO for --objective goodput (default: the scenario's slo)."),
    ] = None,
    tpot_p90_ms: Annotated[
        float | None,
        typer.Option(
            "--tpot-p90-ms",
            help="P90 TPOT SLO under load, ms, held beside the TTFT SLO by --objective goodput (default: the "
            "scenario's slo tpot_p90_ms; none).",
        ),
    ] = None,
    rate: RateOpt = None,
    load: LoadOpt = None,
    curve: CurveOpt = False,
    trace: TraceOpt = None,
    prefix_cache: PrefixCacheOpt = False,
    verify: VerifyOpt = True,
    replications: ReplicationsOpt = 5,
    verify_requests: VerifyRequestsOpt = 20_000,
    seed: SeedOpt = 0,
    json_output: JsonOpt = False,
) -> None:
    """Find the routing threshold and prefill/decode split with the highest throughput (or goodput: the most
    traffic whose P90 TTFT meets an SLO), beside the baselines.

    Example: prfaas-plan optimize --bandwidth-gbit-per-s 10
    Example: prfaas-plan optimize --load 0.7 --trace azure-conv
    Example: prfaas-plan optimize --objective goodput --ttft-p90-s 5
    Example: prfaas-plan optimize --objective goodput --ttft-p90-s 5 --tpot-p90-ms 50
    """
    from prfaas_plan.io.file_kind import topology_argument

    topology = topology_argument(scenario)
    if topology is not None:
        from prfaas_plan.cli import topology_commands

        topo_flags: dict[str, object] = {
            "--bandwidth-gbit-per-s": bandwidth_gbit_per_s,
            "--n-prfaas": n_prfaas,
            "--n-local": n_local,
        }
        topo_flags |= {"--ttft-p90-s": ttft_p90_s, "--tpot-p90-ms": tpot_p90_ms, "--rate": rate}
        given = {k: v is not None for k, v in topo_flags.items()}
        given |= {"--objective": objective != "throughput", "--curve": curve, "--trace": trace is not None}
        given |= {"--prefix-cache": prefix_cache}
        topology_commands.optimize(topology, load=load, given=given, json_output=json_output)
        return
    from prfaas_plan.cli import latency_render as lat
    from prfaas_plan.cli.common import check_finite
    from prfaas_plan.cli.common import emit as _emit
    from prfaas_plan.cli.common import handled as _handled
    from prfaas_plan.optimize import compare
    from prfaas_plan.optimize.shape_choice import for_throughput
    from prfaas_plan.report.plans import add_loaded, comparison_to_dict, goodput_comparison_to_dict
    from prfaas_plan.report.shapes import shape_choice_to_dict
    from prfaas_plan.throughput import stage_model

    with _handled(json_output):
        check_finite(
            {
                "--resolution-tokens": resolution_tokens,
                "--ttft-p90-s": ttft_p90_s,
                "--tpot-p90-ms": tpot_p90_ms,
                "--rate": rate,
                "--load": load,
            }
        )
        lat.check_load_options(rate, load)
        spec = _scenario(scenario, bandwidth_gbit_per_s, n_prfaas, n_local, tpot_p90_ms)
        shapes = for_throughput(spec, resolution_tokens)  # shape: auto; else the pools' own shapes
        spec = shapes.scenario
        slo = lat.goodput_slo(objective, ttft_p90_s, spec, rate, load, curve)
        loaded = slo is not None or rate is not None or load is not None or curve
        model, traffic, label, caches = _traffic(stage_model(spec), spec, trace, prefix_cache, loaded)
        options = _verify_options(verify, replications, verify_requests, seed, loaded)
        pools = (spec.prfaas.gpus, spec.local.gpus_per_instance)
        if slo is not None:
            from prfaas_plan.optimize import compare_goodput
            from prfaas_plan.optimize.token_rates import comparison_token_rates
            from prfaas_plan.report.tpot import token_rates_to_dict

            scv = spec.traffic.output_length.scv
            best = compare_goodput(model, *pools, slo, resolution_tokens=resolution_tokens, decode_service_scv=scv)
            from prfaas_plan.studies.under_load import verified_goodput

            check = verified_goodput(model, best, traffic, options)
            payload = goodput_comparison_to_dict(spec, best, check, model)
            token_rates = comparison_token_rates(model, best, spec.prfaas.gpus_per_instance, pools[1])
            payload["token_rates"] = token_rates_to_dict(token_rates)
        else:
            result = compare(model, *pools, resolution_tokens)
            view = _under_load(loaded, model, result, spec, rate, load, curve, traffic, options, label)
            payload = add_loaded(comparison_to_dict(spec, result, model), result, view)
        if caches is not None:
            payload["prefix_caches"] = caches
        payload["shapes"] = shape_choice_to_dict(shapes)
    if json_output:
        _emit(payload)
        return
    from prfaas_plan.cli.capacity_render import shape_line
    from prfaas_plan.cli.render import console

    out = console()
    if slo is not None:
        out.print(lat.goodput_table(spec, best, check))
        out.print(lat.goodput_note(best, check) + " " + lat.load_note(), style="dim")
        from prfaas_plan.cli.tpot_render import token_rates_table

        out.print(token_rates_table(token_rates))
        out.print(shape_line(payload["shapes"]))
        return
    _print_comparison(out, spec, result, payload, view, plan_title="PrfaaS-PD (optimised)", model=model)
    out.print(shape_line(payload["shapes"]))


def evaluate(
    scenario: ScenarioArg = None,
    threshold: Annotated[float, typer.Option("--threshold", help="Routing threshold t in uncached tokens.")] = ...,  # type: ignore[assignment]
    n_pd_prefill: Annotated[
        int | None,
        typer.Option("--n-pd-prefill", help="Local prefill instances N_p (required for a scenario)."),
    ] = None,
    n_pd_decode: Annotated[
        int | None, typer.Option("--n-pd-decode", help="Local decode instances N_d (required for a scenario).")
    ] = None,
    bandwidth_gbit_per_s: BandwidthOpt = None,
    n_prfaas: NPrfaasOpt = None,
    rate: RateOpt = None,
    load: LoadOpt = None,
    curve: CurveOpt = False,
    trace: TraceOpt = None,
    prefix_cache: PrefixCacheOpt = False,
    verify: VerifyOpt = True,
    replications: ReplicationsOpt = 5,
    verify_requests: VerifyRequestsOpt = 20_000,
    seed: SeedOpt = 0,
    json_output: JsonOpt = False,
) -> None:
    """Score one given plan (threshold and split) beside the two baselines, optionally under load. For a
    topology, every PD cluster routes at --threshold and chooses its own split (no --n-pd-* flags).

    Example: prfaas-plan evaluate --threshold 19400 --n-pd-prefill 3 --n-pd-decode 5
    Example: prfaas-plan evaluate --threshold 19400 --n-pd-prefill 3 --n-pd-decode 5 --load 0.7 --curve
    """
    from prfaas_plan.io.file_kind import topology_argument

    topology = topology_argument(scenario)
    if topology is not None:
        from prfaas_plan.cli import topology_commands

        topo_flags: dict[str, object] = {
            "--bandwidth-gbit-per-s": bandwidth_gbit_per_s,
            "--n-prfaas": n_prfaas,
            "--rate": rate,
        }
        topo_flags |= {"--load": load, "--trace": trace}
        given = {k: v is not None for k, v in topo_flags.items()} | {"--curve": curve, "--prefix-cache": prefix_cache}
        topology_commands.evaluate(
            topology,
            threshold_tokens=threshold,
            n_pd=(n_pd_prefill, n_pd_decode),
            given=given,
            json_output=json_output,
        )
        return
    from prfaas_plan.cli import latency_render as lat
    from prfaas_plan.cli.common import check_finite
    from prfaas_plan.cli.common import emit as _emit
    from prfaas_plan.cli.common import handled as _handled
    from prfaas_plan.optimize import Comparison, plan_comparison
    from prfaas_plan.report.plans import add_loaded, comparison_to_dict
    from prfaas_plan.spec.plan import Plan
    from prfaas_plan.throughput import stage_model

    with _handled(json_output):
        check_finite({"--rate": rate, "--load": load})
        missing = [flag for flag, v in (("--n-pd-prefill", n_pd_prefill), ("--n-pd-decode", n_pd_decode)) if v is None]
        if missing:
            raise InputError(
                [Problem(field=flag, message="required for a scenario (the split to score)") for flag in missing]
            )
        assert n_pd_prefill is not None and n_pd_decode is not None
        _check_plan_options(threshold, n_pd_prefill, n_pd_decode)
        lat.check_load_options(rate, load)
        spec = _scenario(scenario, bandwidth_gbit_per_s, n_prfaas, None)
        if n_pd_prefill + n_pd_decode > spec.local.instances:
            raise InputError(
                Problem(
                    field="--n-pd-prefill/--n-pd-decode",
                    message=f"{n_pd_prefill} + {n_pd_decode} instances exceed the local pool's {spec.local.instances} "
                    "(deployment.local.instances)",
                )
            )
        loaded = rate is not None or load is not None or curve
        model, traffic, label, caches = _traffic(stage_model(spec), spec, trace, prefix_cache, loaded)
        options = _verify_options(verify, replications, verify_requests, seed, loaded)
        plan = Plan(threshold_tokens=threshold, n_pd_prefill=n_pd_prefill, n_pd_decode=n_pd_decode)
        result: Comparison = plan_comparison(model, spec.prfaas.gpus, spec.local.gpus_per_instance, plan)
        view = _under_load(loaded, model, result, spec, rate, load, curve, traffic, options, label)
        payload = add_loaded(comparison_to_dict(spec, result, model), result, view)
        if caches is not None:
            payload["prefix_caches"] = caches
        idle = spec.local.instances - n_pd_prefill - n_pd_decode
        if idle > 0:  # the plan is priced on the instances it uses; the baselines stand on the whole deployment
            payload["note"] = (
                f"the given plan uses {n_pd_prefill + n_pd_decode} of the local pool's {spec.local.instances} "
                f"instances ({idle} idle, not priced); the baselines use the whole deployment's GPUs, so the gain "
                "compares deployments of different sizes"
            )
    if json_output:
        _emit(payload)
        return
    from prfaas_plan.cli.render import console

    out = console()
    _print_comparison(out, spec, result, payload, view, plan_title="Given plan", model=model)
    if "note" in payload:
        out.print(f"Note: {payload['note']}.", style="dim")


def _print_comparison(
    out: Any, spec: Any, result: Any, payload: dict[str, Any], view: Any, *, plan_title: str, model: Any = None
) -> None:
    """The plan-and-baselines table, its provenance footnote and, when asked for, the figures under load."""
    from prfaas_plan.cli import latency_render as lat
    from prfaas_plan.cli.render import comparison_table, provenance_note

    out.print(comparison_table(spec, result, plan_title=plan_title, model=model))
    out.print(provenance_note(payload["provenance"]), style="dim")
    caches = payload.get("prefix_caches")
    if caches:
        if "note" in caches:
            out.print(caches["note"], style="dim")
        for name, rates in caches.get("cache_hit_rates", {}).items():
            token = rates["token_hit_rate"]
            out.print(
                f"prefix cache ({name}): {rates['requests']:,} requests, token hit rate "
                + ("—" if token is None else f"{token:.1%}"),
                style="dim",
            )
    lat.print_under_load(out, result, view, plan_title=plan_title)


def _traffic(
    model: Any, spec: Any, trace: str | None, prefix_cache: bool, loaded: bool
) -> tuple[Any, Any, str | None, dict[str, Any] | None]:
    """The stage model, the offered traffic, the trace label and the prefix-cache summary for the report
    (``studies.traffic.offered_traffic``).

    With no trace, no prefix caches and no figure under load, there is nothing to offer or summarise: the model
    comes back as it is with no traffic (read only under load), and the traffic study is not loaded (start-up)."""
    if trace is None and not prefix_cache and not loaded and (spec.dynamics is None or spec.dynamics.caches is None):
        return model, None, None, None
    from prfaas_plan.studies.traffic import offered_traffic

    offered = offered_traffic(model, spec, trace, prefix_cache=prefix_cache, loaded=loaded)
    summary: dict[str, Any] | None = None
    if offered.cache_replay is not None:
        from prfaas_plan.report.dynamics import replay_to_dict

        summary = replay_to_dict(offered.cache_replay)
    elif offered.note is not None:
        summary = {"note": offered.note}
    return offered.model, offered.traffic, offered.trace_label, summary


def _under_load(
    loaded: bool,
    model: Any,
    result: Any,
    spec: Any,
    rate: float | None,
    load: float | None,
    curve: bool,
    traffic: Any,
    options: Any,
    label: str | None,
) -> Any:
    """``studies.under_load.under_load`` with the scenario's TTFT SLO, or None when no figure under load is asked
    for (``loaded``): then the study is not loaded (start-up time) and the report and the tables add nothing."""
    if not loaded:
        return None
    from prfaas_plan.studies.under_load import under_load

    return under_load(model, result, spec, rate, load, curve, traffic, options, label, slo=spec.slo.ttft_slo)


def _verify_options(verify: bool, replications: int, requests: int, seed: int, loaded: bool) -> Any:
    """The options of the check by simulation, or None when no figure under load is asked for (``loaded``):
    then nothing is simulated and the options' module is not loaded (start-up time)."""
    if not loaded:
        return None
    from prfaas_plan.studies.verify_options import VerifyOptions

    return VerifyOptions(verify=verify, replications=replications, requests=requests, seed=seed)


def _check_plan_options(threshold: float, n_pd_prefill: int, n_pd_decode: int) -> None:
    problems = []
    if not threshold >= 0 or threshold == float("inf"):
        problems.append(Problem(field="--threshold", message=f"must be a finite number >= 0, got {threshold}"))
    elif threshold > MAX_TOKENS:
        problems.append(Problem(field="--threshold", message=f"must be <= {MAX_TOKENS:g} tokens, got {threshold:g}"))
    if n_pd_prefill < 0:
        problems.append(Problem(field="--n-pd-prefill", message=f"must be >= 0, got {n_pd_prefill}"))
    if n_pd_decode < 1:
        problems.append(Problem(field="--n-pd-decode", message=f"must be >= 1, got {n_pd_decode}"))
    if problems:
        raise InputError(problems)


def fit(scenario: ScenarioArg = None, json_output: JsonOpt = False) -> None:
    """Show how each pool's cost curves fit their points: polynomial residuals for measured profiles, and for
    calibrated roofline pools the fitted efficiencies with leave-one-out errors.

    Example: prfaas-plan fit paper-case-study-roofline
    """
    from prfaas_plan.cli.common import emit as _emit
    from prfaas_plan.cli.common import handled as _handled
    from prfaas_plan.physics.fits import pool_fit_reports
    from prfaas_plan.report.plans import fit_report_to_dict

    with _handled(json_output):
        spec = _scenario(scenario, None, None, None)
        curves = [
            fit_report_to_dict(report)
            for pool, role in ((spec.prfaas, "prfaas"), (spec.local, "local"))
            for report in pool_fit_reports(pool, spec.model, role)
        ]
    if json_output:
        _emit({"scenario": spec.name, "fits": curves})
        return
    from prfaas_plan.cli.render import console, fit_table

    console().print(fit_table(curves))


def schema(
    kind: Annotated[
        str,
        typer.Argument(
            help="scenario, hardware (a hardware profile), model (a model card), topology, or engine (a serving "
            "engine's profile, as pools and kv --engine name it)."
        ),
    ],
) -> None:
    """Print the JSON Schema of a YAML input, generated from the loader's own checks, for an editor to complete
    and check files with (e.g. yaml-language-server: $schema=scenario.schema.json).

    Example: prfaas-plan schema scenario > scenario.schema.json
    """
    from prfaas_plan.cli.common import emit as _emit
    from prfaas_plan.cli.common import handled as _handled
    from prfaas_plan.io.schema import KINDS
    from prfaas_plan.io.schema import schema as input_schema

    with _handled():
        if kind not in KINDS:
            raise InputError(Problem(field="KIND", message=f"must be one of {', '.join(KINDS)}, got {kind!r}"))
        payload = input_schema(kind)
    _emit(payload)


#: Whether the app runs under ``main`` (the console script), which closes the ``--table`` selection after the
#: command; the app called on its own (a test's runner) neither refuses a pick nor holds files back.
_UNDER_MAIN = False


def main() -> None:
    """Console-script entry point. Ctrl-C (SIGINT) and SIGTERM unwind the stack as ``Interrupted``, so that
    every ``finally`` and cleanup handler runs (no temporary file is left behind), then exit with status
    128 + the signal number (130 for Ctrl-C, 143 for SIGTERM) and one line on stderr, never a traceback."""
    from prfaas_plan.cli.common import interruptible
    from prfaas_plan.cli.streams import tolerate_narrow_encodings

    global _UNDER_MAIN
    _UNDER_MAIN = True
    tolerate_narrow_encodings()  # a C locale with PYTHONIOENCODING=ascii: "×" as "x", not UnicodeEncodeError
    try:
        with interruptible():
            try:
                app()
            except SystemExit as done:
                if done.code in (0, None):
                    _close_table_selection()
                raise
            finally:
                _discard_held_files()  # a failed or interrupted run (a successful one has committed them)
            _close_table_selection()
    finally:
        _UNDER_MAIN = False  # the app called on its own afterwards (in the same process) holds nothing back


def _close_table_selection() -> None:
    """After a command that succeeded: name the tables ``--format csv`` left out (stderr), or exit 2 where
    ``--table N`` asked for one it did not print (stdout then holds nothing, and the files the command wrote are
    discarded, each target as it was); otherwise commit those files."""
    if "prfaas_plan.cli.render" not in sys.modules or {"--help", "-h", "--version"} & set(sys.argv[1:]):
        return  # no command ran (help or the version was printed instead)
    from prfaas_plan.cli.render import table_selection_close

    note, error = table_selection_close()
    if "prfaas_plan.report.files" in sys.modules:
        from prfaas_plan.cli.common import handled
        from prfaas_plan.report.files import release_commits

        with handled():
            targets = release_commits(commit=not error)
        if error and targets:
            error += "; nothing written (held back until now: " + ", ".join(map(str, targets)) + ")"
    for line in (note, None if error is None else f"error: {error}"):
        if line is not None and sys.stderr is not None:
            with contextlib.suppress(OSError, ValueError):  # a closed or full stderr: the status still stands
                print(line, file=sys.stderr)
    if error:
        raise SystemExit(2)


def _discard_held_files() -> None:
    """Remove the temporaries of files held back (``--table N``) that no commit took: the run failed."""
    if "prfaas_plan.report.files" in sys.modules:
        from prfaas_plan.report.files import release_commits

        release_commits(commit=False)


if __name__ == "__main__":  # pragma: no cover
    main()
