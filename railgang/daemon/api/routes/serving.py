"""Serving deployments over HTTP: ``GET /v1/serving`` (issue 19).

What the daemon's last serving step decided, as it wrote it (``serving/live.py``): per
deployment its pool, replicas wanted by the forecast and by the demand now, running, released and
queued replicas, and the pool's nodes lent to preemptible work with the time each is expected
back. 404 while serving is off (no status file yet); the file is read bounded, and one that is
not the daemon's JSON is a one-line 404 as well, never a 500.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request

from railgang.daemon.api.deps import CurrentToken
from railgang.errors import NotFoundError

router = APIRouter(prefix="/v1", tags=["serving"])
MAX_STATUS_BYTES = 4 * 2**20


def status_path(settings: Any) -> Path:
    own = settings.serving.status_file
    return Path(own if own is not None else settings.daemon.heartbeat_file.parent / "serving.json")


@router.get("/serving")
def serving(request: Request, _: CurrentToken) -> dict[str, Any]:
    """The serving deployments as the daemon's last cycle left them."""
    path = status_path(request.app.state.settings)
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


__all__ = ["router"]
