"""The event engine: time order, FIFO among equal times, the horizon."""

from __future__ import annotations

import pytest

from prfaas_plan.sim.engine import Engine


def test_events_fire_in_time_order_and_ties_in_scheduling_order() -> None:
    """Events fire by time; events at the same time fire in the order they were scheduled (the seq counter)."""
    engine = Engine()
    fired: list[tuple[float, int]] = []
    for time_s, arg in [(2.0, 1), (1.0, 2), (2.0, 3), (1.0, 4), (0.5, 5)]:
        engine.schedule(time_s, 0, arg)
    engine.run([lambda t, a: fired.append((t, a))])
    assert fired == [(0.5, 5), (1.0, 2), (1.0, 4), (2.0, 1), (2.0, 3)]
    assert engine.events_fired == 5 and engine.now_s == 2.0


def test_handlers_can_schedule_and_the_horizon_stops_the_run() -> None:
    """A handler's own events join the heap; events after the horizon stay pending and now_s is the horizon."""
    engine = Engine()
    schedule = engine.scheduler()
    fired: list[float] = []

    def tick(now: float, arg: int) -> None:
        fired.append(now)
        schedule(now + 1.0, 0, arg + 1)

    engine.schedule(0.0, 0, 0)
    engine.run([tick], until_s=3.5)
    assert fired == [0.0, 1.0, 2.0, 3.0]
    assert engine.pending == 1 and engine.now_s == 3.5


def test_two_engines_share_nothing() -> None:
    """Each engine has its own counter and heap: no global state."""
    first, second = Engine(), Engine()
    first.schedule(1.0, 0, 0)
    assert second.pending == 0
    seen: list[int] = []
    second.schedule(1.0, 0, 7)
    second.run([lambda t, a: seen.append(a)])
    assert seen == [7] and first.pending == 1


def test_an_event_in_the_past_is_refused() -> None:
    """A handler that schedules an event before its own time is a bug: the run raises instead of firing it."""
    engine = Engine()

    def backwards(now_s: float, arg: int) -> None:
        engine.schedule(now_s - 1.0, 0, arg + 1)

    engine.schedule(5.0, 0, 0)
    with pytest.raises(RuntimeError, match="before the current"):
        engine.run([backwards])
