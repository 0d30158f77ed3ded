"""The range an error band was measured on (``tests/benchmarks/error_bands.reached_span``): where at least two
sources have measurements on each side."""

from __future__ import annotations

from tests.benchmarks.error_bands import reached_span


def test_an_end_only_one_source_reached_does_not_extend_the_range() -> None:
    # Prompts of 128-8K from three sources, and one benchmark's 30K and 128K: the range stops at 8K.
    spans = {"a": [128.0, 8192.0], "b": [512.0, 8000.0], "c": [1000.0, 4194.0], "d": [30720.0, 131072.0]}
    assert reached_span(spans) == [512.0, 8192.0]
    # Without it, the second longest is another source's 8,000: the longest prompt, 8,192, had one source alone.
    assert reached_span({k: v for k, v in spans.items() if k != "d"}) == [512.0, 8000.0]


def test_each_value_of_the_range_has_two_sources_on_each_side() -> None:
    spans = {"a": [1.0, 2.0], "b": [3.0, 4.0], "c": [5.0, 6.0]}
    lo, hi = reached_span(spans)
    for x in (lo, (lo + hi) / 2, hi):
        assert sum(s[0] <= x for s in spans.values()) >= 2
        assert sum(s[1] >= x for s in spans.values()) >= 2


def test_sources_that_do_not_overlap_keep_the_whole_span() -> None:
    # Nothing is corroborated: neither end is kept over the other, whether the ranges touch, nearly touch or coincide
    # at one value.
    assert reached_span({"a": [1.0, 4.99], "b": [5.0, 8.0]}) == [1.0, 8.0]
    assert reached_span({"a": [1.0, 5.0], "b": [5.0, 8.0]}) == [1.0, 8.0]
    assert reached_span({"a": [1.0, 64.0], "b": [1.0, 1.0]}) == [1.0, 64.0]
    assert reached_span({"a": [512.0, 512.0], "b": [1024.0, 8192.0]}) == [512.0, 8192.0]


def test_one_source_keeps_its_span_and_the_range_is_never_inverted() -> None:
    assert reached_span({"a": [2.0, 9.0]}) == [2.0, 9.0]
    for spans in (
        {"a": [1.0, 10.0], "b": [2.0, 3.0], "c": [20.0, 30.0]},
        {"a": [5.0, 5.0], "b": [5.0, 5.0]},
        {"a": [1.0, 2.0], "b": [2.0, 3.0], "c": [3.0, 4.0], "d": [4.0, 5.0]},
    ):
        lo, hi = reached_span(spans)
        assert lo <= hi
