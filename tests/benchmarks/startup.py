"""Start-up benchmark: `prfaas-plan optimize --json` on the built-in scenario against a bare
`python -c 'import numpy, typer, rich'`, on a normal (non-editable) install of the working tree.

    python3 -m tests.benchmarks.startup [--runs 15] [--keep VENV] [--system-site-packages]

It builds a wheel of the repository and installs it, with its dependencies pinned to the versions this
interpreter has (numpy, scipy, typer, rich: the same releases), into a virtual environment of its own (pip
fetches or takes from its cache what it needs). The environment does not see this interpreter's site-packages:
a ``.pth`` file there runs at every interpreter start (one on the machine these figures came from imports
``certifi``, 25-45 ms, in the bare imports and the commands alike, which pulls every ratio towards 1).
``--system-site-packages`` installs the wheel alone into an environment that sees them (no download). It times
each command end to end (process start to exit) as the median of --runs runs after one warm-up, the commands
taking turns (one run of each per round, so drift in the machine's speed moves them alike): wall time, and the
CPU time (user + system) of the process, which a machine loaded by other work inflates less. It reports; it
never asserts (issue 19's target: optimize within 1.5x of the bare imports).

The commands' output is piped, except for the last case, whose output goes to a pseudo-terminal (80 columns):
there rich draws the table, with its styles, where piped plain output is written without it (``cli/plain.py``).
"""

from __future__ import annotations

import argparse
import os
import pty
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _pins() -> str:
    """A pip constraints file: every distribution this interpreter has, at its version."""
    from importlib.metadata import distributions

    names = {(d.metadata["Name"] or "").lower(): d.version for d in distributions()}
    return "".join(f"{name}=={version}\n" for name, version in sorted(names.items()) if name and name != "prfaas-plan")


def _install(venv: Path, system_site_packages: bool) -> Path:
    subprocess.run(
        [sys.executable, "-m", "venv", *(["--system-site-packages"] if system_site_packages else []), str(venv)],
        check=True,
    )
    python = venv / "bin" / "python"
    with tempfile.TemporaryDirectory() as wheels:
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", wheels, str(ROOT)],
            check=True,
        )
        wheel = next(Path(wheels).glob("prfaas_plan-*.whl"))
        install = [str(python), "-m", "pip", "install", "-q", "--force-reinstall"]
        if system_site_packages:
            subprocess.run([*install, "--no-deps", str(wheel)], check=True)
        else:
            pins = Path(wheels) / "pins.txt"
            pins.write_text(_pins())
            subprocess.run([*install, "-c", str(pins), str(wheel)], check=True)
    return python


def installed(venv: Path, system_site_packages: bool = False) -> Path:
    """The interpreter of ``venv``, installing the working tree there first unless it already has the command
    (an install that stopped half-way, with no command yet, is redone)."""
    if (venv / "bin" / "prfaas-plan").exists():
        return venv / "bin" / "python"
    return _install(venv, system_site_packages)


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


#: Cases whose output goes to a pseudo-terminal rather than a pipe (their names end so).
ON_TERMINAL = "(on a terminal)"


def _run(name: str, argv: list[str], cwd: Path) -> None:
    if not name.endswith(ON_TERMINAL):
        subprocess.run(argv, check=True, capture_output=True, cwd=cwd)
        return
    primary, secondary = pty.openpty()
    env = os.environ | {"COLUMNS": "80", "LINES": "24", "TERM": "xterm-256color"}

    def drain() -> None:  # the terminal's reader: a full pseudo-terminal buffer would stall the command
        while True:
            try:
                if not os.read(primary, 65536):
                    return
            except OSError:  # EIO once the command has exited and closed its end
                return

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        subprocess.run(argv, check=True, stdin=secondary, stdout=secondary, stderr=secondary, cwd=cwd, env=env)
    finally:
        os.close(secondary)
        reader.join()
        os.close(primary)


def _time(cases: dict[str, list[str]], runs: int, cwd: Path) -> dict[str, tuple[list[float], list[float]]]:
    """Wall and CPU seconds of each run of each case. The cases take turns (one run of each per round), so a
    machine that speeds up or slows down during the benchmark moves every case alike and the ratios to the bare
    imports keep."""
    for name, argv in cases.items():
        _run(name, argv, cwd)  # warm-up (page cache, .pyc)
    out: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in cases}
    for _ in range(runs):
        for name, argv in cases.items():
            cpu_start, start = _cpu_s(), time.perf_counter()
            _run(name, argv, cwd)
            out[name][0].append(time.perf_counter() - start)
            out[name][1].append(_cpu_s() - cpu_start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--keep", type=Path, default=None, help="use (or create) this virtual environment")
    parser.add_argument(
        "--system-site-packages",
        action="store_true",
        help="install the wheel alone into an environment that sees this interpreter's packages (and start-up hooks)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        venv = args.keep or Path(tmp) / "venv"
        python = installed(venv, args.system_site_packages)
        cli = venv / "bin" / "prfaas-plan"
        cases = {
            "bare: python -c 'import numpy, typer, rich'": [str(python), "-c", "import numpy, typer, rich"],
            "prfaas-plan --version": [str(cli), "--version"],
            "prfaas-plan optimize --json": [str(cli), "optimize", "--json"],
            "prfaas-plan optimize (table)": [str(cli), "optimize"],
            f"prfaas-plan optimize {ON_TERMINAL}": [str(cli), "optimize"],
        }
        results = _time(cases, args.runs, Path(tmp))
    bare_wall, bare_cpu = (statistics.median(t) for t in next(iter(results.values())))
    print(f"{'command':48s} {'median s':>9s} {'min s':>7s} {'x bare':>7s} {'cpu s':>7s} {'x bare':>7s}")
    for name, (wall, cpu) in results.items():
        median, cpu_median = statistics.median(wall), statistics.median(cpu)
        print(
            f"{name:48s} {median:9.3f} {min(wall):7.3f} {median / bare_wall:7.2f} "
            f"{cpu_median:7.3f} {cpu_median / bare_cpu:7.2f}"
        )


if __name__ == "__main__":
    main()
