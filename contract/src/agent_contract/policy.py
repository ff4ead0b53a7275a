"""Roles → tools: the YAML policy that decides which tools a caller's role may use (never the model).

One parser for both services: the agent builds each request's tool list from it, the MCP server checks
every call against it again. Format (policy.yaml beside this module is the shipped default):

    roles: {role: [tool names, or "*" for every tool]}   a role missing here may use no tool
    groups: {sso-group: role}                            optional; a group named like a role maps to it
    users: {e-mail, id or shell pattern: role}           optional; end users a front-end key names

A policy naming a tool the MCP server does not have is a typo that would silently grant nothing:
`unknown_tools()` finds them (the server refuses to start, the agent logs it when the tool list arrives).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from agent_contract.names import problem

ROLE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
ALL_TOOLS = "*"
SHIPPED = "shipped default"


class PolicyError(ValueError):
    """The policy file is missing or malformed; the message names the file and the problem."""


@dataclass(frozen=True)
class Policy:
    """`roles` maps a role to the tool names it may use ("*" = all); `groups` maps SSO groups to roles;
    `users` maps the end users a front-end names (e-mail or id, shell-style patterns) to roles."""

    roles: dict[str, frozenset[str]]
    groups: dict[str, str] = field(default_factory=dict)
    source: str = SHIPPED
    users: dict[str, str] = field(default_factory=dict)

    def allows(self, role: str, tool: str) -> bool:
        granted = self.roles.get(role, frozenset())
        return ALL_TOOLS in granted or tool in granted

    def checker(self, role: str) -> Callable[[str], bool]:
        return lambda tool: self.allows(role, tool)

    def tools_for(self, role: str, available: Iterable[str]) -> list[str]:
        return [name for name in available if self.allows(role, name)]

    def role_for_groups(self, groups: Iterable[str]) -> str | None:
        """The first role in file order that one of `groups` maps to (directly by name or via `groups:`)."""
        wanted = set()
        for group in groups:
            if group in self.roles:
                wanted.add(group)
            if group in self.groups:
                wanted.add(self.groups[group])
        return next((role for role in self.roles if role in wanted), None)

    def role_for_user(self, user: str) -> str | None:
        """The role of the first `users:` entry (in file order) matching a front-end's user, if any. Case is
        ignored for A-Z only: Unicode case rules would make other names match (`\u212a` KELVIN SIGN lowers to `k`)."""
        name = ascii_lower(user)
        return next((role for pattern, role in self.users.items() if fnmatchcase(name, ascii_lower(pattern))), None)

    def unknown_tools(self, available: Iterable[str]) -> list[str]:
        """Tool names the policy grants that are not in `available` (sorted)."""
        named = {tool for tools in self.roles.values() for tool in tools} - {ALL_TOOLS}
        return sorted(named - set(available))


def parse_policy(data: Any, source: str) -> Policy:
    """The policy in `data` (parsed YAML); PolicyError naming `source` when it breaks the format."""
    if not isinstance(data, dict) or not isinstance(data.get("roles"), dict):
        raise PolicyError(f'{source}: expected a mapping with `roles: {{role: [tool names or "*"]}}`')
    roles: dict[str, frozenset[str]] = {}
    for role, tools in data["roles"].items():
        if not isinstance(role, str) or not ROLE_NAME.match(role):
            raise PolicyError(f"{source}: role name {role!r} must match {ROLE_NAME.pattern}")
        if tools is None:
            tools = []
        if not isinstance(tools, list) or not all(isinstance(t, str) and t for t in tools):
            raise PolicyError(f'{source}: role {role!r} must list tool names (strings) or "*"')
        roles[role] = frozenset(tools)
    groups = data.get("groups") or {}
    if not isinstance(groups, dict) or not all(isinstance(k, str) and v in roles for k, v in groups.items()):
        raise PolicyError(f"{source}: `groups` must map SSO group names to roles defined under `roles`")
    users = data.get("users") or {}
    if not isinstance(users, dict) or not all(isinstance(k, str) and v in roles for k, v in users.items()):
        raise PolicyError(f"{source}: `users` must map front-end users (e-mail, id or pattern) to roles under `roles`")
    for kind, entries in (("groups", groups), ("users", users)):
        for entry in entries:
            why = problem(entry)
            if why is not None:
                raise PolicyError(f"{source}: the {kind} entry {entry!r} {why}: it could stand for another name")
    return Policy(roles, dict(groups), source, dict(users))


def shipped_policy_text() -> str:
    return resources.files("agent_contract").joinpath("policy.yaml").read_text(encoding="utf-8")


def load_policy(path: Path | None = None, setting: str = "AGENT_POLICY_FILE") -> Policy:
    """The policy from `path` (the service's `setting`), else the default shipped with this package."""
    if path is None:
        text, source = shipped_policy_text(), SHIPPED
    else:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise PolicyError(f"{setting} {path} cannot be read: {exc}") from exc
        source = str(path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PolicyError(f"{source}: not valid YAML: {exc}") from exc
    return parse_policy(data, source)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def ascii_lower(text: str) -> str:
    """`text` with A-Z lowered and every other character as it is (e-mail addresses compare this way)."""
    return text.translate(_ASCII_LOWER)
