"""Issue 11 item 7: an empty MCP_TOKEN plus MCP_TOKEN_FILE gave the MCP server the file's token but the agent
none, so every tool call was refused with 401. Both now read the token through agent_contract.secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.settings import Settings as AgentSettings
from agent_tools.settings import Settings as ServerSettings


def test_both_services_take_the_files_token_when_mcp_token_is_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = tmp_path / "mcp_token"
    token.write_text("s3cret-token-from-a-file\n")
    monkeypatch.setenv("MCP_TOKEN", "")  # compose passes a blank .env entry through like this
    monkeypatch.setenv("MCP_TOKEN_FILE", str(token))
    assert AgentSettings().mcp_secret() == ServerSettings().token() == "s3cret-token-from-a-file"
