"""``prfaas-plan simulate``: run the discrete-event cluster on a plan and set it beside the closed form."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer

from prfaas_plan.cli.common import check_finite, check_output, emit, handled, load_with_flags, records_owner
from prfaas_plan.io.limits import MAX_RATE_REQ_PER_S, MAX_TOKENS

if TYPE_CHECKING:
    from prfaas_plan.cli.render import DataTable
    from prfaas_plan.studies.simulate import Study

#: A progress bar is drawn (on a terminal) for runs of at least this many requests.
PROGRESS_MIN_REQUESTS = 200_000


def simulate(
    scenario: Annotated[
        str | None, typer.Argument(help="Scenario YAML file or built-in name (default: paper-case-study).")
    ] = None,
    rate: Annotated[
        float | None, typer.Option("--rate", help="Offered arrival rate, req/s.", max=MAX_RATE_REQ_PER_S)
    ] = None,
    load: Annotated[
        float | None, typer.Option("--load", help="Offered rate as a fraction of the plan's Λ_max (default 0.7).")
    ] = None,
    requests: Annotated[int, typer.Option("--requests", help="Requests to simulate (a trace: the first N).")] = 100_000,
    seed: Annotated[
        int, typer.Option("--seed", help="Seed of the workload's random numbers.", min=0, max=2**63 - 1)
    ] = 0,
    trace: Annotated[
        str | None,
        typer.Option(
            "--trace",
            help="Replay a trace (arrivals and lengths): a Mooncake .jsonl or Azure .csv file, or a built-in "
            "name: mooncake-conversation, mooncake-synthetic, azure-code, azure-conv.",
        ),
    ] = None,
    prefix_cache: Annotated[
        bool, typer.Option("--prefix-cache", help="Mooncake traces: prefill only what an infinite prefix cache misses.")
    ] = False,
    records: Annotated[str | None, typer.Option("--records", help="Write one CSV row per request to FILE.")] = None,
    threshold: Annotated[
        float | None, typer.Option("--threshold", help="Routing threshold t (tokens).", min=0.0, max=MAX_TOKENS)
    ] = None,
    n_pd_prefill: Annotated[
        int | None, typer.Option("--n-pd-prefill", help="Local prefill instances N_p.", min=0)
    ] = None,
    n_pd_decode: Annotated[int | None, typer.Option("--n-pd-decode", help="Local decode instances N_d.", min=1)] = None,
    bandwidth_gbit_per_s: Annotated[
        float | None, typer.Option("--bandwidth-gbit-per-s", help="Override the link bandwidth.")
    ] = None,
    n_prfaas: Annotated[int | None, typer.Option("--n-prfaas", help="Override the PrfaaS instances.")] = None,
    n_local: Annotated[int | None, typer.Option("--n-local", help="Override the local pool's instances.")] = None,
    decode_kv_gib: Annotated[
        float | None,
        typer.Option("--decode-kv-gib", help="KV memory per decode instance for admission, GiB (default: slots only)."),
    ] = None,
    warmup: Annotated[
        float, typer.Option("--warmup", help="Fraction of requests left out of the figures as warm-up.")
    ] = 0.1,
    dynamics_file: Annotated[
        str | None,
        typer.Option(
            "--dynamics",
            help="YAML file with a 'dynamics:' section (prefix caches, link profile and outages, faults, "
            "scheduler); default: the scenario's own section, if any.",
        ),
    ] = None,
    cache_rule: Annotated[
        str | None,
        typer.Option("--cache-rule", help="Override the prefix caches' rule: scarce, abundant or switch."),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of a table.")] = False,
) -> None:
    """Simulate the plan optimize chooses (or the one given) and compare with the closed-form figures.

    Example: prfaas-plan simulate --load 0.8 --requests 200000 --records runs.csv

    Example: prfaas-plan simulate --trace mooncake-conversation --dynamics dynamics.yaml --cache-rule scarce
    """
    from prfaas_plan.io.file_kind import topology_argument

    topology = topology_argument(scenario)
    if topology is not None:
        from prfaas_plan.cli import topology_commands

        topo_flags: dict[str, object] = {
            "--rate": rate,
            "--trace": trace,
            "--records": records,
            "--threshold": threshold,
        }
        topo_flags |= {"--n-pd-prefill": n_pd_prefill, "--n-pd-decode": n_pd_decode, "--n-prfaas": n_prfaas}
        topo_flags |= {"--bandwidth-gbit-per-s": bandwidth_gbit_per_s, "--n-local": n_local}
        topo_flags |= {"--decode-kv-gib": decode_kv_gib, "--dynamics": dynamics_file, "--cache-rule": cache_rule}
        given = {k: v is not None for k, v in topo_flags.items()}
        given |= {"--prefix-cache": prefix_cache, "--warmup": warmup != 0.1}
        topology_commands.simulate(
            topology, load=load, requests=requests, seed=seed, given=given, json_output=json_output
        )
        return
    from prfaas_plan.io.traces import read_trace, resolve_trace_path
    from prfaas_plan.report.dynamics import dynamics_to_dict
    from prfaas_plan.report.records import study_to_dict, write_records_csv
    from prfaas_plan.studies.planning import given_plan
    from prfaas_plan.studies.simulate import offered_rate, run_study
    from prfaas_plan.studies.traffic import planned_traffic
    from prfaas_plan.throughput import stage_model
    from prfaas_plan.units import GIB

    with handled(), _flag_names():
        _check_flags(threshold, decode_kv_gib, rate, load, warmup, records)
        flags = {"--bandwidth-gbit-per-s": bandwidth_gbit_per_s, "--n-prfaas": n_prfaas, "--n-local": n_local}
        spec = load_with_flags(scenario, flags)
        model = stage_model(spec)
        dynamics = _dynamics(spec, dynamics_file, cache_rule, traced=trace is not None)
        # The run replays the first --requests requests, and the plan and the closed form are those of that
        # traffic: only those rows are read (an invalid count is refused after the read, as before).
        first = requests if requests >= 1 else None
        path = resolve_trace_path(trace) if trace is not None else None
        replay = read_trace(path, prefix_cache=prefix_cache, max_requests=first) if path is not None else None
        caches = dynamics.caches if dynamics is not None else None
        flag_plan = given_plan(threshold, n_pd_prefill, n_pd_decode)
        model, plan, replay, cache_replay = planned_traffic(model, replay, caches, flag_plan)
        target = offered_rate(plan, rate, load)
        size = min(requests, replay.n_requests) if replay is not None else requests
        with _progress(size, json_output) as tick:
            study = run_study(
                model,
                plan,
                rate_req_per_s=target,
                requests=requests,
                seed=seed,
                output_lengths=spec.traffic.output_length if replay is None else None,
                trace=replay,
                decode_kv_capacity_bytes=decode_kv_gib * GIB if decode_kv_gib is not None else None,
                warmup_fraction=warmup,
                progress=tick,
                replay=cache_replay,
                dynamics=dynamics,
            )
        if records is not None:
            write_records_csv(records, study.result.records)
        payload = study_to_dict(study)
        if dynamics is not None:
            payload["dynamics"] = dynamics_to_dict(study.result, cache_replay)
    if not study.closed.stable:
        print(
            f"note: offered {study.rate_req_per_s:.3g} req/s is {study.load:.3g} × Λ_max: queues grow for the "
            f"whole run (capped at {study.requests:,} requests); throughput shows the saturated capacity",
            file=sys.stderr,
        )
    caveat = payload["simulated"]["throughput_caveat"]
    if caveat is not None:
        print(_caveat_warning(caveat, payload["simulated"]), file=sys.stderr)
    if json_output:
        emit(payload)
        return
    from prfaas_plan.cli.render import console

    out = console()
    out.print(_table(study, payload))
    out.print(_footer(study, payload), style="dim")
    if "dynamics" in payload:
        out.print(_dynamics_lines(payload["dynamics"]))


def _caveat_warning(caveat: dict[str, Any], simulated: dict[str, Any]) -> str:
    """The stderr warning when the measured window holds no completion (throughput null) or opens before
    the requests in flight have had time to finish (throughput biased low)."""
    lo, hi = simulated["window_s"]
    more = (
        ""
        if caveat["requests_needed"] is None
        else f"; about --requests {caveat['requests_needed']:,} would give a steady-state figure"
    )
    if simulated["measured_window_completions"] == 0:
        return (
            f"warning: no request finished inside the measured window ({lo:.3g}-{hi:.3g} s, after a "
            f"{caveat['warmup_s']:.3g} s warm-up): every request stays longer, so this run measured no throughput "
            "(null, not 0)" + more
        )
    return (
        f"warning: the measured window ({lo:.3g}-{hi:.3g} s) opens before the requests in flight have had time to "
        f"finish: its {simulated['measured_window_completions']:,} completions miss about "
        f"{caveat['undercount_fraction']:.0%} of the steady state's, so the throughput is biased low" + more
    )


def _check_flags(
    threshold: float | None,
    decode_kv_gib: float | None,
    rate: float | None,
    load: float | None,
    warmup: float,
    records: str | None,
) -> None:
    """The simulate command's own flags, each checked before anything is loaded (InputError naming the flag);
    the flags that set scenario fields are checked by the scenario loader (``load_with_flags``)."""
    from prfaas_plan.errors import InputError, Problem

    check_finite({"--threshold": threshold, "--decode-kv-gib": decode_kv_gib, "--rate": rate, "--load": load})
    if records is not None:
        check_output(records, "--records", records_owner())
    if not 0.0 <= warmup < 1.0:
        raise InputError(Problem(field="--warmup", message=f"must be in [0, 1), got {warmup}"))
    if decode_kv_gib is not None and not decode_kv_gib > 0:
        raise InputError(Problem(field="--decode-kv-gib", message=f"must be > 0, got {decode_kv_gib}"))


def _dynamics(spec: Any, path: str | None, rule: str | None, *, traced: bool) -> Any:
    """The run's ``Dynamics``: from ``--dynamics FILE``, else the scenario's own section (if the scenario
    loader carries one), with ``--cache-rule`` applied. Prefix caches are replayed on traces only: without
    ``--trace`` the scenario's own ``dynamics.prefix_cache`` is left out with a note (as ``optimize`` does),
    while caches asked for by ``--dynamics`` or ``--cache-rule`` are an error (``studies.traffic``)."""
    import dataclasses
    from pathlib import Path

    from prfaas_plan.errors import InputError, Problem
    from prfaas_plan.io.dynamics import load_dynamics
    from prfaas_plan.spec.dynamics import CACHE_RULES

    dynamics = load_dynamics(Path(path)) if path is not None else getattr(spec, "dynamics", None)
    if path is None and rule is None and not traced and dynamics is not None and dynamics.caches is not None:
        print(
            "note: dynamics.prefix_cache is replayed on traces only (--trace); simulating the scenario's lengths "
            "as uncached, with the rest of its dynamics",
            file=sys.stderr,
        )
        return dataclasses.replace(dynamics, caches=None)
    if rule is None:
        return dynamics
    if rule not in CACHE_RULES:
        raise InputError(
            Problem(field="--cache-rule", message=f"must be one of {', '.join(CACHE_RULES)}, got {rule!r}")
        )
    if dynamics is None or dynamics.caches is None:
        raise InputError(Problem(field="--cache-rule", message="no prefix caches: give --dynamics with a prefix_cache"))
    return dataclasses.replace(dynamics, caches=dataclasses.replace(dynamics.caches, rule=rule))


def _dynamics_lines(section: dict[str, Any]) -> str:
    """The dynamics figures under the table: accounting, faults, scheduler, caches."""
    acc = section["accounting"]
    lines = [
        f"requests: arrived {acc['arrived']:,} = completed {acc['completed']:,} + in flight {acc['in_flight']:,} "
        f"+ dropped {acc['dropped']:,}; restarted prefills {acc['restarted_prefills']:,}, resumed decodes "
        f"{acc['resumed_decodes']:,}, rerouted {acc['rerouted']:,}"
    ]
    sched = section["scheduler"]
    if sched["threshold_changes"]:
        lines.append(
            f"threshold changed {sched['threshold_changes']} times, final t = {sched['final_threshold_tokens']:,.0f}"
        )
    if sched["role_changes"]:
        lines.append("roles (time s, N_p, N_d): " + ", ".join(f"({t:.0f}, {p}, {d})" for t, p, d in sched["roles"]))
    for name, rates in section.get("cache_hit_rates", {}).items():
        lines.append(
            f"cache {name}: {rates['requests']:,} requests, token hit rate {rates['token_hit_rate']:.3f}, "
            f"request hit rate {rates['request_hit_rate']:.3f}"
        )
    if "cache_transfer_bytes" in section:
        moved = section["cache_transfer_bytes"]
        lines.append(
            f"cross-cluster cache transfers: {moved['to_prfaas'] / 1e9:,.1f} GB to PrfaaS, "
            f"{moved['to_local'] / 1e9:,.1f} GB to local"
        )
    return "\n".join(lines)


#: The library's neutral names of the options it checks, and the flags that set them.
_FLAGS = {
    "requests": "--requests",
    "rate": "--rate",
    "load": "--load",
    "rate/load": "--rate/--load",
    "threshold/n_pd_prefill/n_pd_decode": "--threshold/--n-pd-prefill/--n-pd-decode",
    "n_pd_prefill + n_pd_decode": "--n-pd-prefill + --n-pd-decode",
}


@contextmanager
def _flag_names() -> Iterator[None]:
    """Name the flags in the library's input errors: ``requests`` becomes ``--requests``."""
    from dataclasses import replace

    from prfaas_plan.errors import InputError

    try:
        yield
    except InputError as exc:
        problems = [replace(p, field=_FLAGS[p.field]) if p.field in _FLAGS else p for p in exc.problems]
        raise InputError(problems) from None


@contextmanager
def _progress(total: int, quiet: bool) -> Iterator[Callable[[int], None] | None]:
    """A rich progress bar on stderr for long runs on a terminal; None (no callback) otherwise."""
    if quiet or total < PROGRESS_MIN_REQUESTS or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("simulating", total=total)
        yield lambda done: bar.update(task, completed=done)


def _fmt(value: float | None, spec: str = "{:.3g}") -> str:
    return "—" if value is None else spec.format(value)


def _table(study: Study, payload: dict[str, Any]) -> DataTable:
    """Simulated beside closed form, one row per quantity; as data (``--format csv``), the same rows with the
    quantity's key and unit and plain numbers (``cli.render.DataTable``, as ``fit``'s table does for its
    mixed units): ``simulated``, ``simulated_half_width_95`` (the 95 % interval's half width), ``closed_form``
    and ``simulated_minus_closed_over_closed_fraction`` (what the table shows as a percentage)."""
    from prfaas_plan.cli.render import DataTable

    sim, closed, rel = payload["simulated"], payload["closed_form"], payload["relative_error"]
    ci = sim["ci95_half_width"]
    plan = study.plan
    title = (
        f"{plan.label} plan: t = {_fmt(plan.threshold_tokens, '{:,.0f}')}, PrfaaS/PD-P/PD-D = "
        f"{plan.n_prfaas}/{plan.n_pd_prefill}/{plan.n_pd_decode}; offered {study.rate_req_per_s:.3g} req/s "
        f"= {study.load:.0%} of Λ_max {plan.throughput_req_per_s:.3g}"
    )
    table = DataTable(title=title)
    for header in ("", "simulated (±95% CI)", "closed form", "difference"):
        table.add_column(header, justify="right" if header else "left")

    def row(
        label: str,
        quantity: str,
        unit: str,
        sim_value: float | None,
        half: float | None,
        closed_value: float | None,
        key: str,
    ) -> None:
        shown = _fmt(sim_value) + (f" ± {half:.2g}" if half is not None else "")
        diff = rel.get(key)
        table.add_row(label, shown, _fmt(closed_value), "—" if diff is None else f"{diff:+.1%}")
        table.add_data(
            {
                "quantity": quantity,
                "unit": unit,
                "simulated": sim_value,
                "simulated_half_width_95": half,
                "closed_form": closed_value,
                "simulated_minus_closed_over_closed_fraction": diff,
            }
        )

    row(
        "throughput (req/s)",
        "throughput",
        "req_per_s",
        sim["throughput_req_per_s"],
        ci["throughput_req_per_s"],
        closed["throughput_req_per_s"],
        "throughput_req_per_s",
    )
    for stat in ("mean", "p50", "p90", "p99"):
        row(
            f"TTFT {stat} (s)",
            f"ttft_{stat}",
            "s",
            sim["ttft_s"][stat],
            ci["ttft_s"][stat],
            closed["ttft_s"][stat],
            f"ttft_{stat}_s",
        )
    for route, stats in sim["ttft_by_route_s"].items():
        closed_route = closed["ttft_by_route_s"][route]["mean"]
        row(f"  {route} TTFT mean (s)", f"ttft_{route}_mean", "s", stats["mean"], None, closed_route, "")
    egress = sim["egress_gbit_per_s"]
    row(
        "egress mean (Gbit/s)",
        "egress_mean",
        "gbit_per_s",
        egress["mean"],
        None,
        closed["egress_gbit_per_s"]["mean"],
        "egress_mean_bytes_per_s",
    )
    row("egress peak 1 s (Gbit/s)", "egress_peak_1s", "gbit_per_s", egress["peak"], None, None, "")
    for stage, value in sim["utilization"].items():
        key = f"utilization_{stage}"
        row(f"utilisation {stage}", key, "fraction", value, None, closed["utilization"].get(stage), key)
    bounds = f"{_fmt(closed['max_throughput_req_per_s'])} / {_fmt(closed['max_throughput_mean_service_req_per_s'])}"
    table.add_row("Λ_max: Eq. 6 / mean service (req/s)", "—", bounds, "—")
    for quantity, key in (
        ("max_throughput_eq6", "max_throughput_req_per_s"),
        ("max_throughput_mean_service", "max_throughput_mean_service_req_per_s"),
    ):
        table.add_data(
            {
                "quantity": quantity,
                "unit": "req_per_s",
                "simulated": None,
                "simulated_half_width_95": None,
                "closed_form": closed[key],
                "simulated_minus_closed_over_closed_fraction": None,
            }
        )
    return table


def _footer(study: Study, payload: dict[str, Any]) -> str:
    sim = payload["simulated"]
    queues = ", ".join(f"{k} {v:.2f}" for k, v in sim["queue_length"].items() if v is not None)
    closed = payload["closed_form"]
    note = "" if closed["stable"] else f"Past the closed form's stability limit ({closed['unstable_stage']}): no TTFT."
    validity = closed["validity"]
    domain = (
        "inside the domain where it was validated"
        if validity["in_domain"]
        else "OUT OF ITS VALIDATED DOMAIN: " + "; ".join(validity["reasons"])
    )
    replay = f"Replayed: {study.trace_source}.\n" if study.trace_source else ""
    return (
        f"{replay}Closed form: {closed['method']}, {domain}.\n"
        f"{study.requests:,} requests ({sim['measured_requests']:,} measured after warm-up), seed {study.seed}; "
        f"time-average requests per state: {queues}. {note}\n"
        f"wall {study.wall_s:.2f} s: {study.requests_per_s:,.0f} requests/s, {study.events_per_s:,.0f} events/s"
    )
