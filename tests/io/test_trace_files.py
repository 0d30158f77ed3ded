"""The public traces shipped in workloads/traces/: unchanged (checksums), licensed, and resolvable by name."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from prfaas_plan.errors import InputError
from prfaas_plan.io.traces import BUILTIN_TRACES, read_trace, resolve_trace_path
from tests.conftest import TRACES, run_cli

PROVENANCE = TRACES / "PROVENANCE.md"
#: A row of PROVENANCE.md's table: | `name` | `file` | upstream | licence | bytes | `sha256` |
_ROW = re.compile(r"^\| `([a-z-]+)` \| `([^`]+)` \| [^|]+ \| ([^|]+?) \| (\d+) \| `([0-9a-f]{64})` \|$", re.MULTILINE)


def _rows() -> list[tuple[str, str, str, int, str]]:
    rows = _ROW.findall(PROVENANCE.read_text())
    return [(name, file, licence, int(size), sha256) for name, file, licence, size, sha256 in rows]


def test_provenance_lists_every_built_in_trace_once() -> None:
    """PROVENANCE.md has one table row per built-in name, naming the same file as ``BUILTIN_TRACES``."""
    rows = _rows()
    assert {name: file for name, file, *_ in rows} == dict(BUILTIN_TRACES)
    assert len(rows) == len(BUILTIN_TRACES) == 4


@pytest.mark.parametrize(("name", "file", "licence", "size", "sha256"), _rows())
def test_shipped_trace_is_byte_identical_to_provenance(
    name: str, file: str, licence: str, size: int, sha256: str
) -> None:
    """Each shipped file has exactly the size and SHA-256 that PROVENANCE.md records for the upstream copy."""
    data = (TRACES / file).read_bytes()
    assert len(data) == size, name
    assert hashlib.sha256(data).hexdigest() == sha256, name


def test_licence_texts_ship_beside_the_traces() -> None:
    """Apache-2.0 needs its full text passed on, CC-BY-4.0 an attribution and a link to the licence."""
    licences = {licence for *_, licence, _size, _sha256 in _rows()}
    assert licences == {"Apache-2.0", "CC-BY-4.0"}
    apache = (TRACES / "LICENSE-APACHE-2.0.txt").read_text()
    assert "Apache License" in apache and "Version 2.0, January 2004" in apache
    assert "END OF TERMS AND CONDITIONS" in apache
    notes = (TRACES / "LICENSES.md").read_text()
    assert "https://creativecommons.org/licenses/by/4.0/" in notes and "Splitwise" in notes


@pytest.mark.parametrize("name", sorted(BUILTIN_TRACES))
def test_built_in_name_resolves_to_the_shipped_file(name: str) -> None:
    """Every built-in name resolves to its file in workloads/traces/, which reads as a non-empty trace."""
    path = resolve_trace_path(name)
    assert path.resolve() == (TRACES / BUILTIN_TRACES[name]).resolve()
    assert read_trace(path).n_requests > 0


def test_a_path_is_taken_as_a_path(tmp_path: Path) -> None:
    """Anything with a trace suffix, or an existing file, is a path even if it shares a built-in's name."""
    assert resolve_trace_path("runs/azure-code.csv") == Path("runs/azure-code.csv")
    local = tmp_path / "azure-code"
    local.write_text("")
    assert resolve_trace_path(local) == local


def test_an_unknown_name_is_refused_with_the_built_in_names() -> None:
    """A name that is neither a file nor a built-in trace is one problem that lists the built-in names."""
    with pytest.raises(InputError) as caught:
        resolve_trace_path("mooncake-conversaton")
    (problem,) = caught.value.problems
    assert problem.file == "mooncake-conversaton"
    assert "did you mean 'mooncake-conversation'" in problem.message
    assert all(name in problem.message for name in BUILTIN_TRACES)
    with pytest.raises(InputError):
        resolve_trace_path("x" * 5000)  # a name the file system refuses is still an unknown name, not an OSError


def test_simulate_help_names_every_built_in_trace() -> None:
    """`simulate --help` lists the built-in trace names (they are written out there to keep start-up light)."""
    result = run_cli("simulate", "--help")
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert all(name in text for name in BUILTIN_TRACES)
