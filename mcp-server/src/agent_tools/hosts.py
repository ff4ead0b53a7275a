"""Exact Host and Origin checks on `/mcp` (DNS-rebinding defence), in front of the MCP SDK's own.

The SDK compares a `name:*` entry by prefix (`host.startswith("name:")`), so `mcp-server:8001.evil.example`
or `http://localhost:1@agent-api.evil.example` passed. Here an entry is `host[:port]`, compared whole (host
names case-insensitively), and `:*` stands for one port number, digits only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

_PORT = re.compile(r"[0-9]{1,5}")


def _matches(value: str, allowed: Iterable[str]) -> bool:
    value = value.strip().lower()
    for entry in allowed:
        entry = entry.strip().lower()
        if entry.endswith(":*"):
            base = entry[:-1]  # `name:`
            if value.startswith(base) and _PORT.fullmatch(value[len(base) :]):
                return True
        elif value == entry:
            return True
    return False


def host_allowed(host: str | None, allowed: Iterable[str]) -> bool:
    return bool(host) and _matches(host or "", allowed)


def origin_allowed(origin: str | None, allowed: Iterable[str]) -> bool:
    """No `Origin`: not a browser, allowed. Else it must equal an entry (`scheme://host[:port]`, no path)."""
    return origin is None or _matches(origin.rstrip("/"), allowed)


class HostCheck:
    """Pure ASGI: 421 for a `Host`, 403 for an `Origin` not on the lists, on the protected path only."""

    def __init__(self, app: ASGIApp, *, hosts: list[str], origins: list[str], protected_prefix: str) -> None:
        self.app, self.hosts, self.origins, self.prefix = app, hosts, origins, protected_prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and (path == self.prefix or path.startswith(self.prefix + "/")):
            headers = {k: bytes(v).decode("latin-1") for k, v in scope.get("headers", [])}
            if not host_allowed(headers.get(b"host"), self.hosts):
                await Response("Invalid Host header", status_code=421)(scope, receive, send)
                return
            if not origin_allowed(headers.get(b"origin"), self.origins):
                await Response("Invalid Origin header", status_code=403)(scope, receive, send)
                return
        await self.app(scope, receive, send)
