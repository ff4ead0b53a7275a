"""The distractor set for measuring tool retrieval: 50 tools only behind MCP_DISTRACTOR_TOOLS on the demo
database, each written by the real tools' rules, none of which can hand the model a figure."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mcp import Client

from agent_contract.policy import load_policy
from agent_tools import distractors
from agent_tools.distractors import CATALOG
from agent_tools.server import create_server
from agent_tools.settings import ConfigError
from tests.support.contract import TOOL_NAMES
from tests.unit.agent_tools.conftest import settings_for


async def listed(tmp_path: Path, on: bool) -> dict[str, str]:
    (tmp_path / "root").mkdir(exist_ok=True)
    server = create_server(settings_for(tmp_path, mcp_distractor_tools=on))
    return {t.name: t.description or "" for t in await server.list_tools()}


async def test_off_by_default_the_server_lists_only_the_real_tools(tmp_path: Path) -> None:
    assert list(await listed(tmp_path, on=False)) == TOOL_NAMES


async def test_the_switch_makes_fifty_tools_each_written_by_the_rules(tmp_path: Path) -> None:
    tools = await listed(tmp_path, on=True)
    distractors = [d for d in CATALOG if d.name not in TOOL_NAMES]  # a real tool of the same name wins
    assert len(tools) == len(TOOL_NAMES) + len(distractors) and list(tools)[: len(TOOL_NAMES)] == TOOL_NAMES
    assert len(CATALOG) == 39
    for d in distractors:
        text = tools[d.name]
        for section in ("WHEN TO USE:", "ALWAYS call this tool", "Example:", "WHEN NOT TO USE:"):
            assert section in text, (d.name, section)
        assert any(ch in text for ch in "çğıöşü"), f"{d.name} lacks Turkish trigger phrases"
        named = set(re.findall(r"-> ([a-z]+_\w+)", text.split("WHEN NOT TO USE:")[1]))
        assert named and named <= set(tools), f"{d.name} sends the model to a tool that does not exist: {named}"


async def test_a_distractor_call_is_an_error_that_says_it_has_no_data(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    server = create_server(settings_for(tmp_path, mcp_distractor_tools=True))
    async with Client(server) as client:
        result = await client.call_tool("ilk_yatirim_ozeti", {"start_date": "today"})
    assert result.is_error and "distractor" in str(result.content[0].text)  # type: ignore[union-attr]


def test_refused_outside_the_demo_database(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, mcp_distractor_tools=True).model_copy(
        update={"reports_db_url": "postgresql://reports@db/reports"}
    )
    with pytest.raises(ConfigError, match="demo database only"):
        create_server(settings)


def test_no_shipped_role_but_admin_can_reach_them() -> None:
    policy = load_policy(None)
    for role in policy.roles:
        if role != "admin":
            assert not any(policy.allows(role, d.name) for d in CATALOG if d.name not in TOOL_NAMES), role


def test_a_real_tool_of_the_same_name_wins_over_a_distractor() -> None:
    names = [spec.name for spec in distractors.specs(taken={"iade_ozeti"})]
    assert "iade_ozeti" not in names and len(names) == len(CATALOG) - 1
