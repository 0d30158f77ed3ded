"""Data flows one way: each layer imports only the layers above it (conventions.md)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "prfaas_plan"

# Lower index = higher layer. A module may import only from layers with a smaller or equal index.
LAYERS = [
    "units",
    "errors",
    "lengths",
    "spec",
    "physics",
    "reference",
    "throughput",
    "latency",
    "optimize",
    "sim",
    "review",
    "io",
    "cli",
]
FOREIGN = {"yaml": "io", "typer": "cli", "rich": "cli"}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "prfaas_plan" else ""


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Call) and _dynamic_import(node):
            # importlib.import_module("prfaas_plan.x") or __import__("prfaas_plan.x"): an import all the same.
            names += [
                arg.value for arg in node.args[:1] if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
            ]
            names += ["<dynamic>"] if not (node.args and isinstance(node.args[0], ast.Constant)) else []
    return names


def _dynamic_import(call: ast.Call) -> bool:
    """``importlib.import_module(...)``, ``import_module(...)`` or ``__import__(...)``."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in ("import_module", "__import__")


def test_layers_import_only_upward() -> None:
    """No module imports a lower layer; yaml only in io/, typer and rich only in cli/."""
    bad = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        own = _layer(".".join(rel.parts))
        if own not in LAYERS:
            continue
        for name in _imports(path):
            if name == "<dynamic>":
                bad.append(
                    f"{rel} imports a module named at run time (importlib/__import__): the layers cannot be checked"
                )
                continue
            target = _layer(name)
            if target in LAYERS and LAYERS.index(target) > LAYERS.index(own):
                bad.append(f"{rel} imports {name}")
            root = name.split(".")[0]
            if root in FOREIGN and own != FOREIGN[root]:
                bad.append(f"{rel} imports {root}, allowed only in {FOREIGN[root]}/")
    assert not bad, bad
