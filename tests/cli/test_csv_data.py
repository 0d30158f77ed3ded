"""``--format csv`` is data: a command prints one table (its first, or the one ``--table N`` picks; stderr names
the others), which reads back with Python's csv module, its header names each column with its unit (snake_case
keys, no spaces or signs), and every cell that holds a number parses as one (no thousands separators, no %, x, ×
or $ signs). Every table of every command below is checked. Cost per token carries the same names everywhere."""

from __future__ import annotations

import csv
import io
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli

_KEY = re.compile(r"^[a-z][a-z0-9_]*$")
# A cell that a person would read as a number: digits with separators, signs or units around them.
_HUMAN_NUMBER = re.compile(r"^[+\-−]?\$?[\d,]*\.?\d+\s*(%|×|x|s|/h)?$")


def _tables(stdout: str) -> list[list[list[str]]]:
    blocks = [b for b in stdout.split("\n\n") if b.strip()]
    return [list(csv.reader(io.StringIO(b))) for b in blocks]


def _is_float(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _stderr_closed(*args: str) -> subprocess.CompletedProcess[bytes]:
    """The command line run with its standard error closed (``2>&-``), standard output captured."""
    return subprocess.run(
        [sys.executable, "-m", "prfaas_plan", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        close_fds=True,
        check=False,
        preexec_fn=lambda: os.close(2),
    )


def problems_of(stdout: str) -> list[str]:
    """What in a command's CSV output is not data (empty when every table is)."""
    out: list[str] = []
    tables = _tables(stdout)
    if not tables:
        return ["no table printed"]
    for t, rows in enumerate(tables):
        header, body = rows[0], rows[1:]
        out += [f"table {t}: header {h!r} is not a key with its unit" for h in header if not _KEY.match(h)]
        for row in body:
            if len(row) != len(header):
                out.append(f"table {t}: a row of {len(row)} cells under {len(header)} columns")
            for cell in row:
                if _HUMAN_NUMBER.match(cell.strip()) and not _is_float(cell):
                    out.append(f"table {t}: {cell!r} is a number written for people")
    return out


def test_the_checker_refuses_what_people_read() -> None:
    assert problems_of("plan,threshold_tokens\na,38830\n") == []
    assert problems_of("plan,threshold (tokens)\na,1\n")
    for cell in ("38,830", "15.5%", "1.05x", "$440", "1.54×", "+53.9%"):
        quoted = f'"{cell}"' if "," in cell else cell
        assert problems_of(f"plan,value_usd\na,{quoted}\n"), cell


_COMMANDS = [
    ("optimize",),
    ("optimize", "--objective", "goodput", "--ttft-p90-s", "5", "--no-verify"),
    (
        "evaluate",
        "--threshold",
        "19400",
        "--n-pd-prefill",
        "3",
        "--n-pd-decode",
        "5",
        "--load",
        "0.7",
        "--curve",
        "--replications",
        "2",
    ),
    ("fit",),
    ("kv", "--model", "paper-1t-hybrid", "--hardware", "h200"),
    ("size", "--no-verify"),
    ("cost",),
    ("matrix", "--prefill", "h200,b200", "--local", "h20,h100"),  # 2 x 2: every table, a quarter of the time
    ("simulate", "--requests", "5000"),
]


_NOTE = re.compile(r"--format csv printed table 1 of (\d+);")


def _table_count(stderr: str) -> int:
    """How many tables the command has, as the note on stderr says (1 where there is no note)."""
    found = _NOTE.search(stderr)
    return int(found.group(1)) if found else 1


def _each_table_is_data(*args: str) -> int:
    """Check every table of a command (the first, then each other through --table N); how many there were."""
    result = run_cli("--format", "csv", *args)
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(_tables(result.stdout)) == 1, result.stdout[:2000]  # one table: no blank line, one header
    assert problems_of(result.stdout) == []
    count = _table_count(result.stderr)
    for pick in range(2, count + 1):
        other = run_cli("--format", "csv", "--table", str(pick), *args)
        assert other.returncode == 0, other.stderr[-2000:]
        assert len(_tables(other.stdout)) == 1 and problems_of(other.stdout) == [], (pick, other.stdout[:2000])
        assert "--format csv printed table" not in other.stderr  # a table was chosen: nothing to point at
    return count


@pytest.mark.parametrize("args", _COMMANDS, ids=[" ".join(a[:2]) for a in _COMMANDS])
def test_every_table_of_a_command_is_data(args: tuple[str, ...]) -> None:
    _each_table_is_data(*args)


@pytest.mark.validation
def test_headroom_tables_are_data() -> None:
    _each_table_is_data("headroom")


def test_csv_is_one_table_and_the_others_are_named() -> None:
    """optimize with --load and --curve has three tables: csv prints the first alone (every row as long as its
    header), stderr names all three, --table 3 prints the curve, and asking for a fourth exits 2 with nothing on
    stdout. --table without csv or md is refused; Markdown prints every table, or the one --table picks."""
    args = ("optimize", "--load", "0.7", "--curve", "--no-verify")
    first = run_cli("--format", "csv", *args)
    assert first.returncode == 0, first.stderr[-2000:]
    rows = list(csv.reader(io.StringIO(first.stdout)))
    assert rows[0][0] == "plan" and {len(r) for r in rows} == {len(rows[0])} and len(rows) == 4
    assert _table_count(first.stderr) == 3 and "3 = TTFT vs load" in first.stderr
    curve = run_cli("--format", "csv", "--table", "3", *args)
    assert curve.returncode == 0 and curve.stdout.startswith("load_fraction_of_throughput,"), curve.stderr[-2000:]
    beyond = run_cli("--format", "csv", "--table", "4", *args)
    assert beyond.returncode == 2 and beyond.stdout == ""
    assert "error: --table 4: this command printed 3 tables" in beyond.stderr
    assert run_cli("--table", "2", *args).returncode == 2
    markdown = run_cli("--format", "md", *args)
    picked = run_cli("--format", "md", "--table", "2", *args)

    def rules(text: str) -> int:  # a Markdown table's line under its header
        return sum(line.startswith("|---") for line in text.splitlines())

    assert rules(markdown.stdout) == 3 and rules(picked.stdout) == 1
    assert "**TTFT under load" in picked.stdout


def test_model_show_prints_tables_as_data() -> None:
    """model show under --format csv: the layer groups (then the card's figures through --table 2), not text."""
    assert _each_table_is_data("model", "show", "mimo-v2-flash") == 2
    groups = list(csv.DictReader(io.StringIO(run_cli("--format", "csv", "model", "show", "mimo-v2-flash").stdout)))
    assert [(g["layers"], g["attention"], g["window_tokens"]) for g in groups] == [
        ("1", "gqa", ""),
        ("39", "swa", "128"),
        ("8", "gqa", ""),
    ]
    figures = run_cli("--format", "csv", "--table", "2", "model", "show", "mimo-v2-flash").stdout
    (row,) = csv.DictReader(io.StringIO(figures))
    assert float(row["kv_bytes_per_token"]) == 23040 and row["inferred_architecture"] == "false"


def test_cost_per_token_has_one_name_and_its_rate_in_every_table() -> None:
    """The same three figures under the same names in optimize and cost (both at Λ_max), and the same value."""
    names = {
        "usd_per_million_input_tokens_at_throughput",
        "usd_per_million_output_tokens_at_throughput",
        "usd_per_million_tokens_at_throughput",
    }
    split = {"gpus_at_throughput_usd_per_hour", "link_at_throughput_usd_per_hour", "egress_at_throughput_usd_per_hour"}
    seen = []
    for args in (("optimize",), ("cost",)):
        result = run_cli("--format", "csv", *args)
        assert result.returncode == 0, result.stderr[-2000:]
        rows = list(csv.DictReader(io.StringIO(result.stdout.split("\n\n")[0])))
        assert names | split <= set(rows[0]), args
        first = rows[0]
        seen.append(float(first["usd_per_million_tokens_at_throughput"]))
        parts = sum(float(first[k]) for k in split)
        assert parts == pytest.approx(float(first["cost_at_throughput_usd_per_hour"]), rel=1e-12)
    assert seen[0] == pytest.approx(seen[1], rel=1e-9)


def test_simulate_csv_holds_the_json_figures() -> None:
    """``simulate``'s CSV: one row per quantity with its unit, the same numbers as ``--json`` (same seed), the
    relative difference as a fraction, the half width where the table shows one and nothing where it shows a
    dash."""
    import json

    args = ("simulate", "--requests", "5000", "--seed", "3")
    table = run_cli("--format", "csv", *args)
    doc = run_cli(*args, "--json")
    assert table.returncode == 0 and doc.returncode == 0, table.stderr[-2000:] + doc.stderr[-2000:]
    rows = {r["quantity"]: r for r in csv.DictReader(io.StringIO(table.stdout.strip()))}
    payload = json.loads(doc.stdout)
    sim, closed, rel = payload["simulated"], payload["closed_form"], payload["relative_error"]
    p90 = rows["ttft_p90"]
    assert p90["unit"] == "s"
    assert float(p90["simulated"]) == sim["ttft_s"]["p90"]
    assert float(p90["simulated_half_width_95"]) == sim["ci95_half_width"]["ttft_s"]["p90"]
    assert float(p90["closed_form"]) == closed["ttft_s"]["p90"]
    assert float(p90["simulated_minus_closed_over_closed_fraction"]) == rel["ttft_p90_s"]
    assert float(rows["throughput"]["simulated"]) == sim["throughput_req_per_s"]
    assert rows["egress_peak_1s"]["closed_form"] == "" and rows["egress_peak_1s"]["unit"] == "gbit_per_s"
    assert float(rows["max_throughput_eq6"]["closed_form"]) == closed["max_throughput_req_per_s"]
    assert {f"utilization_{s}" for s in sim["utilization"]} <= set(rows)
    assert all(rows[f"utilization_{s}"]["unit"] == "fraction" for s in sim["utilization"])


def test_table_pick_is_refused_before_any_work_where_it_cannot_apply(tmp_path: Path) -> None:
    """--table with --json, or with a command that prints no table (review, sweep, schema, model import), exits 2
    before the command runs: nothing on stdout, no file written. Past the count, Markdown leaves stdout empty too
    (its notes are not printed once --table picks). A closed stderr does not change the status of a run whose
    note cannot be shown."""
    refused = run_cli("--format", "csv", "--table", "1", "optimize", "--json")
    assert refused.returncode == 2 and refused.stdout == ""
    assert "--table: picks a table, and --json prints none" in refused.stderr
    review = tmp_path / "review"
    refused = run_cli("--format", "csv", "--table", "1", "review", "--output", str(review))
    assert refused.returncode == 2 and "'review' prints no table" in refused.stderr and not review.exists()
    rows = tmp_path / "rows.csv"
    refused = run_cli(
        "--format",
        "csv",
        "--table",
        "2",
        "sweep",
        "--set",
        "deployment.link.bandwidth_gbit_per_s=10,100",
        "-o",
        str(rows),
    )
    assert refused.returncode == 2 and "'sweep' prints no table" in refused.stderr and not rows.exists()
    beyond = run_cli("--format", "md", "--table", "2", "optimize")
    assert beyond.returncode == 2 and beyond.stdout == ""
    helped = run_cli("--format", "csv", "--table", "2", "optimize", "--help")
    assert helped.returncode == 0 and "Usage" in helped.stdout
    closed = _stderr_closed("--format", "csv", "model", "show", "mimo-v2-flash")
    assert closed.returncode == 0 and closed.stdout.startswith(b"layers,attention,window_tokens,ffn")


def test_model_show_without_an_architecture_prints_the_data_header() -> None:
    """A card without an architecture section: csv gives the layer table's data header (no rows), Markdown the
    empty table and the note that says why."""
    bare = "model:\n  name: Bare\n  parameters_b: 7\n  active_parameters_b: 7\n  source: x\n"
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
        handle.write(bare)
    table = run_cli("--format", "csv", "model", "show", handle.name)
    assert table.returncode == 0 and table.stdout == "layers,attention,window_tokens,ffn\n"
    markdown = run_cli("--format", "md", "model", "show", handle.name)
    assert "no architecture section" in markdown.stdout
    Path(handle.name).unlink()


def test_a_refused_pick_never_says_wrote_and_a_closed_stderr_keeps_stdout_empty(tmp_path: Path) -> None:
    """review21 F4: under --table the sized scenario is held, so `size` says 'will write', and past the count the
    refusal says nothing was written; with stderr closed nothing lands on stdout (print once fell back to it)."""
    target = tmp_path / "sized.yaml"
    args = ("--format", "csv", "--table", "9", "size", "--no-verify", "--no-band", "--write-scenario", str(target))
    refused = run_cli(*args)
    assert refused.returncode == 2 and refused.stdout == "" and not target.exists()
    assert "will write" in refused.stderr and "\nwrote " not in "\n" + refused.stderr
    closed = _stderr_closed(*args)
    assert closed.returncode == 2 and closed.stdout == b"" and not target.exists()
