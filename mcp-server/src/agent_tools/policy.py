"""Second line of access control: the MCP server refuses a tool the forwarded caller's role may not use.

The agent already offers each caller only the tools of their role; this check holds even if the agent is
bypassed or buggy. The identity (X-Agent-User, X-Agent-Role) is trusted only on HTTP requests that passed
the bearer-token check, so it is never accepted from a server running without a token. Calls made inside
the process (no HTTP request) are not checked. Policy format: `roles: {role: [tool names or "*"]}`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from agent_contract.headers import Caller
from agent_contract.policy import Policy, PolicyError
from agent_contract.policy import load_policy as load_contract_policy
from agent_tools.settings import ConfigError, Settings


class ToolForbidden(ToolError):
    """The caller's role may not use this tool (or no caller identity was forwarded)."""


def load_policy(path: Path | None) -> Policy:
    """MCP_POLICY_FILE, else the shipped default: the agent's parser, so both refuse the same files."""
    try:
        return load_contract_policy(path, setting="MCP_POLICY_FILE")
    except PolicyError as exc:
        raise ConfigError(str(exc)) from exc


def check_tools_known(policy: Policy, tools: Iterable[str]) -> None:
    """Refuse a policy that names a tool this server does not have: a typo would grant nothing, silently."""
    unknown = policy.unknown_tools(tools)
    if unknown:
        raise ConfigError(
            f"{policy.source} names tools this server does not have: {', '.join(unknown)}. "
            f"Its tools are: {', '.join(sorted(tools))}"
        )


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
        if not self.trusted:
            return None
        return Caller.from_headers(headers)

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
