"""Lazy package faces: a package names what it exports and where each name lives, and a name's module is
imported the first time the name is used, so that importing one module of a package never loads its siblings.

    _EXPORTS = {"simulate": "prfaas_plan.sim.run", ...}
    __all__ = sorted(_EXPORTS)
    __getattr__ = lazy_getattr(__name__, _EXPORTS)

The layering test (tests/test_layering.py) reads ``_EXPORTS`` as the package's imports.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``exports[name]`` on first use and caches the value."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
