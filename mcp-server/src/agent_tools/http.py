"""HTTP edge of the tool server: bearer-token check, request ids and access log lines, /metrics body."""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable

import structlog
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_contract import request_id
from agent_tools.metrics import Metrics

log = structlog.get_logger("agent_tools.http")


def metrics_response(registry: CollectorRegistry) -> Response:
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def token_matches(header: str | None, token: str) -> bool:
    """Constant-time check of `Authorization: Bearer <token>`."""
    if not header:
        return False
    scheme, _, presented = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(presented.strip().encode(), token.encode())


class AuthMiddleware:
    """Pure ASGI (streaming-safe): 401 on the protected prefix without the bearer token; binds request_id."""

    def __init__(
        self, app: ASGIApp, *, token: Callable[[], str | None] | None, protected_prefix: str, metrics: Metrics
    ) -> None:
        self.app = app
        self.token = token
        self.prefix = protected_prefix
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        rid = request_id.clean(_header(scope, b"x-request-id"))
        fields = {"request_id": rid} if rid else {}
        with structlog.contextvars.bound_contextvars(**fields):
            if self._protected(path) and not self._authorized(scope):
                self.metrics.rejected.labels("unauthorized").inc()
                log.warning("request_unauthorized", path=path, method=scope.get("method"))
                await _unauthorized(scope, receive, send)
                return
            await self._forward(scope, receive, send, path)

    def _protected(self, path: str) -> bool:
        return path == self.prefix or path.startswith(self.prefix + "/")

    def _authorized(self, scope: Scope) -> bool:
        if self.token is None:  # MCP_ALLOW_NO_TOKEN
            return True
        required = self.token()  # read per request: a rotated MCP_TOKEN_FILE applies without a restart
        return required is not None and token_matches(_header(scope, b"authorization"), required)

    async def _forward(self, scope: Scope, receive: Receive, send: Send, path: str) -> None:
        started = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            if path not in ("/healthz", "/metrics"):  # probes and scrapes would drown the log
                log.info(
                    "http_request_finished",
                    method=scope.get("method"),
                    path=path,
                    status=status,
                    duration_ms=round((time.perf_counter() - started) * 1000, 2),
                )


async def _unauthorized(scope: Scope, receive: Receive, send: Send) -> None:
    body = {
        "error": {
            "message": "missing or invalid bearer token (Authorization: Bearer <MCP_TOKEN>)",
            "type": "unauthorized",
            "code": 401,
        }
    }
    response = JSONResponse(body, status_code=401, headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
    await response(scope, receive, send)
