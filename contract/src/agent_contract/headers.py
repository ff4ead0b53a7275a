"""HTTP headers the agent sends the MCP server, and the caller identity two of them carry.

The agent authenticates the caller and forwards who they are; the MCP server trusts these headers only on
requests that passed its bearer-token check (agent_tools.policy). The user is percent-encoded because
header values must be latin-1 and user names need not be.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote, unquote

REQUEST_ID = "X-Request-ID"
USER = "X-Agent-User"
ROLE = "X-Agent-Role"
AUTHORIZATION = "Authorization"

MAX_USER_CHARS = 200
MAX_ROLE_CHARS = 64


@dataclass(frozen=True)
class Caller:
    """Who asked: the authenticated user and the role the policy grants tools by."""

    user: str
    role: str

    def headers(self) -> dict[str, str]:
        """The identity as the agent forwards it on every MCP request."""
        return {USER: quote(self.user, safe=""), ROLE: self.role}

    @classmethod
    def from_headers(cls, headers: Mapping[str, str] | None) -> Caller | None:
        """The forwarded identity, or None when no role was forwarded. `headers` is case-insensitive."""
        if headers is None or not headers.get(ROLE.lower()):
            return None
        user = unquote(headers.get(USER.lower()) or "")[:MAX_USER_CHARS]
        return cls(user, str(headers.get(ROLE.lower()))[:MAX_ROLE_CHARS])
