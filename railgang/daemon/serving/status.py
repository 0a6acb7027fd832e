"""The serving step's status file: where it is and how it is read (``GET /v1/serving``,
``railgang serving status``; written by ``serving/live.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from railgang.errors import NotFoundError

MAX_STATUS_BYTES = 4 * 2**20


def status_path(settings: Any) -> Path:
    own = settings.serving.status_file
    return Path(own if own is not None else settings.daemon.heartbeat_file.parent / "serving.json")


def read_status(path: Path) -> dict[str, Any]:
    """The status file the daemon's serving step writes; NotFoundError with one line when it
    is absent or not the daemon's JSON (read bounded)."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_STATUS_BYTES + 1)
    except OSError:
        raise NotFoundError(f"no serving status at {path}: serving is off, or the daemon has "
                            "not run a cycle with it yet") from None
    try:
        if len(raw) > MAX_STATUS_BYTES:
            raise ValueError("too large")
        body = json.loads(raw)
        if not isinstance(body, dict) or not isinstance(body.get("deployments"), list):
            raise ValueError("not a serving status")
    except (ValueError, UnicodeDecodeError) as exc:
        raise NotFoundError(f"the serving status at {path} is unreadable ({exc})") from None
    return body


__all__ = ["read_status", "status_path"]
