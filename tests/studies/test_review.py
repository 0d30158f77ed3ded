"""The capacity review: the library result, its documents, the atomic directory and the command."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from prfaas_plan.errors import InputError
from prfaas_plan.io.names import resolve_scenario_path
from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.optimize import evaluate
from prfaas_plan.report.review_dir import OWNER as REVIEW_OWNER
from prfaas_plan.report.review_dir import check_review_dir, write_review_dir
from prfaas_plan.spec.cost import Target
from prfaas_plan.studies.review import ReviewOptions, review, split_sweep, threshold_sweep
from prfaas_plan.studies.verify import VerifyOptions
from prfaas_plan.throughput import stage_model

ROOT = Path(__file__).resolve().parents[2]
FAST = ReviewOptions(verify=VerifyOptions(verify=False), quick=True, sensitivity=False)


@pytest.fixture(scope="module")
def paper() -> Any:
    return load_scenario(resolve_scenario_path("paper-case-study"))


@pytest.fixture(scope="module")
def untargeted(paper: Any) -> Any:
    """The paper's review without a target or an SLO: the parts that need neither."""
    return review(paper, target=None, ttft_slo_s=None, options=FAST)


def _app() -> typer.Typer:
    from prfaas_plan.cli.review import review as command

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(command)

    @app.callback()
    def _main() -> None:
        """A one-command app, as cli.app will register it."""

    return app


# --------------------------------------------------------------------------------------------------------
# The library result
# --------------------------------------------------------------------------------------------------------


def test_split_sweep_matches_scalar_evaluation(paper: Any) -> None:
    """Fig. 5a's vectorised Λ_max equals Eq. 6 scored one split at a time, and peaks at the chosen split."""
    model = stage_model(paper)
    sweep = split_sweep(model, 19_418.0)
    for n_p, lam in zip(sweep.n_pd_prefill, sweep.throughput_req_per_s, strict=True):
        assert lam == pytest.approx(evaluate(model, 19_418.0, n_p).throughput_req_per_s, rel=1e-12)
    assert sweep.n_pd_prefill[int(np.argmax(sweep.throughput_req_per_s))] == 3


def test_threshold_sweep_never_beats_the_optimum_and_egress_fits_the_link(untargeted: Any, paper: Any) -> None:
    """No threshold of Fig. 5b's grid beats the optimised plan at its split; egress at Λ_max never exceeds the
    link (the link is one of Eq. 6's bounds)."""
    sweep, plan = untargeted.threshold_sweep, untargeted.comparison.plan
    assert max(sweep.throughput_req_per_s) <= plan.throughput_req_per_s * (1 + 1e-9)
    assert max(sweep.egress_at_max_bytes_per_s) <= sweep.link_bandwidth_bytes_per_s * (1 + 1e-9)
    assert sweep.threshold_tokens[0] == paper.traffic.input_length.lower_tokens
    assert sweep.egress_at_target_bytes_per_s is None


def test_egress_at_target_only_where_carried(paper: Any) -> None:
    """Egress at the target rate is given only at thresholds whose Λ_max carries the target."""
    sweep = threshold_sweep(stage_model(paper), 3, 3.0)
    assert sweep.egress_at_target_bytes_per_s is not None
    for lam, egress in zip(sweep.throughput_req_per_s, sweep.egress_at_target_bytes_per_s, strict=True):
        assert np.isnan(egress) == (lam < 3.0)


def test_parts_without_inputs_are_skipped_with_reasons(untargeted: Any) -> None:
    """Without a target or an SLO, goodput, sizing, sensitivity and N-1 are skipped, each with its reason;
    the plan, the sweeps, the loaded figures and the cost are there."""
    r = untargeted
    assert r.goodput is None and r.sizing is None and r.tornado is None and r.n_minus_one is None
    assert set(r.skipped) == {"goodput", "sizing", "error_band", "matrix", "frontier", "tornado", "n_minus_one"}
    assert "target" in r.skipped["sizing"] and "SLO" in r.skipped["goodput"]
    assert r.cost is not None
    assert r.loaded.basis.startswith("each plan at 70%")
    assert len(r.load_curve.closed) == 19 and r.load_curve.simulated == ()


def test_unpriced_scenario_skips_the_money(paper: Any) -> None:
    """A scenario whose pools have no price skips cost, sizing and the frontier, naming what is missing."""
    from dataclasses import replace

    free = replace(
        paper, prfaas=replace(paper.prfaas, accelerator=replace(paper.prfaas.accelerator, price_usd_per_gpu_hour=None))
    )
    r = review(free, target=Target(rate_req_per_s=2.0, ttft_slo_s=5.0), ttft_slo_s=5.0, options=FAST)
    assert r.cost is None and r.sizing is None
    assert "no price" in r.skipped["cost"]
    assert r.n_minus_one is not None and r.goodput is not None


# --------------------------------------------------------------------------------------------------------
# Documents
# --------------------------------------------------------------------------------------------------------


def test_json_is_strict_and_versioned(untargeted: Any) -> None:
    """review.json has a schema version, no NaN or infinity, and null for every skipped part."""
    from prfaas_plan.report.review_data import review_to_dict

    payload = review_to_dict(untargeted)
    text = json.dumps(payload, allow_nan=False)
    back = json.loads(text)
    assert back["schema_version"] == "1"
    for part in ("goodput", "sizing", "matrix", "sensitivity"):
        assert back[part] is None
    assert back["comparison"]["plan"]["n_pd_prefill"] == 3
    assert back["provenance"]["prefill (h200, PrfaaS)"]["kind"] == "measured"


def test_tables_csv_and_markdown(untargeted: Any) -> None:
    """Every table is a CSV with one header and a row per entry; report.md opens with the summary and names
    each table's provenance and CSV."""
    from prfaas_plan.report.review_data import review_tables, table_csv
    from prfaas_plan.report.review_markdown import report_markdown

    tables = review_tables(untargeted)
    names = [t.name for t in tables]
    assert names[:5] == ["plans", "loaded", "ttft_vs_load", "split_sweep", "threshold_sweep"]
    for t in tables:
        lines = table_csv(t).splitlines()
        assert lines[0].split(",") == list(t.columns)
        assert len(lines) == 1 + len(t.rows)
    md = report_markdown(untargeted, tables, [("fig5a_split.png", "Fig 5a", "closed form")])
    assert md.index("## Summary") < md.index("## Tables")
    assert "![Fig 5a](fig5a_split.png)" in md
    assert all(f"`{t.name}.csv`" in md for t in tables)
    assert "Provenance: closed form over prefill (h200, PrfaaS): measured" in md


def test_figures_are_pngs(untargeted: Any) -> None:
    """The figures the parts allow are drawn (no frontier or tornado here), each a PNG."""
    from prfaas_plan.report.figures import review_figures

    figures = review_figures(untargeted)
    assert [f.name for f in figures] == [
        "fig5a_split.png",
        "fig5b_threshold.png",
        "egress_vs_threshold.png",
        "ttft_vs_load.png",
    ]
    assert all(f.png.startswith(b"\x89PNG\r\n\x1a\n") for f in figures)


# --------------------------------------------------------------------------------------------------------
# The atomic directory
# --------------------------------------------------------------------------------------------------------


def _names(path: Path) -> list[str]:
    """The review's files, without its marker (report.review_dir.OWNER)."""
    return sorted(p.name for p in path.iterdir() if p.name != REVIEW_OWNER.marker_name)


def _siblings(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(f".{path.name}."))


def test_write_is_whole(tmp_path: Path) -> None:
    """The directory appears with every file; no temporary sibling remains."""
    out = tmp_path / "rev"
    write_review_dir(out, {"a.md": "hello", "b.png": b"\x89PNG"})
    assert _names(out) == ["a.md", "b.png"]
    assert (out / "a.md").read_text() == "hello"
    assert _siblings(out) == []


def test_existing_directory_refused_unless_force(tmp_path: Path) -> None:
    """A non-empty directory is refused (naming --force) and left as it was; with force it is replaced whole;
    an empty one is used."""
    out = tmp_path / "rev"
    out.mkdir()
    write_review_dir(out, {"x.md": "1"})  # empty: fine
    with pytest.raises(InputError, match="--force"):
        write_review_dir(out, {"y.md": "2"})
    assert _names(out) == ["x.md"]
    write_review_dir(out, {"y.md": "2"}, force=True)
    assert _names(out) == ["y.md"]
    assert _siblings(out) == []


def test_file_in_the_way_and_missing_parent(tmp_path: Path) -> None:
    """A file at the path, or a parent that does not exist, is an input error before any work."""
    (tmp_path / "f").write_text("")
    with pytest.raises(InputError, match="not a directory"):
        check_review_dir(tmp_path / "f")
    with pytest.raises(InputError, match="cannot write"):
        check_review_dir(tmp_path / "missing" / "rev")


class _Interrupting(dict[str, bytes]):
    """Files whose second item interrupts the write, as Ctrl-C would."""

    def items(self) -> Iterator[tuple[str, bytes]]:  # type: ignore[override]
        yield "a.csv", b"1"
        raise KeyboardInterrupt


def test_interrupted_write_leaves_nothing_and_keeps_the_old_review(tmp_path: Path) -> None:
    """An interruption while writing leaves no new directory and no temporary sibling; with force, the review
    it was replacing is still there."""
    out = tmp_path / "rev"
    files = _Interrupting({"a.csv": b"1", "b.csv": b"2"})
    with pytest.raises(KeyboardInterrupt):
        write_review_dir(out, files)
    assert not out.exists() and _siblings(out) == []
    write_review_dir(out, {"old.md": "old"})
    with pytest.raises(KeyboardInterrupt):
        write_review_dir(out, files, force=True)
    assert _names(out) == ["old.md"]
    assert _siblings(out) == []


# --------------------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------------------


def test_command_refuses_a_full_directory_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A non-empty -o is refused with exit 2 before the review runs."""
    import prfaas_plan.studies.review as library

    def boom(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("the review ran")

    monkeypatch.setattr(library, "review", boom)
    out = tmp_path / "rev"
    out.mkdir()
    (out / "keep.md").write_text("keep")
    result = CliRunner().invoke(_app(), ["review", "paper-case-study", "-o", str(out)])
    assert result.exit_code == 2, result.output
    assert "--output" in result.output and "--force" in result.output
    assert (out / "keep.md").read_text() == "keep"


def test_command_writes_the_paper_review(tmp_path: Path) -> None:
    """The paper scenario's quick review writes the report, review.json, the figures and a CSV per table."""
    out = tmp_path / "rev"
    result = CliRunner().invoke(
        _app(), ["review", "paper-case-study", "-o", str(out), "--quick", "--no-verify", "--no-sensitivity", "--json"]
    )
    assert result.exit_code == 0, result.output
    names = {p.name for p in out.iterdir()}
    assert {"report.md", "review.json", "plans.csv", "sizing.csv", "n_minus_one.csv"} <= names
    assert {"fig5a_split.png", "fig5b_threshold.png", "egress_vs_threshold.png", "ttft_vs_load.png"} <= names
    assert "cost_goodput_pareto.png" in names and "tornado.png" not in names
    payload = json.loads((out / "review.json").read_text())
    assert payload["sizing"]["prfaas_pd"]["n_prfaas"] >= 1
    assert payload["skipped"]["tornado"].startswith("not asked for")
    assert json.loads(result.stdout)["directory"] == str(out)


def test_unknown_matrix_hardware_is_an_input_error(tmp_path: Path) -> None:
    """--matrix with an unknown hardware name exits 2 naming the flag, and writes nothing."""
    out = tmp_path / "rev"
    result = CliRunner().invoke(
        _app(),
        ["review", "-o", str(out), "--matrix", "--prefill", "nosuchgpu", "--quick", "--no-verify", "--no-sensitivity"],
    )
    assert result.exit_code == 2, result.output
    assert "nosuchgpu" in result.output
    assert not out.exists() and _siblings(out) == []


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigterm_leaves_nothing_behind(tmp_path: Path) -> None:
    """SIGTERM during a review exits 143 and leaves neither the directory nor a temporary sibling."""
    script = tmp_path / "app.py"
    script.write_text(
        "from prfaas_plan.cli.common import interruptible\n"
        "from tests.studies.test_review import _app\n"
        "with interruptible():\n"
        "    _app()()\n"
    )
    out = tmp_path / "rev"
    proc = subprocess.Popen(
        [sys.executable, str(script), "review", "-o", str(out)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    while "review:" not in proc.stderr.readline():  # the first part has started: the handlers are in place
        assert time.monotonic() < deadline and proc.poll() is None
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert not out.exists() and _siblings(out) == []


# --------------------------------------------------------------------------------------------------------
# Imports
# --------------------------------------------------------------------------------------------------------


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_review_layers() -> None:
    """The library review sits between io and cli: it imports no cli, typer, rich or matplotlib; the io
    modules draw nothing; matplotlib is imported only by the figure writers (report/figures.py,
    report/topology_figure.py)."""
    package = ROOT / "prfaas_plan"
    modules = ("studies/review.py", "report/review_data.py", "report/review_markdown.py", "report/review_dir.py")
    for path in (package / m for m in modules):
        for name in _imported(path):
            root = name.split(".")[0]
            assert root not in ("typer", "rich", "matplotlib", "yaml"), (path, name)
            assert not name.startswith("prfaas_plan.cli"), (path, name)
    users = [p for p in package.rglob("*.py") if any(n.startswith("matplotlib") for n in _imported(p))]
    assert sorted(users) == [package / "report" / "figures.py", package / "report" / "topology_figure.py"]


def test_command_module_does_not_import_matplotlib() -> None:
    """Importing the review command (as cli.app will) loads no matplotlib: other commands keep their start-up."""
    code = "import sys, prfaas_plan.cli.review; assert 'matplotlib' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_a_sized_deployment_reviewed_names_the_plan_that_meets_its_target_and_lists_itself_once(
    tmp_path: Path,
) -> None:
    """hunt20 F2: the review of the deployment `size` wrote (the paper's, 6 + 6 on 40 Gbit/s, 3 req/s within
    P90 <= 5 s) said in one summary that the P90 at the target is 5.37 s and that the target is met, two plans
    unnamed, and listed the deployment as its own next best. The Target line now names the goodput-optimal plan
    and warns that the throughput plan above misses the SLO there; the deployment is listed once."""
    from prfaas_plan.cli.app import app

    sized = tmp_path / "sized.yaml"
    runner = CliRunner()
    made = runner.invoke(app, ["size", "--no-verify", "--no-band", "--write-scenario", str(sized)])
    assert made.exit_code == 0, made.output
    out = tmp_path / "review"
    done = runner.invoke(app, ["review", str(sized), "--quick", "--no-verify", "-o", str(out)])
    assert done.exit_code == 0, done.output
    report = (out / "report.md").read_text()
    under = next(line for line in report.splitlines() if line.startswith("- **Under load**"))
    target = next(line for line in report.splitlines() if line.startswith("- **Target**"))
    best_t = float(under.split("the best plan above, t = ")[1].split(")")[0].replace(",", ""))
    p90 = float(under.split("P90 TTFT ")[1].split(" s")[0])
    assert p90 > 5.0 and "**meets** the target" in target  # the case: the throughput plan misses, the goodput one meets
    good_t = float(target.split("goodput-optimal plan (t = ")[1].split(",")[0].replace(",", ""))
    assert good_t != best_t and f"which has a P90 of {p90:.2f} s there" in target
    decision = next(line for line in report.splitlines() if line.startswith("**Decision**"))
    assert decision.count("6 PrfaaS + 6 local") == 1
    assert "% below homogeneous PD's" in decision or "% above homogeneous PD's" in decision


def test_a_review_with_a_target_and_a_hardware_matrix_lists_the_matrix_options(tmp_path: Path) -> None:
    """review21 F1: with a target and a matrix beside the scenario's own pair, the options include the matrix
    points (labelled by hardware pair, not by counts): the review is written, not a traceback."""
    from prfaas_plan.cli.app import app

    out = tmp_path / "review"
    args = ["review", "--quick", "--no-verify", "--matrix", "--prefill", "h200", "--local", "h20,h100", "-o", str(out)]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    options = json.loads((out / "review.json").read_text())["recommendation"]["options"]
    assert any("h100" in o["label"] for o in options)


def test_the_review_names_a_cheaper_plan_on_the_sized_deployment(tmp_path: Path) -> None:
    """`size` names a cheaper plan on the sized PrfaaS-PD deployment where egress is priced per byte
    (``cheaper_plan``); the review says it too, with the same cost and P90 (Qwen3-Next on B200 + H100, 8 req/s
    within P90 <= 2 s: $222.65/h at the plan with the most margin, $215.42/h offloading nothing)."""
    from prfaas_plan.cli.app import app

    out = tmp_path / "review"
    args = ["review", "qwen3-next-b200-h100", "--quick", "--no-verify", "--no-sensitivity", "--ttft-p90-s", "2"]
    done = CliRunner().invoke(app, [*args, "-o", str(out)])
    assert done.exit_code == 0, done.output
    line = next(x for x in (out / "report.md").read_text().splitlines() if "**The sized PrfaaS-PD deployment**" in x)
    sized = json.loads(
        CliRunner()
        .invoke(app, ["size", "qwen3-next-b200-h100", "--no-verify", "--no-band", "--ttft-p90-s", "2", "--json"])
        .output
    )["sizing"]["prfaas_pd"]
    cheaper = sized["cheaper_plan"]
    assert f"${cheaper['cost_at_target']['total_usd_per_hour']:,.2f}/h" in line
    assert f"P90 TTFT {cheaper['ttft_quantile_at_target_s']:.2f} s" in line and "offloading nothing" in line
