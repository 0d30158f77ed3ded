"""``size --write-scenario`` (``report.scenario``): the sized deployment written as a scenario that loads back
and evaluates to the figures ``size`` found; written atomically and never over a file it did not write."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from prfaas_plan.errors import InputError
from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.report.scenario import HEADER, SizedPlan, sized_scenario_text, write_sized_scenario
from prfaas_plan.units import GBIT_PER_S
from tests.conftest import PAPER_SCENARIO, run_cli

#: A rate well past the paper deployment's (about 3 req/s), so that every sized count differs from the file's.
_RATE = "20"


@pytest.fixture(scope="module")
def sized(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    """``size --rate 20 --ttft-p90-s 5 --no-verify --write-scenario F``: the file and size's JSON."""
    out = tmp_path_factory.mktemp("sized") / "sized.yaml"
    done = run_cli("size", "--rate", _RATE, "--ttft-p90-s", "5", "--no-verify", "--write-scenario", str(out), "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["written_scenario"] == str(out)
    return out, payload


def test_written_scenario_evaluates_to_the_sized_figures(sized: tuple[Path, dict[str, object]]) -> None:
    """``evaluate F`` with the sized threshold and split: the same deployment, offload fraction and Λ_max as
    ``size`` reported, and a P90 TTFT at the target rate within the SLO it was sized for."""
    out, payload = sized
    found = payload["sizing"]["prfaas_pd"]  # type: ignore[index]
    args = ["--threshold", repr(found["threshold_tokens"]), "--n-pd-prefill", str(found["n_pd_prefill"])]
    args += ["--n-pd-decode", str(found["n_pd_decode"]), "--rate", _RATE, "--no-verify", "--json"]
    done = run_cli("evaluate", str(out), *args)
    assert done.returncode == 0, done.stderr
    evaluated = json.loads(done.stdout)
    plan = evaluated["plan"]
    assert evaluated["link_bandwidth_gbit_per_s"] == found["link_bandwidth_gbit_per_s"]
    for key in ("n_prfaas", "n_pd_prefill", "n_pd_decode"):
        assert plan[key] == found[key], key
    assert plan["n_pd_prefill"] + plan["n_pd_decode"] == found["n_local"]
    assert math.isclose(plan["offload_fraction"], found["offload_fraction"], rel_tol=1e-12)
    assert math.isclose(plan["stability_limit_req_per_s"], found["stability_limit_req_per_s"], rel_tol=1e-12)
    assert evaluated["loaded"]["ttft_s"]["p90"] <= 5.0
    scenario = load_scenario(out)
    assert scenario.prfaas.instances == found["n_prfaas"] and scenario.local.instances == found["n_local"]
    assert scenario.target is not None and scenario.target.rate_req_per_s == float(_RATE)


def test_written_scenario_keeps_the_input_and_records_the_plan(sized: tuple[Path, dict[str, object]]) -> None:
    """The input's text and comments stay; the header names the sized threshold and split."""
    out, payload = sized
    text = out.read_text()
    found = payload["sizing"]["prfaas_pd"]  # type: ignore[index]
    assert text.startswith(HEADER + "\n")
    assert f"threshold_tokens {found['threshold_tokens']!r}" in text
    assert f"n_pd_prefill {found['n_pd_prefill']}, n_pd_decode {found['n_pd_decode']}" in text
    assert "# The PrfaaS paper's case study" in text  # the input's own comment
    assert "(was 4)" in text and "(was 8)" in text


def test_optimize_loads_the_written_scenario(sized: tuple[Path, dict[str, object]]) -> None:
    out, payload = sized
    done = run_cli("optimize", str(out), "--no-verify", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["plan"]["n_prfaas"] == payload["sizing"]["prfaas_pd"]["n_prfaas"]  # type: ignore[index]


def _plan(**changes: object) -> SizedPlan:
    fields: dict[str, object] = {
        "n_prfaas": 9,
        "n_local": 11,
        "link_gbit_per_s": 40.0,
        "threshold_tokens": 12345.678,
        "n_pd_prefill": 4,
        "n_pd_decode": 7,
        "rate_req_per_s": 5.0,
        "ttft_slo_s": 4.0,
        "goodput_req_per_s": 5.2,
        "usd_per_hour": 1000.0,
    }
    return SizedPlan(**{**fields, **changes})  # type: ignore[arg-type]


def test_a_foreign_file_is_never_replaced(tmp_path: Path) -> None:
    """An existing file the writer did not write is refused (exit 2 on the command line), byte for byte kept;
    one it wrote is replaced."""
    foreign = tmp_path / "mine.yaml"
    foreign.write_text("scenario: {name: somebody else's}\n")
    with pytest.raises(InputError, match=r"mine\.yaml"):
        write_sized_scenario(str(foreign), PAPER_SCENARIO, _plan())
    assert foreign.read_text() == "scenario: {name: somebody else's}\n"
    done = run_cli("size", "--rate", "3", "--ttft-p90-s", "5", "--no-verify", "--write-scenario", str(foreign))
    assert done.returncode == 2 and "--write-scenario" in done.stderr and "Traceback" not in done.stderr
    assert foreign.read_text() == "scenario: {name: somebody else's}\n"
    own = tmp_path / "own.yaml"
    write_sized_scenario(str(own), PAPER_SCENARIO, _plan())
    write_sized_scenario(str(own), PAPER_SCENARIO, _plan(n_prfaas=12))
    assert load_scenario(own).prfaas.instances == 12
    assert own.read_text().count(HEADER) == 1


def test_a_written_scenario_can_be_sized_again(tmp_path: Path) -> None:
    """A written scenario as the input: its old header is replaced, not stacked, and the values are the new."""
    first = tmp_path / "first.yaml"
    write_sized_scenario(str(first), PAPER_SCENARIO, _plan())
    text = sized_scenario_text(first, _plan(n_local=20, link_gbit_per_s=12.5), tmp_path / "second.yaml")
    assert text.count(HEADER) == 1 and "(was 11)" in text
    second = tmp_path / "second.yaml"
    second.write_text(text)
    scenario = load_scenario(second)
    assert scenario.local.instances == 20 and scenario.link.bandwidth_bytes_per_s == 12.5 * GBIT_PER_S


def test_flow_style_input_is_written_as_plain_yaml(tmp_path: Path) -> None:
    """Values that do not stand alone on their lines (a flow mapping): the edited document is written whole."""
    text = PAPER_SCENARIO.read_text()
    start, end = text.index("deployment:"), text.index("# Prices and a sizing target")
    flow = (
        "deployment:\n  prfaas: {hardware: h200, gpus_per_instance: 8, instances: 4}\n"
        "  local: {hardware: h20, gpus_per_instance: 8, instances: 8}\n  link: {bandwidth_gbit_per_s: 100}\n\n"
    )
    base = tmp_path / "flow.yaml"
    base.write_text(text[:start] + flow + text[end:])
    out = tmp_path / "out.yaml"
    write_sized_scenario(str(out), base, _plan())
    scenario = load_scenario(out)
    assert (scenario.prfaas.instances, scenario.local.instances) == (9, 11)
    assert scenario.link.bandwidth_bytes_per_s == 40.0 * GBIT_PER_S


def test_a_name_that_resolves_elsewhere_is_refused(tmp_path: Path) -> None:
    """A hardware profile found next to the input but not next to the output would load another file (or
    none) there: refused, nothing written."""
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    (here / "my-h200.yaml").write_text((PAPER_SCENARIO.parents[1] / "hardware_profiles" / "h200.yaml").read_text())
    base = here / "s.yaml"
    base.write_text(PAPER_SCENARIO.read_text().replace("hardware: h200", "hardware: my-h200.yaml"))
    with pytest.raises(InputError, match="would not load back"):
        write_sized_scenario(str(there / "out.yaml"), base, _plan())
    assert not (there / "out.yaml").exists()
    write_sized_scenario(str(here / "out.yaml"), base, _plan())
    assert load_scenario(here / "out.yaml").prfaas.instances == 9
