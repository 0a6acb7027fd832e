"""The API's gate in front of every route: a request that may carry a body is authenticated from
its headers before one body byte is read, and no body is read past ``api.max_body_bytes``.

FastAPI reads and parses a route's body before it resolves the route's dependencies, the bearer
token among them, so without this gate anyone who can reach the port makes the process hold and
parse whatever they send (a 32 MB body without a token took it from 236 MB to 820 MB). In order:

1. ``Content-Length`` over the limit (or not a number): 413 (400), nothing read.
2. A request under ``/v1/`` that may carry a body (POST, PUT, PATCH, DELETE, or any request
   that declares one) without a valid bearer token: 401, nothing read. Every ``/v1/`` route needs
   a token; the public paths (``/healthz``, ``/metrics``, ``/docs``) take no body.
3. The body is counted as it streams (``Content-Length`` may lie, chunked bodies declare none):
   the first chunk past the limit ends the request with 413.

Rejections close the connection (``Connection: close``): the server does not read the rest of a
body nobody will parse. Authorisation (403: a team token on an admin route) stays with the route,
after a body that is by then bounded.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from railgang.daemon.api import messages
from railgang.errors import AuthenticationError

BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
PROTECTED = "/v1/"  # every route under it needs a bearer token
# error(status, code, message, fields, headers) -> Response: the app's one error format
Reply = Callable[..., Response]


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` when the body passes the limit; FastAPI re-raises HTTP exceptions
    from body reading, so the app's handler answers 413 (the gate does if it gets here)."""

    def __init__(self, limit: int) -> None:
        super().__init__(status_code=413, detail=messages.BODY_TOO_LARGE.format(limit=limit))


class RequestGuard:
    """Pure ASGI middleware (no buffering): see the module docstring.

    ``authenticate(secret)`` raises ``AuthenticationError`` for a token it does not accept; it is
    blocking (a database lookup) and runs in the thread pool.
    """

    def __init__(self, app: ASGIApp, *, max_body_bytes: int,
                 authenticate: Callable[[str], object], reply: Reply) -> None:
        self.app = app
        self.limit = max_body_bytes
        self.authenticate = authenticate
        self.reply = reply

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        rejection = await self._check(scope, headers)
        if rejection is not None:
            await rejection(scope, receive, send)
            return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except BodyTooLarge as exc:
            if started:
                raise
            await self._reject(413, "payload_too_large", str(exc.detail))(scope, receive, send)

    async def _check(self, scope: Scope, headers: Headers) -> Response | None:
        declared = headers.get("content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                return self._reject(400, "bad_request", messages.BAD_CONTENT_LENGTH)
            if int(declared) > self.limit:
                return self._reject(413, "payload_too_large",
                                    messages.BODY_TOO_LARGE.format(limit=self.limit))
        may_have_body = (scope["method"] in BODY_METHODS or int(declared or 0) > 0
                         or "transfer-encoding" in headers)
        if not may_have_body or not scope["path"].startswith(PROTECTED):
            return None
        scheme, _, secret = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not secret.strip():
            return self._reject(401, "unauthenticated", messages.MISSING_TOKEN)
        try:
            await run_in_threadpool(self.authenticate, secret.strip())
        except AuthenticationError as exc:
            return self._reject(401, "unauthenticated", exc.message)
        return None

    def _reject(self, status: int, code: str, message: str) -> Response:
        headers = {"Connection": "close"}
        if status == 401:
            headers["WWW-Authenticate"] = "Bearer"
        return self.reply(status, code, message, None, headers)


__all__ = ["BODY_METHODS", "PROTECTED", "BodyTooLarge", "RequestGuard"]
