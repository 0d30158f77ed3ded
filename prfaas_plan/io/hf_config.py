"""Reading a Hugging Face ``config.json``: stage one (the file's text and JSON value, within the size and
depth limits of ``io.yamlsrc``), and a checked view of its objects for stage two (``ConfigFields``), whose
reads record which fields were used and report each problem with file, line and field."""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prfaas_plan.errors import Problem
from prfaas_plan.io.guard import CONFIG_JSON_LIMITS, loads_json, read_text
from prfaas_plan.io.models import MAX_LAYERS, MAX_SHAPE
from prfaas_plan.io.yamlsrc import MAX_DEPTH

_KEY_LINE = re.compile(r'"((?:[^"\\]|\\.)*)"\s*:')


class ConfigFields:
    """A checked view of one JSON object: reads mark keys as used; problems carry file, line and field."""

    def __init__(self, data: Mapping[str, Any], path: str, ctx: ConfigContext) -> None:
        self.data = data
        self.path = path
        self.ctx = ctx
        self.used: set[str] = set()

    def name(self, key: str) -> str:
        """The dotted field name of ``key`` (``text_config.hidden_size``)."""
        return f"{self.path}.{key}" if self.path else key

    def report(self, key: str, message: str) -> None:
        """A problem at ``key`` of this object."""
        self.ctx.report(self.name(key), key, message)

    def has(self, key: str) -> bool:
        """Whether ``key`` is present and not null (does not mark it used)."""
        return self.data.get(key) is not None

    def raw(self, key: str) -> Any:
        """The value of ``key`` unchecked (None when absent), marked used."""
        self.used.add(key)
        return self.data.get(key)

    def integer(self, key: str, *, default: int | None = None, ge: int = 1, why: str = "") -> int | None:
        """A whole number >= ``ge``; absent or null -> ``default``, or a problem when there is none."""
        value = self.raw(key)
        if value is None:
            if default is None:
                self.report(key, f"missing, needed for a {self.ctx.family} card{why}")
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < ge:
            self.report(key, f"expected an integer >= {ge}, got {compact_value(value)}")
            return None
        limit = MAX_LAYERS if key in _LAYER_COUNTS else MAX_SHAPE
        if value > limit:
            self.report(key, f"must be <= {limit}, got {compact_value(value)}")
            return None
        return value

    def boolean(self, key: str, *, default: bool) -> bool | None:
        """true or false; absent or null -> ``default``."""
        value = self.raw(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.report(key, f"expected true or false, got {json.dumps(value)}")
            return None
        return value

    def int_list(self, key: str, *, required: bool = True) -> list[int] | None:
        """A list of at most MAX_LAYERS integers, each at most MAX_SHAPE in size."""
        value = self.raw(key)
        if value is None:
            if required:
                self.report(key, f"missing, needed for a {self.ctx.family} card")
            return None
        if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            self.report(key, f"expected a list of integers, got {compact_value(value)}")
            return None
        if len(value) > MAX_LAYERS or any(abs(v) > MAX_SHAPE for v in value):
            self.report(
                key, f"expected at most {MAX_LAYERS} integers of at most {MAX_SHAPE}, got {compact_value(value)}"
            )
            return None
        return list(value)

    def str_list(self, key: str) -> list[str] | None:
        """A list of strings; absent or null -> None without a problem."""
        value = self.raw(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.report(key, f"expected a list of strings, got {compact_value(value)}")
            return None
        return list(value)

    def sub(self, key: str) -> ConfigFields | None:
        """The checked view of the nested object at ``key`` (its unused fields are reported too)."""
        value = self.raw(key)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            self.report(key, f"expected a JSON object, got {compact_value(value)}")
            return None
        child = ConfigFields(value, self.name(key), self.ctx)
        self.ctx.children.append(child)
        return child


#: The field that counts layers (each one a loop iteration and a list entry): bounded by MAX_LAYERS.
_LAYER_COUNTS = frozenset({"num_hidden_layers"})


def compact_value(value: Any) -> str:
    """A JSON value as shown in a message: at most 60 characters, huge integers by their size."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        return f"an integer of {len(str(abs(value)))} digits"
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


class ConfigContext:
    """One import: the file's name and text (for line numbers), its family and the problems found."""

    def __init__(self, file: str, text: str, family: str) -> None:
        self.file = file
        self.family = family
        self.problems: list[Problem] = []
        self.children: list[ConfigFields] = []
        self.lines: dict[str, int] = {}
        newlines = [i for i, char in enumerate(text) if char == "\n"]
        for match in _KEY_LINE.finditer(text):
            self.lines.setdefault(match.group(1), bisect.bisect(newlines, match.start()) + 1)

    def report(self, field: str, key: str, message: str) -> None:
        """A problem at ``field``; its line is where ``key`` first appears in the file (None when absent)."""
        self.problems.append(Problem(file=self.file, line=self.lines.get(key), field=field, message=message))


def read_config_json(path: Path, display: str) -> tuple[str, Any]:
    """Stage one: the file's text and its JSON value, within ``io.guard.CONFIG_JSON_LIMITS`` (a regular file of
    at most 1 MiB) and the depth limit of ``io.yamlsrc``, numbers of at most ``guard.MAX_JSON_DIGITS`` digits;
    NaN and Infinity (which Python's decoder accepts) are refused."""
    text = read_text(path, display, CONFIG_JSON_LIMITS)
    return text, loads_json(text, display, max_depth=MAX_DEPTH)
