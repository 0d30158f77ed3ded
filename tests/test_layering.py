"""Data flows one way: each layer imports only the layers above it (conventions.md), and no module imports
itself through others (no import circles, counting imports inside functions and the lazy package faces)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "prfaas_plan"

# Lower index = higher layer. A module may import only from layers with a smaller or equal index.
LAYERS = [
    "_frozen",
    "units",
    "errors",
    "_lazy",
    "lengths",
    "spec",
    "physics",
    "io",
    "throughput",
    "latency",
    "optimize",
    "sim",
    "reference",
    "studies",
    "report",
    "cli",
]
# yaml: read in io/, written in report/ (profiles and model cards); typer and rich: the command line only.
FOREIGN = {"yaml": ("io", "report"), "typer": ("cli",), "rich": ("cli",)}
# The one module allowed to import a module named at run time: the lazy package faces' loader.
DYNAMIC_IMPORTER = "prfaas_plan._lazy"


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "prfaas_plan" else ""


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.parts[-1] == "__init__" else rel.parts
    return ".".join(parts)


def _exports(node: ast.Assign) -> list[str]:
    """The modules a lazy package face's ``_EXPORTS = {name: module}`` names."""
    if not (isinstance(node.targets[0], ast.Name) and node.targets[0].id == "_EXPORTS"):
        return []
    if not isinstance(node.value, ast.Dict):
        return ["<dynamic>"]
    return [
        v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "<dynamic>" for v in node.value.values
    ]


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
            # ``from prfaas_plan.pkg import module``: the submodule is imported too.
            names += [f"{node.module}.{alias.name}" for alias in node.names if node.module.startswith("prfaas_plan")]
        elif isinstance(node, ast.Assign):
            names += _exports(node)
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


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def test_layers_import_only_upward() -> None:
    """No module imports a lower layer; yaml only in io/ and report/, typer and rich only in cli/."""
    bad = []
    for module, path in _modules().items():
        own = _layer(module)
        if own not in LAYERS:
            continue
        for name in _imports(path):
            if name == "<dynamic>":
                if module != DYNAMIC_IMPORTER:
                    bad.append(f"{module} imports a module named at run time: the layers cannot be checked")
                continue
            target = _layer(name)
            if target in LAYERS and LAYERS.index(target) > LAYERS.index(own):
                bad.append(f"{module} imports {name}")
            root = name.split(".")[0]
            if root in FOREIGN and own not in FOREIGN[root]:
                bad.append(f"{module} imports {root}, allowed only in {'/, '.join(FOREIGN[root])}/")
    assert not bad, bad


def test_every_package_is_a_layer() -> None:
    """A new package must be placed in the layer order before it can be checked."""
    packages = {path.parent.name for path in PACKAGE.rglob("__init__.py") if path.parent != PACKAGE}
    modules = {path.stem for path in PACKAGE.glob("*.py") if path.stem not in ("__init__", "__main__")}
    unplaced = sorted((packages | modules) - set(LAYERS) - {"_builtin"})
    assert not unplaced, unplaced


def test_no_import_circles() -> None:
    """The module import graph (imports inside functions and lazy faces included; a package's face is not an
    edge to the modules it merely names for its own members) has no cycle."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = set()
        for name in _imports(path):
            # importing a.b.c loads a and a.b too; the faces are lazy, so only the named module counts.
            if name in modules and name != module and not module.startswith(name + "."):
                targets.add(name)
        graph[module] = targets
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    assert not cycles, [" -> ".join(c) for c in cycles]


def test_lazy_exports_do_not_shadow_submodules() -> None:
    """A lazy face's exported name must not be a submodule's name too: importing the submodule sets the package
    attribute to the module, and the face would then hand out the module instead of the function."""
    clashes = []
    for init in PACKAGE.rglob("__init__.py"):
        submodules = {p.stem for p in init.parent.glob("*.py")} | {p.name for p in init.parent.iterdir() if p.is_dir()}
        for node in ast.parse(init.read_text()).body:
            if isinstance(node, ast.Assign) and _exports(node) and isinstance(node.value, ast.Dict):
                names = [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
                clashes += [f"{_module_name(init)}.{name}" for name in names if name in submodules]
    assert not clashes, clashes
