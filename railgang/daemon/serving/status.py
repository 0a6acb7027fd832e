"""The serving step's status file: where it is and how it is read (``GET /v1/serving``,
``railgang serving status``; written by ``serving/live.py``).

Read through the one bounded reader (``topology/files.py``, docs/security.md "Files"): a FIFO or a
device put in its place is refused without blocking, at most ``MAX_STATUS_BYTES`` are read, and
nesting too deep, NaN and bytes that are not UTF-8 are one line (issue 38 row 8: a deeply nested
file was a 500, a FIFO hung the request)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from railgang.errors import NotFoundError
from railgang.topology.files import InputProblem, parse_json, read_text

# a status names each deployment's pool, held and lent nodes: a few hundred bytes a node, so
# even pools of 10,000 nodes stay well under this
MAX_STATUS_BYTES = 4 * 2**20


def status_path(settings: Any) -> Path:
    own = settings.serving.status_file
    return Path(own if own is not None else settings.daemon.heartbeat_file.parent / "serving.json")


def read_status(path: Path) -> dict[str, Any]:
    """The status file the daemon's serving step writes; NotFoundError with one line naming the
    file when it is absent or not the daemon's JSON."""
    try:
        body = parse_json(read_text(path, "serving status", MAX_STATUS_BYTES), str(path),
                          "serving status")
    except InputProblem as exc:
        if isinstance(exc.__cause__, FileNotFoundError):
            raise NotFoundError(f"no serving status at {path}: serving is off, or the daemon "
                                "has not run a cycle with it yet") from None
        raise NotFoundError(f"the serving status at {path} is unreadable ({exc.message})") from None
    if not isinstance(body, dict) or not isinstance(body.get("deployments"), list):
        raise NotFoundError(f"the serving status at {path} is unreadable (not a serving status)")
    return body


__all__ = ["read_status", "status_path"]
