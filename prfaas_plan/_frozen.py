"""``@frozen``: the house's frozen, slotted, keyword-only dataclass, built faster than the standard library builds it.

    @frozen
    class Link:
        bandwidth_bit_per_s: float
        rtt_s: float = 0.0

is ``@dataclass(frozen=True, slots=True, kw_only=True)`` in what it does: the same fields (``dataclasses.fields``,
``replace`` and ``asdict`` work), a keyword-only ``__init__`` that calls ``__post_init__``, assignment and deletion
refused with ``FrozenInstanceError``, equality and hashing over the compared fields, a field-by-field ``repr``, and
pickling. ``@frozen(eq=False)`` keeps identity equality and hashing, as ``eq=False`` does.

Why not the decorator itself: on Python 3.11 it writes six methods of each class as source text and compiles each
one. The 49 classes the ``optimize`` command builds before it computes anything took 62 ms that way on a 2-core Xeon
VM, the largest part of its start-up after the interpreter and its libraries (issue 19); built here they take 12 ms.
Only ``__init__`` is compiled (its keyword parameters give it a real signature and its speed), once per count of
parameters, and renamed for each class; the other methods are closures over the class's field names.

The standard decorator still collects the fields (defaults, factories, ``field()`` options, slots), called with
``init=False, repr=False, eq=False, frozen=False`` so that it writes no methods: ``__dataclass_params__`` therefore
reads ``frozen=False``, and a class made here must not be mixed in one hierarchy with the standard frozen decorator.
Other differences: default factories are called after every parameter is set (the standard ``__init__`` calls each
in field order); a class without a docstring gets none (the standard decorator writes its signature there); and
``repr`` has no guard against an instance that contains itself (only a mutable field could make it do so).
"""

from __future__ import annotations

import builtins
import dataclasses
import sys
from collections.abc import Callable
from functools import cache
from operator import attrgetter
from types import CellType, CodeType, FunctionType
from typing import Any, TypeVar, dataclass_transform, overload

_T = TypeVar("_T")
_MISSING: Any = dataclasses.MISSING
_set = object.__setattr__


class _Factory:
    """The default of a parameter whose field has a ``default_factory``: the factory is called when it is left."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


@cache
def _template(arity: int, tail: bool) -> CodeType:
    """The code of an ``__init__`` with ``arity`` keyword-only parameters ``_a0, _a1, ...``: it sets the field named by
    the free variable ``_frozen_n<i>_`` to ``_a<i>``, then calls ``_frozen_tail_(self)`` if ``tail``. One compilation
    serves every class with that many parameters: a class's own ``__init__`` is this code with the parameters renamed
    to its fields, closed over cells that name its fields, in its module's globals (as the standard ``__init__``)."""
    params = ", ".join(f"_a{i}" for i in range(arity))
    frees = ", ".join(["_frozen_set_", "_frozen_tail_", *(f"_frozen_n{i}_" for i in range(arity))])
    lines = [f"def _outer({frees}):", f"    def __init__(self, *, {params}):" if arity else "    def __init__(self):"]
    lines += [f"        _frozen_set_(self, _frozen_n{i}_, _a{i})" for i in range(arity)]
    lines += ["        _frozen_tail_(self)"] if tail else ([] if arity else ["        pass"])
    lines += ["    return __init__"]
    scope: dict[str, Any] = {}
    exec("\n".join(lines), scope)  # fixed text: only the count of parameters varies
    code: CodeType = scope["_outer"](*([None] * (arity + 2))).__code__
    return code


def _init(cls: type, fields: tuple[dataclasses.Field[Any], ...]) -> Callable[..., None]:
    """``cls.__init__``: the keyword parameters are the fields with ``init`` (a field with a ``default_factory``
    defaults to a marker that the tail replaces with a fresh value), set in order; then the tail fills the
    factories left at their marker and the fields without ``init``, and calls ``__post_init__``."""
    params = [f for f in fields if f.init]
    with_factory = [f for f in fields if f.default_factory is not _MISSING]
    fill: tuple[tuple[str, Any], ...] = tuple((f.name, f.default_factory) for f in with_factory if f.init)
    made: tuple[tuple[str, Any], ...] = tuple((f.name, f.default_factory) for f in with_factory if not f.init)
    fixed = tuple(
        (f.name, f.default)
        for f in fields
        if not f.init and f.default_factory is _MISSING and f.default is not _MISSING
    )
    post_init = hasattr(cls, "__post_init__")

    def _tail(self: Any) -> None:
        for name, factory in fill:
            if getattr(self, name) is _FACTORY:
                _set(self, name, factory())
        for name, factory in made:
            _set(self, name, factory())
        for name, value in fixed:
            _set(self, name, value)
        if post_init:
            self.__post_init__()

    tail = bool(fill or made or fixed or post_init)
    code = _template(len(params), tail).replace(
        co_varnames=("self", *(f.name for f in params)), co_qualname=f"{cls.__qualname__}.__init__"
    )
    values = {"_frozen_set_": _set, "_frozen_tail_": _tail} | {f"_frozen_n{i}_": f.name for i, f in enumerate(params)}
    module = sys.modules.get(cls.__module__)
    scope = module.__dict__ if module is not None else {"__builtins__": builtins}
    init = FunctionType(code, scope, "__init__", None, tuple(CellType(values[name]) for name in code.co_freevars))
    init.__kwdefaults__ = {
        f.name: _FACTORY if f.default_factory is not _MISSING else f.default
        for f in params
        if f.default_factory is not _MISSING or f.default is not _MISSING
    } or None
    init.__annotations__ = {f.name: f.type for f in params} | {"return": None}
    return init


def _methods(cls: type, eq: bool) -> dict[str, Callable[..., Any]]:
    fields: tuple[dataclasses.Field[Any], ...] = dataclasses.fields(cls)
    names = tuple(f.name for f in fields)
    protected = frozenset(names)
    init = _init(cls, fields)
    shown = tuple(f.name for f in fields if f.repr)

    def __repr__(self: Any) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
        return f"{type(self).__qualname__}({inner})"

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in protected:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)  # type: ignore[arg-type]

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in protected:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)  # type: ignore[arg-type]

    def __getstate__(self: Any) -> list[Any]:
        return [getattr(self, name) for name in names]

    def __setstate__(self: Any, state: list[Any]) -> None:
        for name, value in zip(names, state, strict=True):
            _set(self, name, value)

    methods: dict[str, Callable[..., Any]] = {
        "__init__": init,
        "__repr__": __repr__,
        "__setattr__": __setattr__,
        "__delattr__": __delattr__,
        "__getstate__": __getstate__,
        "__setstate__": __setstate__,
    }
    if eq:
        compared = _values([f.name for f in fields if f.compare])
        hashed = _values([f.name for f in fields if (f.compare if f.hash is None else f.hash)])

        def __eq__(self: Any, other: object) -> bool:
            if other.__class__ is self.__class__:
                return bool(compared(self) == compared(other))
            return NotImplemented

        def __hash__(self: Any) -> int:
            return hash(hashed(self))

        methods |= {"__eq__": __eq__, "__hash__": __hash__}
    return methods


def _values(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """A function from an instance to the tuple of these fields' values."""
    if not names:
        return lambda _: ()
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return attrgetter(*names)


def _build(cls: type[_T], eq: bool) -> type[_T]:
    own = set(cls.__dict__)
    for name in ("__setattr__", "__delattr__"):
        if name in own:
            raise TypeError(f"cannot overwrite attribute {name} in frozen class {cls.__name__}")
    doc = cls.__doc__
    built = dataclasses.dataclass(cls, init=False, repr=False, eq=False, frozen=False, slots=True, kw_only=True)
    built.__doc__ = doc  # the standard decorator writes a signature into a missing docstring: ours has no __init__ yet
    for name, method in _methods(built, eq).items():
        if name in own:  # a method the class writes itself is kept, as the standard decorator keeps it
            continue
        method.__qualname__ = f"{built.__qualname__}.{name}"
        method.__module__ = built.__module__
        setattr(built, name, method)
    return built


@overload
def frozen(cls: type[_T], /) -> type[_T]: ...


@overload
def frozen(*, eq: bool = True) -> Callable[[type[_T]], type[_T]]: ...


@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(dataclasses.field,))
def frozen(cls: type[_T] | None = None, /, *, eq: bool = True) -> type[_T] | Callable[[type[_T]], type[_T]]:
    """Make ``cls`` a frozen, slotted, keyword-only dataclass (see the module's docstring)."""
    if cls is None:
        return lambda c: _build(c, eq)
    return _build(cls, eq)
