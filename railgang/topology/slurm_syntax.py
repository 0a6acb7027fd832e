"""The lexical rules slurmctld applies to its ``*.conf`` files, ported from Slurm 22.05.

``topology.conf`` must mean to railgang exactly what it means to slurmctld, so these follow the C
code line by line rather than a library's idea of the grammar (python-hostlist, for one, refuses
``n[`` and accepts ``n[1-3]x``; Slurm does the opposite). Sources, tag slurm-22-05-8-1:

- ``src/common/parse_config.c``: ``_get_next_line`` (``#`` comments unless escaped, a trailing odd
  run of ``\\`` joins the next line *without* a blank, then every ``\\`` escapes the next
  character), ``keyvalue_pattern`` (``Key = value``, ``Key+=value``, ``Key="a b"``);
- ``src/common/parse_value.c``: ``s_p_handle_uint32`` (``0x10``, ``8k``, ``UNLIMITED``);
- ``src/common/hostlist.c``: ``_hostlist_create_bracketed`` and ``_parse_single_range`` (separators
  tab, comma and blank; at most 65,536 names per range; ``n[`` is the host ``n]``).

The conformance test (tests/topology/conformance) checks this against the real slurmctld.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = [
    "INFINITE",
    "SLURM_MAX_RANGE",
    "KeyValue",
    "host_list",
    "logical_lines",
    "next_pair",
    "parse_uint32",
    "slurm_hostlist",
]

SLURM_MAX_RANGE = 64 * 1024  # hostlist.c MAX_RANGE (and MAX_PREFIX_CNT): names in one range
INFINITE = 0xFFFFFFFF  # "UNLIMITED" / "INFINITE"
_ULONG_MAX = 2**64 - 1
_SPACE = " \t\n\v\f\r"  # C isspace() / [[:space:]] in the C locale
_HOST_SEP = "\t, "
# parse_config.c keyvalue_pattern; the quoted alternative is tried first, as glibc's matcher
# picks it (a quoted switch name is found again unquoted in Switches=, checked on slurmctld)
_PAIR = re.compile(
    r"^[ \t\n\v\f\r]*([A-Za-z0-9_.]+)[ \t\n\v\f\r]*([-*+/]?)=[ \t\n\v\f\r]*"
    r"(?:\"([^\"]*)\"(?=[ \t\n\v\f\r]|$)|([^ \t\n\v\f\r]+)(?=[ \t\n\v\f\r]|$))")


@dataclass(frozen=True)
class KeyValue:
    key: str
    value: str
    rest: str  # the text after this pair


def _strip_comment(line: str) -> str:
    backslashes = 0
    for i, ch in enumerate(line):
        if ch == "#" and backslashes % 2 == 0:
            return line[:i]
        backslashes = backslashes + 1 if ch == "\\" else 0
    return line


def _continued(line: str) -> str | None:
    """The line without its continuation backslash, or None if it does not continue."""
    body = line.rstrip(_SPACE)
    run = len(body) - len(body.rstrip("\\"))
    return body[:-1] if run % 2 == 1 else None


def _strip_escapes(line: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(line):
        if line[i] == "\\":
            i += 1
            if i >= len(line):
                break
        out.append(line[i])
        i += 1
    return "".join(out)


def logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(number of the first physical line, logical line) as slurmctld reads them; empty lines are
    skipped. Only ``\\n`` ends a line (``fgets``); a NUL ends the line's text early."""
    number = 1
    physical = text.split("\n")
    if physical and physical[-1] == "":
        physical.pop()
    i = 0
    while i < len(physical):
        parts: list[str] = []
        merged = 0
        while i < len(physical):
            line = _strip_comment(physical[i].split("\x00", 1)[0])
            i += 1
            merged += 1
            cut = _continued(line)
            if cut is None:
                parts.append(line)
                break
            parts.append(cut)
        joined = _strip_escapes("".join(parts))
        if joined:
            yield number, joined
        number += merged


def next_pair(text: str) -> KeyValue | None:
    """The ``key=value`` pair at the start of ``text`` (blanks allowed around ``=``), or None."""
    m = _PAIR.match(text)
    if m is None:
        return None
    value = m.group(3) if m.group(3) is not None else m.group(4)
    return KeyValue(m.group(1), value, text[m.end():])


def _strtoul(text: str) -> tuple[int, int]:
    """C strtoul(text, &end, 10): (value, index of end); end 0 when no digits were read."""
    i = 0
    while i < len(text) and text[i] in _SPACE:
        i += 1
    negative = False
    if i < len(text) and text[i] in "+-":
        negative = text[i] == "-"
        i += 1
    start = i
    while i < len(text) and text[i].isascii() and text[i].isdigit():
        i += 1
    if i == start:
        return 0, 0
    value = min(int(text[start:i]), _ULONG_MAX)
    return ((-value) % 2**64 if negative else value), i


def _strtoul0(text: str) -> tuple[int, int, bool]:
    """C strtoul(text, &end, 0): (value, index of end, overflowed); end 0 when nothing was read."""
    i = 0
    while i < len(text) and text[i] in _SPACE:
        i += 1
    negative = i < len(text) and text[i] == "-"
    if i < len(text) and text[i] in "+-":
        i += 1
    base, digits = 10, "0123456789"
    if text[i:i + 2].lower() == "0x" and text[i + 2:i + 3].lower() in set("0123456789abcdef") - {""}:
        base, digits, i = 16, "0123456789abcdefABCDEF", i + 2
    elif text[i:i + 1] == "0":
        base, digits = 8, "01234567"
    start = i
    while i < len(text) and text[i] in digits:
        i += 1
    if i == start:
        return 0, 0, False
    value = int(text[start:i], base)
    if value > _ULONG_MAX:
        return _ULONG_MAX, i, True
    return ((-value) % 2**64 if negative else value), i, False


def parse_uint32(value: str, key: str) -> int:
    """parse_value.c s_p_handle_uint32; ValueError carries slurmctld's own message."""
    num, end, overflow = _strtoul0(value)
    if value[end:end + 1] in ("k", "K"):
        num, end = num * 1024, end + 1
    if end < len(value):
        if value.upper() in ("UNLIMITED", "INFINITE"):
            return INFINITE
        raise ValueError(f"{key} value ({value}) is not a valid number")
    if overflow:
        raise ValueError(f"{key} value ({value}) is out of range")
    if value[:1] == "-":
        raise ValueError(f"{key} value ({value}) is less than zero")
    if num > 0xFFFFFFFF:
        raise ValueError(f"{key} value ({value}) is greater than 4294967295")
    return num


def _tokens(text: str) -> Iterator[str]:
    """hostlist.c _next_tok: split on tab, comma and blank, keeping ``x[1,2]`` whole."""
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _HOST_SEP:
            i += 1
        if i >= n:
            return
        start = parse = i
        while True:
            while i < n and text[i] not in _HOST_SEP:
                i += 1
            extended = False
            while True:
                ob = text.find("[", parse)
                if ob == -1 or ob > i:
                    break
                cb = text.find("]", parse)
                if cb == -1 or cb < ob:
                    break
                if cb < i:
                    parse = cb + 1
                    continue
                i, extended = cb, True
                break
            if not extended:
                break
        yield text[start:i]
        while i < n and text[i] in _HOST_SEP:
            i += 1


def _ranges(text: str) -> list[tuple[int, int, int]]:
    """_parse_range_list + _parse_single_range: [(lo, hi, width)]; ValueError like Slurm's."""
    out = []
    for piece in text.split(","):
        if "x" in piece:
            raise ValueError(f"Invalid range: `{piece}'")
        lo_text, dash, hi_text = piece.partition("-")
        if dash and hi_text.startswith("-"):
            raise ValueError(f"Invalid range: `{piece}'")
        lo, end = _strtoul(lo_text)
        if end == 0:
            raise ValueError(f"Invalid range: `{piece}'")
        if hi_text:
            hi, hi_end = _strtoul(hi_text)
            if hi_end == 0 or hi_end != len(hi_text):
                raise ValueError(f"Invalid range: `{piece}'")
        else:
            hi = lo  # "1-" is the range 1-1; "1a" and "1a-" are invalid, but "1a-3" is not
            if end != len(lo_text):
                raise ValueError(f"Invalid range: `{piece}'")
        if lo > hi:
            raise ValueError(f"Invalid range: `{piece}'")
        if hi - lo + 1 > SLURM_MAX_RANGE:
            raise ValueError(f"Too many hosts in range `{piece}'")
        out.append((lo, hi, len(lo_text)))
    return out


class _Names:
    """Collects names, refusing more than ``cap`` (railgang's own memory guard)."""

    def __init__(self, cap: int, expr: str) -> None:
        self.cap, self.expr = cap, expr
        self.names: list[str] = []

    def one(self, name: str) -> None:
        if len(self.names) >= self.cap:
            raise OverflowError(f"host list {self.expr!r} expands to more than {self.cap} names")
        self.names.append(name)

    def push(self, prefix: str, ranges: list[tuple[int, int, int]], suffix: str = "") -> None:
        for lo, hi, width in ranges:
            if len(self.names) + hi - lo + 1 > self.cap:
                raise OverflowError(f"host list {self.expr!r} expands to more than {self.cap} names")
            self.names.extend(f"{prefix}{j:0{width}d}{suffix}" for j in range(lo, hi + 1))


def _push(names: _Names, prefix: str, ranges: list[tuple[int, int, int]], suffix: str = "") -> bool:
    """_push_range_list: a prefix may hold one more range (``rack[1-2]n[1-4]``); False = invalid."""
    p = prefix.rfind("[")
    q = prefix.rfind("]", p + 1) if p != -1 else -1
    if p == -1 or q == -1:
        names.push(prefix, ranges, suffix)
        return True
    head, inner, tail = prefix[:p], prefix[p + 1:q], prefix[q + 1:]
    try:
        outer = _ranges(inner)
    except ValueError:
        return False
    if sum(hi - lo + 1 for lo, hi, _ in outer) > SLURM_MAX_RANGE:
        return False
    for lo, hi, width in outer:
        for j in range(lo, hi + 1):
            new_prefix = f"{head}{j:0{width}d}{tail}"
            if "[" in head:
                _push(names, new_prefix, ranges, suffix)  # Slurm ignores a failure one level down
            else:
                names.push(new_prefix, ranges, suffix)
    return True


def slurm_hostlist(expr: str, cap: int, release: str = "22.05") -> tuple[str, ...]:
    """Expand ``expr`` as Slurm's hostlist_create does (ValueError: Slurm refuses it;
    OverflowError: more than ``cap`` names, which railgang refuses to hold). ``release`` "24.11"
    follows that release's ``_hostlist_create_bracketed`` (src/common/hostlist.c, tag
    slurm-24-11-5-1): a ``[`` without ``]`` is an error, and text after ``]`` is a suffix of
    every name (``n[1-2]x`` is n1x,n2x); 22.05 read ``n[`` as the host ``n]`` and refused a suffix."""
    names = _Names(cap, expr)
    newer = release != "22.05"
    for tok in _tokens(expr):
        p = tok.rfind("[")
        if p == -1:
            names.one(tok)
            continue
        prefix, rest = tok[:p], tok[p + 1:]
        q = rest.find("]")
        if q == -1 and newer:
            raise ValueError(f"'[' without ']' in {tok!r}")
        if q == -1:
            # "n[" has no "]": Slurm tacks one on the prefix (the host "n]"), or keeps what follows
            names.one(f"{prefix}]" if prefix else rest)
            continue
        suffix = ""
        if rest[q + 1:q + 2] not in ("", ","):
            if not newer:
                raise ValueError(f"text after ']' in {tok!r}")
            suffix = rest[q + 1:]
        ranges = _ranges(rest[:q])
        if not _push(names, prefix, ranges, suffix):
            raise ValueError(f"malformed prefix range in {tok!r}")
    return tuple(names.names)


def host_list(expr: str, cap: int, release: str = "22.05") -> tuple[str, ...]:
    """``slurm_hostlist`` with one kind of error: ValueError saying what is wrong with ``expr``."""
    try:
        return slurm_hostlist(expr, cap, release)
    except OverflowError as exc:
        raise ValueError(str(exc)) from exc
    except ValueError as exc:
        raise ValueError(f"malformed host list {expr!r}: {exc}") from exc
