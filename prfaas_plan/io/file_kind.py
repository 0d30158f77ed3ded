"""Which kind of input a command's SCENARIO argument names: a scenario (one PrfaaS cluster, one PD cluster, one
link) or a topology (several of each, ``io.topology``). The one place every command asks (issue 23): a YAML
mapping with a top-level ``clusters:`` key is a topology; anything else, a file that cannot be read included,
is left to the scenario loader, which reports it as it always has.
"""

from __future__ import annotations

from pathlib import Path

from prfaas_plan.errors import InputError
from prfaas_plan.io.paths import builtin_root, display_path
from prfaas_plan.io.yamlsrc import load_yaml

#: The top-level key only a topology has.
TOPOLOGY_KEY = "clusters"
#: Where built-in topologies live, below the package's root (``io.topology.TOPOLOGY_DIRS``' first entry).
TOPOLOGY_DIR = "workloads/topologies"


def is_topology_file(path: Path) -> bool:
    """True when ``path`` is a readable YAML mapping with a top-level ``clusters:`` key."""
    try:
        doc = load_yaml(path, display_path(path))
    except InputError:
        return False
    return isinstance(doc.data, dict) and TOPOLOGY_KEY in doc.data


def topology_argument(name: str | None) -> Path | None:
    """The topology file a SCENARIO argument names (a path, or the name of a built-in topology that is not
    also a built-in scenario), or None when it names a scenario (or nothing readable)."""
    if name is None:
        return None
    path = Path(name)
    if path.is_file():
        return path if is_topology_file(path) else None
    if path.suffix in (".yaml", ".yml") or (builtin_root() / "workloads" / f"{name}.yaml").is_file():
        return None
    builtin = builtin_root() / TOPOLOGY_DIR / f"{name}.yaml"
    return builtin if builtin.is_file() and is_topology_file(builtin) else None
