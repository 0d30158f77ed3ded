"""The review at the edges of the pools' error bands (issue 20, "Say how sure"): a part that runs when the
scenario has a roofline or calibrated pool and a target, its JSON, its table and its summary line; a
measured-pool scenario has none."""

from __future__ import annotations

import json
from typing import Any

import pytest

from prfaas_plan.io.names import resolve_scenario_path
from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.optimize.uncertainty import verdict
from prfaas_plan.report.review_data import review_tables, review_to_dict
from prfaas_plan.report.review_markdown import band_line, report_markdown
from prfaas_plan.spec.cost import Target
from prfaas_plan.studies.review import ReviewOptions, review
from prfaas_plan.studies.verify import VerifyOptions
from tests.conftest import REPO

FAST = ReviewOptions(verify=VerifyOptions(verify=False), quick=True, sensitivity=False)
ROOFLINE = REPO / "workloads" / "paper-case-study-roofline.yaml"
#: The roofline scenario has no `target:`: the paper's 2 req/s-class load within a 5 s P90 TTFT.
TARGET = Target(rate_req_per_s=2.0, ttft_slo_s=5.0)


@pytest.fixture(scope="module")
def banded_review() -> Any:
    spec = load_scenario(ROOFLINE)
    assert spec.target is None  # the target comes from here, as --rate/--ttft-p90-s would give it
    return review(spec, target=TARGET, ttft_slo_s=TARGET.ttft_slo_s, options=FAST)


def test_band_part_sizes_both_edges(banded_review: Any) -> None:
    """Both edges sized; a slower edge never needs a cheaper deployment, a faster never a dearer one; the
    nominal deployment's goodput moves the same way."""
    b = banded_review.error_band
    assert b is not None and "error_band" not in banded_review.skipped
    assert b.nominal is banded_review.sizing.sizing
    assert b.nominal_verdict == verdict(banded_review.sizing.sizing)
    edges = {e.edge: e for e in b.edges}
    assert set(edges) == {"slow", "fast"}
    nominal = b.nominal.cheapest
    assert nominal is not None
    slow, fast = edges["slow"].sizing, edges["fast"].sizing
    assert slow is not None and slow.cheapest is not None and fast is not None and fast.cheapest is not None
    assert slow.cheapest.usd_per_hour >= nominal.usd_per_hour >= fast.cheapest.usd_per_hour
    good = {e: edges[e].nominal_prfaas_goodput_req_per_s for e in edges}
    assert b.nominal.prfaas_pd is not None
    assert good["slow"] <= b.nominal.prfaas_pd.goodput_req_per_s <= good["fast"]
    assert edges["slow"].prefill_factor["prfaas"] > 1 > edges["fast"].prefill_factor["prfaas"]


def test_band_json_table_and_summary_agree(banded_review: Any) -> None:
    r, b = banded_review, banded_review.error_band
    doc = json.loads(json.dumps(review_to_dict(r), allow_nan=False))["error_band"]
    assert doc["nominal_verdict"] == b.nominal_verdict and doc["verdict_holds"] == b.verdict_holds
    assert doc["bands"]["prfaas"]["prefill_factor"] > 1
    table = next(t for t in review_tables(r) if t.name == "error_band")
    assert [row[0] for row in table.rows] == ["nominal", "slow", "fast"]
    column = table.columns.index("prfaas_pd_usd_per_hour")
    for row in table.rows[1:]:
        assert row[column] == doc["edges"][row[0]]["prfaas_pd"]["usd_per_hour"]
    line = band_line(r)
    assert line is not None
    assert ("holds across the band" in line) == b.verdict_holds
    slow = next(e for e in b.edges if e.edge == "slow")
    chosen = b.nominal.prfaas_pd
    assert chosen is not None and slow.sizing is not None and slow.sizing.prfaas_pd is not None
    if slow.nominal_prfaas_goodput_req_per_s < TARGET.rate_req_per_s:  # the slow edge needs more: how many
        more = slow.sizing.prfaas_pd.n_prfaas + slow.sizing.prfaas_pd.n_local - chosen.n_prfaas - chosen.n_local
        assert f"{more:+d} instance" in line
    assert line in report_markdown(r, review_tables(r), [])


def test_measured_pools_have_no_band_part() -> None:
    spec = load_scenario(resolve_scenario_path("paper-case-study"))
    r = review(spec, target=None, ttft_slo_s=None, options=FAST)
    assert r.error_band is None and "measured" in r.skipped["error_band"]
    assert review_to_dict(r)["error_band"] is None
    assert all(t.name != "error_band" for t in review_tables(r))
    assert band_line(r) is None


def test_prompts_longer_than_the_bands_measurements_are_named(banded_review: Any) -> None:
    """Where the traffic's prompts outrun the longest prompt a pool's prefill band was measured on, the band's
    JSON, the size table's line and the review's summary say what share: those times are extrapolated."""
    from prfaas_plan.optimize.uncertainty import band_of
    from prfaas_plan.studies.uncertainty import OUTSIDE_SHARE_NOTED, prompts_outside_band

    r = banded_review
    b = r.error_band
    band = band_of(b.scenario.prfaas)
    assert band is not None and band.prefill.tokens is not None
    share = float(b.scenario.traffic.input_length.sf(band.prefill.tokens[1]))
    note = prompts_outside_band(b.scenario, "prfaas")
    doc = review_to_dict(r)["error_band"]["bands"]["prfaas"]
    line = band_line(r)
    assert line is not None
    if share >= OUTSIDE_SHARE_NOTED:
        longest = band.prefill.tokens[1]
        assert note.startswith(f"{share:.0%} of the traffic's prompts are longer than any ({longest:,.0f}")
        assert doc["prompts_outside_band"] == note and f"Note: {note}." in line
    else:
        assert note == "" and "prompts_outside_band" not in doc and "prompts are longer" not in line
    from dataclasses import replace

    from prfaas_plan.lengths import Fixed

    low, high = band.prefill.tokens
    within = replace(b.scenario, traffic=replace(b.scenario.traffic, input_length=Fixed(tokens=(low + high) / 2)))
    assert prompts_outside_band(within, "prfaas") == ""
    beyond = replace(b.scenario, traffic=replace(b.scenario.traffic, input_length=Fixed(tokens=2 * high)))
    expected = f"100% of the traffic's prompts are longer than any ({high:,.0f}"
    assert prompts_outside_band(beyond, "prfaas").startswith(expected)


def test_decode_contexts_longer_than_the_bands_measurements_are_named(banded_review: Any) -> None:
    """The local pool decodes: where the requests' mean decode context (prompt plus half the output) outruns
    the longest context its decode band was measured on, the band JSON and the summary say what share."""
    from dataclasses import replace

    from prfaas_plan.lengths import Fixed
    from prfaas_plan.optimize.uncertainty import band_of
    from prfaas_plan.studies.uncertainty import contexts_outside_band

    r = banded_review
    scenario = r.error_band.scenario
    band = band_of(scenario.local)
    assert band is not None and band.decode.tokens is not None
    longest, half_output = band.decode.tokens[1], scenario.traffic.output_length.mean_tokens / 2
    note = contexts_outside_band(scenario)
    doc = review_to_dict(r)["error_band"]["bands"]["local"]
    share = float(scenario.traffic.input_length.sf(longest - half_output))
    if share >= 0.01:
        assert note.startswith(f"{share:.0%} of the requests decode at contexts longer than any ({longest:,.0f}")
        assert doc["contexts_outside_band"] == note and note in (band_line(r) or "")
    else:
        assert note == "" and "contexts_outside_band" not in doc
    short = replace(scenario.traffic, input_length=Fixed(tokens=max(longest - half_output - 100, 1.0)))
    assert contexts_outside_band(replace(scenario, traffic=short)) == ""
    long = replace(scenario.traffic, input_length=Fixed(tokens=longest))
    assert contexts_outside_band(replace(scenario, traffic=long)).startswith("100% of the requests decode")


def test_a_pool_whose_band_holds_too_few_points_of_its_models_kind_is_named_in_the_review(banded_review: Any) -> None:
    """The review's summary line and its band JSON name a pool whose band holds too few measurements of the
    scenario's kind of model (``studies.uncertainty.pool_outside_band``); the shipped SGLang band on Hopper
    holds enough of Qwen3.5's kind, and nothing is said."""
    from dataclasses import replace

    from prfaas_plan.studies.uncertainty import pool_outside_band

    r = banded_review
    assert "pool_outside_band" not in review_to_dict(r)["error_band"]["bands"]["prfaas"]
    scenario = r.error_band.scenario
    band = scenario.prfaas.time_band
    thin = replace(band, prefill=replace(band.prefill, kinds=(("dense", "x", band.prefill.points),)))
    odd = replace(scenario, prfaas=replace(scenario.prfaas, time_band=thin))
    changed = replace(r, error_band=replace(r.error_band, scenario=odd))
    note = pool_outside_band(odd, "prfaas")
    assert note.startswith("the prfaas pool's prefill of a mixture-of-experts model is outside")
    assert f"Note: {note}." in (band_line(changed) or "")
    assert review_to_dict(changed)["error_band"]["bands"]["prfaas"]["pool_outside_band"] == note
