"""Writing a sized deployment as a scenario (``size --write-scenario``): the input scenario file with the sized
instance counts, link bandwidth and target, and the plan the sizing chose (threshold and split, which the
scenario schema has no fields for) recorded in comments with the ``evaluate`` command that scores it.

The file keeps the input's text and comments: each edited value is replaced on its own line where it stands
alone there; otherwise (a flow mapping, a missing field) the edited document is written as plain YAML under the
same header. Before anything is written the text is loaded back with the scenario loader from the directory it
goes to, and must give the scenario the edits give (so a name that resolves differently there is refused).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InputError, Problem
from prfaas_plan.io.overrides import BaseScenario, apply_edits, load_document
from prfaas_plan.io.paths import display_path
from prfaas_plan.io.scenario import scenario_from_document
from prfaas_plan.io.yamlsrc import Document, KeyPath, parse_yaml, read_text_bounded
from prfaas_plan.report.files import Owner, check_file, write_file
from prfaas_plan.spec.scenario import Scenario
from prfaas_plan.units import GBIT_PER_S

#: The first line of every scenario this module writes: how an existing file is recognised as one of them.
HEADER = "# Scenario written by prfaas-plan size --write-scenario"
OWNER = Owner(what="a scenario written by prfaas-plan size --write-scenario", signatures=(HEADER.encode(),))


@frozen
class SizedPlan:
    """What ``size`` found: the deployment (instances, link), its goodput-optimal plan (threshold, split) and
    the target it was sized for, with its goodput and cost for the header."""

    n_prfaas: int
    n_local: int
    link_gbit_per_s: float
    threshold_tokens: float | None
    n_pd_prefill: int
    n_pd_decode: int
    rate_req_per_s: float
    ttft_slo_s: float
    goodput_req_per_s: float
    usd_per_hour: float
    notes: tuple[str, ...] = ()


def _edits(plan: SizedPlan) -> dict[KeyPath, Any]:
    return {
        ("deployment", "prfaas", "instances"): plan.n_prfaas,
        ("deployment", "local", "instances"): plan.n_local,
        ("deployment", "link", "bandwidth_gbit_per_s"): plan.link_gbit_per_s,
        ("target", "rate_req_per_s"): plan.rate_req_per_s,
        ("target", "ttft_p90_s"): plan.ttft_slo_s,
    }


def _number(value: float) -> str:
    """A number as YAML reads it back exactly: integers plainly, other floats by their shortest repr."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 2**53 else repr(float(value))


def _header(plan: SizedPlan, source: str, out_name: str) -> list[str]:
    threshold = "none (no offload)" if plan.threshold_tokens is None else repr(plan.threshold_tokens)
    lines = [
        HEADER,
        f"# from {source}: the cheapest PrfaaS-PD deployment carrying {_number(plan.rate_req_per_s)} req/s",
        f"# within a P90 TTFT of {_number(plan.ttft_slo_s)} s (goodput {plan.goodput_req_per_s:.6g} req/s, "
        f"{plan.usd_per_hour:,.2f} USD/h at the target rate).",
        f"# Sized plan (no scenario field holds it): threshold_tokens {threshold}, "
        f"n_pd_prefill {plan.n_pd_prefill}, n_pd_decode {plan.n_pd_decode}.",
    ]
    if plan.threshold_tokens is not None:
        lines.append(
            f"# Score it: prfaas-plan evaluate {out_name} --threshold {plan.threshold_tokens!r} "
            f"--n-pd-prefill {plan.n_pd_prefill} --n-pd-decode {plan.n_pd_decode} --rate {_number(plan.rate_req_per_s)}"
        )
    lines += [f"# {note}" for note in plan.notes]
    return lines


def _in_place(text: str, document: Document, edits: Mapping[KeyPath, Any]) -> str | None:
    """``text`` with each edited value replaced on the line of its key, when that line holds the key and a plain
    scalar alone (``key: value  # comment``; the comment, which described the old value, gives way to the old
    value); None when any edit does not stand so."""
    lines = text.split("\n")
    for path, value in edits.items():
        line = document.lines.get(path)
        if line is None:
            return None
        pattern = re.compile(rf"^(\s*{re.escape(str(path[-1]))}\s*:\s*)([^\s#{{}}\[\],]+)(\s*(#.*)?)$")
        match = pattern.match(lines[line - 1])
        if match is None:
            return None
        lines[line - 1] = f"{match.group(1)}{_number(value)}  # sized by prfaas-plan size (was {match.group(2)})"
    return "\n".join(lines)


def _without_header(text: str) -> str:
    """An input that is itself a written scenario: its old header lines dropped (a new one replaces them)."""
    if not text.startswith(HEADER):
        return text
    lines = text.split("\n")
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return "\n".join(lines)


def _key(scenario: Scenario) -> str:
    """What must agree between the scenario the edits give and the one the written file loads to."""
    return repr(replace(scenario, file=""))


def sized_scenario_text(base_path: Path, plan: SizedPlan, out: Path) -> str:
    """The scenario text for ``plan``: ``base_path``'s text with the sized values, under a header; checked by
    loading it back from ``out``'s directory (InputError when it would not load to the same scenario)."""
    display = display_path(base_path)
    source = read_text_bounded(base_path, display, "a YAML file")
    base = BaseScenario(path=base_path, document=parse_yaml(source, display))
    edits = _edits(plan)
    data = apply_edits(base.document.data, edits)
    expected = load_document(base, data)
    edited = _in_place(source, base.document, edits)
    if edited is None:
        body = yaml.safe_dump(data, sort_keys=False, width=100, allow_unicode=True)
    else:
        body = _without_header(edited)
    text = "\n".join(_header(plan, base.display, out.name)) + "\n" + body
    if not text.endswith("\n"):
        text += "\n"
    try:
        written = scenario_from_document(parse_yaml(text, str(out)), out.parent)
    except InputError as exc:
        raise InputError(
            [Problem(file=str(out), message=f"would not load back from {out.parent}: {p}") for p in exc.problems]
        ) from None
    if _key(written) != _key(expected):
        raise InputError(
            Problem(
                file=str(out),
                message=f"would load differently from {out.parent} than from {base_path.parent} (a model card, "
                "hardware profile or trace it names resolves to another file there); write it next to the input",
            )
        )
    return text


def check_scenario_output(path: str, *, force: bool = True) -> None:
    """Check before the sizing that ``path`` can be written (``report.files.check_file``)."""
    check_file(path, owner=OWNER, force=force)


def write_sized_scenario(path: str, base_path: Path, plan: SizedPlan, *, force: bool = True) -> Path:
    """Write ``plan`` as a scenario file at ``path`` atomically, under the output lock, never over a file that
    is not one of these scenarios (``report.files``); returns the path."""
    text = sized_scenario_text(base_path, plan, Path(path))
    return write_file(path, text, owner=OWNER, force=force)


def sized_plan(deployment: Any, target: Any, notes: Sequence[str] = ()) -> SizedPlan:
    """A ``SizedPlan`` from ``optimize.carrier.Deployment`` and ``spec.cost.Target``."""
    return SizedPlan(
        n_prfaas=int(deployment.n_prfaas),
        n_local=int(deployment.n_local),
        link_gbit_per_s=float(deployment.bandwidth_bytes_per_s) / GBIT_PER_S,
        threshold_tokens=None if deployment.threshold_tokens is None else float(deployment.threshold_tokens),
        n_pd_prefill=int(deployment.n_pd_prefill),
        n_pd_decode=int(deployment.n_pd_decode),
        rate_req_per_s=float(target.rate_req_per_s),
        ttft_slo_s=float(target.ttft_slo_s),
        goodput_req_per_s=float(deployment.goodput_req_per_s),
        usd_per_hour=float(deployment.usd_per_hour),
        notes=tuple(notes),
    )
