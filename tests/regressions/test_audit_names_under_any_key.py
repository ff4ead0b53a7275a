"""Regression (issue 26, finding 5): a customer name under an argument key the tool does not declare was logged
in clear; a note that merely mentions C1009 recorded C1009 as a customer whose data was seen; Open WebUI's
`### Task:` requests were audited without their question hash."""

from __future__ import annotations

import hashlib
import json
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx

from agent.api.app import create_app
from agent.context import RequestContext
from agent.security.audit_check import records
from agent.toolspec import ArgumentRules, ToolResult, ToolSpec
from tests.unit.agent.conftest import ScriptedBackend
from tests.unit.agent.security.test_auth import bearer, env, settings_for

__all__ = ["env"]
FOUND = json.dumps({"status": "found", "customer_id": "C1004", "name": "Ayşe Kaya", "balance": 10.0})
NOTES = json.dumps({"count": 1, "notes": [{"id": 7, "title": "call back", "text": "C1009 wants a call back"}]})
TASK = '### Task:\nGenerate a concise title.\n### Output:\nJSON format: { "title": "your concise title here" }\n'


class Box:
    """The customer tool (declares `customer` personal) and the notes list (declares `contains` free text), as the
    MCP server answers them; their schemas let other keys through, as a model may send them."""

    def __init__(self) -> None:
        loose = {"type": "object", "properties": {"customer": {"type": "string"}, "contains": {"type": "string"}}}
        self.specs = [
            ToolSpec("musteri_bakiyesi", "balance", loose, ArgumentRules(personal=frozenset({"customer"}))),
            ToolSpec("notlari_getir", "notes", loose, ArgumentRules(free_text=frozenset({"contains"}))),
        ]

    async def list_tools(self, refresh: bool = False, context: RequestContext | None = None) -> list[ToolSpec]:
        return self.specs

    def audit_rules(self, name: str) -> ArgumentRules:
        return next(s.audit for s in self.specs if s.name == name)

    async def call(self, name: str, arguments: dict[str, Any], context: RequestContext | None = None) -> ToolResult:
        return ToolResult(False, FOUND if name == "musteri_bakiyesi" else NOTES)

    async def problem(self) -> str | None:
        return None

    async def aclose(self) -> None:
        return None


async def audited(tmp: Path, key: str, replies: list[Any], question: str) -> dict[str, Any]:
    app = create_app(settings_for(tmp), backend=ScriptedBackend(replies), toolbox=Box())  # type: ignore[arg-type]
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(app.router.lifespan_context(app))
        http = await stack.enter_async_context(
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://agent")
        )
        body = {"model": "qwen3:4b", "messages": [{"role": "user", "content": question}]}
        assert (await http.post("/v1/chat/completions", json=body, headers=bearer(key))).status_code == 200
    return [r for r in records(tmp / "audit") if r["event"] == "request"][-1]


async def test_a_customer_name_under_an_undeclared_key_is_pseudonymised(env: dict[str, Any]) -> None:
    # The model sends the name under keys no tool declares, one of them in a call made before the name was met.
    calls = [
        [("notlari_getir", {"who": "Ayşe Kaya", "filters": [{"person": "AYŞE KAYA"}]})],
        [("musteri_bakiyesi", {"customer": "C1004", "musteri_adi": "Ayşe Kaya"})],
        "done",
    ]
    record = await audited(env["tmp"], env["keys"]["admin"], calls, "what about her?")
    logged = json.dumps(record, ensure_ascii=False)
    assert "Kaya" not in logged and "KAYA" not in logged, logged
    first, second = record["tool_calls"]
    assert second["arguments"]["musteri_adi"] == second["arguments"]["musteri_adi"].strip()
    assert second["arguments"]["musteri_adi"].startswith("name:")  # the declared keys' pseudonym, not a digest
    assert first["arguments"]["who"] == second["arguments"]["musteri_adi"]


async def test_a_note_that_mentions_a_customer_is_not_a_customer_seen(env: dict[str, Any]) -> None:
    record = await audited(env["tmp"], env["keys"]["admin"], [[("notlari_getir", {})], "done"], "my notes")
    assert record["tool_calls"][0]["customer_ids"] == []
    looked_up = await audited(
        env["tmp"], env["keys"]["admin"], [[("musteri_bakiyesi", {"customer": "Ayşe Kaya"})], "done"], "her balance"
    )
    assert looked_up["tool_calls"][0]["customer_ids"] == ["C1004"]  # a customer record still counts


async def test_a_front_end_task_request_is_audited_with_its_question_hash(env: dict[str, Any]) -> None:
    record = await audited(env["tmp"], env["keys"]["admin"], [], TASK)
    assert record["kind"] == "client_task" and record["task"] == "title"
    assert record["question_sha256"] == hashlib.sha256(TASK.encode()).hexdigest()
