"""Bad input: every problem is reported with its file, line and field; nothing is half-loaded."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from prfaas_plan.cli.common import load_with_flags
from prfaas_plan.errors import InputError
from prfaas_plan.io.hardware import load_hardware
from prfaas_plan.io.names import resolve_scenario_path
from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.optimize import evaluate, search
from prfaas_plan.throughput import stage_model
from tests.conftest import PAPER_SCENARIO, REPO, TRACES, run_cli

PAPER_TEXT = PAPER_SCENARIO.read_text()


def _scenario(tmp_path: Path, old: str, new: str) -> Path:
    """The paper scenario with one text edit, written next to a copy of the hardware profiles."""
    assert old in PAPER_TEXT, old
    (tmp_path / "workloads").mkdir(exist_ok=True)
    path = tmp_path / "workloads" / "edited.yaml"
    path.write_text(PAPER_TEXT.replace(old, new, 1))
    return path


def _problems(path: Path) -> list[str]:
    with pytest.raises(InputError) as info:
        load_scenario(path)
    return [str(p) for p in info.value.problems]


def _line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


@pytest.mark.parametrize(
    ("old", "new", "field", "message"),
    [
        ("    sigma: 1.00", "    sigma: -1.0", "traffic.input_length.sigma", "must be > 0, got -1.0"),
        ("    sigma: 1.00", "    sigma: .nan", "traffic.input_length.sigma", "must be a finite number"),
        (
            "    sigma: 1.00",
            "    sigma: wide",
            "traffic.input_length.sigma",
            "expected a number, got string 'wide'",
        ),
        (
            "    max_tokens: 131072",
            "    max_tokens: 100",
            "traffic.input_length.max_tokens",
            "must be > min_tokens",
        ),
        ("    instances: 4 ", "    instances: 0 ", "deployment.prfaas.instances", "must be >= 1, got 0"),
        (
            "    instances: 8 ",
            "    instances: 1 ",
            "deployment.local.instances",
            "one prefill and one decode",
        ),
        ("    instances: 4 ", "    instances: 2.5 ", "deployment.prfaas.instances", "expected an integer"),
        (
            "    bandwidth_gbit_per_s: 100",
            "    bandwidth_gbit_per_s: 0",
            "deployment.link.bandwidth_gbit_per_s",
            "> 0",
        ),
        (
            "    bandwidth_gbit_per_s: 100",
            "    bandwidth_gbps: 100",
            "deployment.link.bandwidth_gbps",
            "unknown key 'bandwidth_gbps' (did you mean 'bandwidth_gbit_per_s'?)",
        ),
        ("    hardware: h200", "    hardware: h-200", "deployment.prfaas.hardware", "did you mean 'h200'?"),
        ("model: paper-1t-hybrid", "model: paper-1t", "model", "no model card named 'paper-1t'"),
        (
            "    distribution: lognormal",
            "    distribution: log-normal",
            "traffic.input_length.distribution",
            "did you mean 'lognormal'?",
        ),
        (
            "    gpus_per_instance: 8\n    instances: 4",
            "    gpus_per_instance: 4\n    instances: 4",
            "deployment.prfaas.hardware",
            "no profile for model 'paper-1t-hybrid' on 4 GPUs",
        ),
    ],
)
def test_each_bad_field_is_named_with_file_and_line(
    tmp_path: Path, old: str, new: str, field: str, message: str
) -> None:
    """One clear problem naming file:line and the dotted field, for each kind of bad value."""
    path = _scenario(tmp_path, old, new)
    problems = _problems(path)
    matching = [p for p in problems if f" {field}: " in p and message in p]
    assert matching, problems
    if "hardware" not in field:  # profile-reference problems point at the reference, checked below
        line = _line_of(path, new.splitlines()[-1])
        assert f"edited.yaml:{line} {field}: " in matching[0]


def test_all_problems_are_collected_not_just_the_first(tmp_path: Path) -> None:
    """Two bad fields in one file give two problems."""
    text = PAPER_TEXT.replace("    sigma: 1.00", "    sigma: -1").replace(
        "bandwidth_gbit_per_s: 100", "bandwidth_gbit_per_s: -5"
    )
    path = tmp_path / "two.yaml"
    path.write_text(text)
    problems = _problems(path)
    assert any("sigma" in p for p in problems) and any("bandwidth_gbit_per_s" in p for p in problems)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("scenario: [unclosed\n", "malformed YAML"),
        ("", "the file is empty"),
        ("scenario:\n  name: a\nscenario:\n  name: b\n", "duplicate key"),
        ("- a list\n", "expected a mapping"),
    ],
)
def test_malformed_files(tmp_path: Path, text: str, message: str) -> None:
    """Malformed YAML, an empty file, duplicate keys and a non-mapping top level are input errors."""
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert any(message in p and "bad.yaml" in p for p in _problems(path))


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    """A scenario path that does not exist names the file."""
    assert any("file not found" in p for p in _problems(tmp_path / "nope.yaml"))


def test_unknown_builtin_scenario_name_suggests() -> None:
    """A bare name that is not a built-in scenario suggests the closest one."""
    with pytest.raises(InputError, match="did you mean 'paper-case-study'"):
        resolve_scenario_path("paper-case-stdy")


def test_profile_errors_name_the_profile_file(tmp_path: Path) -> None:
    """A bad value inside a hardware profile is reported against that file and line."""
    shutil.copytree(REPO / "hardware_profiles", tmp_path / "hardware_profiles")
    profile = tmp_path / "hardware_profiles" / "h200.yaml"
    profile.write_text(profile.read_text().replace("latency_s: 0.72}", "latency_s: -0.72}"))
    path = _scenario(tmp_path, "name: paper-case-study", "name: edited")
    problems = _problems(path)
    line = _line_of(profile, "latency_s: -0.72")
    assert any(f"h200.yaml:{line} profiles[0].prefill.points[1].latency_s: must be > 0" in p for p in problems), (
        problems
    )


def test_a_fit_that_turns_down_is_rejected(tmp_path: Path) -> None:
    """Profile points whose fitted curve decreases inside the length range are an input error."""
    shutil.copytree(REPO / "hardware_profiles", tmp_path / "hardware_profiles")
    profile = tmp_path / "hardware_profiles" / "h200.yaml"
    profile.write_text(profile.read_text().replace("latency_s: 7.40}", "latency_s: 0.50}"))
    problems = _problems(_scenario(tmp_path, "name: paper-case-study", "name: edited"))
    assert any("decreases with length" in p for p in problems), problems


def test_every_shipped_profile_loads() -> None:
    """Every file in hardware_profiles/ passes validation."""
    for path in sorted((REPO / "hardware_profiles").glob("*.yaml")):
        assert load_hardware(path).accelerator.key == path.stem


def test_a_pools_compute_efficiency_prices_its_fp8_gemms_too(tmp_path: Path) -> None:
    """An engine pool's ``roofline: compute_efficiency`` sets its GEMMs' rate whatever their dtype: the engine's
    FP8 figure does not override it for an FP8 model (before, it silently did), while a pool that sets none
    keeps the engine's per-dtype figures."""
    text = (REPO / "workloads" / "qwen3-next-b200-h100.yaml").read_text()
    text = text.replace("  card: qwen3-next-80b-a3b\n", "  card: qwen3-next-80b-a3b\n  dtypes: {weights: fp8}\n", 1)
    plain = tmp_path / "plain.yaml"
    plain.write_text(text)
    old = "    hardware: h100\n    method: roofline\n"
    assert text.count(old) == 1
    edited = tmp_path / "edited.yaml"
    edited.write_text(text.replace(old, old + "    roofline: {compute_efficiency: 0.33}\n"))
    engine = load_scenario(plain).local.roofline
    assert engine.gemm_efficiency("fp8") != pytest.approx(engine.compute_efficiency)  # else this checks nothing
    local = load_scenario(edited).local.roofline
    assert local.compute_efficiency == pytest.approx(0.33)
    assert local.gemm_efficiency("fp8") == pytest.approx(0.33)
    assert local.gemm_efficiency("fp4") == pytest.approx(0.33)


def test_a_pools_roofline_overrides_keep_its_engine_named(tmp_path: Path) -> None:
    """A pool's `roofline:` overrides sit on its engine's figures, and its source says so: the engine stays named
    before the overrides (it was replaced by "scenario roofline overrides" while its terms were still priced)."""
    text = (REPO / "workloads" / "qwen3-next-b200-h100.yaml").read_text()
    old = "    hardware: h100\n    method: roofline\n"
    path = tmp_path / "s.yaml"
    path.write_text(text.replace(old, old + "    engine: vllm\n    roofline: {memory_efficiency: 0.5}\n"))
    local = load_scenario(path).local.roofline
    assert local.memory_efficiency == 0.5
    assert local.source.startswith("engine vllm on hopper") and local.source.endswith("scenario roofline overrides")


@pytest.mark.parametrize("key", ["compute_efficiency", "overhead_s"])
def test_a_calibrated_pool_refuses_the_values_its_fit_sets(tmp_path: Path, key: str) -> None:
    """`method: calibrated` fits the compute efficiency and the per-request overhead: a value given for either
    is refused with its file, line and field (it was accepted and silently replaced by the fit)."""
    text = (REPO / "workloads" / "example-annotated.yaml").read_text()
    old = "      memory_efficiency: 0.8 "
    assert text.count(old) == 1
    path = tmp_path / "s.yaml"
    path.write_text(text.replace(old, f"      {key}: 0.3\n{old}"))
    with pytest.raises(InputError) as err:
        load_scenario(path)
    line = _line_of(path, f"{key}: 0.3")
    assert f"s.yaml:{line} deployment.prfaas.roofline.{key}: is what method: calibrated fits" in str(err.value)
    load_scenario(REPO / "workloads" / "example-annotated.yaml")  # its other overrides stay accepted
    # The published schema refuses it too, and still accepts the annotated example.
    import yaml
    from jsonschema import Draft202012Validator

    from prfaas_plan.io.schema import schema

    validator = Draft202012Validator(schema("scenario"))
    assert not validator.is_valid(yaml.safe_load(path.read_text()))
    assert validator.is_valid(yaml.safe_load((REPO / "workloads" / "example-annotated.yaml").read_text()))


def test_overrides_are_checked() -> None:
    """Command-line overrides are edits checked by the scenario loader, with its limits, naming the option."""
    with pytest.raises(InputError, match="--bandwidth-gbit-per-s: must be > 0"):
        load_with_flags(None, {"--bandwidth-gbit-per-s": -1.0})
    with pytest.raises(InputError, match="--n-local: must be >= 2"):
        load_with_flags(None, {"--n-local": 1})
    assert load_with_flags(None, {"--n-prfaas": 7, "--n-local": None}).prfaas.instances == 7


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["optimize", "no/such/file.yaml"], "file not found"),
        (["optimize", "--bandwidth-gbit-per-s", "-3"], "--bandwidth-gbit-per-s: must be > 0"),
        (
            ["evaluate", "--threshold", "19400", "--n-pd-prefill", "6", "--n-pd-decode", "5"],
            "exceed the local pool",
        ),
    ],
)
def test_cli_bad_input_exits_2_without_traceback(args: list[str], needle: str) -> None:
    """The real command line: exit status 2, one line naming the problem, no traceback, nothing on stdout."""
    result = run_cli(*args)
    assert result.returncode == 2, result.stderr
    assert needle in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_cli_infeasible_plan_exits_1_naming_the_constraint() -> None:
    """A plan that cannot carry load exits 1 and names the stage without capacity."""
    result = run_cli("evaluate", "--threshold", "19400", "--n-pd-prefill", "0", "--n-pd-decode", "8")
    assert result.returncode == 1
    assert "pd_prefill" in result.stderr and "Traceback" not in result.stderr


def test_empirical_trace_scenario_optimises(tmp_path: Path) -> None:
    """An input-length distribution read from the Mooncake trace, net of prefix-cache hits, plans end to end."""
    trace = TRACES / "conversation_trace.jsonl"
    text = PAPER_TEXT.replace(
        "    distribution: lognormal\n    mu: 9.90\n    sigma: 1.00\n    min_tokens: 128\n    max_tokens: 131072",
        f"    distribution: empirical\n    trace: {trace}\n    prefix_cache: true",
    )
    path = tmp_path / "trace.yaml"
    path.write_text(text)
    scenario = load_scenario(path)
    assert scenario.traffic.input_length.mean_tokens == pytest.approx(7_539, abs=1)  # the recorded uncached mean
    model = stage_model(scenario)
    plan = search(model)
    # With the infinite cache, 1 % of requests have nothing left to prefill; offloading every request (those
    # included) is then the best plan, and the search must reach it (its grid once started at t = 0, which
    # keeps them local, so that plan was out of its reach).
    from prfaas_plan.optimize.baselines import naive_threshold

    naive = evaluate(model, naive_threshold(model), 0)
    assert plan.throughput_req_per_s >= naive.throughput_req_per_s * (1 - 1e-9) > 0


def test_bursty_arrival_processes_load_with_their_parameters(tmp_path: Path) -> None:
    """ON/OFF with batches and a diurnal profile parse into the spec, with the values given."""
    onoff = _scenario(
        tmp_path,
        "    process: poisson ",
        "    process: onoff\n    on_fraction: 0.25\n    mean_cycle_s: 90\n    batch_size_mean: 3\n    #",
    )
    arrival = load_scenario(onoff).traffic.arrival
    assert (arrival.process, arrival.on_fraction, arrival.mean_cycle_s, arrival.batch_size_mean) == (
        "onoff",
        0.25,
        90.0,
        3.0,
    )
    assert not arrival.is_stationary_renewal
    diurnal = _scenario(
        tmp_path, "    process: poisson ", "    process: diurnal\n    amplitude: 0.5\n    period_s: 600\n    #"
    )
    assert load_scenario(diurnal).traffic.arrival.amplitude == 0.5


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ("    process: poisson\n    on_fraction: 0.5\n    #", "does not apply to process 'poisson'"),
        ("    process: diurnal\n    amplitude: 1.0\n    #", "amplitude: must be < 1"),
        ("    process: onoff\n    on_fraction: 0\n    #", "on_fraction: must be > 0"),
        ("    process: burst\n    #", "process"),
    ],
)
def test_bad_arrival_settings_are_named(tmp_path: Path, edit: str, message: str) -> None:
    """A parameter the process does not use, or a value out of range, is an input error naming the field."""
    problems = _problems(_scenario(tmp_path, "    process: poisson ", edit))
    assert any(message in p for p in problems), problems


@pytest.mark.parametrize(
    ("role", "words"), [("input_length", "nothing to prefill"), ("output_length", "nothing to decode")]
)
def test_an_empirical_length_from_a_trace_of_all_zeros_is_refused(tmp_path: Path, role: str, words: str) -> None:
    """All-zero output lengths ended in ZeroDivisionError; all-zero inputs in a threshold of -1.0 tokens."""
    rows = [{"timestamp": 100 * i, "input_length": 1000, "output_length": 100, role: 0} for i in range(50)]
    (tmp_path / "zeros.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    text = PAPER_SCENARIO.read_text()
    start = text.index(f"  {role}:")
    end = text.index("  output_length:" if role == "input_length" else "  arrival:")
    section = f"  {role}:\n    distribution: empirical\n    trace: zeros.jsonl\n"
    (tmp_path / "s.yaml").write_text(text[:start] + section + text[end:])
    problems = _problems(tmp_path / "s.yaml")
    assert len(problems) == 1 and f"traffic.{role}.trace" in problems[0] and words in problems[0], problems
