"""``@frozen`` behaves as ``@dataclass(frozen=True, slots=True, kw_only=True)``: each check builds the same class
both ways and compares what the two do (the standard decorator is the reference)."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from dataclasses import FrozenInstanceError, dataclass, field, replace
from typing import Any

import pytest

from prfaas_plan._frozen import frozen


def _both(body: dict[str, Any], annotations: dict[str, Any], **options: Any) -> tuple[type, type]:
    """The class of ``body`` built by the standard decorator and by ``@frozen`` (``options`` to both)."""
    made = []
    for decorate in (dataclass(frozen=True, slots=True, kw_only=True, **options), frozen(**options)):
        namespace = {"__doc__": "A record.", "__annotations__": dict(annotations), **body}
        made.append(decorate(type("Record", (), namespace)))
    return made[0], made[1]


FIELDS = {"rate_per_s": "float", "name": "str", "tags": "tuple[str, ...]", "extra": "dict[str, int]"}
BODY = {"tags": (), "extra": field(default_factory=dict, compare=False, hash=False, repr=False)}


def test_same_fields_signature_and_repr() -> None:
    standard, ours = _both(BODY, FIELDS)
    assert [(f.name, f.default, f.compare) for f in dataclasses.fields(standard)] == [
        (f.name, f.default, f.compare) for f in dataclasses.fields(ours)
    ]
    assert str(inspect.signature(standard)) == str(inspect.signature(ours))
    assert repr(standard(rate_per_s=1.5, name="a")) == repr(ours(rate_per_s=1.5, name="a"))
    assert ours.__slots__ == standard.__slots__
    assert ours.__init__.__qualname__ == "Record.__init__"


def test_keyword_only_and_required() -> None:
    _, ours = _both(BODY, FIELDS)
    with pytest.raises(TypeError):
        ours(1.0, "a")
    with pytest.raises(TypeError, match="name"):
        ours(rate_per_s=1.0)
    with pytest.raises(TypeError, match="unexpected"):
        ours(rate_per_s=1.0, name="a", other=2)


def test_factories_give_each_instance_its_own_value() -> None:
    _, ours = _both(BODY, FIELDS)
    first, second = ours(rate_per_s=1.0, name="a"), ours(rate_per_s=1.0, name="a")
    assert first.extra == {} and first.extra is not second.extra
    given = {"k": 1}
    assert ours(rate_per_s=1.0, name="a", extra=given).extra is given


def test_equality_and_hash_follow_the_compared_fields() -> None:
    standard, ours = _both(BODY, FIELDS)
    for cls in (standard, ours):
        a = cls(rate_per_s=1.0, name="a", extra={"x": 1})
        b = cls(rate_per_s=1.0, name="a", extra={"y": 2})  # extra is not compared nor hashed
        c = cls(rate_per_s=2.0, name="a")
        assert a == b and hash(a) == hash(b)
        assert a != c
        assert (a == object()) is False
    assert ours(rate_per_s=1.0, name="a") != standard(rate_per_s=1.0, name="a")  # another class


def test_a_single_compared_field_and_none() -> None:
    _, ours = _both({}, {"only_s": "float"})
    assert ours(only_s=1.0) == ours(only_s=1.0) and hash(ours(only_s=1.0)) == hash(ours(only_s=1.0))
    assert ours(only_s=1.0) != ours(only_s=2.0)
    empty_standard, empty = _both({}, {})
    assert empty() == empty() and hash(empty()) == hash(empty())
    assert repr(empty()) == repr(empty_standard())


def test_eq_false_keeps_identity() -> None:
    standard, ours = _both({}, {"value_s": "float"}, eq=False)
    for cls in (standard, ours):
        a, b = cls(value_s=1.0), cls(value_s=1.0)
        assert a != b and a == a
        assert hash(a) == object.__hash__(a)


def test_assignment_and_deletion_are_refused() -> None:
    _, ours = _both(BODY, FIELDS)
    record = ours(rate_per_s=1.0, name="a")
    with pytest.raises(FrozenInstanceError):
        record.rate_per_s = 2.0
    with pytest.raises(FrozenInstanceError):
        del record.name
    with pytest.raises((FrozenInstanceError, AttributeError)):
        record.unknown = 1  # type: ignore[attr-defined]


def test_post_init_runs_after_the_fields_are_set() -> None:
    seen: list[float] = []

    def __post_init__(self: Any) -> None:
        seen.append(self.rate_per_s)
        if self.rate_per_s < 0:
            raise ValueError("rate_per_s must be >= 0")
        object.__setattr__(self, "double_per_s", 2 * self.rate_per_s)

    body = {"__post_init__": __post_init__, "double_per_s": field(init=False, repr=False, compare=False)}
    _, ours = _both(body, {"rate_per_s": "float", "double_per_s": "float"})
    assert ours(rate_per_s=3.0).double_per_s == 6.0
    assert seen == [3.0]
    with pytest.raises(ValueError, match="rate_per_s"):
        ours(rate_per_s=-1.0)
    assert "double_per_s" not in str(inspect.signature(ours))


def test_replace_pickle_and_copy() -> None:
    record = _Pickled(rate_per_s=1.0, names=("a",))
    assert replace(record, rate_per_s=2.0) == _Pickled(rate_per_s=2.0, names=("a",))
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(record, protocol)) == record
    assert copy.copy(record) == record and copy.deepcopy(record) == record
    assert dataclasses.asdict(record) == {"rate_per_s": 1.0, "names": ("a",)}


def test_methods_a_class_writes_itself_are_kept() -> None:
    def __repr__(self: Any) -> str:
        return "mine"

    _, ours = _both({"__repr__": __repr__}, {"value_s": "float"})
    assert repr(ours(value_s=1.0)) == "mine"
    with pytest.raises(TypeError, match="__setattr__"):
        frozen(type("Bad", (), {"__annotations__": {"x": "int"}, "__setattr__": lambda *a: None}))


def test_inherited_fields_come_first() -> None:
    @frozen
    class Base:
        a_s: float

    @frozen
    class Child(Base):
        b_s: float = 2.0

    child = Child(a_s=1.0)
    assert (child.a_s, child.b_s) == (1.0, 2.0)
    assert child == Child(a_s=1.0, b_s=2.0) and child != Base(a_s=1.0)
    with pytest.raises(FrozenInstanceError):
        child.a_s = 3.0


@frozen
class _Pickled:
    rate_per_s: float
    names: tuple[str, ...] = ()


def test_init_resolves_its_annotations_in_the_module_as_the_standard_one_does() -> None:
    import typing

    hints = {"rate_per_s": float, "names": tuple[str, ...], "return": type(None)}
    assert typing.get_type_hints(_Pickled.__init__) == hints
    assert _Pickled.__init__.__globals__ is globals()
