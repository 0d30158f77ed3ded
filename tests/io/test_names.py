"""Built-in names given on the command line (``io.names.named``): another case, and for model cards a Hugging Face
organisation, find the one built-in they spell; anything else is refused with the likeliest name suggested."""

from __future__ import annotations

from pathlib import Path

import pytest

from prfaas_plan.errors import InputError
from prfaas_plan.io.names import load_named_hardware, load_named_model, same_name
from tests.conftest import run_cli


def test_other_case_and_organisation_find_the_builtin() -> None:
    assert load_named_hardware("H100").accelerator.key == load_named_hardware("h100").accelerator.key
    assert load_named_model("Qwen/Qwen3-235B-A22B").key == "qwen3-235b-a22b"
    assert load_named_model("META-LLAMA/Llama-3.1-8B").key == "llama-3.1-8b"


@pytest.mark.parametrize(
    ("name", "organisation", "found"),
    [
        ("H200", False, "h200"),
        ("org/H200", False, None),  # hardware has no organisations: a path-like name is not stripped
        ("Qwen/Qwen3-235B-A22B", True, "qwen3-235b-a22b"),
        ("./Qwen3-235B-A22B", True, None),  # a relative path, not an organisation
        ("a/b/qwen3-235b-a22b", True, None),  # two slashes: a path
        ("llama-3.1-8b-instruct", True, None),  # another model's name is never guessed
    ],
)
def test_same_name(name: str, organisation: bool, found: str | None) -> None:
    known = ["h200", "qwen3-235b-a22b", "llama-3.1-8b"]
    assert same_name(name, known, organisation=organisation) == found


@pytest.mark.parametrize(
    ("name", "suggested"),
    [("a100", "a100-80gb"), ("A100", "a100-80gb"), ("h100-sxm", "h100"), ("h-200", "h200")],
)
def test_an_unknown_hardware_name_suggests_the_likeliest(name: str, suggested: str) -> None:
    with pytest.raises(InputError, match=rf"no hardware profile named '{name}' \(did you mean '{suggested}'\?\)"):
        load_named_hardware(name, "--hardware")


def test_an_instruct_variant_is_refused_and_its_base_card_suggested() -> None:
    with pytest.raises(InputError, match=r"'Llama-3.1-8B-Instruct' \(did you mean 'llama-3.1-8b'\?\)"):
        load_named_model("Llama-3.1-8B-Instruct", "--model")


def test_kv_takes_names_as_users_write_them() -> None:
    done = run_cli("kv", "--model", "meta-llama/Llama-3.1-8B", "--hardware", "H100", "--gpus", "1", "--length", "1000",
                   "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert '"model": "llama-3.1-8b"' in done.stdout and '"hardware": "h100"' in done.stdout


def test_a_scenario_argument_that_is_there_but_not_a_file_is_named_for_what_it_is(tmp_path: Path) -> None:
    """A directory, a device or a dangling link given as SCENARIO is said to be that (exit 2 with its kind), not
    reported as missing; a name that is nowhere still gets the suggestion."""
    from prfaas_plan.errors import InputError
    from prfaas_plan.io.names import resolve_scenario_path

    dangling = tmp_path / "gone"
    dangling.symlink_to(tmp_path / "nothing")
    for given, kind in (
        (str(tmp_path), "a directory"),
        ("/dev/null", "a character device"),
        (str(dangling), "a link to nothing"),
    ):
        with pytest.raises(InputError) as refused:
            resolve_scenario_path(given)
        assert f"'{given}' is {kind}, not a scenario file" in str(refused.value)
    from prfaas_plan.io.topology import resolve_topology_path

    with pytest.raises(InputError, match=r"'/dev/null' is a character device, not a topology or scenario file"):
        resolve_topology_path("/dev/null")
    with pytest.raises(InputError, match=r"no scenario file or built-in scenario named 'paper-case-studdy' \(did you"):
        resolve_scenario_path("paper-case-studdy")
