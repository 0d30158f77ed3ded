"""Calibration from benchmark results (``studies.bench_calibration``, ``prfaas-plan calibrate``): each format's
example file calibrates, the written profile round-trips through the loader and prices a scenario's pools, and a
calibration refits its own synthetic measurements."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from prfaas_plan.errors import InputError
from prfaas_plan.io.engine_profile import OPTIONAL_TERMS, TERMS, load_engine_profile, load_named_engine
from prfaas_plan.io.error_bands import pool_band
from prfaas_plan.io.names import load_named_hardware, load_named_model
from prfaas_plan.io.scenario import load_scenario
from prfaas_plan.physics.corpus_fit import CorpusCase, predict
from prfaas_plan.physics.roofline import Instance
from prfaas_plan.report.engine_calibration import write_calibration
from prfaas_plan.spec.engine import CorpusMeasurement, EngineProfile
from prfaas_plan.studies.bench_calibration import (
    FOLDS,
    MAX_LEAVE_ONE_OUT,
    MAX_MEASUREMENTS,
    MIN_BAND_POINTS,
    calibrate_files,
)
from tests.conftest import REPO, examples, run_cli

FIXTURES = REPO / "tests" / "fixtures" / "bench_results"
# (file, model, hardware, gpus, engine): the real files with their published setup (the InferenceX MiniMax run
# does not name its GPUs in the file: H200 is this test's assumption); synthetic files on a small card.
CASES = {
    "vllm-real": ("vllm-bench-serve-minimax-m2.5-conc4.json", "minimax-m2.5", "h200", 8, "vllm"),
    "sglang-serving-real": ("sglang-bench-serving-llama-3.3-70b-4xh200.jsonl", "llama-3.1-70b", "h200", 4, "sglang"),
    "sglang-one-batch-synthetic": ("synthetic-sglang-bench-one-batch.jsonl", "llama-3.1-8b", "h100", 1, "sglang"),
    "aiperf-synthetic": ("synthetic-aiperf-profile-export.json", "llama-3.1-8b", "h100", 1, "trtllm"),
    # AIPerf's own example run (0.1.1, real) names openai/gpt-oss-20b and no GPU; there is no card for that model,
    # so the round trip runs on the gpt-oss-120b card on one H100: this test's assumption (it checks the format's
    # path to a profile, not the physics).
    "aiperf-0.1-real-json": ("aiperf-0.1.1-profile-export-gpt-oss-20b-conc100.json", "gpt-oss-120b", "h100", 1, "vllm"),
    "aiperf-0.1-real-csv": ("aiperf-0.1.1-profile-export-gpt-oss-20b-conc100.csv", "gpt-oss-120b", "h100", 1, "vllm"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_format_calibrates_and_round_trips(tmp_path: Path, name: str) -> None:
    """Calibrate on the example file, write the profile, load it back: the fitted terms and the band survive."""
    file, model, hardware, gpus, engine = CASES[name]
    cal = calibrate_files([FIXTURES / file], model=model, hardware=hardware, gpus=gpus, engine=engine)
    assert cal.points and all(p.measured_s > 0 and p.fitted_s > 0 for p in cal.points)
    out = write_calibration(cal, tmp_path / "cal.yaml")
    back = load_engine_profile(out)
    for term, value in cal.fit.values.items():
        written = back.gemm_efficiency_scale if term == "gemm_efficiency_scale" else getattr(back, term)
        assert written == pytest.approx(min(value, 10.0), rel=1e-4, abs=1e-12)
    assert set(back.fitted) == set(cal.fit.values)
    for term, _, _ in (*TERMS, *OPTIONAL_TERMS):  # every term, fitted or the base engine's, prices as it was fitted
        assert getattr(back, term) == pytest.approx(getattr(cal.engine, term), rel=1e-5, abs=1e-12), term
    band = pool_band(str(out), tmp_path)
    assert band.prefill.factor == pytest.approx(cal.bands["prefill"].factor, rel=1e-3)
    assert band.decode.factor == pytest.approx(cal.bands["decode"].factor, rel=1e-3)
    for phase, written in (("prefill", band.prefill), ("decode", band.decode)):  # the range survives too
        assert written.tokens == pytest.approx(cal.bands[phase].tokens, rel=1e-5)
        assert written.kinds == cal.bands[phase].kinds and written.generations == cal.bands[phase].generations
        mine = [p.tokens for p in cal.points if p.phase == phase]
        if len(mine) >= MIN_BAND_POINTS and "leave-one-out over this calibration" in cal.bands[phase].basis:
            assert cal.bands[phase].tokens == (min(mine), max(mine))
    text = out.read_text()
    assert cal.files[0].sha256 in text and "held_out_ratio" in text


@pytest.mark.parametrize("name", sorted(CASES))
def test_written_profile_prices_a_scenario_used_by_optimize(tmp_path: Path, name: str) -> None:
    """From each format: a scenario whose pools name the calibrated profile loads (with its band) and optimize
    answers."""
    file, model, hardware, gpus, engine = CASES[name]
    done = run_cli(
        "calibrate", str(FIXTURES / file), "--model", model, "--hardware", hardware, "--gpus", str(gpus),
        "--engine", engine, "--out", str(tmp_path / "cal.yaml"), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["profile"] == str(tmp_path / "cal.yaml")
    text = (REPO / "workloads" / "qwen3.5-capacity.yaml").read_text()
    scenario = tmp_path / "s.yaml"
    scenario.write_text(text.replace("engine: sglang", "engine: cal.yaml"))
    spec = load_scenario(scenario)
    assert spec.prfaas.roofline.source.startswith(f"engine {engine}-calibrated")
    assert spec.prfaas.time_band is not None and spec.prfaas.time_band.source.startswith("prfaas-plan calibrate")
    done = run_cli("optimize", str(scenario), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)


def test_refuses_to_overwrite_a_foreign_file(tmp_path: Path) -> None:
    target = tmp_path / "notes.yaml"
    target.write_text("my own notes\n")
    file, model, hardware, gpus, engine = CASES["vllm-real"]
    cal = calibrate_files([FIXTURES / file], model=model, hardware=hardware, gpus=gpus, engine=engine)
    with pytest.raises(InputError, match=r"notes\.yaml"):
        write_calibration(cal, target, force=True)
    assert target.read_text() == "my own notes\n"


# --- a calibration refits its own synthetic measurements -------------------------------------------------

_ARCH = load_named_model("llama-3.1-8b").architecture
_INSTANCE = Instance(accelerator=load_named_hardware("h100").accelerator, gpus=1)
_LENGTHS = (128, 512, 4096, 16384, 32768, 65536)
_BATCHES = (2, 8, 32, 128, 256)


def _time(truth: EngineProfile, phase: str, batch: int, tokens: float) -> float:
    assert _ARCH is not None
    m = CorpusMeasurement(
        id="synthetic", source="synthetic", engine="vllm", engine_version="", model="llama-3.1-8b", hardware="h100",
        gpus=1, tensor_parallel=1, expert_parallel=1, weights_dtype="bf16", kv_dtype="bf16", cuda_graphs=True,
        phase="prefill" if phase == "prefill" else "decode", batch=batch, tokens=tokens, measured_s=1.0,
    )  # fmt: skip
    return predict(CorpusCase(measurement=m, arch=_ARCH, instance=_INSTANCE, generation="hopper"), truth)


def _synthetic_files(truth: EngineProfile, folder: Path) -> list[Path]:
    """SYNTHETIC benchmark files generated from ``truth``: vLLM runs at one request at a time (TTFT = batch-1
    prefill, one output token: no decode) and a bench_one_batch file of decode steps at batches > 1."""
    files = []
    for length in _LENGTHS:
        t = _time(truth, "prefill", 1, length)
        doc = {
            "completed": 10, "total_input_tokens": 10 * length, "total_output_tokens": 10, "max_concurrency": 1,
            "request_throughput": 1 / t, "mean_ttft_ms": t * 1e3, "mean_e2el_ms": t * 1e3, "output_throughput": 1 / t,
        }  # fmt: skip
        path = folder / f"vllm-{length}.json"
        path.write_text(json.dumps(doc))
        files.append(path)
    lines = [
        json.dumps({"batch_size": b, "input_len": 2048, "output_len": 128, "prefill_latency": 1.0,
                    "median_decode_latency": _time(truth, "decode", b, 2048 + 64)})
        for b in _BATCHES
    ]  # fmt: skip
    path = folder / "one-batch.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return [*files, path]


# No shrinking: each example is a calibration of seconds; a failure prints its example as drawn.
@settings(max_examples=examples(3), phases=(Phase.explicit, Phase.reuse, Phase.generate))
@given(
    scale=st.floats(0.6, 1.3),
    request_s=st.floats(0.005, 0.08),
    chunk_s=st.floats(2e-5, 3e-4),
    step_s=st.floats(5e-4, 4e-3),
    layer_s=st.floats(5e-6, 6e-5),
)
def test_calibration_refits_its_own_synthetic_measurements(
    tmp_path_factory: pytest.TempPathFactory, scale: float, request_s: float, chunk_s: float, step_s: float,
    layer_s: float,
) -> None:  # fmt: skip
    """Files generated from known terms calibrate back to them: the measurements are reproduced within 5 %, the
    GEMM efficiency scale within 5 %, and the fixed costs the files identify (a one-chunk prefill's o_req +
    layers x o_chunk, a decode step's o_step + layers x o_layer) to within 5 % of the shortest time they are
    part of. Why not tighter: the weak priors (weight 0.1 on log(term / prior)) pull each term towards the base
    engine's value, most where a term adds little to the times; how the fixed costs split between their terms
    is not identified by these files and is not checked."""
    assert _ARCH is not None
    base = load_named_engine("vllm")
    truth = replace(
        base, gemm_efficiency_scale=scale, request_overhead_s=request_s, prefill_layer_overhead_s=chunk_s,
        decode_step_overhead_s=step_s, decode_layer_overhead_s=layer_s,
    )  # fmt: skip
    files = _synthetic_files(truth, tmp_path_factory.mktemp("synthetic"))
    cal = calibrate_files(files, model="llama-3.1-8b", hardware="h100", gpus=1, engine="vllm")
    fitted = cal.engine
    assert max(abs(np.log(p.fitted_s / p.measured_s)) for p in cal.points) < 0.05
    assert fitted.gemm_efficiency_scale == pytest.approx(scale, rel=0.05)
    shortest = {ph: min(p.measured_s for p in cal.points if p.phase == ph) for ph in ("prefill", "decode")}
    layers = _ARCH.n_layers
    one_chunk = fitted.request_overhead_s + layers * fitted.prefill_layer_overhead_s
    assert abs(one_chunk - (request_s + layers * chunk_s)) <= 0.05 * shortest["prefill"]
    decode_fixed = fitted.decode_step_overhead_s + layers * fitted.decode_layer_overhead_s
    assert abs(decode_fixed - (step_s + layers * layer_s)) <= 0.05 * shortest["decode"]


def test_many_measurements_are_cross_validated_in_folds_and_too_many_refused(tmp_path: Path) -> None:
    """Beyond MAX_LEAVE_ONE_OUT measurements the held-out predictions come from FOLDS folds (the cost of FOLDS + 1
    fits, where leave-one-out grows with the square of the count); beyond MAX_MEASUREMENTS the files are refused."""
    line = (FIXTURES / "vllm-bench-serve-minimax-m2.5-conc4.json").read_text().strip()
    many = tmp_path / "sweep.jsonl"
    many.write_text((line + "\n") * 30)  # 30 runs: 60 measurements
    cal = calibrate_files([many], model="minimax-m2.5", hardware="h200", gpus=8, engine="vllm")
    assert len(cal.points) == 60 > MAX_LEAVE_ONE_OUT
    assert all(p.held_out_s > 0 for p in cal.points)
    assert all(f"{FOLDS}-fold cross-validation" in band.basis for band in cal.bands.values())
    too_many = tmp_path / "huge-sweep.jsonl"
    too_many.write_text((line + "\n") * (MAX_MEASUREMENTS // 2 + 1))
    with pytest.raises(InputError, match=rf"more than the {MAX_MEASUREMENTS:,} one calibration takes"):
        calibrate_files([too_many], model="minimax-m2.5", hardware="h200", gpus=8, engine="vllm")


def test_reading_stops_as_soon_as_the_count_passes_the_limit(tmp_path: Path) -> None:
    """Calibrate stops reading at the run that takes the running count past MAX_MEASUREMENTS: the rest of that
    file and the files after it are not looked at (here a run of no known benchmark and a missing file, either
    of which would be refused if read), instead of parsing every file first (eight 63 MB files took 78 s and
    2 GB to be refused). Exit 2 on FILES, naming the file and line where the count passed."""
    line = (FIXTURES / "synthetic-sglang-bench-one-batch.jsonl").read_text().splitlines()[0]
    runs = MAX_MEASUREMENTS // 2 + 1  # 2 measurements a run (batch 1: a prefill and a decode step)
    sweep = tmp_path / "sweep.jsonl"
    sweep.write_text((line + "\n") * runs + '{"not": "a benchmark"}\n')
    flags = ("--model", "llama-3.1-70b", "--hardware", "h200")
    done = run_cli("calibrate", str(sweep), str(tmp_path / "never-opened.json"), *flags)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    expected = (
        f"error: FILES: {2 * runs:,} measurements read by {sweep} line {runs}, more than the {MAX_MEASUREMENTS:,} "
        "one calibration takes (reading stopped there): give fewer"
    )
    assert done.stderr.strip() == expected


def test_files_of_one_name_in_two_folders_stay_apart(tmp_path: Path) -> None:
    """Two result files named alike in different folders: their measurements keep distinct ids (the file's path
    stands in for its name) and are fitted as two, so the prefill fit sits between a TTFT and its triple (their
    fitted ratios straddle 1). When the ids collided, the fit took the first file's pieces for both."""
    line = json.loads((FIXTURES / "vllm-bench-serve-minimax-m2.5-conc4.json").read_text())
    for folder, factor in (("a", 1.0), ("b", 3.0)):
        (tmp_path / folder).mkdir()
        run = {**line, "mean_ttft_ms": line["mean_ttft_ms"] * factor}
        (tmp_path / folder / "result.json").write_text(json.dumps(run))
    files = [tmp_path / "a" / "result.json", tmp_path / "b" / "result.json"]
    cal = calibrate_files(files, model="minimax-m2.5", hardware="h200", gpus=8, engine="vllm")
    assert len({p.id for p in cal.points}) == len(cal.points) == 4
    slow, fast = sorted((p for p in cal.points if p.phase == "prefill"), key=lambda p: p.measured_s, reverse=True)
    assert fast.fitted_s / fast.measured_s > 1 > slow.fitted_s / slow.measured_s
    assert 0.8 < float(np.sqrt(fast.fitted_s / fast.measured_s * slow.fitted_s / slow.measured_s)) < 1.25


def test_one_file_given_twice_is_refused_naming_both(tmp_path: Path) -> None:
    """The same file twice (one path, the path spelt another way, a link to it, or a byte-identical copy) is
    exit 2 on FILES naming both: counted twice, each measurement's twin stayed in its leave-one-out fit and the
    prefill band fell from the base engine's 2.06x to 1.05x."""
    given = FIXTURES / "synthetic-sglang-bench-one-batch.jsonl"
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(given.read_bytes())
    link = tmp_path / "link.jsonl"
    link.symlink_to(given)
    flags = ("--model", "llama-3.1-70b", "--hardware", "h200")
    assert run_cli("calibrate", str(given), *flags).returncode == 0
    cases = {
        str(given): f"FILES: {given} is given twice",
        str(tmp_path / ".." / tmp_path.name / "link.jsonl"): "are the same file",
        str(link): "are the same file",
        str(copy): "hold the same bytes (sha256 ",
    }
    for second, expected in cases.items():
        done = run_cli("calibrate", str(given), second, *flags)
        assert done.returncode == 2, (second, done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0] and str(given) in lines[0] and second in lines[0], lines
        assert "count twice" in lines[0] and "Traceback" not in done.stderr


def test_a_calibrated_band_covers_the_model_and_generation_it_was_measured_on(tmp_path: Path) -> None:
    """A phase calibrated on the user's own measurements counts them as of the calibrated model and its GPU
    generation: the written profile's band says nothing of that model on that generation, and calls another
    model (of the same kind) or another generation outside it."""
    file, model, hardware, gpus, engine = CASES["sglang-serving-real"]  # 9 runs: enough for a band of its own
    cal = calibrate_files([FIXTURES / file], model=model, hardware=hardware, gpus=gpus, engine=engine)
    calibrated = [p for p, b in cal.bands.items() if "over this calibration" in b.basis]
    assert calibrated
    band = pool_band(str(write_calibration(cal, tmp_path / "cal.yaml")), tmp_path)
    for phase in calibrated:
        mine = getattr(band, phase)
        n = mine.points
        assert mine.kinds == (("dense", model, n),) and mine.generations == (("hopper", n),)
        assert mine.beyond(phase, None, kind="dense", model=model, generation="hopper") == ""
        other = mine.beyond(phase, None, kind="dense", model="llama-3.1-8b", generation="hopper")
        assert f"of a dense model other than {model}" in other
        assert "on blackwell GPUs" in mine.beyond(phase, None, kind="dense", model=model, generation="blackwell")


def _one_batch_scaled(tmp_path: Path, factor: float) -> Path:
    """The synthetic bench_one_batch run with its prefill and decode times multiplied by ``factor``."""
    run = json.loads((FIXTURES / "synthetic-sglang-bench-one-batch.jsonl").read_text().splitlines()[0])
    scaled = dict(
        run,
        prefill_latency=run["prefill_latency"] * factor,
        median_decode_latency=run["median_decode_latency"] * factor,
    )
    path = tmp_path / f"x{factor:g}.jsonl"
    path.write_text(json.dumps(scaled) + "\n")
    return path


def test_a_measurement_faster_than_the_datasheet_peak_is_refused(tmp_path: Path) -> None:
    """A prefill 1000x faster than measured (0.05 ms for 1,024 tokens of MiniMax-M2.5 on 8 x H200) is faster than
    the instance runs it with every FLOP and byte at peak: exit 2 naming the file and its line, nothing written
    (it was fitted, written, and given the base engine's 2.06x band)."""
    fast = _one_batch_scaled(tmp_path, 1e-3)
    out = tmp_path / "fast.yaml"
    done = run_cli("calibrate", str(fast), "--model", "minimax-m2.5", "--hardware", "h200", "--out", str(out))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"{fast}:1:" in done.stderr and "datasheet peak" in done.stderr and "prefill of 1,024 tokens" in done.stderr
    assert not out.exists()
    as_given = _one_batch_scaled(tmp_path, 1.0)  # the same run as timed: well above the bound
    assert run_cli("calibrate", str(as_given), "--model", "minimax-m2.5", "--hardware", "h200").returncode == 0


def test_a_band_never_claims_less_error_than_the_fit_shows_on_its_own_points(tmp_path: Path) -> None:
    """With too few measurements for a band of its own a phase takes the base engine's band, widened to the
    calibration's own worst in-sample error: a run 1000x slower than measured, which no term within its bounds
    fits, is not given the base engine's 2.06x (it was, with its fit off by 1,794x)."""
    slow = _one_batch_scaled(tmp_path, 1e3)
    cal = calibrate_files([slow], model="minimax-m2.5", hardware="h200", gpus=8, engine="sglang")
    for phase, band in cal.bands.items():
        worst = max(abs(np.log(p.fitted_s / p.measured_s)) for p in cal.points if p.phase == phase)
        assert band.factor >= np.exp(worst) * (1 - 1e-9), (phase, band.factor, np.exp(worst))
        assert band.factor > 2.5 and "widened to this calibration's own worst in-sample error" in band.basis


def test_a_file_that_records_another_model_is_noted(tmp_path: Path) -> None:
    """A result file's recorded model (vLLM's model_id, AIPerf's model_names) is compared with --model: a path
    naming the card's model passes silently, another model is noted on the screen, in --json and in the written
    profile (which still loads), and files recording different models are noted too (the model id was never
    read: a vLLM file of Llama-3.1-8B calibrated as MiniMax-M2.5 passed without a word)."""
    vllm = FIXTURES / "vllm-bench-serve-minimax-m2.5-conc4.json"  # model_id: .../models--MiniMaxAI--MiniMax-M2.5/...
    same = calibrate_files([vllm], model="minimax-m2.5", hardware="h200", gpus=8, engine="vllm")
    assert same.notes == ()
    other = json.loads(vllm.read_text())
    other["model_id"] = "meta-llama/Llama-3.1-8B"
    renamed = tmp_path / "llama.json"
    renamed.write_text(json.dumps(other))
    cal = calibrate_files([renamed], model="minimax-m2.5", hardware="h200", gpus=8, engine="vllm")
    assert len(cal.notes) == 1 and "'meta-llama/Llama-3.1-8B', not --model minimax-m2.5" in cal.notes[0]
    back = load_engine_profile(write_calibration(cal, tmp_path / "cal.yaml"))
    assert back.key == "vllm-calibrated"
    assert "meta-llama/Llama-3.1-8B" in (tmp_path / "cal.yaml").read_text()
    both = calibrate_files([vllm, renamed], model="minimax-m2.5", hardware="h200", gpus=8, engine="vllm")
    assert any("record 2 different models" in n for n in both.notes)
    done = run_cli("calibrate", str(renamed), "--model", "minimax-m2.5", "--hardware", "h200", "--engine", "vllm")
    assert done.returncode == 0 and "note: " in done.stdout and "meta-llama/Llama-3.1-8B" in done.stdout
