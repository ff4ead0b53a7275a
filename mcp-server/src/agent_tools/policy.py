"""Second line of access control: the MCP server refuses a tool the forwarded caller's role may not use.

The agent already offers each caller only the tools of their role; this check holds even if the agent is
bypassed or buggy. The identity (X-Agent-User, X-Agent-Role) is trusted only on HTTP requests that passed
the bearer-token check, so it is never accepted from a server running without a token. Calls made inside
the process (no HTTP request) are not checked. Policy format: `roles: {role: [tool names or "*"]}`.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import yaml
from mcp.server.mcpserver.exceptions import ToolError

from agent_tools.settings import ConfigError, Settings

USER_HEADER, ROLE_HEADER = "x-agent-user", "x-agent-role"


class ToolForbidden(ToolError):
    """The caller's role may not use this tool (or no caller identity was forwarded)."""


@dataclass(frozen=True)
class Policy:
    roles: dict[str, frozenset[str]]

    def allows(self, role: str, tool: str) -> bool:
        granted = self.roles.get(role, frozenset())
        return "*" in granted or tool in granted


def load_policy(path: Path | None) -> Policy:
    """MCP_POLICY_FILE, else the policy shipped with the server (the same as the agent's default)."""
    try:
        text = (
            path.read_text(encoding="utf-8")
            if path is not None
            else resources.files("agent_tools").joinpath("policy.yaml").read_text(encoding="utf-8")
        )
        data = yaml.safe_load(text)
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"MCP_POLICY_FILE {path} cannot be read: {exc}") from exc
    roles = data.get("roles") if isinstance(data, dict) else None
    if not isinstance(roles, dict) or not all(isinstance(t, list | None) for t in roles.values()):
        raise ConfigError(f'MCP_POLICY_FILE {path or "default"}: expected `roles: {{role: [tool names or "*"]}}`')
    return Policy({str(role): frozenset(str(t) for t in tools or []) for role, tools in roles.items()})


@dataclass(frozen=True)
class Caller:
    user: str
    role: str


class IdentityGuard:
    """Checks every HTTP tool call against the policy, from the identity the agent forwarded."""

    def __init__(self, policy: Policy, *, trusted: bool, require: bool) -> None:
        self.policy, self.trusted, self.require = policy, trusted, require

    @classmethod
    def from_settings(cls, settings: Settings) -> IdentityGuard:
        return cls(
            load_policy(settings.mcp_policy_file),
            trusted=settings.token() is not None,
            require=settings.mcp_require_identity,
        )

    def caller(self, headers: Any) -> Caller | None:
        if not self.trusted or headers is None or not headers.get(ROLE_HEADER):
            return None
        return Caller(unquote(headers.get(USER_HEADER) or "")[:200], str(headers.get(ROLE_HEADER))[:64])

    def check(self, tool: str, headers: Any, in_process: bool) -> Caller | None:
        """The caller if allowed; raises ToolForbidden (the tool never runs) otherwise."""
        if in_process:
            return None
        caller = self.caller(headers)
        if caller is None:
            if self.require:
                raise ToolForbidden(f"the tool {tool} was refused: no caller identity was forwarded")
            return None
        if not self.policy.allows(caller.role, tool):
            raise ToolForbidden(f"the tool {tool} is not allowed for role {caller.role!r}")
        return caller
