"""Scenario overrides (``io.overrides``): a flag's value is an edit of the scenario document checked by the
scenario loader, so flags and YAML share one validator and one set of limits (``io.limits``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from prfaas_plan.cli.common import SCENARIO_FLAGS, load_with_flags
from prfaas_plan.errors import InputError
from prfaas_plan.io import limits
from prfaas_plan.io.overrides import Override, load_overridden
from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.units import GBIT_PER_S
from tests.conftest import PAPER_SCENARIO

_INSTANCES = ("deployment", "prfaas", "instances")
_LINK = ("deployment", "link", "bandwidth_gbit_per_s")


def _fleet_file(tmp_path: Path, instances: int, gbit_per_s: float) -> Path:
    """The paper scenario with ``instances`` in each pool and the given link, as a file in ``tmp_path`` (its
    model card and hardware profiles resolve to the built-in ones)."""
    text = PAPER_SCENARIO.read_text()
    for old in ("instances: 4 ", "instances: 8 "):
        text = text.replace(old, f"instances: {instances} ")
    text = text.replace("bandwidth_gbit_per_s: 100 ", f"bandwidth_gbit_per_s: {gbit_per_s:g} ")
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    return path


def test_an_override_is_the_same_as_the_field_in_the_file(tmp_path: Path) -> None:
    """Loading a file with overrides gives the scenario the file with those values would give."""
    edited = load_overridden(
        PAPER_SCENARIO,
        [Override(path=_INSTANCES, value=37, origin="--n-prfaas"), Override(path=_LINK, value=12.5, origin="--bw")],
    )
    written = load_scenario(_fleet_file(tmp_path, 37, 12.5))
    assert edited.prfaas.instances == written.prfaas.instances == 37
    assert edited.link.bandwidth_bytes_per_s == written.link.bandwidth_bytes_per_s == 12.5 * GBIT_PER_S
    assert edited.local.instances == 8  # the file's own value where no edit goes
    assert written.local.instances == 37


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--n-prfaas", limits.MAX_INSTANCES + 1, f"must be <= {limits.MAX_INSTANCES:g}"),
        ("--n-prfaas", 0, "must be >= 1"),
        ("--n-local", 1, "must be >= 2"),
        ("--n-local", 10**15, f"must be <= {limits.MAX_INSTANCES:g}"),
        ("--bandwidth-gbit-per-s", limits.MAX_LINK_GBIT_PER_S * 2, f"must be <= {limits.MAX_LINK_GBIT_PER_S:g}"),
        ("--bandwidth-gbit-per-s", limits.MIN_LINK_GBIT_PER_S / 2, f"must be >= {limits.MIN_LINK_GBIT_PER_S:g}"),
        ("--bandwidth-gbit-per-s", float("nan"), "must be a finite number"),
        ("--bandwidth-gbit-per-s", float("inf"), "must be a finite number"),
    ],
)
def test_flag_limits_are_the_loaders(flag: str, value: float, message: str) -> None:
    """A flag's value is refused exactly where the YAML field's is, and the problem names the flag only (not
    the file's line, whose value the flag replaced)."""
    with pytest.raises(InputError) as caught:
        load_with_flags(None, {flag: value})
    (problem,) = caught.value.problems
    assert problem.field == flag and problem.file is None and problem.line is None
    assert problem.message.startswith(message), problem.message


def test_the_same_value_is_refused_in_the_file(tmp_path: Path) -> None:
    """The limit a flag meets is the file's: one past it is refused in YAML with the file's line."""
    with pytest.raises(InputError) as caught:
        load_scenario(_fleet_file(tmp_path, limits.MAX_INSTANCES + 1, 100))
    fields = {p.field for p in caught.value.problems}
    assert fields == {"deployment.prfaas.instances", "deployment.local.instances"}
    assert all(p.line is not None for p in caught.value.problems)


def test_fleet_sized_scenario_loads(tmp_path: Path) -> None:
    """A scenario at the instance limit in both pools, with a fleet's link, loads from YAML."""
    scenario = load_scenario(_fleet_file(tmp_path, limits.MAX_INSTANCES, 250_000))
    assert scenario.prfaas.instances == scenario.local.instances == limits.MAX_INSTANCES
    assert scenario.link.bandwidth_bytes_per_s == 250_000 * GBIT_PER_S


def test_problems_elsewhere_keep_their_file_and_line(tmp_path: Path) -> None:
    """An override does not hide the file's own problems: those keep the file name and line."""
    path = _fleet_file(tmp_path, 4, 100)
    path.write_text(path.read_text().replace("decode_tokens_per_s: 40", "decode_tokens_per_s: -40"))
    with pytest.raises(InputError) as caught:
        load_overridden(path, [Override(path=_INSTANCES, value=0, origin="--n-prfaas")])
    by_field = {p.field: p for p in caught.value.problems}
    assert by_field["--n-prfaas"].file is None
    assert by_field["slo.decode_tokens_per_s"].file is not None and by_field["slo.decode_tokens_per_s"].line


def test_an_edit_into_a_scalar_names_the_file(tmp_path: Path) -> None:
    """A file whose ``deployment`` is not a mapping: the file's own problem, not a traceback."""
    path = tmp_path / "bad.yaml"
    path.write_text(PAPER_SCENARIO.read_text().split("deployment:")[0] + "deployment: 3\n")
    with pytest.raises(InputError) as caught:
        load_overridden(path, [Override(path=_INSTANCES, value=5, origin="--n-prfaas")])
    assert any(p.field == "deployment" for p in caught.value.problems)


def test_every_scenario_flag_names_a_loader_field() -> None:
    """Each flag of the table edits a field the loader reads: a wrong path would be an unknown key."""
    for flag, path in SCENARIO_FLAGS.items():
        value = 3 if "instances" in path else 50.0
        scenario = load_overridden(PAPER_SCENARIO, [Override(path=path, value=value, origin=flag)])
        assert scenario.name == "paper-case-study"
