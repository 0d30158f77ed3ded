"""io.guard: special files refused without blocking, reads bounded in bytes, lines and line length, JSON
bounded in depth and digits; and the readers routed through it (YAML, config.json, traces)."""

from __future__ import annotations

import json
import os
import socket
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from prfaas_plan.errors import InputError
from prfaas_plan.io import guard
from prfaas_plan.io.guard import Limits
from prfaas_plan.io.hf_config import read_config_json
from prfaas_plan.io.traces import read_trace
from prfaas_plan.io.yamlsrc import load_yaml

SMALL = Limits(what="a test file", max_bytes=1000, max_lines=10, max_line_bytes=50)


def _message(error: pytest.ExceptionInfo[InputError]) -> str:
    return str(error.value)


def _char_device(path: Path, major: int, minor: int) -> Path:
    """A private character device node (a copy of /dev/zero is 1, 5; of /dev/null 1, 3), or skip."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(major, minor))
    except (PermissionError, OSError) as error:
        pytest.skip(f"cannot make a device node here: {error}")
    return path


def _in_thread(call: Callable[[], Any], timeout_s: float = 10.0) -> BaseException | None:
    """Run ``call`` in a daemon thread; fail the test if it has not returned in ``timeout_s`` (a hang)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as error:  # handed back to the test
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout_s)
    assert outcome, f"still running after {timeout_s} s: a hang"
    return outcome[0]


# -- special files ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".yaml", ".jsonl", ".csv", ".json"])
def test_a_fifo_nobody_writes_is_refused_at_once(tmp_path: Path, suffix: str) -> None:
    fifo = tmp_path / f"pipe{suffix}"
    os.mkfifo(fifo)
    readers = {
        ".yaml": lambda: load_yaml(fifo),
        ".jsonl": lambda: read_trace(fifo),
        ".csv": lambda: read_trace(fifo),
        ".json": lambda: read_config_json(fifo, str(fifo)),
    }
    error = _in_thread(readers[suffix])
    assert isinstance(error, InputError)
    assert "FIFO" in str(error) and str(fifo) in str(error)


def test_a_device_node_copy_of_dev_zero_is_refused(tmp_path: Path) -> None:
    zero = _char_device(tmp_path / "zero.jsonl", 1, 5)
    for read in (lambda: read_trace(zero), lambda: load_yaml(zero), lambda: guard.read_bytes(zero, "z", SMALL)):
        error = _in_thread(read)
        assert isinstance(error, InputError) and "character device" in str(error)


def test_directories_sockets_and_dangling_links_are_one_line_each(tmp_path: Path) -> None:
    directory = tmp_path / "dir.yaml"
    directory.mkdir()
    dangling = tmp_path / "gone.yaml"
    dangling.symlink_to(tmp_path / "never-there.yaml")
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    sock_path = tmp_path / "s.yaml"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(sock_path))
        cases = {directory: "a directory", dangling: "does not exist", loop: "symbolic links", sock_path: "socket"}
        for path, words in cases.items():
            with pytest.raises(InputError) as error:
                load_yaml(path)
            assert words in _message(error) and len(error.value.problems) == 1
    finally:
        server.close()


def test_a_nul_byte_in_the_name_is_an_input_error() -> None:
    with pytest.raises(InputError, match="NUL"):
        guard.read_bytes("a\0b.yaml", "a?b.yaml", SMALL)


def test_a_symlink_to_a_regular_file_is_read(tmp_path: Path) -> None:
    target = tmp_path / "real.yaml"
    target.write_text("a: 1\n")
    link = tmp_path / "link.yaml"
    link.symlink_to(target)
    assert load_yaml(link).data == {"a": 1}


# -- bounds ----------------------------------------------------------------------------------------------------


def test_bytes_lines_and_line_length_are_bounded(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(b"x" * 1001)
    with pytest.raises(InputError, match="larger than"):
        guard.read_text(path, "f", SMALL)
    path.write_bytes(b"\n" * 10)  # 11 lines counting the empty one after the last newline
    with pytest.raises(InputError, match="more than 10 lines"):
        guard.read_text(path, "f", SMALL)
    path.write_bytes(b"ok\n" + b"y" * 51 + b"\nok\n")
    with pytest.raises(InputError) as error:
        guard.read_text(path, "f", SMALL)
    assert error.value.problems[0].line == 2 and "longer than 50 bytes" in _message(error)
    path.write_bytes(b"ok\n" + b"y" * 50 + b"\n")
    assert guard.read_text(path, "f", SMALL).endswith("y\n")


def test_a_huge_sparse_file_is_refused_by_size_before_reading(tmp_path: Path) -> None:
    huge = tmp_path / "huge.jsonl"
    with huge.open("wb") as handle:
        handle.truncate(guard.TRACE_LIMITS.max_bytes + 1)  # sparse: costs no disk
    error = _in_thread(lambda: read_trace(huge), timeout_s=5.0)
    assert isinstance(error, InputError) and "GiB" in str(error)
    yaml_huge = tmp_path / "huge.yaml"
    with yaml_huge.open("wb") as handle:
        handle.truncate(50 << 30)
    with pytest.raises(InputError, match="larger than 1 MiB"):
        load_yaml(yaml_huge)


def test_a_sparse_trace_of_nul_bytes_under_the_size_bound_stops_at_the_first_long_line(tmp_path: Path) -> None:
    """500 MiB of NUL bytes is one line: refused after reading about a megabyte, not held in memory."""
    zeros = tmp_path / "zeros.jsonl"
    with zeros.open("wb") as handle:
        handle.truncate(500 << 20)
    error = _in_thread(lambda: read_trace(zeros), timeout_s=5.0)
    assert isinstance(error, InputError)
    assert error.problems[0].line == 1 and "longer than" in str(error)


def test_iter_lines_bounds_a_flood_of_empty_lines(tmp_path: Path) -> None:
    flood = tmp_path / "flood.jsonl"
    flood.write_bytes(b"\n" * 11)
    with guard.open_regular(flood, "flood", SMALL.what) as stream, pytest.raises(InputError, match="more than 10"):
        list(guard.iter_lines(stream, "flood", SMALL))


def test_an_empty_line_flood_as_a_trace_is_an_input_error_not_memory(tmp_path: Path) -> None:
    flood = tmp_path / "flood.jsonl"
    flood.write_bytes(b"\n" * 2_000_000 + b"\r\n" * 1_000_000)
    with pytest.raises(InputError, match="no requests"):
        read_trace(flood)


def test_iter_lines_reports_the_line_of_bad_utf8_and_drops_a_bom(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_bytes(b"\xef\xbb\xbfa\r\nb\n\xff\n")
    with guard.open_regular(path, "t", "x") as stream:
        lines = guard.iter_lines(stream, "t", SMALL)
        assert next(lines) == "a\r\n" and next(lines) == "b\n"
        with pytest.raises(InputError) as error:
            next(lines)
    assert error.value.problems[0].line == 3 and "UTF-8" in _message(error)


# -- JSON --------------------------------------------------------------------------------------------------------


def test_json_nested_ten_thousand_deep_is_refused_without_recursion_error() -> None:
    deep = "[" * 10_000 + "]" * 10_000
    with pytest.raises(InputError, match="nested deeper than 32"):
        guard.loads_json(deep, "deep.json")
    assert guard.json_bound_problem('{"a": "' + "[" * 100 + '"}') is None  # brackets inside a string


def test_json_numbers_of_thousands_of_digits_are_refused_before_conversion() -> None:
    long_int = "1" * 5000
    with pytest.raises(InputError, match="5,000 digits"):
        guard.loads_json(f'{{"a": {long_int}}}', "n.json")
    assert guard.loads_json(f'{{"{long_int}": 1}}', "key.json") == {long_int: 1}  # a long key is text
    assert guard.loads_json('{"a": 12345678901234567890}', "ok.json") == {"a": 12345678901234567890}


def test_json_nan_is_refused_and_the_line_of_an_error_is_given() -> None:
    with pytest.raises(InputError, match="NaN"):
        guard.loads_json('{"a": NaN}', "nan.json")
    with pytest.raises(InputError) as error:
        guard.loads_json('{\n"a":\n}', "bad.json")
    assert error.value.problems[0].line == 3


def test_config_json_deep_or_long_digits_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"hidden_size": ' + "9" * 5000 + "}")
    with pytest.raises(InputError, match="digits"):
        read_config_json(path, "config.json")
    path.write_text('{"a": ' + "[" * 10_000 + "]" * 10_000 + "}")
    with pytest.raises(InputError, match="nested deeper"):
        read_config_json(path, "config.json")


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ('{"timestamp": 0, "input_length": ' + "7" * 5000 + ', "output_length": 1}', "5,000 digits"),
        ('{"timestamp": ' + "7" * 400 + ', "input_length": 1, "output_length": 1}', "400 digits"),
        ('{"timestamp": 0, "input_length": 1, "output_length": 1, "x": ' + "[" * 10_000 + "]" * 10_000 + "}", "deeper"),
        ('{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [' + "1" * 5000 + "]}", "5,000 digits"),
    ],
)
def test_trace_lines_with_long_numbers_or_deep_nesting_are_reported_with_their_line(
    tmp_path: Path, line: str, words: str
) -> None:
    path = tmp_path / "t.jsonl"
    good = json.dumps({"timestamp": 0, "input_length": 5, "output_length": 5})
    path.write_text(f"{good}\n{line}\n")
    with pytest.raises(InputError) as error:
        read_trace(path)
    assert error.value.problems[0].line == 2 and words in _message(error)


def test_a_trace_line_with_a_huge_bad_value_gives_a_short_message(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"timestamp": "x" * 100_000, "input_length": 1, "output_length": 1}) + "\n")
    with pytest.raises(InputError) as error:
        read_trace(path)
    assert len(_message(error)) < 300


# -- reading only what is needed --------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_max_requests_reads_the_first_requests_only(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"t{suffix}"
    if suffix == ".jsonl":
        rows = [json.dumps({"timestamp": i * 10, "input_length": 100 + i, "output_length": 7}) for i in range(50)]
        text = "\n".join(rows) + "\nthis line is never read\n"
    else:
        rows = [f"2023-11-16 18:15:{i:02d}.0000000,{100 + i},7" for i in range(50)]
        text = "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\nnever,read\n"
    path.write_text(text)
    first = read_trace(path, max_requests=20)
    assert first.n_requests == 20
    assert list(first.input_tokens) == list(range(100, 120))
    with pytest.raises(InputError):
        read_trace(path)  # the whole file holds the bad line


def test_a_trace_past_the_line_bound_is_refused_with_a_way_out(tmp_path: Path) -> None:
    """The trace line bound is what a planning run holds in about 4 GB and a minute (guard.TRACE_LIMITS):
    one line past it is refused naming the bound and saying to sample or split the trace; at the bound it is
    read (blank lines, so the file is small and quick: what is counted is lines)."""
    bound = guard.TRACE_LIMITS.max_lines
    header = b"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 00:00:00.0,10,1\n2023-11-16 00:00:01.0,10,1\n"
    at_bound = tmp_path / "at.csv"
    at_bound.write_bytes(header + b"\n" * (bound - 3))
    assert read_trace(at_bound).input_tokens.size == 2
    past = tmp_path / "past.csv"
    past.write_bytes(header + b"\n" * (bound - 2))
    with pytest.raises(InputError) as refused:
        read_trace(past)
    assert f"more than {bound:,} lines" in _message(refused) and "sample it, or split it by time" in _message(refused)
