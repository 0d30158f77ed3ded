"""Read request traces into ``Trace`` specs: Mooncake JSONL and Azure LLM inference 2023 CSV.

Formats (workloads/traces/PROVENANCE.md describes the four public traces shipped with the package):

- ``.jsonl``, Mooncake FAST'25 traces: one JSON object per line with ``timestamp`` (milliseconds since the
  trace start), ``input_length`` and ``output_length`` (tokens) and, optionally, ``hash_ids``, the ids of
  the request's 512-token prefix blocks.
- ``.csv``, Azure LLM inference trace 2023: header ``TIMESTAMP,ContextTokens,GeneratedTokens``, with
  ``TIMESTAMP`` a wall-clock time "YYYY-MM-DD HH:MM:SS.fffffff" (100 ns digits).

Every bad line is reported (up to ``MAX_PROBLEMS``), each with the file, its 1-based line and the field.
"""

from __future__ import annotations

import csv
import functools
import json
import math
import os
import re
import sys
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

from prfaas_plan.errors import InputError, Problem
from prfaas_plan.io.guard import (
    MAX_JSON_DEPTH,
    TRACE_LIMITS,
    RepeatedKey,
    iter_lines,
    json_bound_problem,
    open_regular,
    unique_keys,
)
from prfaas_plan.spec.trace import Trace

#: Tokens per prefix block in Mooncake's ``hash_ids`` (Mooncake FAST25-release/README.md;
#: len(hash_ids) == ceil(input_length / 512) holds on every row of both shipped Mooncake traces).
MOONCAKE_BLOCK_TOKENS = 512
#: At most this many problems are listed one by one; the rest are counted in one closing problem.
MAX_PROBLEMS = 20

#: Largest token count a request may have (input or output). The longest context windows of current models
#: are about 10 million tokens (Llama 4 Scout); larger counts are corrupt data and would overflow the
#: KV-size and prefill-time curves' domain.
MAX_TOKENS = 10_000_000
#: Longest span a trace may cover, s (a leap year). The public traces span an hour to a week; longer spans
#: are corrupt timestamps (milliseconds read as microseconds, epoch offsets), and in float64 seconds a
#: year still resolves the Azure traces' 100 ns digits to about 4 ns.
MAX_SPAN_S = 366 * 86_400.0

#: Largest trace file read, bytes (1 GiB). The shipped traces are 0.3-3 MB and the largest public week-long
#: request logs a few hundred MB; a line is at least about 30 bytes, so this bounds a trace to about 36
#: million requests, and the arrays kept per request (24 bytes, plus 8 per Mooncake block) to about 1 GiB
#: for Azure traces and a few GiB for Mooncake ones: within this workplace's memory, refused beyond.
MAX_TRACE_BYTES = TRACE_LIMITS.max_bytes

MOONCAKE_KEYS = ("timestamp", "input_length", "output_length")
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_MS_PER_S = 1000.0
_S_PER_DAY = 86_400

#: Built-in traces by name: the public traces shipped in ``workloads/traces/`` (provenance, licences and
#: checksums in workloads/traces/PROVENANCE.md).
BUILTIN_TRACES: Mapping[str, str] = MappingProxyType(
    {
        "mooncake-conversation": "conversation_trace.jsonl",
        "mooncake-synthetic": "synthetic_trace.jsonl",
        "azure-code": "AzureLLMInferenceTrace_code.csv",
        "azure-conv": "AzureLLMInferenceTrace_conv.csv",
    }
)
_TRACE_SUFFIXES = (".jsonl", ".csv")

_JSON_DECODE = json.JSONDecoder().raw_decode
_FLOAT_MAX = sys.float_info.max
#: (timestamp ms, input tokens, output tokens) of one Mooncake line, None where the field is missing or bad.
_Fields = tuple[float | None, int | None, int | None]
_WALL_CLOCK = re.compile(r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}):(\d{2}(?:\.\d{1,9})?)")


@dataclass(slots=True)
class _Problems:
    """Collects problems of one file, listing the first ``MAX_PROBLEMS`` and counting the rest."""

    file: str
    listed: list[Problem] = field(default_factory=list)
    unlisted: int = 0

    def add(self, line: int | None, field_name: str | None, message: str) -> None:
        if len(self.listed) < MAX_PROBLEMS:
            self.listed.append(Problem(message=message, file=self.file, line=line, field=field_name))
        else:
            self.unlisted += 1

    def __bool__(self) -> bool:
        return bool(self.listed)

    def raise_if_any(self) -> None:
        if not self.listed:
            return
        problems = list(self.listed)
        if self.unlisted:
            problems.append(Problem(message=f"... and {self.unlisted} more problems", file=self.file))
        raise InputError(problems)


def resolve_trace_path(name: str | os.PathLike[str]) -> Path:
    """A trace argument: a path to a ``.jsonl`` or ``.csv`` file, or the name of a built-in trace
    (``BUILTIN_TRACES``: mooncake-conversation, mooncake-synthetic, azure-code, azure-conv).

    A path (anything with a trace suffix, or an existing file) wins over a built-in name. Built-in files are
    found where the built-in scenarios are (``builtin_root()``): the installed wheel, or the source tree.
    Raises ``InputError`` naming the built-in traces when ``name`` is neither.
    """
    # Imported here: io.scenario pulls in the whole spec and physics stack, which reading a trace by path
    # does not need; the built-in root must stay the one place that knows where shipped data live.
    from prfaas_plan.io.paths import builtin_root

    path = Path(name)
    if path.suffix.lower() in _TRACE_SUFFIXES or _exists(path):
        return path
    text = os.fspath(name)
    if text in BUILTIN_TRACES:
        return builtin_root() / "workloads" / "traces" / BUILTIN_TRACES[text]
    from prfaas_plan.io.yamlsrc import suggest

    raise InputError(
        Problem(
            file=text,
            message=f"no such trace file, and not a built-in trace{suggest(text, BUILTIN_TRACES)}; "
            f"built-in traces: {', '.join(sorted(BUILTIN_TRACES))}",
        )
    )


def _exists(path: Path) -> bool:
    """``path.exists()``, False for a name the file system refuses (too long, for one) instead of raising."""
    try:
        return path.exists()
    except OSError:
        return False


def read_trace(path: str | os.PathLike[str], *, prefix_cache: bool = False, max_requests: int | None = None) -> Trace:
    """Read a request trace, choosing the format by extension: ``.jsonl`` Mooncake, ``.csv`` Azure 2023.

    Arrival times become seconds since the first request. With ``prefix_cache=True`` (Mooncake only) the
    cached tokens of each request are those an infinite prefix cache would hold, replaying the trace in
    arrival order: a block hits only if it and every block before it in the request appeared in an earlier
    request; cached = min(hits · 512, input_length). Without it, ``cached_tokens`` is None.

    ``max_requests``: read only the first that many request rows, good or bad (blank lines do not count; the
    rest of the file is neither read nor checked, and no line past them is read), so that simulating a few
    requests of a huge trace costs what those requests cost, in time and memory. The file's size limit
    (``MAX_TRACE_BYTES``) still applies, checked before reading; the problems listed are those of the rows read.

    Raises ``InputError`` listing every bad line (file, 1-based line, field): a missing file or column,
    malformed JSON, non-numeric or negative lengths, timestamps that go backwards, or an empty trace; and
    naming the file when it is not a regular file or is beyond ``guard.TRACE_LIMITS`` (bytes, lines, line
    length).
    """
    file = os.fspath(path)
    suffix = Path(file).suffix.lower()
    if max_requests is not None and max_requests < 1:
        raise ValueError(f"max_requests must be >= 1, got {max_requests}")
    if suffix not in _TRACE_SUFFIXES:
        raise InputError(
            Problem(
                message=f"unknown trace format {suffix or '(no extension)'!r}: "
                "expected .jsonl (Mooncake) or .csv (Azure 2023)",
                file=file,
            )
        )
    if prefix_cache and suffix == ".csv":
        raise InputError(
            Problem(
                message="prefix caching needs block hashes, which Azure CSV traces do not carry; "
                "use a Mooncake .jsonl trace or turn prefix caching off",
                file=file,
            )
        )
    problems = _Problems(file)
    # Only a regular file is read (guard.open_regular refuses FIFOs, devices and directories without blocking),
    # one bounded line at a time: a flood of lines, an endless line or bytes that are not UTF-8 are refused
    # with their line, and memory stays within one line plus the arrays kept.
    limits = replace(TRACE_LIMITS, max_bytes=MAX_TRACE_BYTES)
    with open_regular(file, file, limits.what, missing="no such file") as stream:
        size = os.fstat(stream.fileno()).st_size
        if size > limits.max_bytes:
            raise InputError(
                Problem(
                    message=f"the trace is {size / 2**30:.1f} GiB; at most {limits.max_bytes / 2**30:g} GiB "
                    f"is read{limits.remedy}",
                    file=file,
                )
            )
        lines = iter_lines(stream, file, limits)
        if suffix == ".jsonl":
            trace = _read_mooncake(lines, file, problems, prefix_cache=prefix_cache, max_requests=max_requests)
        else:
            trace = _read_azure(lines, file, problems, max_requests=max_requests)
    problems.raise_if_any()
    assert trace is not None  # a trace is None only when problems were recorded
    return trace


def _repeated_key(text: str) -> str | None:
    """The first key a JSON line gives twice in one object, or None (a line ``_JSON_DECODE`` has decoded)."""
    try:
        json.JSONDecoder(object_pairs_hook=unique_keys).raw_decode(text)
    except RepeatedKey as repeated:
        return repeated.key
    return None


def _first_text_rows(lines: Iterable[str], limit: int | None) -> Iterator[tuple[int, str]]:
    """(1-based line, stripped text) of each line that is not blank, at most ``limit`` of them (all when None),
    good or bad. Nothing after the last line taken is read, so a run of N requests reads N rows of a trace of
    any length (and a problem past them, or a line past them too long to read, is not met)."""
    taken = 0
    line_no = 0
    iterator = iter(lines)
    while limit is None or taken < limit:  # checked before the next line is read
        text = next(iterator, None)
        if text is None:
            return
        line_no += 1
        stripped = text.strip()
        if stripped:
            taken += 1
            yield line_no, stripped


def _first_csv_rows(rows: _Rows, limit: int | None) -> Iterator[list[str]]:
    """Each CSV row that is not empty, at most ``limit`` of them (all when None), as ``_first_text_rows``."""
    taken = 0
    while limit is None or taken < limit:  # checked before the next row is read
        row = next(rows, None)
        if row is None:
            return
        if row:
            taken += 1
            yield row


# -- Mooncake JSONL ------------------------------------------------------------------------------------------


def _read_mooncake(
    lines: Iterable[str], file: str, problems: _Problems, *, prefix_cache: bool, max_requests: int | None
) -> Trace | None:
    # Typed arrays, 8 bytes a value, rather than lists of int objects (about 36 bytes each).
    timestamps_ms = array("d")
    inputs = array("q")
    outputs = array("q")
    # Every request's block hashes as dense ids (first appearance order), flat, with offsets; dropped (None)
    # at the first request without well-formed hash_ids unless prefix caching needs them.
    block_ids: array[int] | None = array("q")
    block_offsets = array("q", [0])
    dense: dict[Any, int] = {}
    latest_ms = -math.inf
    latest_line = 0
    for line_no, stripped in _first_text_rows(lines, max_requests):
        if stripped.count("[") + stripped.count("{") > MAX_JSON_DEPTH and _unbounded(stripped, line_no, problems):
            continue  # decoding would recurse once per level, into a RecursionError
        try:
            # raw_decode skips json.loads's Python-level wrapper, a third of the time on a million lines.
            record, end = _JSON_DECODE(stripped)
            if end != len(stripped):
                raise json.JSONDecodeError("Extra data", stripped, end)
        except json.JSONDecodeError as error:
            problems.add(line_no, None, f"malformed JSON: {error.msg} (column {error.colno})")
            continue
        except (ValueError, RecursionError) as error:  # an integer of over 4,300 digits, say
            if not _unbounded(stripped, line_no, problems):
                problems.add(line_no, None, f"malformed JSON: {error}")
            continue
        if isinstance(record, dict) and stripped.count('":') + stripped.count('" :') > len(record):
            repeated = _repeated_key(stripped)  # more key separators than keys: perhaps a key given twice
            if repeated is not None:
                problems.add(line_no, repeated, "duplicate key (JSON keeps the last)")
                continue
        fields: _Fields | None = _well_formed_fields(record, latest_ms)
        if fields is None:
            # The checked path: first refuse numbers too long to be a count or a time (a 400-digit timestamp
            # would overflow float), which the fast path's type and range checks let through to here.
            if _unbounded(stripped, line_no, problems):
                continue
            fields = _checked_fields(record, line_no, problems, latest_ms, latest_line)
            if fields is None:
                continue
        time_ms, input_length, output_length = fields
        if time_ms is not None:
            latest_ms, latest_line = time_ms, line_no
        blocks: list[int] | None = None
        if block_ids is not None or prefix_cache:
            blocks = _dense_blocks(record, dense)
            if blocks is None:
                if prefix_cache:
                    _report_blocks(record, line_no, problems)
                block_ids = None
        if problems or time_ms is None or input_length is None or output_length is None:
            # Once any problem is known the trace will be refused; keep scanning only to report the rest.
            continue
        timestamps_ms.append(time_ms)
        inputs.append(input_length)
        outputs.append(output_length)
        if block_ids is not None and blocks is not None:
            block_ids.extend(blocks)
            block_offsets.append(len(block_ids))
    if problems:
        return None
    if not inputs:
        problems.add(None, None, "trace has no requests")
        return None
    times = np.frombuffer(timestamps_ms, dtype=np.float64)
    cached = None
    if prefix_cache:
        assert block_ids is not None  # a request without well-formed hash_ids was reported as a problem
        cached = _infinite_cache_tokens(block_ids, block_offsets, inputs, len(dense))
    return _trace(
        file,
        arrival_s=(times - times[0]) / _MS_PER_S,
        input_tokens=inputs,
        output_tokens=outputs,
        cached_tokens=cached,
        blocks=(block_ids, block_offsets) if block_ids is not None else None,
    )


def _unbounded(text: str, line: int, problems: _Problems) -> bool:
    """Record a problem and return True when a line nests too deep or holds an overlong number."""
    bound = json_bound_problem(text)
    if bound is None:
        return False
    problems.add(line, None, f"malformed JSON: {bound[1]} (column {bound[0] + 1})")
    return True


def _dense_blocks(record: Any, dense: dict[Any, int]) -> list[int] | None:
    """The request's ``hash_ids`` as dense ids (new hashes numbered in order of first appearance), or None
    when the key is missing or is not a list of hashable ids."""
    try:
        hashes = record.get("hash_ids")
        if type(hashes) is not list:
            return None
        setdefault = dense.setdefault
        return [setdefault(block, len(dense)) for block in hashes]
    except (AttributeError, TypeError):  # not an object, or an element that cannot be an id (a list or dict)
        return None


def _report_blocks(record: Any, line: int, problems: _Problems) -> None:
    """Record why a line's ``hash_ids`` cannot be used for prefix caching."""
    if isinstance(record, dict) and record.get("hash_ids") is None:
        problems.add(line, "hash_ids", "missing key (prefix caching needs the block hashes)")
    elif isinstance(record, dict):
        problems.add(line, "hash_ids", "must be a list of block ids")


def _infinite_cache_tokens(
    block_ids: Sequence[int], offsets: Sequence[int], inputs: Sequence[int], n_ids: int
) -> list[int]:
    """Cached tokens of each request under an infinite prefix cache, replayed in arrival order: a block hits
    only if it and every block before it in the request appeared in an earlier request;
    cached = min(hits · 512, input_length)."""
    seen = bytearray(n_ids)
    cached = []
    for i, input_length in enumerate(inputs):
        blocks = block_ids[offsets[i] : offsets[i + 1]]
        hits = 0
        for block in blocks:
            if not seen[block]:
                break
            hits += 1
        for block in blocks:
            seen[block] = 1
        cached.append(min(hits * MOONCAKE_BLOCK_TOKENS, input_length))
    return cached


def _well_formed_fields(record: Any, latest_ms: float) -> tuple[float, int, int] | None:
    """(timestamp ms, input, output) of a line that needs no checking, or None to take the checked path."""
    try:
        timestamp = record["timestamp"]
        input_length = record["input_length"]
        output_length = record["output_length"]
    except (KeyError, TypeError):
        return None
    if (
        type(input_length) is int
        and type(output_length) is int
        and 0 <= input_length <= MAX_TOKENS
        and 0 <= output_length <= MAX_TOKENS
        and (type(timestamp) is float or (type(timestamp) is int and -_FLOAT_MAX < timestamp < _FLOAT_MAX))
        and math.isfinite(timestamp)
        and timestamp >= latest_ms
    ):
        return float(timestamp), input_length, output_length
    return None


def _checked_fields(record: Any, line: int, problems: _Problems, latest_ms: float, latest_line: int) -> _Fields | None:
    """Check one decoded line field by field, recording a problem for each bad field.

    Returns None when the line is not an object at all, otherwise (timestamp ms, input, output) with None
    for each field that is missing or bad.
    """
    if not isinstance(record, dict):
        problems.add(line, None, f"expected a JSON object, got {type(record).__name__}")
        return None
    for key in MOONCAKE_KEYS:
        if key not in record:
            problems.add(line, key, "missing key")
    time_ms: float | None = None
    if "timestamp" in record:
        timestamp = record["timestamp"]
        if isinstance(timestamp, bool) or not isinstance(timestamp, int | float) or not math.isfinite(timestamp):
            problems.add(line, "timestamp", f"must be a number of milliseconds, got {_short(timestamp)}")
        elif timestamp < latest_ms:
            problems.add(
                line,
                "timestamp",
                f"goes backwards: {timestamp:g} ms is earlier than {latest_ms:g} ms "
                f"on line {latest_line} (requests must be in arrival order)",
            )
        else:
            time_ms = float(timestamp)
    input_length = _json_count(record, "input_length", line, problems)
    output_length = _json_count(record, "output_length", line, problems)
    return time_ms, input_length, output_length


def _json_count(record: dict[str, Any], key: str, line: int, problems: _Problems) -> int | None:
    """A non-negative integer token count from a JSON value (integral floats such as 512.0 accepted).

    None, with a problem recorded, when the value is bad; None without one when the key is missing (the
    missing key has been reported already).
    """
    if key not in record:
        return None
    value = record[key]
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and value > MAX_TOKENS:
        problems.add(line, key, f"{value:.3g} tokens is more than the {MAX_TOKENS:,} a request may have")
        return None
    problems.add(line, key, f"must be a non-negative integer number of tokens, got {_short(value)}")
    return None


def _short(value: object) -> str:
    """``repr(value)`` cut to 60 characters for a message (a bad field may be a megabyte long)."""
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


# -- Azure 2023 CSV ------------------------------------------------------------------------------------------


def _read_azure(handle: Iterable[str], file: str, problems: _Problems, *, max_requests: int | None) -> Trace | None:
    reader = _Rows(csv.reader(handle), problems)
    header = next(reader, None)
    if header is None:
        problems.add(None, None, f"empty file: expected a header row {','.join(AZURE_COLUMNS)}")
        return None
    position = {name.strip(): index for index, name in enumerate(header)}
    for column in AZURE_COLUMNS:
        if column not in position:
            problems.add(reader.line_num, column, f"missing column (header has {_short(', '.join(header))[1:-1]})")
    if problems:
        return None
    i_time, i_input, i_output = (position[column] for column in AZURE_COLUMNS)
    days = array("q")
    seconds = array("d")
    inputs = array("q")
    outputs = array("q")
    latest: tuple[int, float] | None = None
    latest_text, latest_line = "", 0
    for row in _first_csv_rows(reader, max_requests):
        line = reader.line_num
        if len(row) != len(header):  # one field more is as wrong as one fewer: the columns no longer line up
            problems.add(line, None, f"expected {len(header)} comma-separated fields (the header's), got {len(row)}")
            continue
        stamp = _wall_clock(row[i_time])
        input_length = _text_count(row[i_input], AZURE_COLUMNS[1], line, problems)
        output_length = _text_count(row[i_output], AZURE_COLUMNS[2], line, problems)
        if stamp is None:
            shown = _short(row[i_time])
            problems.add(line, AZURE_COLUMNS[0], f"not a timestamp 'YYYY-MM-DD HH:MM:SS[.fffffff]': {shown}")
            continue
        if latest is not None and stamp < latest:
            problems.add(
                line,
                AZURE_COLUMNS[0],
                f"goes backwards: {row[i_time].strip()} is earlier than {latest_text} on line {latest_line} "
                "(requests must be in arrival order)",
            )
            continue
        latest, latest_text, latest_line = stamp, row[i_time].strip(), line
        if input_length is None or output_length is None or problems:
            continue
        days.append(stamp[0])
        seconds.append(stamp[1])
        inputs.append(input_length)
        outputs.append(output_length)
    if problems:
        return None
    if not inputs:
        problems.add(None, None, "trace has no requests")
        return None
    # Day and second-of-day are kept apart until here: as one float since year 1 they would lose the
    # 100 ns digits (float64 resolves about 8 µs at 6e10 s).
    day_array = np.frombuffer(days, dtype=np.int64)
    second_array = np.frombuffer(seconds, dtype=np.float64)
    arrival_s = (day_array - day_array[0]) * float(_S_PER_DAY) + (second_array - second_array[0])
    return _trace(file, arrival_s=arrival_s, input_tokens=inputs, output_tokens=outputs, cached_tokens=None)


class _Rows:
    """The rows of a CSV reader; a row it cannot parse (a field over ``csv.field_size_limit()``, 128 KiB)
    ends the rows with a problem on its line instead of raising ``csv.Error``."""

    def __init__(self, reader: Any, problems: _Problems) -> None:
        self._reader, self._problems = reader, problems

    @property
    def line_num(self) -> int:
        return int(self._reader.line_num)

    def __iter__(self) -> _Rows:
        return self

    def __next__(self) -> list[str]:
        try:
            return list(next(self._reader))
        except csv.Error as error:
            self._problems.add(self.line_num, None, f"not readable as CSV: {error}")
            raise StopIteration from None


def _wall_clock(text: str) -> tuple[int, float] | None:
    """(proleptic Gregorian day ordinal, seconds since midnight) of "YYYY-MM-DD HH:MM:SS[.f...]", or None.

    Parsed by hand: ``datetime.fromisoformat`` on Python 3.11 accepts at most 6 fractional digits and the
    Azure traces have 7.
    """
    match = _WALL_CLOCK.fullmatch(text.strip())
    if match is None:
        return None
    minute = _minute_start(match[1])
    second = float(match[2])
    if minute is None or second >= 60.0:
        return None
    return minute[0], minute[1] + second


@functools.lru_cache(maxsize=4096)
def _minute_start(text: str) -> tuple[int, int] | None:
    """(day ordinal, seconds from midnight to the minute) of "YYYY-MM-DD HH:MM"; cached, since sorted
    traces repeat each minute many times."""
    try:
        day = date(int(text[0:4]), int(text[5:7]), int(text[8:10])).toordinal()
    except ValueError:
        return None
    hour, minute = int(text[11:13]), int(text[14:16])
    if hour > 23 or minute > 59:
        return None
    return day, hour * 3600 + minute * 60


def _text_count(text: str, column: str, line: int, problems: _Problems) -> int | None:
    """A non-negative integer token count from a CSV cell."""
    try:
        value = int(text) if len(text) <= 20 else -1  # longer text cannot be a count <= MAX_TOKENS
    except ValueError:
        value = -1
    if value > MAX_TOKENS:
        problems.add(line, column, f"{value:.3g} tokens is more than the {MAX_TOKENS:,} a request may have")
        return None
    if value < 0:
        shown = repr(text) if len(text) <= 40 else repr(text[:37] + "...")
        problems.add(line, column, f"must be a non-negative integer number of tokens, got {shown}")
        return None
    return value


# -- shared --------------------------------------------------------------------------------------------------


def _trace(
    file: str,
    *,
    arrival_s: npt.NDArray[np.float64],
    input_tokens: Sequence[int],
    output_tokens: Sequence[int],
    cached_tokens: Sequence[int] | None,
    blocks: tuple[Sequence[int], Sequence[int]] | None = None,
) -> Trace:
    if arrival_s.size and float(arrival_s[-1]) > MAX_SPAN_S:
        past = int(np.argmax(arrival_s > MAX_SPAN_S))
        raise InputError(
            Problem(
                file=file,
                message=f"request {past + 1:,} arrives {float(arrival_s[past]):.3g} s after the first, past the "
                f"{MAX_SPAN_S / 86_400:.0f} days a trace may span (are the timestamps in the stated unit?)",
            )
        )
    arrays: dict[str, Any] = {
        "arrival_s": arrival_s,
        "input_tokens": _int64(input_tokens),
        "output_tokens": _int64(output_tokens),
        "cached_tokens": None if cached_tokens is None else np.array(cached_tokens, dtype=np.int64),
    }
    if blocks is not None:
        arrays["block_ids"] = _int64(blocks[0])
        arrays["block_offsets"] = _int64(blocks[1])
    for values in arrays.values():
        if values is not None:
            values.setflags(write=False)
    return Trace(source=file, block_tokens=MOONCAKE_BLOCK_TOKENS, **arrays)


def _int64(values: Sequence[int]) -> npt.NDArray[np.int64]:
    """``values`` as an int64 array: a typed ``array('q')`` without a copy through Python ints."""
    if isinstance(values, array):
        return np.frombuffer(values, dtype=np.int64) if len(values) else np.zeros(0, dtype=np.int64)
    return np.array(values, dtype=np.int64)
