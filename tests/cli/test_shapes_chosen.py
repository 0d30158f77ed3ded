"""``size`` and ``optimize`` report the instance shapes they chose (issue 22, "Instance shapes"): with
``shape: auto`` the chosen pair, each pool's alternative and the next-best's figure under the stated
criterion; a fixed-shape pool with no alternative; a model whose weights fit no shape is infeasible (exit 1)
with the numbers."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from prfaas_plan.io.names import load_named_hardware
from tests.conftest import REPO, run_cli

ROOFLINE = REPO / "workloads" / "paper-case-study-roofline.yaml"
SMALL_TARGET = ("--rate", "1", "--ttft-p90-s", "5")


def _roofline(tmp_path: Path, prfaas_shape: str, local_shape: str) -> Path:
    """The roofline case study with a ``shape:`` line under each pool (model named as in the original, which
    resolves from any directory)."""
    text = ROOFLINE.read_text()
    text = text.replace("    instances: 4 ", f"    shape: {prfaas_shape}\n    instances: 4 ", 1)
    text = text.replace("    instances: 8 ", f"    shape: {local_shape}\n    instances: 8 ", 1)
    assert text.count("shape:") == 2
    path = tmp_path / "shapes.yaml"
    path.write_text(text)
    return path


def _json(*args: str) -> dict[str, Any]:
    done = run_cli(*args, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    payload: dict[str, Any] = json.loads(done.stdout)
    return payload


def _gpu_price(key: str) -> float:
    price = load_named_hardware(key).accelerator.price_usd_per_gpu_hour
    assert price is not None
    return price


def test_size_reports_the_cheapest_shape_pair_and_the_next_best(tmp_path: Path) -> None:
    path = _roofline(tmp_path, "auto", "auto")
    payload = _json("size", str(path), *SMALL_TARGET, "--no-verify", "--no-band")
    shapes, sized = payload["shapes"], payload["sizing"]["prfaas_pd"]
    assert shapes["unit"] == "USD/h" and not shapes["higher_is_better"] and "cost" in shapes["criterion"]
    chosen = shapes["chosen"]["value"]
    # The chosen pair is the one sized: its figure is the reported deployment's cost, and that cost is its GPUs
    # at the datasheet prices in the chosen shapes' GPU counts.
    cost = sized["cost_at_target"]
    assert math.isclose(chosen, cost["total_usd_per_hour"], rel_tol=1e-9)
    pools = shapes["pools"]
    for role, key, n in (("prfaas", "h200", sized["n_prfaas"]), ("local", "h20", sized["n_local"])):
        pool = pools[role]
        assert pool["chosen_by"] == "auto"
        assert pool["tensor_parallel"] * pool["attention_data_parallel"] == pool["gpus"]
        assert math.isclose(cost[f"{role}_gpus_usd_per_hour"], n * pool["gpus"] * _gpu_price(key), rel_tol=1e-9)
    # No priced pair is cheaper than the chosen one, the next best included.
    priced = [c["value"] for c in shapes["candidates"] if c["value"] is not None]
    assert len(shapes["candidates"]) >= 2 and min(priced) == chosen
    nxt = shapes["next_best"]
    assert nxt is not None and nxt["label"] != shapes["chosen"]["label"]
    assert nxt["value"] is None or nxt["value"] >= chosen
    # Each pool's alternative differs from the chosen pair in that pool's shape.
    for role in ("prfaas", "local"):
        alt = pools[role]["alternative"]
        if alt is not None:
            assert alt[role]["label"] != pools[role]["label"] or alt[role]["gpus"] != pools[role]["gpus"]
    # 1, 2 and 4 GPUs cannot hold the 538 GB of weights; the numbers say so.
    assert shapes["ruled_out"] and all("GB of weights" in why for why in shapes["ruled_out"])


def test_optimize_reports_a_fixed_pool_with_no_alternative(tmp_path: Path) -> None:
    path = _roofline(tmp_path, "auto", "{tensor_parallel: 8}")
    shapes = _json("optimize", str(path))["shapes"]
    assert "Λ_max per USD/h" in shapes["criterion"] and shapes["higher_is_better"]
    local, prfaas = shapes["pools"]["local"], shapes["pools"]["prfaas"]
    assert local["chosen_by"] == "fixed" and local["alternative"] is None
    assert (local["gpus"], local["tensor_parallel"], local["expert_parallel"]) == (8, 8, 1)
    assert prfaas["chosen_by"] == "auto"
    # Every pair priced keeps the fixed local shape; the chosen one carries the most per USD/h.
    assert all(c["local"]["label"] == "TP8" for c in shapes["candidates"])
    best = shapes["chosen"]["value"]
    assert best > 0 and all(c["value"] is None or c["value"] <= best for c in shapes["candidates"])
    nxt = shapes["next_best"]
    assert nxt is not None and (nxt["value"] is None or nxt["value"] <= best)

    done = run_cli("optimize", str(path))
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("Instance shapes:"))
    assert "local 8 GPUs TP8 (fixed)" in line and "(chosen)" in line and "next best" in line


def test_weights_that_fit_no_shape_are_infeasible_with_the_numbers(tmp_path: Path) -> None:
    text = (REPO / "workloads" / "qwen3.5-capacity.yaml").read_text()
    assert "dtypes: {weights: fp8}" in text
    text = text.replace("dtypes: {weights: fp8}", "dtypes: {weights: bf16}")  # about 806 GB of weights
    text = text.replace("    instances: 8\n", "    instances: 8\n    shape: auto\n", 1)  # the local (H20) pool
    path = tmp_path / "bf16.yaml"
    path.write_text(text)
    done = run_cli("size", str(path), *SMALL_TARGET, "--no-verify", "--no-band")
    assert done.returncode == 1, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert "no instance shape holds the model" in said and "Traceback" not in said
    assert "GB of weights > 8 x 96 GB h20" in said and "GB of weights > 1 x 96 GB h20" in said
