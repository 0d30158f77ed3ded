"""The optimize/evaluate under-load table shows the check's answer (issue 21, "Simulation that decides"): the
simulated percentiles, marked, where the closed form is out of its domain, unstable or beyond the tolerance,
with the closed form beside them; the same figures as JSON's ``ttft_s`` and ``closed_form_ttft_s``."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest

from prfaas_plan.cli.latency_render import check_notes, loaded_table
from prfaas_plan.cli.render import table_as_csv, table_as_markdown
from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.optimize import compare
from prfaas_plan.report.plans import check_to_dict
from prfaas_plan.studies.traffic import offered_traffic
from prfaas_plan.studies.under_load import under_load
from prfaas_plan.studies.verify import VerifyOptions
from prfaas_plan.throughput import stage_model
from tests.conftest import PAPER_SCENARIO, REPO

TRACE = REPO / "workloads" / "traces" / "conversation_trace.jsonl"
TITLES = ("PrfaaS-PD (optimised)", "Homogeneous PD", "Naive heterogeneous")
KEYS = ("plan", "homogeneous_pd", "naive_heterogeneous")


def _view(trace: str | None) -> tuple[Any, Any]:
    spec = load_scenario(PAPER_SCENARIO)
    offered = offered_traffic(stage_model(spec), spec, trace, prefix_cache=False, loaded=True)
    comparison = compare(offered.model, spec.prfaas.gpus, spec.local.gpus_per_instance)
    options = VerifyOptions(replications=2, requests=4000, seed=0)
    view = under_load(offered.model, comparison, spec, None, 0.7, False, offered.traffic, options, offered.trace_label)
    return comparison, view


@pytest.fixture(scope="module")
def traced() -> tuple[Any, Any]:
    """A quantised Mooncake trace at 70 %: its closed form is out of domain, so every answer is simulated."""
    return _view(str(TRACE))


def _markdown_row(text: str, label: str, nth: int = 0) -> list[str]:
    cells = [
        [c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines() if line.startswith("|")
    ]
    return [row for row in cells if row[0] == label][nth][1:]


def test_simulated_answer_is_shown_marked_with_the_closed_form_beside(traced: tuple[Any, Any]) -> None:
    comparison, view = traced
    checks = view.checks
    assert all(checks[k].answer_source == "simulation" for k in KEYS)  # the case this test is about
    table = loaded_table(comparison, view, plan_title=TITLES[0])
    md = table_as_markdown(table)
    answers = _markdown_row(md, "TTFT mean/P50/P90/P99 (s)")
    closed = _markdown_row(md, "closed form (s)")
    for key, shown, beside in zip(KEYS, answers, closed, strict=True):
        doc = check_to_dict(checks[key])
        sim = doc["ttft_s"]
        assert shown == f"{sim['mean']:.2f} / {sim['p50']:.2f} / {sim['p90']:.2f} / {sim['p99']:.2f} sim"
        cf = doc["closed_form_ttft_s"]
        assert beside == f"{cf['mean']:.2f} / {cf['p50']:.2f} / {cf['p90']:.2f} / {cf['p99']:.2f}"
        assert sim["p90"] == checks[key].figure_simulated("overall", "p90").value != cf["p90"]
    assert any("simulation" in cell for cell in _markdown_row(md, "answer from"))
    rows = list(csv.DictReader(io.StringIO(table_as_csv(table))))
    for key, row in zip(KEYS, rows, strict=True):
        doc = check_to_dict(checks[key])
        assert row["answer_source"] == "simulation"
        assert float(row["ttft_p90_s"]) == doc["ttft_s"]["p90"]
        assert float(row["closed_form_ttft_p90_s"]) == doc["closed_form_ttft_s"]["p90"]
        local = doc["ttft_by_route_s"]["local"]
        assert (row["local_ttft_p90_s"] == "") == (local is None)
        if local is not None:
            assert float(row["local_ttft_p90_s"]) == local["p90"]
    assert "The answer shown is the simulated one" in " ".join(check_notes(checks["plan"]))


def test_closed_form_answer_is_shown_once_when_it_holds() -> None:
    """The paper's Poisson scenario at 70 %: the closed form is in domain and within tolerance, so it is the
    answer, unmarked, and the closed-form rows say 'same'."""
    comparison, view = _view(None)
    check = view.checks["plan"]
    if check.answer_source != "closed form":
        pytest.skip(f"the closed form is not the answer here ({check.disagreements})")
    md = table_as_markdown(loaded_table(comparison, view, plan_title=TITLES[0]))
    shown = _markdown_row(md, "TTFT mean/P50/P90/P99 (s)")[0]
    cf = check.closed.ttft
    assert shown == f"{cf.mean_s:.2f} / {cf.p50_s:.2f} / {cf.p90_s:.2f} / {cf.p99_s:.2f}"
    assert _markdown_row(md, "closed form (s)")[0] == "same"
    assert "sim" not in _markdown_row(md, "TTFT mean/P50/P90/P99 (s)")[0]
