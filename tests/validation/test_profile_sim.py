"""The windowed closed form (``latency.profile``) against the simulator, on traffic it was not tuned on.

Each test builds its traffic from a fixed seed (synthetic requests with the paper scenario's length law), runs
the real CLI or the library, and compares with the simulator's replications. These are validations: nothing
in the windowed model was fitted to these workloads.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from prfaas_plan.io.names import resolve_scenario_path
from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.latency import loaded_ttft
from prfaas_plan.latency.profile import profile_ttft
from prfaas_plan.optimize import search
from prfaas_plan.spec.plan import Plan
from prfaas_plan.throughput import StageModel, stage_model
from tests.conftest import run_cli

pytestmark = pytest.mark.validation


@pytest.fixture(scope="module")
def paper() -> tuple[StageModel, float, int, int, float]:
    """The paper scenario's stage model, the optimised plan (t, N_p, N_d) and its Λ_max."""
    model = stage_model(load_scenario(resolve_scenario_path(None)))
    plan = search(model)
    assert plan.threshold_tokens is not None
    return model, plan.threshold_tokens, plan.n_pd_prefill, plan.n_pd_decode, plan.throughput_req_per_s


def _write_mooncake(path: Path, arrival_s: np.ndarray, inputs: np.ndarray, outputs: np.ndarray) -> None:
    """A Mooncake-format JSONL trace (timestamps in ms), read back by the real trace reader."""
    lines = [
        json.dumps({"timestamp": round(t * 1000), "input_length": int(i), "output_length": int(o)})
        for t, i, o in zip(arrival_s, inputs, outputs, strict=True)
    ]
    path.write_text("\n".join(lines) + "\n")


def _doubling_trace(model: StageModel, base_rate: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Poisson arrivals at λ0 for 30 min, 2 λ0 for the next 10 min, λ0 for 20 min; lengths from the model."""
    rng = np.random.default_rng(seed)
    parts, start = [], 0.0
    for duration_s, rate in ((1800.0, base_rate), (600.0, 2.0 * base_rate), (1200.0, base_rate)):
        parts.append(np.sort(rng.uniform(start, start + duration_s, rng.poisson(rate * duration_s))))
        start += duration_s
    arrival = np.concatenate(parts)
    return arrival, np.round(model.lengths.sample(rng, arrival.size))


def test_p90_follows_a_ten_minute_rate_doubling(
    paper: tuple[StageModel, float, int, int, float], tmp_path: Path
) -> None:
    """A trace whose rate doubles for ten minutes (0.4 -> 0.8 of Λ_max): through the CLI, the closed form's
    P90 and P99 stay within 15 % of the simulation's (or inside its interval), while the stationary model at
    the trace's average rate misses the simulated P90 by more than 15 %: the closed form moves with the
    traffic, not with its mean."""
    model, t, n_p, n_d, lam_max = paper
    arrival, inputs = _doubling_trace(model, 0.4 * lam_max, seed=7)
    trace = tmp_path / "doubling.jsonl"
    _write_mooncake(trace, arrival, inputs, np.full(arrival.size, 1024))
    rate = (arrival.size - 1) / float(arrival[-1] - arrival[0])
    result = run_cli(
        "evaluate",
        "--threshold",
        str(t),
        "--n-pd-prefill",
        str(n_p),
        "--n-pd-decode",
        str(n_d),
        "--trace",
        str(trace),
        "--rate",
        f"{rate:.6f}",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)["loaded"]
    simulated = loaded["verification"]["simulated_ttft_s"]["overall"]
    for stat in ("p90", "p99"):
        closed, sim = loaded["ttft_s"][stat], simulated[stat]
        assert abs(closed - sim["value"]) <= max(0.15 * sim["value"], sim["ci95_half_width"]), (stat, closed, sim)
    stationary = loaded_ttft(model, Plan(threshold_tokens=t, n_pd_prefill=n_p, n_pd_decode=n_d), rate).ttft
    assert stationary is not None
    assert stationary.p90_s < 0.85 * simulated["p90"]["value"]


def test_windowed_model_reduces_to_the_stationary_one_on_poisson_traffic(
    paper: tuple[StageModel, float, int, int, float],
) -> None:
    """On 60,000 Poisson arrivals at 70 % of Λ_max the windowed model's percentiles are within 8 % of the
    stationary model's (itself validated against the simulator for Poisson traffic): the window loads shrink
    to the mean when their spread is only noise."""
    model, t, n_p, n_d, lam_max = paper
    rng = np.random.default_rng(11)
    rate = 0.7 * lam_max
    arrival = np.cumsum(rng.exponential(1.0 / rate, 60_000))
    inputs = model.lengths.sample(rng, arrival.size)
    plan = Plan(threshold_tokens=t, n_pd_prefill=n_p, n_pd_decode=n_d)
    windowed = profile_ttft(model, plan, arrival, inputs, np.full(arrival.size, 1024.0))
    stationary = loaded_ttft(model, plan, (arrival.size - 1) / float(arrival[-1] - arrival[0]))
    assert windowed.loaded.ttft is not None and stationary.ttft is not None
    assert windowed.validity.in_domain, windowed.validity.reasons
    for stat in ("mean_s", "p50_s", "p90_s", "p99_s"):
        assert getattr(windowed.loaded.ttft, stat) == pytest.approx(getattr(stationary.ttft, stat), rel=0.08), stat


def test_onoff_arrivals_in_yaml_are_checked_by_simulation(tmp_path: Path) -> None:
    """A scenario with ON/OFF arrivals (ON a third of 2-minute cycles) evaluated under load through the CLI:
    the closed form is the windowed one, every percentile agrees with the simulation within 20 % (or its
    interval) or the figure is flagged out of domain, and the JSON says which figures the verdict uses."""
    text = Path(resolve_scenario_path(None)).read_text()
    text = text.replace(
        "    process: poisson ",
        "    process: onoff\n    on_fraction: 0.33\n    mean_cycle_s: 120\n    #",
    )
    assert "process: onoff" in text
    scenario = tmp_path / "onoff.yaml"
    scenario.write_text(text)
    result = run_cli(
        "evaluate",
        str(scenario),
        "--threshold",
        "19418",
        "--n-pd-prefill",
        "3",
        "--n-pd-decode",
        "5",
        "--load",
        "0.5",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)["loaded"]
    assert loaded["method"].startswith("windowed (onoff arrivals")
    verification = loaded["verification"]
    assert verification["verdict_source"] == "simulation"
    if loaded["validity"]["in_domain"]:
        assert verification["disagreements"] == [], verification["disagreements"]
