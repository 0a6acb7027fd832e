"""What ``squeue -h -O NAME:0SUFFIX,...`` prints, for tests of the narrow read (narrow.py) that
need no cluster: each field whole (width 0), then its suffix, a newline after each job, and
the bytes decoded as the runner decodes them (invalid UTF-8 becomes U+FFFD)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from railgang.daemon.slurm.cli.runner import decode


def squeue_o(argv: list[str], rows: Iterable[Mapping[str, str | bytes]]) -> str:
    """``rows`` (squeue's field name -> value) as squeue prints them for ``argv``'s ``-O``."""
    spec = argv[argv.index("-O") + 1]
    fields = []
    for token in spec.split(","):
        m = re.fullmatch(r"([^:]+):0(.*)", token, re.S)
        assert m, token
        fields.append((m[1], m[2].encode()))
    out = b""
    for row in rows:
        for name, suffix in fields:
            value = row[name]
            out += (value if isinstance(value, bytes) else value.encode()) + suffix
        out += b"\n"
    return decode(out)


__all__ = ["squeue_o"]
