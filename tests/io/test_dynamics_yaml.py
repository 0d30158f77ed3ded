"""The ``dynamics:`` section (io.dynamics): every field into SI specs; every problem with file, line, path."""

from __future__ import annotations

from pathlib import Path

import pytest

from prfaas_plan.errors import InputError
from prfaas_plan.io.dynamics import load_dynamics
from prfaas_plan.spec.dynamics import (
    BandwidthSteps,
    InstanceLoss,
    Outage,
    PeriodicBandwidth,
    RandomBandwidth,
    RoleControl,
    ThresholdControl,
)
from prfaas_plan.units import GB, GBIT_PER_S, GIB, MIB, TB

FULL = """\
scenario: {name: ignored}
dynamics:
  prefix_cache:
    rule: abundant
    abundant_below_utilization: 0.3
    linear_state_mib: 64
    prfaas: {nodes: 4, dram_gib_per_node: 1024, ssd_tb_per_node: 8, load_gb_per_s: 50}
    local:  {nodes: 8, dram_gib_per_node: 512, load_gb_per_s: 25}
  link:
    steps: [{at_s: 0, gbit_per_s: 100}, {at_s: 600, gbit_per_s: 30}]
    outages: [{start_s: 1200, duration_s: 60}]
  faults:
    - {pool: prfaas, at_s: 1000, count: 2, restore_s: 1300}
    - {pool: decode, at_s: 2000}
  scheduler:
    threshold: {interval_s: 5, window_requests: 500, every_interval: false}
    roles: {period_s: 600, switch_s: 20}
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "d.yaml"
    path.write_text(text)
    return path


def test_every_field_converts_once_to_si(tmp_path: Path) -> None:
    """GiB, TB, GB/s, Gbit/s and MiB become bytes and bytes/s; defaults fill what is left out."""
    dynamics = load_dynamics(_write(tmp_path, FULL))
    assert dynamics is not None and dynamics.caches is not None
    caches = dynamics.caches
    assert caches.rule == "abundant" and caches.abundant_below_utilization == 0.3
    assert caches.linear_state_bytes == 64 * MIB
    assert caches.prfaas.capacity_bytes == 4 * (1024 * GIB + 8 * TB)
    assert caches.local.capacity_bytes == 8 * 512 * GIB
    assert caches.local.load_bandwidth_bytes_per_s == 25 * GB
    assert dynamics.bandwidth == BandwidthSteps(steps=((0.0, 100 * GBIT_PER_S), (600.0, 30 * GBIT_PER_S)))
    assert dynamics.outages == (Outage(start_s=1200.0, duration_s=60.0),)
    assert dynamics.losses == (
        InstanceLoss(pool="prfaas", at_s=1000.0, count=2, restore_s=1300.0),
        InstanceLoss(pool="decode", at_s=2000.0),
    )
    assert dynamics.threshold == ThresholdControl(interval_s=5.0, window_requests=500, every_interval=False)
    assert dynamics.roles == RoleControl(period_s=600.0, switch_s=20.0)


def test_periodic_and_random_profiles(tmp_path: Path) -> None:
    """The two other profile forms."""
    periodic = load_dynamics(
        _write(
            tmp_path,
            "dynamics:\n  link:\n    periodic: {period_s: 100, steps: [{at_s: 0, gbit_per_s: 10}, "
            "{at_s: 50, gbit_per_s: 5}]}\n",
        )
    )
    assert periodic is not None
    assert periodic.bandwidth == PeriodicBandwidth(
        period_s=100.0, steps=((0.0, 10 * GBIT_PER_S), (50.0, 5 * GBIT_PER_S))
    )
    random = load_dynamics(
        _write(
            tmp_path,
            "dynamics:\n  link:\n    random: {mean_gbit_per_s: 100, std_gbit_per_s: 20, correlation_s: 60}\n",
        )
    )
    assert random is not None
    assert random.bandwidth == RandomBandwidth(
        mean_bytes_per_s=100 * GBIT_PER_S, std_bytes_per_s=20 * GBIT_PER_S, correlation_s=60.0, step_s=1.0
    )


def test_a_file_given_for_dynamics_without_the_section_is_refused(tmp_path: Path) -> None:
    """A file given as --dynamics without a ``dynamics:`` section is refused naming its keys, a misspelt one
    pointed out (it was read as no dynamics, and the run went on without them, saying nothing)."""
    with pytest.raises(InputError, match=r":1: no 'dynamics' section; its top-level keys: scenario$"):
        load_dynamics(_write(tmp_path, "scenario: {name: x}\n"))
    with pytest.raises(InputError, match=r"top-level keys: dynamic \('dynamic' for 'dynamics'\?\)"):
        load_dynamics(_write(tmp_path, "dynamic:\n  link: {steps: [{at_s: 0, gbit_per_s: 10}]}\n"))


def test_every_problem_is_listed_with_file_line_and_path(tmp_path: Path) -> None:
    """Unknown keys with suggestions, bad choices, out-of-range numbers, two profiles, a restore before its
    loss, unordered steps: all reported at once."""
    path = _write(
        tmp_path,
        """\
dynamics:
  prefix_cache:
    rule: scarse
    prfaas: {nodes: -1, load_gb_per_s: 50}
  link:
    steps: [{at_s: 5, gbit_per_s: 100}]
    random: {mean_gbit_per_s: 1, std_gbit_per_s: 0, correlation_s: 1}
  faults:
    - {pool: decod, at_s: 1000, restore_s: 10}
  scheduler:
    threshold: {intervl_s: 10}
""",
    )
    with pytest.raises(InputError) as caught:
        load_dynamics(path)
    lines = [str(p) for p in caught.value.problems]
    expected = [
        f"{path}:2 dynamics.prefix_cache: missing required key 'local'",
        f"{path}:3 dynamics.prefix_cache.rule: must be one of scarce, abundant, switch; got 'scarse' "
        "(did you mean 'scarce'?)",
        f"{path}:4 dynamics.prefix_cache.prfaas.nodes: must be >= 0, got -1",
        f"{path}:5 dynamics.link: give one of steps, periodic, random; got steps, random",
        f"{path}:9 dynamics.faults[0].pool: must be one of prfaas, local_prefill, decode; got 'decod' "
        "(did you mean 'decode'?)",
        f"{path}:9 dynamics.faults[0].restore_s: must be after at_s (1000 s), got 10",
        f"{path}:11 dynamics.scheduler.threshold.intervl_s: unknown key 'intervl_s' (did you mean 'interval_s'?)",
    ]
    assert sorted(lines) == sorted(expected)
    steps = _write(tmp_path, "dynamics:\n  link:\n    steps: [{at_s: 5, gbit_per_s: 100}]\n")
    with pytest.raises(InputError, match="step times must start at 0"):
        load_dynamics(steps)


def _dynamics_file(tmp_path: Path, link: str) -> Path:
    path = tmp_path / "dynamics.yaml"
    path.write_text(f"dynamics:\n  link:\n    {link}\n")
    return path


def test_a_random_link_step_below_a_millisecond_is_refused(tmp_path: Path) -> None:
    """A 30 us step of a random link profile grew simulate to 24 GB before the kernel killed it; it is refused
    where it is written."""
    path = _dynamics_file(
        tmp_path, "random: {mean_gbit_per_s: 100, std_gbit_per_s: 20, correlation_s: 60, step_s: 0.00003}"
    )
    with pytest.raises(InputError, match=r"dynamics\.link\.random\.step_s: must be >= 0\.001"):
        load_dynamics(path)


def test_a_link_that_is_zero_at_every_step_is_refused(tmp_path: Path) -> None:
    """Steps of 0 Gbit/s throughout (a ZeroDivisionError traceback in simulate) are refused, pointing at
    outages; a 0 step among others stays allowed."""
    with pytest.raises(InputError, match=r"dynamics\.link\.steps: every step is 0 Gbit/s.*outages"):
        load_dynamics(_dynamics_file(tmp_path, "steps: [{at_s: 0, gbit_per_s: 0}, {at_s: 10, gbit_per_s: 0}]"))
    assert load_dynamics(_dynamics_file(tmp_path, "steps: [{at_s: 0, gbit_per_s: 100}, {at_s: 10, gbit_per_s: 0}]"))


def test_a_profile_too_fine_for_the_run_is_refused_and_a_dead_link_has_no_utilisation(tmp_path: Path) -> None:
    """A random step or a period so short that the run would lay out more than MAX_PROFILE_STEPS steps is exit 2
    naming the field and the step that would do (a numpy allocation traceback of 92 GiB, or an OOM kill, before);
    a link down for the whole window has a null utilisation, not a division by zero."""
    import json

    from tests.conftest import run_cli

    fine = _dynamics_file(
        tmp_path, "random: {mean_gbit_per_s: 100, std_gbit_per_s: 20, correlation_s: 60, step_s: 0.001}"
    )
    done = run_cli("simulate", "--requests", "20000", "--dynamics", str(fine))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "dynamics.link.random.step_s:" in done.stderr and "make it at least" in done.stderr
    (tmp_path / "periodic").mkdir()
    short = _dynamics_file(tmp_path / "periodic", "periodic: {period_s: 0.000001, steps: [{at_s: 0, gbit_per_s: 100}]}")
    done = run_cli("simulate", "--requests", "20000", "--dynamics", str(short))
    assert done.returncode == 2 and "dynamics.link.periodic.period_s:" in done.stderr, done.stderr
    (tmp_path / "down").mkdir()
    down = _dynamics_file(tmp_path / "down", "outages: [{start_s: 0, duration_s: 10000000}]")
    done = run_cli("simulate", "--requests", "3000", "--dynamics", str(down), "--json")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert json.loads(done.stdout)["simulated"]["utilization"]["link"] is None
