"""The ``dynamics:`` section of a scenario (or of a file of its own): prefix caches, the link over time,
faults and the dual-timescale scheduler, validated field by field into ``spec.dynamics.Dynamics``.

Every key and its unit, with an example::

    dynamics:
      prefix_cache:
        rule: switch                      # scarce | abundant | switch (default switch)
        abundant_below_utilization: 0.5   # switch: abundant while link utilisation < this
        linear_state_mib: 64              # hybrid model: one linear-attention/SWA state checkpoint (omit: none)
        block_tokens: 512
        prfaas: {nodes: 4, dram_gib_per_node: 1024, ssd_tb_per_node: 8, load_gb_per_s: 50}
        local:  {nodes: 8, dram_gib_per_node: 1024, ssd_tb_per_node: 0, load_gb_per_s: 50}
      link:
        steps: [{at_s: 0, gbit_per_s: 100}, {at_s: 600, gbit_per_s: 30}, {at_s: 900, gbit_per_s: 100}]
        # or periodic: {period_s: 86400, steps: [{at_s: 0, gbit_per_s: 100}, {at_s: 43200, gbit_per_s: 50}]}
        # or random: {mean_gbit_per_s: 100, std_gbit_per_s: 20, correlation_s: 60, step_s: 1}
        outages: [{start_s: 1200, duration_s: 60}]
      faults:
        - {pool: prfaas, at_s: 1000, count: 1, restore_s: 1300}   # pool: prfaas | local_prefill | decode
      scheduler:
        threshold: {interval_s: 10, window_requests: 2000, trigger_utilization: 0.8,
                    trigger_queue_per_instance: 2, every_interval: true, smoothing: 0.5, hysteresis: 0.05}
        roles: {period_s: 300, switch_s: 30, min_gain: 0.02}

``parse_dynamics(section)`` checks a section that ``io.scenario`` hands over (same ``Checker``, so every
problem carries file, line and dotted path); ``load_dynamics(path)`` reads the section from a file on its
own (a scenario file, or a file with only ``dynamics:``), ignoring the rest of the file.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from prfaas_plan.io.limits import MAX_LINK_GBIT_PER_S
from prfaas_plan.io.paths import display_path
from prfaas_plan.io.yamlsrc import Checker, KeyPath, Section, load_yaml, suggest
from prfaas_plan.spec.dynamics import (
    CACHE_RULES,
    POOLS,
    BandwidthProfile,
    BandwidthSteps,
    ClusterCache,
    Dynamics,
    InstanceLoss,
    Outage,
    PeriodicBandwidth,
    PrefixCaches,
    RandomBandwidth,
    RoleControl,
    ThresholdControl,
)
from prfaas_plan.units import GB, GBIT_PER_S, GIB, MIB, TB

#: Keys of the ``dynamics:`` section.
DYNAMICS_KEYS = ("prefix_cache", "link", "faults", "scheduler")
_CACHE_KEYS = ("rule", "abundant_below_utilization", "linear_state_mib", "block_tokens", "prfaas", "local")
_CLUSTER_KEYS = ("nodes", "dram_gib_per_node", "ssd_tb_per_node", "load_gb_per_s")
_LINK_KEYS = ("steps", "periodic", "random", "outages")
_THRESHOLD_KEYS = (
    "interval_s",
    "window_requests",
    "trigger_utilization",
    "trigger_queue_per_instance",
    "every_interval",
    "smoothing",
    "hysteresis",
)
_ROLE_KEYS = ("period_s", "switch_s", "min_gain")
#: Bounds with their reasons: a link as fast as the scenario's own cap (``io.limits``), a run of at most a year.
_MAX_GBIT_PER_S = MAX_LINK_GBIT_PER_S
_MAX_TIME_S = 366 * 86_400.0


def load_dynamics(path: Path) -> Dynamics | None:
    """The ``dynamics:`` section of a YAML file given for it (``--dynamics``); InputError listing every problem,
    and where the file has no such section (a misspelt key was ignored, and the run went on without dynamics)."""
    doc = load_yaml(path, display_path(path))
    checker = Checker(doc)
    if not isinstance(doc.data, dict):
        checker.report((), "expected a mapping with a 'dynamics' section")
        checker.raise_if_any()
    if "dynamics" not in doc.data:
        keys = [str(k) for k in doc.data]
        found = f"; its top-level keys: {', '.join(keys)}" if keys else ""
        close = [k for k in keys if suggest(k, ["dynamics"])]
        hint = f" ('{close[0]}' for 'dynamics'?)" if close else ""
        checker.report((), f"no 'dynamics' section{found}{hint}")
        checker.raise_if_any()
    root = Section(checker, (), {"dynamics": doc.data["dynamics"]}, optional=("dynamics",))
    dynamics = parse_dynamics(root.sub("dynamics", optional=DYNAMICS_KEYS))
    checker.raise_if_any()
    return dynamics


def parse_dynamics(sec: Section) -> Dynamics | None:
    """Check a ``dynamics:`` section (opened with ``optional=DYNAMICS_KEYS``); None when it is dead or any
    field was bad (the problems are in the section's checker)."""
    if sec.dead:
        return None
    before = len(sec.checker.problems)
    caches = _caches(sec.sub("prefix_cache", required=("prfaas", "local"), optional=_CACHE_KEYS))
    link = sec.sub("link", optional=_LINK_KEYS)
    profile = _profile(link)
    outages = tuple(o for o in (_outage(sec.checker, p, v) for p, v in link.items("outages")) if o is not None)
    losses = tuple(f for f in (_loss(sec.checker, p, v) for p, v in sec.items("faults")) if f is not None)
    scheduler = sec.sub("scheduler", optional=("threshold", "roles"))
    threshold = _threshold(scheduler.sub("threshold", optional=_THRESHOLD_KEYS))
    roles = _roles(scheduler.sub("roles", optional=_ROLE_KEYS))
    if len(sec.checker.problems) > before:
        return None
    return Dynamics(caches=caches, bandwidth=profile, outages=outages, losses=losses, threshold=threshold, roles=roles)


def _caches(sec: Section) -> PrefixCaches | None:
    if sec.dead:
        return None
    rule = sec.string("rule", choices=CACHE_RULES, default="switch")
    below = sec.number("abundant_below_utilization", gt=0, le=1, default=0.5)
    state_mib = sec.number("linear_state_mib", gt=0, le=1e6)
    block = sec.number("block_tokens", ge=1, le=1e6, integer=True, default=512)
    prfaas = _cluster(sec.sub("prfaas", required=("nodes", "load_gb_per_s"), optional=_CLUSTER_KEYS))
    local = _cluster(sec.sub("local", required=("nodes", "load_gb_per_s"), optional=_CLUSTER_KEYS))
    if None in (rule, below, block, prfaas, local):
        return None
    return PrefixCaches(
        prfaas=prfaas,  # type: ignore[arg-type]
        local=local,  # type: ignore[arg-type]
        rule=rule,  # type: ignore[arg-type]
        abundant_below_utilization=float(below),  # type: ignore[arg-type]
        linear_state_bytes=None if state_mib is None else state_mib * MIB,
        block_tokens=int(block),  # type: ignore[arg-type]
    )


def _cluster(sec: Section) -> ClusterCache | None:
    if sec.dead:
        return None
    nodes = sec.number("nodes", ge=0, le=1e6, integer=True)
    dram = sec.number("dram_gib_per_node", ge=0, le=1e6, default=0.0)
    ssd = sec.number("ssd_tb_per_node", ge=0, le=1e4, default=0.0)
    load = sec.number("load_gb_per_s", gt=0, le=1e5)
    if None in (nodes, dram, ssd, load):
        return None
    return ClusterCache.of_nodes(
        nodes=int(nodes),  # type: ignore[arg-type]
        dram_bytes_per_node=dram * GIB,  # type: ignore[operator]
        ssd_bytes_per_node=ssd * TB,  # type: ignore[operator]
        load_bandwidth_bytes_per_s=load * GB,  # type: ignore[operator]
    )


def _steps(
    checker: Checker, items: list[tuple[KeyPath, Any]], where: KeyPath, *, period_s: float | None
) -> tuple[tuple[float, float], ...] | None:
    steps: list[tuple[float, float]] = []
    ok = bool(items)
    for path, item in items:
        step = Section(checker, path, item, required=("at_s", "gbit_per_s"))
        at = step.number("at_s", ge=0, le=period_s if period_s is not None else _MAX_TIME_S)
        rate = step.number("gbit_per_s", ge=0, le=_MAX_GBIT_PER_S)
        if step.dead or at is None or rate is None:
            ok = False
            continue
        if period_s is not None and at >= period_s:
            checker.report((*path, "at_s"), f"must be < the period {period_s:g} s, got {at:g}")
            ok = False
            continue
        steps.append((at, rate * GBIT_PER_S))
    if not ok:
        return None
    times = [t for t, _ in steps]
    if times[0] != 0.0 or any(b <= a for a, b in itertools.pairwise(times)):
        checker.report(where, "step times must start at 0 and increase")
        return None
    if all(rate == 0 for _, rate in steps):
        checker.report(
            where, "every step is 0 Gbit/s: the link would never carry a KV cache; give the down spells as outages:"
        )
        return None
    return tuple(steps)


def _profile(link: Section) -> BandwidthProfile | None:
    if link.dead:
        return None
    given = [key for key in ("steps", "periodic", "random") if link.has(key)]
    if len(given) > 1:
        link.checker.report(link.path, f"give one of steps, periodic, random; got {', '.join(given)}")
        return None
    checker = link.checker
    if link.has("steps"):
        steps = _steps(checker, link.items("steps"), (*link.path, "steps"), period_s=None)
        return None if steps is None else BandwidthSteps(steps=steps)
    if link.has("periodic"):
        sec = link.sub("periodic", required=("period_s", "steps"))
        period = sec.number("period_s", gt=0, le=_MAX_TIME_S)
        if period is None:
            return None
        steps = _steps(checker, sec.items("steps"), (*sec.path, "steps"), period_s=period)
        return None if steps is None else PeriodicBandwidth(period_s=period, steps=steps)
    if link.has("random"):
        sec = link.sub("random", required=("mean_gbit_per_s", "std_gbit_per_s", "correlation_s"), optional=("step_s",))
        mean = sec.number("mean_gbit_per_s", gt=0, le=_MAX_GBIT_PER_S)
        std = sec.number("std_gbit_per_s", ge=0, le=_MAX_GBIT_PER_S)
        corr = sec.number("correlation_s", gt=0, le=_MAX_TIME_S)
        # At least a millisecond: finer steps describe nothing a KV transfer of milliseconds to seconds can see,
        # and the simulator draws one value per step over the whole run (sim.link_profile.MAX_PROFILE_STEPS).
        step = sec.number("step_s", ge=1e-3, le=_MAX_TIME_S, default=1.0)
        if None in (mean, std, corr, step):
            return None
        return RandomBandwidth(
            mean_bytes_per_s=mean * GBIT_PER_S,  # type: ignore[operator]
            std_bytes_per_s=std * GBIT_PER_S,  # type: ignore[operator]
            correlation_s=float(corr),  # type: ignore[arg-type]
            step_s=float(step),  # type: ignore[arg-type]
        )
    return None


def _outage(checker: Checker, path: KeyPath, value: Any) -> Outage | None:
    sec = Section(checker, path, value, required=("start_s", "duration_s"))
    start = sec.number("start_s", ge=0, le=_MAX_TIME_S)
    duration = sec.number("duration_s", gt=0, le=_MAX_TIME_S)
    if start is None or duration is None:
        return None
    return Outage(start_s=start, duration_s=duration)


def _loss(checker: Checker, path: KeyPath, value: Any) -> InstanceLoss | None:
    sec = Section(checker, path, value, required=("pool", "at_s"), optional=("count", "restore_s"))
    pool = sec.string("pool", choices=POOLS)
    at = sec.number("at_s", ge=0, le=_MAX_TIME_S)
    count = sec.number("count", ge=1, le=1e6, integer=True, default=1)
    restore = sec.number("restore_s", ge=0, le=_MAX_TIME_S)
    if restore is not None and at is not None and not restore > at:
        checker.report((*path, "restore_s"), f"must be after at_s ({at:g} s), got {restore:g}")
        return None
    if pool is None or at is None or count is None:
        return None
    return InstanceLoss(pool=pool, at_s=at, count=int(count), restore_s=restore)  # type: ignore[arg-type]


def _threshold(sec: Section) -> ThresholdControl | None:
    if sec.dead:
        return None
    default = ThresholdControl()
    values = {
        "interval_s": sec.number("interval_s", gt=0, le=_MAX_TIME_S, default=default.interval_s),
        "window_requests": sec.number("window_requests", ge=50, le=1e7, integer=True, default=default.window_requests),
        "trigger_utilization": sec.number("trigger_utilization", gt=0, default=default.trigger_utilization),
        "trigger_queue_per_instance": sec.number(
            "trigger_queue_per_instance", ge=0, default=default.trigger_queue_per_instance
        ),
        "smoothing": sec.number("smoothing", gt=0, le=1, default=default.smoothing),
        "hysteresis": sec.number("hysteresis", ge=0, le=10, default=default.hysteresis),
    }
    every = sec.boolean("every_interval", default=default.every_interval)
    if None in values.values() or every is None:
        return None
    return ThresholdControl(
        interval_s=float(values["interval_s"]),  # type: ignore[arg-type]
        window_requests=int(values["window_requests"]),  # type: ignore[arg-type]
        trigger_utilization=float(values["trigger_utilization"]),  # type: ignore[arg-type]
        trigger_queue_per_instance=float(values["trigger_queue_per_instance"]),  # type: ignore[arg-type]
        every_interval=every,
        smoothing=float(values["smoothing"]),  # type: ignore[arg-type]
        hysteresis=float(values["hysteresis"]),  # type: ignore[arg-type]
    )


def _roles(sec: Section) -> RoleControl | None:
    if sec.dead:
        return None
    default = RoleControl()
    period = sec.number("period_s", gt=0, le=_MAX_TIME_S, default=default.period_s)
    switch = sec.number("switch_s", ge=0, le=_MAX_TIME_S, default=default.switch_s)
    gain = sec.number("min_gain", ge=0, le=10, default=default.min_gain)
    if None in (period, switch, gain):
        return None
    return RoleControl(period_s=float(period), switch_s=float(switch), min_gain=float(gain))  # type: ignore[arg-type]
