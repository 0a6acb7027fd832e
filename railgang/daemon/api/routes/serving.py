"""Serving deployments over HTTP: ``GET /v1/serving`` (issue 19).

What the daemon's last serving step decided, as it wrote it (``serving/live.py``): per
deployment its pool, replicas wanted by the forecast and by the demand now, running, released and
queued replicas, and the pool's nodes lent to preemptible work with the time each is expected
back. 404 while serving is off (no status file yet); the file is read through the one bounded
reader (``serving/status.py``: a FIFO or a device is refused without blocking the request, nesting
too deep and NaN are refused), and one that is not the daemon's JSON is a one-line 404 as well,
never a 500 (``tests/daemon/api/test_serving_api.py``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from railgang.daemon.api.deps import CurrentToken
from railgang.daemon.serving.status import read_status, status_path

router = APIRouter(prefix="/v1", tags=["serving"])


@router.get("/serving")
def serving(request: Request, _: CurrentToken) -> dict[str, Any]:
    """The serving deployments as the daemon's last cycle left them."""
    return read_status(status_path(request.app.state.settings))


__all__ = ["router"]
