"""The daemon's side of the one bounded reader (``railgang.topology.files``): every file a
``railgang`` command is given is read here, with the bound that fits what it holds, and every
problem becomes one ``InputError`` line (``path[:line]: message``), never a traceback.

The bounds, in one table (docs/security.md "Files"); ``--config`` is read by ``daemon/config.py``
(1 MiB), topology and facts files by ``topology/inputs.py`` (16 MiB), traces line by line
(``sim/traces``, 1 GiB, 64 KiB a line).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from railgang.errors import InputError
from railgang.topology.files import InputProblem, parse_toml, read_text

SACCT_MAX_BYTES = 256 * 2**20  # `sacct --json` of a busy day; a longer range: --since/--until
TELEMETRY_MAX_BYTES = 256 * 2**20  # a day of nvidia-smi CSV at 1 s for 8 GPUs is ~70 MB
QUOTAS_MAX_BYTES = 2**20  # a quota tree of a few hundred teams is a few kB


def input_error(exc: InputProblem) -> InputError:
    """The CLI's one-line error for a reader's problem."""
    return InputError(exc.message, path=exc.path, line=exc.line, field=exc.field)


def read_input(path: str | Path, what: str, *, limit: int) -> str:
    """The file's text (a regular file, at most ``limit`` bytes, UTF-8 without NUL)."""
    try:
        return read_text(path, what, limit)
    except InputProblem as exc:
        raise input_error(exc) from exc


def read_json_text(path: str | Path, what: str, *, limit: int) -> str:
    """The text of a bounded JSON file whose records a later parser reads one by one (sacct):
    a file that is not JSON at all (empty, truncated, nested too deep) is refused here, naming
    the file; NaN and odd values inside records are left to that parser, which skips the record."""
    text = read_input(path, what, limit=limit)
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{what} is not valid JSON: {exc.msg} (column {exc.colno})", path=str(path),
                         line=exc.lineno) from exc
    except RecursionError as exc:
        raise InputError(f"{what} is nested too deep", path=str(path)) from exc
    return text


def read_toml(path: str | Path, what: str, *, limit: int) -> dict[str, Any]:
    """A bounded TOML file: nesting bounded, no ``inf``/``nan``."""
    try:
        return parse_toml(read_text(path, what, limit), str(path), what)
    except InputProblem as exc:
        raise input_error(exc) from exc


__all__ = ["QUOTAS_MAX_BYTES", "SACCT_MAX_BYTES", "TELEMETRY_MAX_BYTES", "input_error",
           "read_input", "read_json_text", "read_toml"]
