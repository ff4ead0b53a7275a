"""MCP server settings: token policy, allowed hosts, time zone."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from agent_tools.server import create_app
from agent_tools.settings import ConfigError, Settings


def test_token_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="MCP_TOKEN is not set"):
        Settings(mcp_token=None).checked_token()
    assert Settings(mcp_token=None, mcp_allow_no_token=True).checked_token() is None
    with pytest.raises(ConfigError, match="too weak"):
        Settings(mcp_token=SecretStr("short")).checked_token()
    (tmp_path / "tok").write_text("s" * 20 + "\n")
    assert Settings(mcp_token=None, mcp_token_file=tmp_path / "tok").checked_token() == "s" * 20


def test_create_app_refuses_to_build_without_a_token(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        create_app(Settings(mcp_token=None, data_dir=tmp_path, files_root=tmp_path))


def test_allowed_hosts_from_a_comma_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_ALLOWED_HOSTS", "mcp-server:*, tools.intranet:8001")
    settings = Settings()
    assert settings.mcp_allowed_hosts == ["mcp-server:*", "tools.intranet:8001"]
    assert settings.origins() == ["http://mcp-server:*", "http://tools.intranet:8001"]
    monkeypatch.setenv("MCP_ALLOWED_HOSTS", " ")
    assert "mcp-server:*" in Settings().mcp_allowed_hosts  # empty means the defaults, never "allow nothing"


def test_default_hosts_include_the_compose_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_ALLOWED_HOSTS", raising=False)
    assert {"mcp-server:*", "127.0.0.1:*", "localhost:*"} <= set(Settings().mcp_allowed_hosts)


def test_timezone_precedence_and_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_TIMEZONE", raising=False)
    monkeypatch.setenv("TZ", "Europe/Istanbul")
    assert Settings().timezone_name() == "Europe/Istanbul"
    assert Settings(mcp_timezone="Asia/Tokyo").timezone_name() == "Asia/Tokyo"
    with pytest.raises(ConfigError, match="not a known time zone"):
        Settings(mcp_timezone="Mars/Base").zone()


def test_a_token_file_rotated_to_an_empty_or_weak_value_refuses_every_call(tmp_path: Path) -> None:
    path = tmp_path / "tok"
    path.write_text("s" * 20)
    current = Settings(mcp_token=None, mcp_token_file=path).token_source()
    assert current is not None and current() == "s" * 20
    for weak in ("", "changeme"):
        (tmp_path / "new").write_text(weak)
        (tmp_path / "new").rename(path)
        assert current() is None  # AuthMiddleware refuses when there is no required token: never open
    assert Settings(mcp_token=None, mcp_allow_no_token=True).token_source() is None
