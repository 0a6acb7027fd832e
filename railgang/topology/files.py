"""The one bounded file reader of railgang: every input file a command is given (config, traces,
quota trees, sacct and telemetry captures, topology and facts files) is opened, read and decoded
here, and parsed as JSON or TOML here when it is JSON or TOML.

Each problem is an :class:`InputProblem` (``path[:line]: [field: ]message``) that the callers
turn into their one-line errors; nothing here can hang, fill memory or recurse without bound:

- only regular files are opened for reading (``-`` is stdin where a command offers it): a FIFO
  (``open`` would block until a writer comes), ``/dev/zero`` and other devices, sockets and
  directories are refused from ``fstat`` after a non-blocking open;
- at most ``limit`` bytes are read (``limit + 1`` to tell "over"), lines at most ``max_line``;
- NUL bytes (binary data) and bytes that are not UTF-8 are refused with their line;
- JSON and TOML nesting deeper than the parser's recursion, and NaN/Infinity (JSON's ``NaN``,
  ``1e400``; TOML's ``inf``/``nan`` unless the caller checks them itself), are refused.

This module is pure (standard library only) and light: ``daemon/config.py`` reads the config
file through it on every command.
"""

from __future__ import annotations

import json
import math
import os
import stat
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

__all__ = [
    "MAX_LINE_BYTES",
    "MAX_TEXT_BYTES",
    "InputProblem",
    "iter_lines",
    "open_input",
    "parse_json",
    "parse_toml",
    "read_bytes",
    "read_text",
]

# A topology.conf, facts or free-GPU file of a 100,000-node cluster is a few MB; 16 MiB leaves room
# and still refuses a runaway paste before it costs real memory. Callers pass their own limit.
MAX_TEXT_BYTES = 16 * 2**20
# No line of any input we read (ibnetdiscover included) is near this long; a longer one is binary
# data or a file without newlines, refused before it is held whole.
MAX_LINE_BYTES = 64 * 2**10


class InputProblem(ValueError):
    """A malformed input, located: ``path:line: field: message``."""

    def __init__(self, message: str, *, path: str, line: int | None = None, field: str | None = None) -> None:
        self.message, self.path, self.line, self.field = message, path, line, field
        where = path + (f":{line}" if line is not None else "")
        super().__init__(f"{where}: {field + ': ' if field else ''}{message}")


_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def open_input(path: str | Path, what: str) -> BinaryIO:
    """``path`` opened for binary reading, if it is a regular file (``-``: stdin). The open does
    not block (``O_NONBLOCK``: a FIFO without a writer would wait for ever) and the type comes
    from the open file, so nothing can swap it in between. The caller closes it."""
    if str(path) == "-":
        return sys.stdin.buffer
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError as exc:
        raise InputProblem(f"cannot read {what}: file not found", path=str(path)) from exc
    except OSError as exc:
        raise InputProblem(f"cannot read {what}: {exc.strerror or exc}", path=str(path)) from exc
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise InputProblem(f"is a directory; expected the {what}", path=str(path))
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
            raise InputProblem(f"is {kind}; the {what} must be a regular file", path=str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def too_big(what: str, limit: int) -> str:
    size = (f"{limit // 2**20} MiB" if limit >= 2**20 else f"{limit // 2**10} KiB"
            if limit >= 2**10 else f"{limit} bytes")
    return f"{what} is larger than {size}; refusing to read it"


def read_bytes(path: str | Path, what: str, limit: int = MAX_TEXT_BYTES) -> bytes:
    """At most ``limit`` bytes of the file (over: InputProblem), read whole."""
    stream = open_input(path, what)
    try:
        data = stream.read(limit + 1)
    except OSError as exc:
        raise InputProblem(f"cannot read {what}: {exc.strerror or exc}", path=str(path)) from exc
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    if len(data) > limit:
        raise InputProblem(too_big(what, limit), path=str(path))
    return data


def read_text(path: str | Path, what: str, limit: int = MAX_TEXT_BYTES) -> str:
    """The whole file as text, reading at most ``limit`` bytes; ``-`` is stdin.

    InputProblem when it is missing, unreadable, not a regular file, over ``limit``, binary (NUL
    bytes) or not UTF-8.
    """
    return decode(read_bytes(path, what, limit), what, str(path))


def decode(data: bytes, what: str, path: str, line: int | None = None) -> str:
    """UTF-8 text without NUL bytes, or InputProblem naming the line of the first bad byte."""
    if b"\0" in data:
        at = line if line is not None else data.count(b"\n", 0, data.index(b"\0")) + 1
        raise InputProblem(f"{what} contains NUL bytes: binary data, not text", path=path, line=at)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        at = line if line is not None else data.count(b"\n", 0, exc.start) + 1
        raise InputProblem(f"{what} is not UTF-8 text: {exc.reason} (byte 0x{data[exc.start]:02x})",
                           path=path, line=at) from exc


def iter_lines(path: str | Path, what: str, *, max_bytes: int = MAX_TEXT_BYTES,
               max_line: int = MAX_LINE_BYTES) -> Iterator[tuple[int, str]]:
    """(line number, text without the newline) streamed from the file, for inputs too big to hold
    as one string (traces, ibnetdiscover of a large fabric); the same refusals as ``read_text``,
    a line over ``max_line`` and a total over ``max_bytes`` too. A consumer that stops early (a
    trace read with ``--limit``) reads no further."""
    stream = open_input(path, what)
    total = 0
    try:
        for number, raw in enumerate(iter(lambda: stream.readline(max_line + 1), b""), start=1):
            total += len(raw)
            if total > max_bytes:
                raise InputProblem(too_big(what, max_bytes), path=str(path), line=number)
            if len(raw) > max_line and not raw.endswith(b"\n"):
                raise InputProblem(f"line longer than {max_line // 2**10} KiB: binary data or no newlines",
                                   path=str(path), line=number)
            yield number, decode(raw, what, str(path), number).rstrip("\r\n")
    except OSError as exc:
        raise InputProblem(f"cannot read {what}: {exc.strerror or exc}", path=str(path)) from exc
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is not a finite number")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


def parse_json(text: str, path: str, what: str) -> Any:
    """JSON, refusing NaN, Infinity, numbers that overflow to infinity and nesting too deep."""
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise InputProblem(f"{what} is not valid JSON: {exc.msg} (column {exc.colno})", path=path,
                           line=exc.lineno) from exc
    except ValueError as exc:
        raise InputProblem(f"{what}: {exc}", path=path) from exc
    except RecursionError as exc:
        raise InputProblem(f"{what} is nested too deep", path=path) from exc


def parse_toml(text: str, path: str, what: str, *, finite: bool = True) -> dict[str, Any]:
    """TOML, refusing nesting too deep and (with ``finite``) ``inf``/``nan`` floats; a caller that
    names the key of a bad float itself (the config) passes ``finite=False``."""
    try:
        return tomllib.loads(text, parse_float=_finite if finite else float)
    except tomllib.TOMLDecodeError as exc:
        raise InputProblem(f"{what} is not valid TOML: {exc}", path=path) from exc
    except ValueError as exc:
        raise InputProblem(f"{what}: {exc}", path=path) from exc
    except RecursionError as exc:
        raise InputProblem(f"{what} is nested too deep", path=path) from exc
