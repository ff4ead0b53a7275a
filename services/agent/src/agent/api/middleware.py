"""Pure ASGI middleware: request id in logs, headers and `request.state`, request duration by route and status.

Every request gets an id made here, never the client's: two users sending one `X-Request-ID` would otherwise
share audit records. A client's id that follows the shared rule (agent_contract.request_id) is kept beside it,
as `client_request_id` in the logs and the audit record, so a client can still find its requests.

Pure ASGI on purpose: Starlette's BaseHTTPMiddleware wraps `receive`, which hides a client's disconnect
from `Request.is_disconnected()` (a non-streaming answer could then not be cancelled) and adds a task per
streamed chunk.
"""

from __future__ import annotations

import time

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent import metrics
from agent_contract import request_id


class ObserveMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        rid = request_id.new()
        theirs = request_id.clean(headers.get(b"x-request-id", b"").decode("latin-1"))
        state = scope.setdefault("state", {})  # request.state: read by agent.api.access (the request's context, audit)
        state["request_id"], state["client_request_id"] = rid, theirs
        structlog.contextvars.bind_contextvars(request_id=rid, **({"client_request_id": theirs} if theirs else {}))
        started, status = time.monotonic(), 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", []), (b"x-request-id", rid.encode("latin-1"))]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            endpoint = getattr(scope.get("route"), "path", "unmatched")
            metrics.REQUEST_DURATION.labels(endpoint, str(status), metrics.outcome(status)).observe(
                time.monotonic() - started
            )
            structlog.contextvars.unbind_contextvars("request_id", "client_request_id")
