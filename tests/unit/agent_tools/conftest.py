"""Unit fixtures for the tool server: a files root beside a secret outside it, and an in-process server."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from agent_tools.server import ToolServer, create_server
from agent_tools.settings import Settings

SECRET = "TOP-SECRET-7f3a9c-do-not-leak"


@dataclass
class Box:
    root: Path
    outside: Path
    secret: Path
    server: ToolServer

    async def call(self, name: str, **args: Any) -> tuple[bool, str]:
        # A client per call: an anyio task group cannot span pytest-asyncio's fixture and test tasks.
        async with Client(self.server) as client:
            result = await client.call_tool(name, args)
        return bool(result.is_error), str(result.content[0].text)  # type: ignore[union-attr]

    async def ok(self, name: str, **args: Any) -> dict[str, Any]:
        is_error, text = await self.call(name, **args)
        assert not is_error, text
        data: dict[str, Any] = json.loads(text)
        return data


def settings_for(tmp: Path, **extra: Any) -> Settings:
    return Settings(
        files_root=tmp / "root", data_dir=tmp / "data", mcp_timezone="UTC", reports_db_url=None, mcp_token=None, **extra
    )


@pytest.fixture
def box(tmp_path: Path) -> Box:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text(SECRET)
    return Box(root, outside, secret, create_server(settings_for(tmp_path)))
