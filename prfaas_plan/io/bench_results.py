"""Result files of the standard serving benchmarks, read into the measurements a calibration can honestly use.

Formats (detected from each object's keys; one file holds one format):

- ``vllm-serving``: vLLM ``benchmarks/benchmark_serving.py --save-result`` / ``vllm bench serve --save-result``,
  one JSON object per run (keys ``*_ttft_ms``, ``*_tpot_ms``, ``*_itl_ms``, ``*_e2el_ms``, totals, load).
- ``sglang-bench-serving``: SGLang ``python -m sglang.bench_serving --output-file``, one JSON object per line
  (``*_ttft_ms``, ``*_itl_ms``, ``*_e2e_latency_ms``, ``random_input_len``, ...).
- ``sglang-bench-one-batch``: SGLang ``python -m sglang.bench_one_batch --result-filename``, one line per
  (batch, input, output): ``prefill_latency`` and ``median_decode_latency`` in seconds, no server.
- ``aiperf``: NVIDIA AIPerf ``profile_export_aiperf.json`` and GenAI-Perf ``profile_export_genai_perf.json``:
  one object whose metrics (``time_to_first_token``, ``inter_token_latency``, ...) hold ``avg``/``p50``/...;
  AIPerf 0.1 nests them under ``records`` and names two by short tags (``ttft``, ``ttst``). Their CSV exports
  (``profile_export_aiperf.csv``, ``profile_export_genai_perf.csv``) are read too: a ``Metric,avg,min,...``
  section of per-request metrics and a ``Metric,Value`` section of run totals, each row named
  ``Label (unit)``, numbers possibly written with thousands separators (GenAI-Perf's ``"1,146.31"``).

What is read (each measurement carries its assumption, in words, for the calibration's report):

- prefill: the mean (else median) TTFT of a serving run as the batch-1 prefill time at the run's mean input
  length, only where the run was at most one request at a time (``max_concurrency`` 1) or light enough that
  requests rarely overlapped in prefill: Little's law's mean number of requests in their TTFT (request
  throughput x mean TTFT) at most ``max_prefill_occupancy``. A ``bench_one_batch`` line of batch 1 gives its
  ``prefill_latency`` directly (engine only: no HTTP, tokenisation or scheduling, so no per-request cost).
- decode: the median inter-token latency (else TPOT) of a serving run as one decode step at the run's mean
  decode batch, from Little's law (output tokens per second x seconds per step), at a context of the mean input
  plus half the mean output; a ``bench_one_batch`` line's ``median_decode_latency`` at its ``batch_size`` and
  input + output / 2 tokens.

A JSON file may hold one object, one per line (JSONL), or objects one after another as ``jq .`` pretty-prints
them; a key given twice in one object is refused (``json`` would silently keep the last). Every file is read
through ``io.guard`` (regular files only, bounded bytes, lines and JSON nesting); every problem is one
``InputError`` naming the file, its line and the key.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InputError, Problem
from prfaas_plan.io.guard import (
    Limits,
    RepeatedKey,
    check_lines,
    decode_utf8,
    json_bound_problem,
    read_bytes,
    unique_keys,
)
from prfaas_plan.io.limits import MAX_STEP_S, MAX_TOKENS

#: A result file: 64 MiB (a vLLM run saved with ``--save-detailed`` lists every request's TTFT and inter-token
#: gaps, about 20 bytes a token: some hundred thousand output tokens), 1,000,000 lines (one run per line), and a
#: line as long as the file (a detailed vLLM result is one line).
BENCH_LIMITS = Limits(what="a benchmark result file", max_bytes=64 << 20, max_lines=1_000_000, max_line_bytes=64 << 20)
#: Default bound on Little's law's mean number of requests in their TTFT for a serving run's TTFT to stand for a
#: batch-1 prefill: at 0.2 a request finds another in prefill about one time in five, so the queueing it adds is
#: a fraction of one prefill time on average (an assumption stated in every calibration, not a measurement).
MAX_PREFILL_OCCUPANCY = 0.2
#: Most decode batch a measurement may claim (sequences).
MAX_BATCH = 1e6

Format = Literal["vllm-serving", "sglang-bench-serving", "sglang-bench-one-batch", "aiperf"]
FORMAT_NAMES: dict[str, str] = {
    "vllm-serving": "vLLM serving benchmark JSON (benchmark_serving.py --save-result / vllm bench serve)",
    "sglang-bench-serving": "SGLang bench_serving JSONL (--output-file)",
    "sglang-bench-one-batch": "SGLang bench_one_batch JSONL (--result-filename)",
    "aiperf": "NVIDIA AIPerf / GenAI-Perf profile export (JSON, or its CSV)",
}
_TIME_UNITS = {"ms": 1e-3, "s": 1.0, "sec": 1.0, "us": 1e-6, "ns": 1e-9}


@frozen
class BenchMeasurement:
    """One time read from a result file: a batch-1 prefill of ``tokens`` input tokens or a decode step of
    ``batch`` sequences at ``tokens`` of context, seconds; ``run`` is the object's line (JSONL) or 1."""

    file: str
    run: int
    format: str
    phase: Literal["prefill", "decode"]
    batch: int
    tokens: float
    measured_s: float
    statistic: str
    assumption: str
    includes_request_overhead: bool = True


@frozen
class BenchFile:
    """One result file: its format, SHA-256, how many runs it holds, what was read and what was not (why), and
    the model names its runs record (``recorded_models``: vLLM's ``model_id``, AIPerf's
    ``input_config.endpoint.model_names``; SGLang's results record none)."""

    file: str
    format: str
    sha256: str
    runs: int
    measurements: tuple[BenchMeasurement, ...]
    skipped: tuple[str, ...]
    synthetic: bool = False
    models: tuple[str, ...] = ()


def recorded_models(data: Mapping[str, Any]) -> list[str]:
    """The model names one result object records, as written (strings only; anything else is ignored)."""
    names: list[Any] = [data.get("model_id")]
    config = data.get("input_config")
    endpoint = config.get("endpoint") if isinstance(config, Mapping) else None
    listed = endpoint.get("model_names") if isinstance(endpoint, Mapping) else None
    if isinstance(listed, list):
        names += listed
    return [n for n in names if isinstance(n, str) and n.strip()]


class _Run:
    """One JSON object of a result file, with typed, located access to its keys. ``where`` gives, for a key of
    ``data``, the name and line it was (or would have been) read under where those differ (AIPerf 0.1's
    ``records.ttft``, a CSV row), so a problem names what the file says."""

    def __init__(
        self,
        data: Mapping[str, Any],
        display: str,
        line: int | None,
        where: Callable[[str], tuple[str, int | None]] | None = None,
        *,
        rows: bool = False,
    ) -> None:
        self.data, self.display, self.line = data, display, line
        self.where = where or (lambda key: (key, None))
        self.rows = rows  # read from a CSV export's rows

    def problem(self, key: str, message: str) -> InputError:
        head, dot, rest = key.partition(".")
        shown, line = self.where(head)
        return InputError(
            Problem(
                file=self.display,
                line=line if line is not None else self.line,
                field=shown + dot + rest,
                message=message,
            )
        )

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def number(
        self,
        key: str,
        *,
        gt: float = 0.0,
        le: float = math.inf,
        owner: Mapping[str, Any] | None = None,
        field: str | None = None,
    ) -> float:
        """The finite number at ``key`` (> gt, <= le); missing, wrong type, NaN or out of range: InputError."""
        source = self.data if owner is None else owner
        name = field or key
        if key not in source:
            raise self.problem(name, "missing")
        value = source[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.problem(name, f"expected a number, got {_shown(value)}")
        value = float(value)
        if math.isnan(value):
            raise self.problem(name, "is NaN (not a number)")
        if math.isinf(value) or not (gt < value <= le):
            bound = f"in ({gt:g}, {le:g}]" if math.isfinite(le) else f"> {gt:g}"
            raise self.problem(name, f"must be {bound}, got {value:g}")
        return value

    def first(self, keys: Sequence[str]) -> str | None:
        """The first of ``keys`` present (not null)."""
        return next((k for k in keys if self.has(k)), None)


def _shown(value: Any) -> str:
    text = json.dumps(value)[:40] if not isinstance(value, float) else repr(value)
    return f"{type(value).__name__} {text}"


def _constant(name: str) -> float:
    # SGLang writes an unbounded request rate as the bare JSON constant Infinity; NaN can stand for an empty
    # statistic. Both are read, and refused only where a key the calibration uses holds one.
    return {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}[name]


class _DuplicateKeyError(InputError):
    """A JSON object of a result file repeats a key: refused wherever the file is read (as one value, as JSONL
    or as a stream), never taken for a file of another layout."""


def _duplicate_key(text: str, start: int, display: str, line: int | None, key: str) -> _DuplicateKeyError:
    """The problem of the value at ``text[start:]`` repeating ``key``: the repeated member's line (``line`` for
    one JSONL line) and dotted path, and where it was first given, as the YAML reader says it."""
    found = _repeat_in(text, start)
    if found is None:  # not located (cannot happen on text the parser read): the key, on the value's line
        at = line if line is not None else text.count("\n", 0, start) + 1
        return _DuplicateKeyError(Problem(file=display, line=at, field=key, message="duplicate key"))
    path, first, second = found
    first_line, second_line = (text.count("\n", 0, i) + 1 if line is None else line for i in (first, second))
    return _DuplicateKeyError(
        Problem(
            file=display,
            line=second_line,
            field=path,
            message=f"duplicate key (first given on line {first_line})",
        )
    )


def _repeat_in(text: str, start: int) -> tuple[str, int, int] | None:
    """The first repeated key (in the order the text gives them) of the JSON value at ``text[start:]``: its
    dotted path and the offsets of its first and second occurrence; None when there is none. Each value is
    checked whole by the C parser and walked member by member only when a repeat is inside it, so the cost
    is that of parsing the text once per level of nesting (``MAX_JSON_DEPTH`` at most)."""
    checked = json.JSONDecoder(parse_constant=_constant, object_pairs_hook=unique_keys)
    plain = json.JSONDecoder(parse_constant=_constant)

    def skip(i: int) -> int:
        return _JSON_SPACE.match(text, i).end()  # type: ignore[union-attr]  # matches the empty string

    def walk(i: int, path: str) -> tuple[str, int, int] | int:
        """The repeat inside the value at ``i`` (path, first, second), else the offset just past the value."""
        try:
            return int(checked.raw_decode(text, i)[1])
        except RepeatedKey:
            pass
        closing = "}" if text[i] == "{" else "]"
        seen: dict[str, int] = {}
        j, n = skip(i + 1), 0
        while text[j] != closing:
            name = f"{path}[{n}]"
            if closing == "}":
                key, after = plain.raw_decode(text, j)
                name = f"{path}.{key}" if path else str(key)
                if key in seen:
                    return name, seen[key], j
                seen[key] = j
                j = skip(skip(after) + 1)  # past the ':'
            found = walk(j, name)
            if not isinstance(found, int):
                return found
            j, n = skip(found), n + 1
            if text[j] == ",":
                j = skip(j + 1)
        return j + 1

    try:
        found = walk(skip(start), "")
    except (ValueError, IndexError, RecursionError):
        return None
    return None if isinstance(found, int) else found


def _loads(text: str, display: str, line: int | None) -> Any:
    bound = json_bound_problem(text)
    if bound is not None:
        at = line if line is not None else text.count("\n", 0, bound[0]) + 1
        raise InputError(Problem(file=display, line=at, message=f"malformed JSON: {bound[1]}"))
    try:
        return json.loads(text, parse_constant=_constant, object_pairs_hook=unique_keys)
    except RepeatedKey as exc:
        raise _duplicate_key(text, 0, display, line, exc.key) from None
    except json.JSONDecodeError as exc:
        at = line if line is not None else exc.lineno
        raise InputError(
            Problem(file=display, line=at, message=f"malformed JSON: {exc.msg} (column {exc.colno})")
        ) from None
    except (ValueError, RecursionError) as exc:
        raise InputError(Problem(file=display, line=line, message=f"malformed JSON: {exc}")) from None


#: A first line that starts a CSV export with another separator than the comma AIPerf writes.
_OTHER_CSV = re.compile(r"\s*Metric[;\t|]")


def _objects(text: str, display: str) -> list[tuple[int | None, Any]]:
    """The file's JSON objects: the whole text as one value, else one value per non-empty line (JSONL), else a
    stream of values (``_stream``: JSONL pretty-printed, as ``jq .`` prints it)."""
    if _OTHER_CSV.match(text):
        message = (
            "an AIPerf/GenAI-Perf CSV export with another separator than the comma: its first line must begin "
            "'Metric,' (re-export it, or replace the separators with commas)"
        )
        raise InputError(Problem(file=display, line=1, message=message))
    if not text.strip():
        raise InputError(Problem(file=display, message="empty: no benchmark result in it"))
    try:
        return [(None, _loads(text, display, None))]
    except _DuplicateKeyError:
        raise
    except InputError:
        lines = [(n, s) for n, s in enumerate(text.splitlines(), start=1) if s.strip()]
        if len(lines) < 2:
            raise
    try:
        return [(n, _loads(s, display, n)) for n, s in lines]
    except _DuplicateKeyError:
        raise
    except InputError:
        stream = _stream(text, display)
        if stream is None:
            raise
        return stream


_JSON_SPACE = re.compile(r"[ \t\n\r]*")


def _stream(text: str, display: str) -> list[tuple[int | None, Any]] | None:
    """The JSON values of ``text`` one after another, separated by nothing but white space, each with the line
    it starts on; None unless it holds two or more and nothing else (the caller then reports the JSONL error),
    or where it is beyond the bounds on depth and digits. _DuplicateKeyError where a value repeats a key."""
    if json_bound_problem(text) is not None:
        return None
    decoder = json.JSONDecoder(parse_constant=_constant, object_pairs_hook=unique_keys)
    out: list[tuple[int | None, Any]] = []
    at, line = 0, 1
    try:
        while True:
            start = _JSON_SPACE.match(text, at).end()  # type: ignore[union-attr]  # matches the empty string
            if start == len(text):
                break
            line += text.count("\n", at, start)
            try:
                value, end = decoder.raw_decode(text, start)
            except RepeatedKey as exc:
                raise _duplicate_key(text, start, display, None, exc.key) from None
            out.append((line, value))
            line += text.count("\n", start, end)
            at = end
    except (ValueError, RecursionError):
        return None
    return out if len(out) >= 2 else None


#: AIPerf 0.1's short tags for metrics that GenAI-Perf (and later AIPerf) name in full.
_AIPERF_TAGS = {"ttft": "time_to_first_token", "ttst": "time_to_second_token"}


def _aiperf_metrics(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """Where an AIPerf/GenAI-Perf object keeps its metric objects: ``records`` (AIPerf 0.1) or the top level."""
    records = data.get("records")
    return records if isinstance(records, Mapping) else data


def detect_format(data: Mapping[str, Any]) -> Format | None:
    """The benchmark that wrote one result object, from its keys; None when none matches."""
    keys = set(data)
    if {"prefill_latency", "batch_size", "input_len"} <= keys:
        return "sglang-bench-one-batch"
    metrics = _aiperf_metrics(data)
    if any(isinstance(metrics.get(k), Mapping) for k in ("time_to_first_token", "ttft", "inter_token_latency")):
        return "aiperf"
    if any(k.endswith("_e2el_ms") for k in keys):
        return "vllm-serving"
    if any(k.endswith("_e2e_latency_ms") for k in keys) or "random_input_len" in keys:
        return "sglang-bench-serving"
    if "completed" in keys and any(k.endswith("_ttft_ms") for k in keys):
        return "vllm-serving"  # vLLM before 0.6 (summer 2024) wrote no end-to-end latency
    return None


_UNKNOWN = (
    "not a result of a known benchmark: no 'prefill_latency' (SGLang bench_one_batch), 'time_to_first_token' "
    "(AIPerf/GenAI-Perf), '*_e2el_ms' (vLLM serving) or '*_e2e_latency_ms' (SGLang bench_serving) key, and "
    "not an AIPerf/GenAI-Perf CSV export (first line 'Metric,...')"
)


#: Result files of neighbouring tools that hold no aggregate a calibration reads, by a key set that marks them,
#: with what to give instead.
_NEAR_MISSES = (
    (
        {"metadata", "metrics"},
        "AIPerf's per-request records (profile_export.jsonl); give its aggregate export, profile_export_aiperf.json "
        "or .csv, from the same directory",
    ),
    (
        {"avg_latency", "latencies"},
        "vLLM's benchmark_latency output (whole-request latencies, no TTFT or inter-token latency); give a "
        "'vllm bench serve --save-result' JSON",
    ),
    (
        {"last_ttft", "input_throughput"},
        "SGLang's bench_one_batch_server output; give bench_one_batch (--result-filename) or bench_serving "
        "(--output-file) results",
    ),
)


def _unknown(data: Mapping[str, Any]) -> str:
    """Why an object is not a known result, naming the neighbouring tool's file where its keys mark one."""
    for keys, what in _NEAR_MISSES:
        if keys <= set(data):
            return f"{what}: no aggregate this reader takes"
    return _UNKNOWN


def _aiperf_run(data: Mapping[str, Any], display: str, line: int | None) -> _Run:
    """An AIPerf/GenAI-Perf object with its metrics under their GenAI-Perf names at the top level (problems
    still name ``records.ttft`` where AIPerf 0.1 wrote that)."""
    metrics = _aiperf_metrics(data)
    if metrics is data:
        return _Run(data, display, line)
    view = {**data, **{_AIPERF_TAGS.get(key, key): value for key, value in metrics.items()}}
    # A metric is named as the file wrote it; a missing one as AIPerf 0.1 would have.
    written = {_AIPERF_TAGS.get(key, key): key for key in metrics} | {
        full: short for short, full in _AIPERF_TAGS.items() if full not in metrics
    }
    return _Run(view, display, line, lambda name: (f"records.{written.get(name, name)}", None))


_CSV_ROW_NAME = re.compile(r"^(?P<label>.*?)\s*(?:\((?P<unit>[^()]*)\))?\s*$")
#: Longest metric name and number a CSV export's row may hold (AIPerf writes "Output Token Throughput Per User
#: (tokens/sec/user)", 50 characters, and two-decimal numbers): longer cells are refused or read as text.
_CSV_MAX_NAME, _CSV_MAX_NUMBER = 200, 64
#: Most metric rows a CSV export may hold (AIPerf 0.1 writes 22; with GPU telemetry some dozens more).
_CSV_MAX_ROWS = 10_000
_CSV_NUMBER = re.compile(r"^[+-]?(?:\d{1,3}(?:,\d{3})+|\d*)(?:\.\d*)?(?:[eE][+-]?\d{1,4})?$")


def _csv_run(text: str, display: str) -> _Run:
    """An AIPerf/GenAI-Perf CSV export as one run whose metric objects are keyed as in their JSON exports: the
    row ``Time To First Token (ms),120.5,...`` under a ``Metric,avg,...`` header is ``time_to_first_token``
    with unit ``ms`` and ``avg`` 120.5; a ``Metric,Value`` row's value is its ``avg``."""
    metrics: dict[str, dict[str, Any]] = {}
    where: dict[str, tuple[str, int | None]] = {}
    header: list[str] | None = None
    reader = csv.reader(text.splitlines())
    try:
        for row in reader:
            at = reader.line_num
            cells = [c.strip() for c in row]
            if not any(cells):
                header = None
                continue
            if cells[0] == "Metric":
                header = ["avg" if c.lower() == "value" else c.lower() for c in cells[1:]]
                continue
            if header is None:
                message = f"row {cells[0][:40]!r} comes before any 'Metric,...' header"
                raise InputError(Problem(file=display, line=at, message=message))
            if len(cells[0]) > _CSV_MAX_NAME:
                message = f"a metric name longer than {_CSV_MAX_NAME} characters"
                raise InputError(Problem(file=display, line=at, message=message))
            found = _CSV_ROW_NAME.match(cells[0])
            label, unit = (found["label"], found["unit"] or "") if found else (cells[0], "")
            name = re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")
            if len(metrics) >= _CSV_MAX_ROWS:
                message = f"more than {_CSV_MAX_ROWS:,} metric rows (an export has a few dozen)"
                raise InputError(Problem(file=display, line=at, message=message))
            if name in metrics:
                raise InputError(Problem(file=display, line=at, field=cells[0], message="a second row of this metric"))
            values: dict[str, Any] = {"unit": unit}
            for stat, cell in zip(header, cells[1:], strict=False):
                if not cell:
                    values[stat] = None
                elif len(cell) <= _CSV_MAX_NUMBER and _CSV_NUMBER.match(cell) and any(ch.isdigit() for ch in cell):
                    values[stat] = float(cell.replace(",", ""))
                else:
                    values[stat] = cell[:40]  # refused as "expected a number" if the calibration reads it
            metrics[name] = values
            where[name] = (cells[0], at)
    except csv.Error as exc:
        raise InputError(Problem(file=display, line=reader.line_num, message=f"malformed CSV: {exc}")) from None
    if not metrics:
        raise InputError(Problem(file=display, message="a CSV export with no metric rows"))
    return _Run(metrics, display, None, lambda name: where.get(name, (name, None)), rows=True)


#: An AIPerf/GenAI-Perf CSV export's start: its first non-blank line begins ``Metric,``.
_CSV_EXPORT = re.compile(r"\s*Metric,")


class TooManyMeasurements(InputError):
    """``read_bench_file`` read more than its ``max_measurements``: it stopped at the run that passed them
    (``line``: None for a file of one run), with ``count`` read from the file."""

    def __init__(self, display: str, line: int | None, count: int, limit: int) -> None:
        message = f"{count:,} measurements read, more than the {limit:,} allowed: reading stopped here"
        super().__init__(Problem(file=display, line=line, message=message))
        self.display, self.line, self.count = display, line, count


def read_bench_file(
    path: str | Path,
    display: str | None = None,
    *,
    max_prefill_occupancy: float = MAX_PREFILL_OCCUPANCY,
    max_measurements: int | None = None,
) -> BenchFile:
    """Read one result file (module docstring). InputError naming the file, line and key for anything that is
    not a well-formed result of one known benchmark; TooManyMeasurements as soon as more than
    ``max_measurements`` are read (the runs after it are not looked at)."""
    shown = display or str(path)
    raw = read_bytes(path, shown, BENCH_LIMITS)
    check_lines(raw, shown, BENCH_LIMITS)
    text = decode_utf8(raw, shown)
    if _CSV_EXPORT.match(text):
        got, why = _aiperf(_csv_run(text, shown), max_prefill_occupancy)
        if max_measurements is not None and len(got) > max_measurements:
            raise TooManyMeasurements(shown, None, len(got), max_measurements)
        return BenchFile(
            file=shown,
            format="aiperf",
            sha256=hashlib.sha256(raw).hexdigest(),
            runs=1,
            measurements=tuple(got),
            skipped=tuple(f"run: {w}" for w in why),
        )
    objects = _objects(text, shown)
    formats: list[Format] = []
    measurements: list[BenchMeasurement] = []
    skipped: list[str] = []
    models: list[str] = []
    synthetic = False
    for line, data in objects:
        if not isinstance(data, Mapping):
            raise InputError(Problem(file=shown, line=line, message=f"expected a JSON object, got {_shown(data)}"))
        fmt = detect_format(data)
        if fmt is None:
            raise InputError(Problem(file=shown, line=line, message=_unknown(data)))
        if formats and fmt != formats[0]:
            raise InputError(
                Problem(file=shown, line=line, message=f"a {fmt} result after {formats[0]} ones: one format per file")
            )
        formats.append(fmt)
        synthetic = synthetic or "_synthetic" in data
        models += [m for m in recorded_models(data) if m not in models]
        run = _Run(data, shown, line)
        if fmt == "sglang-bench-one-batch":
            got, why = _one_batch(run)
        elif fmt == "aiperf":
            got, why = _aiperf(_aiperf_run(data, shown, line), max_prefill_occupancy)
        else:
            got, why = _serving(run, fmt, max_prefill_occupancy)
        measurements += got
        if max_measurements is not None and len(measurements) > max_measurements:
            raise TooManyMeasurements(shown, line, len(measurements), max_measurements)
        skipped += [f"{'line ' + str(line) if line else 'run'}: {w}" for w in why]
    return BenchFile(
        file=shown,
        format=formats[0],
        sha256=hashlib.sha256(raw).hexdigest(),
        runs=len(objects),
        measurements=tuple(measurements),
        skipped=tuple(skipped),
        synthetic=synthetic,
        models=tuple(models),
    )


def _measurement(run: _Run, fmt: str, phase: Literal["prefill", "decode"], **fields: Any) -> BenchMeasurement:
    tokens, measured = fields["tokens"], fields["measured_s"]
    if not (1 <= tokens <= MAX_TOKENS):
        raise run.problem(fields.pop("tokens_key"), f"{tokens:g} tokens is outside 1..{MAX_TOKENS:g}")
    fields.pop("tokens_key", None)
    if not (0 < measured <= MAX_STEP_S):
        raise run.problem(fields["statistic"], f"{measured:g} s is outside (0, {MAX_STEP_S:g}]")
    return BenchMeasurement(file=run.display, run=run.line or 1, format=fmt, phase=phase, **fields)


def _serving(run: _Run, fmt: Format, max_occupancy: float) -> tuple[list[BenchMeasurement], list[str]]:
    """A vLLM or SGLang serving run: TTFT as a batch-1 prefill when light, ITL as a decode step."""
    completed = run.number("completed", le=1e9)
    mean_in = run.number("total_input_tokens", le=MAX_TOKENS * 1e9) / completed
    mean_out = run.number("total_output_tokens", le=MAX_TOKENS * 1e9) / completed
    duration = run.number("duration", le=1e9) if run.has("duration") else None
    out: list[BenchMeasurement] = []
    skipped: list[str] = []
    ttft_key = run.first(("mean_ttft_ms", "median_ttft_ms"))
    if ttft_key is None:
        raise run.problem("mean_ttft_ms", "missing (nor median_ttft_ms): no time to first token")
    ttft_s = run.number(ttft_key, le=MAX_STEP_S * 1e3) * 1e-3
    if run.has("request_throughput"):
        rate = run.number("request_throughput", le=1e9)
    elif duration is not None:
        rate = completed / duration
    else:
        raise run.problem("request_throughput", "missing (nor duration): cannot tell how loaded the run was")
    concurrency = run.data.get("max_concurrency")
    occupancy = rate * ttft_s
    if concurrency == 1 or occupancy <= max_occupancy:
        why = (
            "one request at a time (max_concurrency 1)"
            if concurrency == 1
            else f"light load: {occupancy:.3f} requests in their TTFT on average (Little's law: {rate:.3g} req/s x "
            f"{ttft_s:.3g} s <= {max_occupancy:g})"
        )
        out.append(
            _measurement(
                run,
                fmt,
                "prefill",
                batch=1,
                tokens=mean_in,
                tokens_key="total_input_tokens",
                measured_s=ttft_s,
                statistic=ttft_key,
                assumption=f"TTFT ({ttft_key}) as the batch-1 prefill at the mean input length {mean_in:.0f} tokens; "
                f"{why}; includes HTTP, tokenisation and scheduling (the engine's per-request cost) and any decode "
                "step running beside it",
            )
        )
    else:
        skipped.append(
            f"TTFT not used as a prefill time: {occupancy:.2f} requests in their TTFT on average (Little's law: "
            f"{rate:.3g} req/s x {ttft_s:.3g} s > {max_occupancy:g}), so it includes queueing and batched prefills"
        )
    step_key = run.first(("median_itl_ms", "median_tpot_ms", "mean_tpot_ms", "mean_itl_ms"))
    if step_key is None:
        skipped.append("no inter-token latency (median_itl_ms, median_tpot_ms, mean_tpot_ms or mean_itl_ms)")
        return out, skipped
    step_s = run.number(step_key, le=MAX_STEP_S * 1e3) * 1e-3
    if mean_out <= 1:
        skipped.append(f"mean output {mean_out:.2f} tokens: no decode steps to time")
        return out, skipped
    if run.has("output_throughput"):
        tokens_per_s = run.number("output_throughput", le=1e12)
    elif duration is not None:
        tokens_per_s = mean_out * completed / duration
    else:
        raise run.problem("output_throughput", "missing (nor duration): cannot estimate the decode batch")
    batch = tokens_per_s * step_s
    if batch > MAX_BATCH:
        raise run.problem("output_throughput", f"implies a decode batch of {batch:g} (more than {MAX_BATCH:g})")
    context = mean_in + mean_out / 2
    out.append(
        _measurement(
            run,
            fmt,
            "decode",
            batch=max(1, round(batch)),
            tokens=context,
            tokens_key="total_input_tokens",
            measured_s=step_s,
            statistic=step_key,
            assumption=f"{step_key} as one decode step at the run's mean batch {batch:.2f} (Little's law: "
            f"{tokens_per_s:.4g} output tok/s x {step_s:.4g} s per step; rounded to {max(1, round(batch))}"
            + (f", max_concurrency {concurrency}" if isinstance(concurrency, int) else "")
            + f") at a context of mean input + half the mean output, {context:.0f} tokens",
        )
    )
    return out, skipped


def _one_batch(run: _Run) -> tuple[list[BenchMeasurement], list[str]]:
    """A ``bench_one_batch`` line: batch-1 prefill latency, and the median decode step at its batch."""
    fmt = "sglang-bench-one-batch"
    batch = run.number("batch_size", le=MAX_BATCH)
    input_len = run.number("input_len", le=MAX_TOKENS)
    output_len = run.number("output_len", le=MAX_TOKENS) if run.has("output_len") else 1.0
    prefill_s = run.number("prefill_latency", le=MAX_STEP_S)
    out: list[BenchMeasurement] = []
    skipped: list[str] = []
    if batch != int(batch):
        raise run.problem("batch_size", f"must be a whole number, got {batch:g}")
    if batch == 1:
        out.append(
            _measurement(
                run,
                fmt,
                "prefill",
                batch=1,
                tokens=input_len,
                tokens_key="input_len",
                measured_s=prefill_s,
                statistic="prefill_latency",
                assumption=f"prefill_latency of batch 1 at {input_len:.0f} tokens: engine only (no server), so no "
                "per-request cost is priced for it",
                includes_request_overhead=False,
            )
        )
    else:
        skipped.append(f"prefill of a static batch of {batch:g} is not a batch-1 prefill: not used")
    if output_len > 1 and run.has("median_decode_latency"):
        step = run.number("median_decode_latency", le=MAX_STEP_S)
        context = input_len + output_len / 2
        out.append(
            _measurement(
                run,
                fmt,
                "decode",
                batch=int(batch),
                tokens=context,
                tokens_key="input_len",
                measured_s=step,
                statistic="median_decode_latency",
                assumption=f"median decode step of a static batch of {batch:g} at input + half the output, "
                f"{context:.0f} tokens of context (engine only)",
                includes_request_overhead=False,
            )
        )
    elif output_len > 1:
        raise run.problem("median_decode_latency", f"missing although output_len is {output_len:g}")
    return out, skipped


def _metric(run: _Run, name: str, stats: Sequence[str], *, time: bool) -> tuple[float, str]:
    """An AIPerf metric object's first present statistic (a time in seconds when ``time``)."""
    obj = run.data.get(name)
    if obj is None:
        csv_row = " (no row named like '" + name.replace("_", " ").capitalize() + " (unit)')" if run.rows else ""
        raise run.problem(name, "missing" + csv_row)
    if not isinstance(obj, Mapping):
        raise run.problem(name, f"expected a metric object with 'avg', got {_shown(obj)}")
    stat = next((s for s in stats if obj.get(s) is not None), None)
    if stat is None:
        raise run.problem(f"{name}.{stats[0]}", "missing")
    shown = run.where(name)[0]
    value = run.number(stat, owner=obj, field=f"{name}.{stat}", le=1e15)
    if time:
        unit = obj.get("unit", "ms")
        if unit not in _TIME_UNITS:
            raise run.problem(f"{name}.unit", f"unknown time unit {_shown(unit)}; known: {', '.join(_TIME_UNITS)}")
        value *= _TIME_UNITS[unit]
    return value, f"{shown}.{stat}"


def _configured_concurrency(config: Any) -> Any:
    """The concurrency an AIPerf/GenAI-Perf run was set to, where its ``input_config`` says (AIPerf's
    ``loadgen.concurrency``, GenAI-Perf's ``perf_analyzer.stimulus.concurrency`` or ``concurrency``); else None.
    A CSV export does not record it."""
    for path in (("loadgen", "concurrency"), ("perf_analyzer", "stimulus", "concurrency"), ("concurrency",)):
        node = config
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        if node is not None:
            return node
    return None


def _aiperf(run: _Run, max_occupancy: float) -> tuple[list[BenchMeasurement], list[str]]:
    """An AIPerf / GenAI-Perf export: TTFT as a prefill when light, ITL as a decode step (as ``_serving``)."""
    fmt = "aiperf"
    mean_in, _ = _metric(run, "input_sequence_length", ("avg", "p50"), time=False)
    mean_out, _ = _metric(run, "output_sequence_length", ("avg", "p50"), time=False)
    ttft_s, ttft_key = _metric(run, "time_to_first_token", ("avg", "p50"), time=True)
    rate, _ = _metric(run, "request_throughput", ("avg",), time=False)
    concurrency = _configured_concurrency(run.data.get("input_config"))
    said = f"concurrency {str(concurrency)[:20]}" if concurrency is not None else "concurrency not recorded"
    out: list[BenchMeasurement] = []
    skipped: list[str] = []
    occupancy = rate * ttft_s
    if concurrency == 1 or occupancy <= max_occupancy:
        out.append(
            _measurement(
                run,
                fmt,
                "prefill",
                batch=1,
                tokens=mean_in,
                tokens_key="input_sequence_length",
                measured_s=ttft_s,
                statistic=ttft_key,
                assumption=f"TTFT ({ttft_key}) as the batch-1 prefill at the mean input length {mean_in:.0f} tokens; "
                f"{occupancy:.3f} requests in their TTFT on average (Little's law), {said}; "
                "includes the engine's per-request cost",
            )
        )
    else:
        skipped.append(
            f"TTFT not used as a prefill time: {occupancy:.2f} requests in their TTFT on average (Little's law) "
            f"> {max_occupancy:g}"
        )
    if mean_out <= 1:
        skipped.append("mean output at most 1 token: no decode steps to time")
        return out, skipped
    step_s, step_key = _metric(run, "inter_token_latency", ("p50", "avg"), time=True)
    tokens_per_s, _ = _metric(run, "output_token_throughput", ("avg",), time=False)
    batch = tokens_per_s * step_s
    if batch > MAX_BATCH:
        raise run.problem("output_token_throughput", f"implies a decode batch of {batch:g} (more than {MAX_BATCH:g})")
    context = mean_in + mean_out / 2
    out.append(
        _measurement(
            run,
            fmt,
            "decode",
            batch=max(1, round(batch)),
            tokens=context,
            tokens_key="input_sequence_length",
            measured_s=step_s,
            statistic=step_key,
            assumption=f"{step_key} as one decode step at the mean batch {batch:.2f} (Little's law: {tokens_per_s:.4g} "
            f"output tok/s x {step_s:.4g} s; {said}) at mean input + half the mean output, "
            f"{context:.0f} tokens",
        )
    )
    return out, skipped
