"""The MCP server's own policy check: a forwarded role may run only its tools; the tool never starts otherwise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from agent_tools.policy import IdentityGuard, ToolForbidden, load_policy
from agent_tools.server import create_server
from agent_tools.settings import ConfigError
from tests.unit.agent_tools.conftest import settings_for


class HttpContext:
    """Stands in for the SDK's Context of an HTTP request: only the headers matter to the guard."""

    def __init__(self, **headers: str) -> None:
        self.headers = {k.replace("_", "-"): v for k, v in headers.items()}


def guard(trusted: bool = True, require: bool = True) -> IdentityGuard:
    return IdentityGuard(load_policy(None), trusted=trusted, require=require)


def test_the_shipped_policy_matches_the_agents_roles() -> None:
    policy = load_policy(None)
    assert policy.allows("admin", "anything") and policy.allows("support", "musteri_bakiyesi")
    assert not policy.allows("operations", "musteri_bakiyesi") and policy.allows("operations", "kyc_ozeti")
    assert not policy.allows("guest", "sistem_bilgisi") and not policy.allows("unknown-role", "sistem_bilgisi")


def test_a_role_may_run_only_its_tools() -> None:
    ops = {"x-agent-role": "operations", "x-agent-user": "ay%C5%9Fe"}
    caller = guard().check("kyc_ozeti", ops, in_process=False)
    assert caller is not None and (caller.user, caller.role) == ("ayşe", "operations")
    with pytest.raises(ToolForbidden, match="not allowed for role 'operations'"):
        guard().check("musteri_bakiyesi", ops, in_process=False)


def test_a_missing_identity_is_refused_when_required_and_allowed_only_in_process() -> None:
    with pytest.raises(ToolForbidden, match="no caller identity"):
        guard().check("sistem_bilgisi", {}, in_process=False)
    assert guard(require=False).check("sistem_bilgisi", {}, in_process=False) is None
    assert guard().check("musteri_bakiyesi", None, in_process=True) is None


def test_without_a_bearer_token_identity_headers_are_not_believed() -> None:
    admin = {"x-agent-role": "admin", "x-agent-user": "root"}
    with pytest.raises(ToolForbidden, match="no caller identity"):
        guard(trusted=False).check("musteri_bakiyesi", admin, in_process=False)


@pytest.mark.parametrize(
    "text, message",
    [
        ("roles: [admin]", "expected a mapping"),
        ("roles:\n  'bad role': ['*']", "must match"),  # the agent's rules: one parser for both
        ("roles:\n  ops: [42]", "must list tool names"),
    ],
)
def test_a_bad_policy_file_stops_the_server(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "p.yaml").write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_policy(tmp_path / "p.yaml")
    with pytest.raises(ConfigError, match=r"MCP_POLICY_FILE .* cannot be read"):
        load_policy(tmp_path / "absent.yaml")


def test_a_policy_naming_a_tool_the_server_lacks_stops_it(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("roles:\n  ops: [kyc_ozeti, kyc_ozti]\n")
    settings = settings_for(tmp_path, mcp_policy_file=tmp_path / "p.yaml")
    with pytest.raises(ConfigError, match="names tools this server does not have: kyc_ozti"):
        create_server(settings)


async def test_a_forbidden_call_never_reaches_the_tool_and_is_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(tmp_path, mcp_require_identity=True).model_copy(update={"mcp_token": SecretStr("t" * 24)})
    server = create_server(settings)
    touched: list[Any] = []

    def spy(*args: Any) -> list[Any]:
        touched.append(args)
        return []

    monkeypatch.setattr(server.deps.reports, "query", spy)
    context: Any = HttpContext(x_agent_role="operations", x_agent_user="mallory")
    with pytest.raises(ToolForbidden):
        await server.call_tool("musteri_bakiyesi", {"customer": "C1001"}, context)
    with pytest.raises(ToolForbidden):
        await server.call_tool("musteri_bakiyesi", {"customer": "C1001"}, HttpContext())  # type: ignore[arg-type]
    assert touched == []
    reg = server.metrics.registry
    assert reg.get_sample_value("mcp_tool_calls_total", {"tool": "musteri_bakiyesi", "outcome": "forbidden"}) == 2


def test_identity_is_required_by_default() -> None:
    """A bypass of the agent with the token but no forwarded role must not run tools."""
    from agent_tools.settings import Settings

    assert Settings(mcp_token=SecretStr("t" * 24)).mcp_require_identity is True
