"""Opening and reading an input file so that a hostile one costs bounded time and memory.

Every reader of user files (scenario, hardware, model and dynamics YAML, sweep grids, Hugging Face
``config.json``, Mooncake JSONL and Azure CSV traces) goes through here:

- Only regular files are read. A FIFO (nobody may ever write to it: reading would block for good), a socket,
  a character or block device (``/dev/zero`` never ends, a disk is gigabytes) or a directory is refused with
  one line naming the file and what it is. The check is made with ``os.stat`` before opening, and again on the
  open descriptor (opened with ``O_NONBLOCK``, so a file swapped for a FIFO in between cannot block the open),
  after which non-blocking mode is cleared.
- The bytes read, the number of lines and the length of a line are bounded per kind of file
  (:class:`Limits`); the read stops one byte or one line past a bound, so no bound is checked after the fact.
- JSON text is parsed only once its nesting depth and the length of its number literals are known to be
  within bounds (:func:`loads_json`): Python's decoder recurses once per level and converts any number of
  digits, so a 10,000-deep array ends in RecursionError and a 5,000-digit integer in ValueError otherwise.

Every refusal is an ``InputError`` (exit status 2) naming the file, and the line where there is one.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import os
import re
import stat
from collections.abc import Iterator
from typing import IO, Any

from prfaas_plan._frozen import frozen
from prfaas_plan.errors import InputError, Problem

_MIB = 1 << 20


@frozen
class Limits:
    """Bounds on one kind of input file: what it is (for messages), the most bytes, lines and bytes per line, and
    what to do with a file past them (``remedy``, a clause after the message; '' for none)."""

    what: str
    max_bytes: int
    max_lines: int
    max_line_bytes: int
    remedy: str = ""


#: YAML inputs (scenarios, hardware profiles, model cards, dynamics files, sweep grids): the biggest shipped
#: one is under 5 KB and 200 lines, so 1 MiB, 100,000 lines and 256 KiB per line (a long flow-style list of
#: profile points) are room for any real file while keeping ``/dev/zero``-like input out of memory.
YAML_LIMITS = Limits(what="a YAML file", max_bytes=_MIB, max_lines=100_000, max_line_bytes=256 * 1024)
#: A Hugging Face ``config.json``: a few KB (the largest multimodal configs are about 20 KB); a minified one is
#: a single line, so a line may be as long as the file.
CONFIG_JSON_LIMITS = Limits(what="a config.json file", max_bytes=_MIB, max_lines=100_000, max_line_bytes=_MIB)
#: Request traces: 1 GiB (the shipped traces are 0.3-3 MB, the largest public week-long request logs a few
#: hundred MB); 6 million lines, what a planning run holds within about 4 GB and a minute: ``optimize --trace
#: --load 0.7`` on an Azure CSV of 6 million requests (one line past the bound with its header) took 46 s and
#: 3.0 GB, of 8 million 63 s and 4.0 GB (2-core Xeon VM; the windowed TTFT model keeps a few hundred bytes per
#: request), so a larger trace is refused with a message to sample or split it; 1 MiB per line (a Mooncake line
#: of a 10-million-token request lists 19,532 block ids, about 160 KB).
TRACE_LIMITS = Limits(
    what="a trace file",
    max_bytes=1 << 30,
    max_lines=6_000_000,
    max_line_bytes=_MIB,
    remedy=" (sample it, or split it by time, first)",
)

#: JSON nesting deeper than this is refused before decoding (Python's decoder recurses once per level).
MAX_JSON_DEPTH = 32
#: The most digits in a run inside a JSON number literal: a float64 carries 17 significant digits and a 64-bit
#: hash id 20; Python refuses to convert integers of over 4,300 digits.
MAX_JSON_DIGITS = 40

_KIND_NAMES = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe), which may never end or never start"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _kind(mode: int) -> str:
    for test, name in _KIND_NAMES:
        if test(mode):
            return name
    return "not a regular file"


def kind_of(path: str | os.PathLike[str]) -> str:
    """What a path that is there is, in words ("a directory", "a character device", ...; a link is followed)."""
    try:
        return _kind(os.stat(path).st_mode)
    except OSError:
        return "a link to nothing" if os.path.islink(path) else "not readable"


#: What a missing input is called in messages.
MISSING = "file not found"


def _os_problem(display: str, error: OSError) -> InputError:
    """One line for an ``OSError`` met while opening or reading ``display``."""
    if error.errno == errno.ENOENT:
        return InputError(Problem(file=display, message=MISSING))
    if error.errno == errno.ELOOP:
        return InputError(Problem(file=display, message="too many levels of symbolic links"))
    if error.errno == errno.ENAMETOOLONG:
        return InputError(Problem(file=display, message="file name too long"))
    return InputError(Problem(file=display, message=f"cannot read: {error.strerror or error}"))


def _refuse_special(display: str, mode: int, what: str) -> InputError:
    return InputError(Problem(file=display, message=f"is {_kind(mode)}; expected {what} (a regular file)"))


def open_regular(path: str | os.PathLike[str], display: str, what: str, *, missing: str = MISSING) -> IO[bytes]:
    """Open ``path`` for binary reading if it is a regular file; InputError naming ``display`` otherwise
    (``missing``: the message when there is no such file).

    Never blocks: special files are refused by ``os.stat`` before opening, and the open itself is
    non-blocking (a FIFO put in place between the two checks opens at once and is then refused).
    """
    try:
        before = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise InputError(Problem(file=display, message="a symbolic link to a file that does not exist")) from None
        raise InputError(Problem(file=display, message=missing)) from None
    except (OSError, ValueError) as error:  # ValueError: a NUL byte in the name
        if isinstance(error, OSError):
            raise _os_problem(display, error) from None
        raise InputError(Problem(file=display, message="the file name holds a NUL byte")) from None
    if not stat.S_ISREG(before.st_mode):
        raise _refuse_special(display, before.st_mode, what)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise _os_problem(display, error) from None
    try:
        after = os.fstat(fd)
        if not stat.S_ISREG(after.st_mode):
            raise _refuse_special(display, after.st_mode, what)
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _too_big(display: str, limits: Limits) -> InputError:
    return InputError(
        Problem(file=display, message=f"larger than {_size(limits.max_bytes)}, the most read for {limits.what}")
    )


def _size(n_bytes: int) -> str:
    return f"{n_bytes / (1 << 30):g} GiB" if n_bytes >= 1 << 30 else f"{n_bytes / _MIB:g} MiB"


def file_size(path: str | os.PathLike[str], display: str, limits: Limits) -> int:
    """The size of the regular file ``path`` in bytes, refusing it up front when over ``limits.max_bytes``
    (a huge sparse file costs nothing to create and would cost minutes to read)."""
    with open_regular(path, display, limits.what) as stream:
        size = os.fstat(stream.fileno()).st_size
    if size > limits.max_bytes:
        raise _too_big(display, limits)
    return size


def read_bytes(path: str | os.PathLike[str], display: str, limits: Limits) -> bytes:
    """All bytes of a regular file of at most ``limits.max_bytes``; InputError naming ``display`` otherwise."""
    with open_regular(path, display, limits.what) as stream:
        if os.fstat(stream.fileno()).st_size > limits.max_bytes:
            raise _too_big(display, limits)
        try:
            raw = stream.read(limits.max_bytes + 1)  # a file that grows while read is still bounded
        except OSError as error:
            raise _os_problem(display, error) from None
    if len(raw) > limits.max_bytes:
        raise _too_big(display, limits)
    return raw


def check_lines(raw: bytes, display: str, limits: Limits) -> None:
    """Refuse text with more than ``limits.max_lines`` lines or a line longer than ``limits.max_line_bytes``."""
    lines = raw.count(b"\n") + 1
    if lines > limits.max_lines:
        raise InputError(
            Problem(file=display, message=f"more than {limits.max_lines:,} lines, the most read for {limits.what}")
        )
    if len(raw) <= limits.max_line_bytes:
        return
    start = 0
    for line_no in range(1, lines + 1):
        end = raw.find(b"\n", start)
        end = len(raw) if end < 0 else end
        if end - start > limits.max_line_bytes:
            raise _long_line(display, line_no, limits)
        start = end + 1


def _long_line(display: str, line_no: int, limits: Limits) -> InputError:
    return InputError(
        Problem(
            file=display,
            line=line_no,
            message=f"a line longer than {limits.max_line_bytes:,} bytes, the most read for {limits.what}",
        )
    )


def decode_utf8(raw: bytes, display: str) -> str:
    """``raw`` as UTF-8 text (a leading byte-order mark dropped); InputError with the line of a bad byte."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError(Problem(file=display, line=line, message=f"not UTF-8 text: {exc.reason}")) from None


def read_text(path: str | os.PathLike[str], display: str, limits: Limits) -> str:
    """A regular UTF-8 text file within ``limits`` (bytes, lines, line length); InputError otherwise."""
    raw = read_bytes(path, display, limits)
    check_lines(raw, display, limits)
    return decode_utf8(raw, display)


def iter_lines(stream: IO[bytes], display: str, limits: Limits) -> Iterator[str]:
    """The lines of an open binary stream as text (line ends kept, a leading byte-order mark dropped), reading
    one line at a time: refused (InputError with the line) past ``limits`` in bytes, lines or line length,
    or at a line that is not UTF-8. Memory stays within one line whatever the stream holds."""
    total = 0
    line_no = 0
    readline = stream.readline
    cap = limits.max_line_bytes + 2  # room for the line's own "\r\n"
    while True:
        try:
            raw = readline(cap)
        except OSError as error:
            raise _os_problem(display, error) from None
        if not raw:
            return
        line_no += 1
        total += len(raw)
        if total > limits.max_bytes:
            raise _too_big(display, limits)
        if line_no > limits.max_lines:
            raise InputError(
                Problem(
                    file=display,
                    message=f"more than {limits.max_lines:,} lines, the most read for {limits.what}{limits.remedy}",
                )
            )
        if len(raw) == cap and not raw.endswith(b"\n"):
            raise _long_line(display, line_no, limits)
        if line_no == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(Problem(file=display, line=line_no, message=f"not UTF-8 text: {exc.reason}")) from None


# -- bounded JSON ---------------------------------------------------------------------------------------------

_JSON_STRING = r'"(?:[^"\\]|\\.)*"'
_JSON_BRACKET = r"[\[{\]}]"
_LONG_DIGITS = rf"[0-9]{{{MAX_JSON_DIGITS + 1},}}"


@functools.cache
def _json_patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """The string, bracket and long-digit patterns, compiled when the first JSON text is checked: a run that reads
    no JSON (YAML scenarios only) compiles none of them (start-up time)."""
    return re.compile(_JSON_STRING), re.compile(_JSON_BRACKET), re.compile(_LONG_DIGITS)


def json_bound_problem(text: str, *, max_depth: int = MAX_JSON_DEPTH) -> tuple[int, str] | None:
    """(character offset, reason) where ``text`` first nests deeper than ``max_depth`` or holds a number
    with a run of more than MAX_JSON_DIGITS digits (string contents skipped), or None when it is within both.

    Cheap on ordinary text: the full scan runs only when the bracket count could exceed the depth or a long
    run of digits appears at all."""
    json_string, json_bracket, long_digits = _json_patterns()
    deep = text.count("[") + text.count("{") > max_depth
    long = long_digits.search(text) is not None
    if not (deep or long):
        return None
    blanked = json_string.sub(lambda m: '"' + " " * (m.end() - m.start() - 2) + '"', text)
    if long:
        match = long_digits.search(blanked)
        if match is not None:
            return match.start(), (
                f"a number with a run of {match.end() - match.start():,} digits (at most {MAX_JSON_DIGITS})"
            )
    if deep:
        depth = 0
        for bracket in json_bracket.finditer(blanked):
            depth += 1 if bracket.group() in "[{" else -1
            if depth > max_depth:
                return bracket.start(), f"nested deeper than {max_depth} levels"
    return None


def no_constant(name: str) -> Any:
    """``json``'s ``parse_constant`` hook that refuses NaN and Infinity (ValueError): strict JSON."""
    raise ValueError(f"{name} is not a number JSON allows")


class RepeatedKey(Exception):
    """A JSON object repeats a key (``unique_keys``); not a ValueError, so no parse attempt swallows it."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's members as a dict (an ``object_pairs_hook``); RepeatedKey where a key comes twice
    (``json`` would keep the last, silently)."""
    out = dict(pairs)
    if len(out) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise RepeatedKey(key)
            seen.add(key)
    return out


def loads_json(text: str, display: str, *, line: int | None = None, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Decode one JSON value within the depth and digit bounds; NaN and Infinity refused, and a key given twice in
    one object. InputError naming ``display`` (and ``line``, or the line within ``text`` when None) for anything
    malformed."""
    bound = json_bound_problem(text, max_depth=max_depth)
    if bound is not None:
        at = line if line is not None else text.count("\n", 0, bound[0]) + 1
        raise InputError(Problem(file=display, line=at, message=f"malformed JSON: {bound[1]}"))
    import json  # here: a run that reads no JSON never loads the json package (start-up time)

    try:
        return json.loads(text, parse_constant=no_constant, object_pairs_hook=unique_keys)
    except RepeatedKey as exc:  # a value given twice: the YAML loader refuses it too
        marks = [m.start() for m in re.finditer(re.escape(f'"{exc.key}"'), text)]
        where = line if line is not None else (text.count("\n", 0, marks[1]) + 1 if len(marks) > 1 else None)
        message = "duplicate key (JSON keeps the last)"
        raise InputError(Problem(file=display, line=where, field=exc.key, message=message)) from None
    except json.JSONDecodeError as exc:
        at = line if line is not None else exc.lineno
        message = f"malformed JSON: {exc.msg} (column {exc.colno})"
        raise InputError(Problem(file=display, line=at, message=message)) from None
    except (ValueError, RecursionError) as exc:  # NaN/Infinity; any other bound the checks above missed
        raise InputError(Problem(file=display, line=line, message=f"malformed JSON: {exc}")) from None
