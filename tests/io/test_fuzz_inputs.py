"""Hostile inputs through the real command line: every run exits 0, 1 or 2, prints no traceback, puts no NaN
or infinity on stdout when it succeeds, and finishes in bounded time.

Each surface starts from a shipped valid file (the paper scenario, the H200 profile, the model cards, the
config.json fixtures), mutates it (one value replaced by a hostile one, or the text damaged: truncated, a
control character, an alias bomb, deep nesting, emptied) and runs the command that reads it, in process with
typer's CliRunner. Run with ``-s`` to print, per surface, the inputs tried and each outcome's count.

One measured run (ci profile, 2 cores, 20 s); inputs tried: exit 0 / exit 1 / exit 2 / mishandled:

- scenario YAML          100: 19 / 2 / 79 / 0
- hardware profile YAML  100: 15 / 0 / 85 / 0
- model card YAML        100: 12 / 0 / 88 / 0
- config.json            100: 13 / 0 / 87 / 0
- known regressions       26:  0 / 0 / 26 / 0

Under PRFAAS_HYPOTHESIS_PROFILE=deep (1,000 per surface) a run found none mishandled either.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from prfaas_plan.cli.app import app
from tests.conftest import REPO, examples

SCENARIO = REPO / "workloads" / "paper-case-study.yaml"
PROFILE = REPO / "hardware_profiles" / "h200.yaml"
CARDS = sorted((REPO / "workloads" / "models").glob("*.yaml"))
CONFIGS = sorted((REPO / "tests" / "fixtures" / "hf_configs").glob("*.json"))

#: A hang guard, not a speed assertion: the slowest valid run here takes well under a second.
HANG_GUARD_S = 20.0
_NAN_OR_INF = re.compile(r"\b(nan|inf|infinity)\b", re.IGNORECASE)
_RUNNER = CliRunner()
OUTCOMES: dict[str, Counter[str]] = {}
_ROOTS: list[Path] = []

HOSTILE_NUMBERS: list[Any] = [
    0,
    -1,
    -0.0,
    1e-300,
    1e15,
    1e300,
    -1e300,
    10**12,
    10**30,
    10**400,
    float("nan"),
    float("inf"),
    float("-inf"),
    2**63,
    0.5,
]
HOSTILE_OTHER: list[Any] = [
    None,
    True,
    "",
    " ",
    "x" * 100_000,
    "\x07bell",
    "\u202eright-to-left",
    [],
    {},
    [1, 2, 3],
    {"kind": "gqa"},
    "1e400",
]


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


#: Factors for the near-valid mutation: a number a billion times too small or large, halved, doubled, negated.
SCALES = [0, -1, 1e-9, 1e-3, 0.5, 0.999, 1.001, 2, 10, 1e3, 1e6, 1e9]

HOSTILE = st.one_of(
    st.sampled_from(HOSTILE_NUMBERS),
    st.sampled_from(HOSTILE_OTHER),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=40, max_value=200).map(_nested),
)

ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key path of a nested value (mappings and lists), the root excepted."""
    if path:
        yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*path, index))


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        value = value[part]
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, *rest = path
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[head] = _replace(value[head], tuple(rest), new)
    return copy


@st.composite
def mutated_text(draw: st.DrawFn, text: str, *, is_json: bool) -> str:
    """The valid ``text`` with one value replaced by a hostile one, or the text itself damaged."""
    data = json.loads(text) if is_json else yaml.safe_load(text)
    kind = draw(
        st.sampled_from(["scale", "scale", "scale", "value", "value", "truncate", "control", "alias", "deep", "empty"])
    )
    numbers = [p for p in _paths(data) if _is_number(_get(data, p))]
    if kind == "scale" and numbers:
        # Near-valid inputs: one number scaled, so the formulas (not only the checks) see extreme values.
        path = draw(st.sampled_from(numbers))
        factor = draw(st.sampled_from(SCALES))
        changed = _replace(data, path, _get(data, path) * factor)
        return json.dumps(changed) if is_json else yaml.safe_dump(changed, sort_keys=False, allow_unicode=True)
    if kind in ("value", "scale"):
        path = draw(st.sampled_from(list(_paths(data))))
        changed = _replace(data, path, draw(HOSTILE))
        return json.dumps(changed) if is_json else yaml.safe_dump(changed, sort_keys=False, allow_unicode=True)
    if kind == "truncate":
        return text[: draw(st.integers(min_value=0, max_value=len(text)))]
    if kind == "control":
        at = draw(st.integers(min_value=0, max_value=len(text)))
        return text[:at] + draw(st.sampled_from(["\x00", "\x07", "\x1b", "\ufffe", "\x85"])) + text[at:]
    if kind == "alias":
        return ALIAS_BOMB if not is_json else "[" * 100_000 + "]" * 100_000
    if kind == "deep":
        depth = draw(st.integers(min_value=30, max_value=20_000))
        return '{"a": ' * depth + "1" + "}" * depth if is_json else "a: " + "[" * depth + "]" * depth + "\n"
    return ""


def _check(surface: str, args: list[str]) -> Any:
    """Run the CLI once and assert the promise; count the outcome under ``surface``."""
    counts = OUTCOMES.setdefault(surface, Counter())
    counts["tried"] += 1
    start = time.perf_counter()
    result = _RUNNER.invoke(app, args)
    elapsed = time.perf_counter() - start
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    bad = (
        crashed
        or result.exit_code not in (0, 1, 2)
        or "Traceback" in result.output
        or (result.exit_code == 0 and _NAN_OR_INF.search(result.stdout) is not None)
        or elapsed >= HANG_GUARD_S
    )
    counts["mishandled" if bad else f"exit {result.exit_code}"] += 1
    assert not crashed, f"{args}: {result.exception!r}"
    assert result.exit_code in (0, 1, 2), (args, result.exit_code, result.output[-2000:])
    assert "Traceback" not in result.output, result.output[-2000:]
    if result.exit_code == 0:
        assert _NAN_OR_INF.search(result.stdout) is None, result.stdout[-2000:]
    if result.exit_code == 2:
        assert result.stderr.strip(), "exit 2 with no problem named"
    assert elapsed < HANG_GUARD_S, f"{args} took {elapsed:.1f} s"
    return result


@pytest.fixture(scope="module", autouse=True)
def _print_outcomes() -> Iterator[None]:
    yield
    for root in _ROOTS:
        shutil.rmtree(root, ignore_errors=True)
    for surface, counts in sorted(OUTCOMES.items()):
        shown = ", ".join(f"{k} {counts[k]}" for k in ("exit 0", "exit 1", "exit 2", "mishandled"))
        print(f"\n{surface}: {counts['tried']} inputs tried; {shown}")


def _in_tree(files: dict[str, str], run: Callable[[Path], list[str]]) -> list[str]:
    """Write ``files`` (relative path -> text) into a fresh directory and return the CLI arguments."""
    root = Path(tempfile.mkdtemp(prefix="prfaas-fuzz-"))
    _ROOTS.append(root)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return run(root)


_SETTINGS = settings(
    max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@_SETTINGS
@given(text=mutated_text(SCENARIO.read_text(encoding="utf-8"), is_json=False))
def test_fuzz_scenario_yaml(text: str) -> None:
    """A mutated paper scenario through ``optimize --json``: exit 0/1/2, no traceback, no NaN, bounded time."""
    _check("scenario YAML", _in_tree({"s.yaml": text}, lambda root: ["optimize", str(root / "s.yaml"), "--json"]))


@_SETTINGS
@given(text=mutated_text(PROFILE.read_text(encoding="utf-8"), is_json=False))
def test_fuzz_hardware_profile_yaml(text: str) -> None:
    """A mutated H200 profile, read by the paper scenario (measured PrfaaS pool) through ``optimize --json``."""
    files = {"w/s.yaml": SCENARIO.read_text(encoding="utf-8"), "hardware_profiles/h200.yaml": text}
    _check("hardware profile YAML", _in_tree(files, lambda root: ["optimize", str(root / "w" / "s.yaml"), "--json"]))


@_SETTINGS
@given(
    card=st.sampled_from(CARDS).flatmap(
        lambda p: mutated_text(p.read_text(encoding="utf-8"), is_json=False).map(lambda t: (p.stem, t))
    ),
    command=st.sampled_from(["kv", "show"]),
)
def test_fuzz_model_card_yaml(card: tuple[str, str], command: str) -> None:
    """A mutated model card through ``kv --method roofline`` on an H200 or ``model show``, both ``--json``."""
    stem, text = card

    def args(root: Path) -> list[str]:
        path = str(root / f"{stem}.yaml")
        if command == "show":
            return ["model", "show", path, "--json"]
        return ["kv", "--model", path, "--hardware", "h200", "--gpus", "8", "--length", "32000", "--json"]

    _check("model card YAML", _in_tree({f"{stem}.yaml": text}, args))


@_SETTINGS
@given(
    config=st.sampled_from(CONFIGS).flatmap(
        lambda p: mutated_text(p.read_text(encoding="utf-8"), is_json=True).map(lambda t: (p.stem, t))
    )
)
def test_fuzz_config_json(config: tuple[str, str]) -> None:
    """A mutated Hugging Face config.json through ``model import --json``."""
    stem, text = config
    _check(
        "config.json",
        _in_tree(
            {f"{stem}/config.json": text}, lambda root: ["model", "import", str(root / stem / "config.json"), "--json"]
        ),
    )


def _sub(path: Path, old: str, new: str) -> str:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    return text.replace(old, new, 1)


_H20 = REPO / "hardware_profiles" / "h20.yaml"
_CARD = REPO / "workloads" / "models" / "llama-3.1-8b.yaml"
_MLA_CARD = REPO / "workloads" / "models" / "deepseek-v3.yaml"
_CONFIG = REPO / "tests" / "fixtures" / "hf_configs" / "llama-3.1-8b.json"
# The cases that were mishandled before the loaders were bounded: (surface, file name, text).
REGRESSIONS: dict[str, tuple[str, str]] = {
    "scenario alias bomb": ("s.yaml", ALIAS_BOMB),
    "scenario nested 5000 deep": ("s.yaml", "scenario: " + "[" * 5000 + "]" * 5000 + "\n"),
    "scenario non-printable": ("s.yaml", _sub(SCENARIO, "name: paper-case-study", "name: paper\x07case")),
    "scenario gpus 1e12": ("s.yaml", _sub(SCENARIO, "instances: 4 ", "instances: 1000000000000 ")),
    "scenario 5000-digit int": ("s.yaml", _sub(SCENARIO, "tokens: 1024", "tokens: " + "9" * 5000)),
    "scenario mu 1e300": ("s.yaml", _sub(SCENARIO, "mu: 9.90", "mu: 1.0e+300")),
    "scenario empty": ("s.yaml", ""),
    "scenario over 1 MiB": ("s.yaml", SCENARIO.read_text(encoding="utf-8") + "#" * (1 << 21) + "\n"),
    "scenario invalid date": ("s.yaml", _sub(SCENARIO, "name: paper-case-study", "name: 2001-02-30")),
    "profile memory 400 digits": (
        "hardware_profiles/h200.yaml",
        _sub(PROFILE, "memory_gb: 141", "memory_gb: 1" + "0" * 400),
    ),
    "profile tflops 1e300": ("hardware_profiles/h200.yaml", _sub(PROFILE, "bf16: 989", "bf16: 1.0e+300")),
    "profile max_batch 1e15": ("hardware_profiles/h20.yaml", _sub(_H20, "max_batch: 20", "max_batch: 1.0e+15")),
    "profile latency 1e300": ("hardware_profiles/h200.yaml", _sub(PROFILE, "latency_s: 0.44}", "latency_s: 1.0e+300}")),
    "card hidden 10^400": ("card.yaml", _sub(_CARD, "hidden_size: 4096", "hidden_size: 1" + "0" * 400)),
    "card hidden 1e300": ("card.yaml", _sub(_CARD, "hidden_size: 4096", "hidden_size: 1.0e+300")),
    "card layers 1e12": ("card.yaml", _sub(_CARD, "num_layers: 32", "num_layers: 1000000000000")),
    "config nested 100000 deep": ("config.json", '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"),
    "config 5000-digit int": ("config.json", _sub(_CONFIG, '"hidden_size": 4096', '"hidden_size": ' + "9" * 5000)),
    "config 400-digit int": ("config.json", _sub(_CONFIG, '"hidden_size": 4096', '"hidden_size": ' + "9" * 400)),
    "config NaN": ("config.json", _sub(_CONFIG, '"hidden_size": 4096', '"hidden_size": NaN')),
    "scenario bandwidth 1e-280": (
        "s.yaml",
        _sub(SCENARIO, "bandwidth_gbit_per_s: 100", "bandwidth_gbit_per_s: 1.0e-280"),
    ),
    "scenario sigma 10": ("s.yaml", _sub(SCENARIO, "sigma: 1.00", "sigma: 10")),
    "card mla heads 0": ("card.yaml", _sub(_MLA_CARD, "heads: 128", "heads: 0")),
    "config torch_dtype list": ("config.json", _sub(_CONFIG, '"torch_dtype": "bfloat16"', '"torch_dtype": []')),
    "profile calibrated on flat latencies": (
        "hardware_profiles/h200.yaml",
        re.sub(r"latency_s: [0-9.]+\}", "latency_s: 0.5}", PROFILE.read_text(encoding="utf-8")),
    ),
    "config layers 1e9": ("config.json", _sub(_CONFIG, '"num_hidden_layers": 32', '"num_hidden_layers": 1000000000')),
}


def _regression_args(name: str, root: Path) -> list[str]:
    if name.endswith(".json"):
        return ["model", "import", str(root / name), "--json"]
    if name == "card.yaml":
        return ["kv", "--model", str(root / name), "--hardware", "h200", "--json"]
    if name.startswith("hardware_profiles/"):
        return ["optimize", str(root / "w" / "s.yaml"), "--json"]
    return ["optimize", str(root / name), "--json"]


@pytest.mark.parametrize("case", sorted(REGRESSIONS))
def test_known_hostile_input_is_an_input_error(case: str) -> None:
    """Each once-mishandled input now exits 2 naming the file (and a line where it has one), quickly."""
    name, text = REGRESSIONS[case]
    files = {name: text}
    if name.startswith("hardware_profiles/"):
        scenario = SCENARIO.read_text(encoding="utf-8")
        if "calibrated" in case:
            scenario = _sub(SCENARIO, "    hardware: h200\n", "    hardware: h200\n    method: calibrated\n")
        files["w/s.yaml"] = scenario
    args = _in_tree(files, lambda root: _regression_args(name, root))
    result = _check("regressions", args)
    assert result.exit_code == 2, result.output
    assert Path(name).name in result.stderr, result.stderr
    assert "Traceback" not in result.output
