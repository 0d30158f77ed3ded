"""The longest functions of the package (lines from ``def`` to the end of the body): the house's size check.

python3 tests/golden/longest.py [N]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "prfaas_plan"


def function_lengths(package: Path = PACKAGE) -> list[tuple[int, str]]:
    """(lines, module:function) of every function and method in the package, longest first."""
    out = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
                rel = path.relative_to(package.parent)
                out.append((node.end_lineno - node.lineno + 1, f"{rel}:{node.name}"))
    return sorted(out, reverse=True)


if __name__ == "__main__":
    for lines, name in function_lengths()[: int(sys.argv[1]) if len(sys.argv) > 1 else 15]:
        print(f"{lines:5d}  {name}")
