"""A minimal discrete-event engine: a binary heap of future events and a per-run sequence counter.

An event is the tuple ``(time_s, seq, kind, arg)``: ``kind`` is a small integer that selects a handler and
``arg`` an integer the handler interprets (a request index, a generation number). ``seq`` comes from this
run's own ``itertools.count()``, so events at the same instant fire in the order they were scheduled and
the heap never compares beyond it: identical inputs give identical runs, with no global state.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Sequence

#: A handler receives the event's time (s) and its integer argument.
Handler = Callable[[float, int], None]


class Engine:
    """Future events of one run, and the loop that fires them in time order."""

    __slots__ = ("_heap", "_seq", "events_fired", "now_s")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, int]] = []
        self._seq = itertools.count()
        self.now_s = 0.0
        self.events_fired = 0

    def schedule(self, time_s: float, kind: int, arg: int) -> None:
        """Add the event ``kind(arg)`` at ``time_s`` seconds (never earlier than the current time)."""
        heapq.heappush(self._heap, (time_s, next(self._seq), kind, arg))

    def scheduler(self) -> Callable[[float, int, int], None]:
        """``schedule`` as a plain closure, for handlers that schedule on every event (saves an attribute
        lookup and a bound-method call per use; same heap, same counter)."""
        heap, seq, push = self._heap, self._seq, heapq.heappush

        def schedule(time_s: float, kind: int, arg: int) -> None:
            push(heap, (time_s, next(seq), kind, arg))

        return schedule

    @property
    def pending(self) -> int:
        """Number of scheduled events not yet fired."""
        return len(self._heap)

    def run(self, handlers: Sequence[Handler], until_s: float = math.inf) -> None:
        """Fire events in (time, seq) order until none is left or the next lies after ``until_s``.

        Events after ``until_s`` stay scheduled; ``now_s`` ends at ``until_s`` when that is finite and
        earlier events ran out, so state read afterwards is the state at the horizon. An event scheduled
        before the time of the event that scheduled it (a bug in a handler) raises RuntimeError when it
        comes up: time never runs backwards.
        """
        heap, pop = self._heap, heapq.heappop
        fired = 0
        now_s = self.now_s
        while heap and heap[0][0] <= until_s:
            time_s, _, kind, arg = pop(heap)
            if time_s < now_s:
                raise RuntimeError(f"event {kind}({arg}) scheduled at {time_s!r} s, before the current {now_s!r} s")
            now_s = time_s
            handlers[kind](time_s, arg)
            fired += 1
        self.events_fired += fired
        if math.isfinite(until_s):
            self.now_s = until_s
        elif fired:
            self.now_s = time_s
