"""Customer privacy in audit records: IDs kept, names pseudonymised with a keyed hash unless switched off."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx

from agent.api.app import create_app
from agent.api.trail import logged_arguments
from agent.context import RequestContext
from agent.security.audit_check import records
from agent.security.privacy import Pseudonymizer, fold, result_names
from agent.toolspec import ArgumentRules, ToolResult, ToolSpec
from agent_contract.customers import customer_ids
from tests.unit.agent.conftest import ScriptedBackend
from tests.unit.agent.security.test_auth import bearer, env, settings_for

__all__ = ["env"]

FOUND = json.dumps({"status": "found", "customer_id": "C1004", "name": "Ayşe Kaya", "balance": 10.0})
AMBIGUOUS = json.dumps(
    {
        "status": "ambiguous",
        "candidates": [{"customer_id": "C1003", "name": "Ayşe Demir"}, {"customer_id": "C1004", "name": "Ayşe Kaya"}],
    }
)


def test_names_fold_to_one_pseudonym_and_keys_matter() -> None:
    names = Pseudonymizer(b"k" * 32)
    assert fold("  AYŞE   Kaya ") == fold("ayse kaya") == "ayse kaya"
    assert names.token("AYŞE Kaya") == names.token("ayşe kaya")
    assert names.token("Ayşe Kaya").startswith("name:") and "Ayşe" not in names.token("Ayşe Kaya")
    assert names.token("Ayşe Kaya") != Pseudonymizer(b"x" * 32).token("Ayşe Kaya")
    assert Pseudonymizer(None).token("Ayşe Kaya") == "Ayşe Kaya"


def test_declared_personal_arguments_are_pseudonymised_but_ids_are_kept() -> None:
    names, rules = Pseudonymizer(b"k" * 32), ArgumentRules(personal=frozenset({"who"}), free_text=frozenset({"q"}))
    args, found, ids = logged_arguments({"who": "Ayşe Kaya"}, rules, names)
    assert args == {"who": names.token("Ayşe Kaya")} and found == ["Ayşe Kaya"] and ids == []
    assert logged_arguments({"who": "c-1004"}, rules, names) == ({"who": "c-1004"}, [], ["C1004"])
    assert logged_arguments({"symbol": "EURUSD"}, rules, names) == ({"symbol": "EURUSD"}, [], [])
    # declared, not guessed: an undeclared argument called `customer` is not treated as a name
    assert logged_arguments({"customer": "Ayşe Kaya"}, ArgumentRules(), names)[0] == {"customer": "Ayşe Kaya"}
    (text,) = logged_arguments({"q": "maaş listesi"}, rules, names)[0].values()
    assert text.startswith("text:") and "maaş" not in text and "(12 chars)" in text


def test_names_from_results_are_replaced_in_the_question() -> None:
    names = Pseudonymizer(b"k" * 32)
    assert sorted(result_names(AMBIGUOUS)) == ["Ayşe Demir", "Ayşe Kaya"]
    assert customer_ids(AMBIGUOUS) == ["C1003", "C1004"]
    text = names.text("what does ayşe  KAYA have? and Ayşe Demir?", result_names(AMBIGUOUS))
    assert "Kaya" not in text and "Demir" not in text and names.token("Ayşe Kaya") in text
    assert result_names("not json") == []


class NameBox:
    """A customer tool that answers like the real one."""

    def __init__(self) -> None:
        schema = {"type": "object", "properties": {"customer": {"type": "string"}}, "required": ["customer"]}
        declared = ArgumentRules(personal=frozenset({"customer"}))  # as the MCP server declares it
        self.specs = [ToolSpec("musteri_bakiyesi", "balance", schema, declared)]

    async def list_tools(self, refresh: bool = False, context: RequestContext | None = None) -> list[ToolSpec]:
        return self.specs

    def audit_rules(self, name: str) -> ArgumentRules:
        return self.specs[0].audit

    async def call(self, name: str, arguments: dict[str, Any], context: RequestContext | None = None) -> ToolResult:
        return ToolResult(False, FOUND)

    async def problem(self) -> str | None:
        return None

    async def aclose(self) -> None:
        return None


async def run_name_question(tmp: Path, key: str, **settings: Any) -> dict[str, Any]:
    backend = ScriptedBackend([[("musteri_bakiyesi", {"customer": "ayşe kaya"})], "Ayşe Kaya has 10 USD."])
    app = create_app(settings_for(tmp, **settings), backend=backend, toolbox=NameBox())  # type: ignore[arg-type]
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(app.router.lifespan_context(app))
        http = await stack.enter_async_context(
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://agent")
        )
        question = {"model": "qwen3:4b", "messages": [{"role": "user", "content": "Balance of Ayşe Kaya?"}]}
        resp = await http.post("/v1/chat/completions", json=question, headers=bearer(key))
        assert resp.status_code == 200
    return next(r for r in records(tmp / "audit") if r["event"] == "request")


async def test_the_audit_record_names_no_customer_by_default(env: dict[str, Any]) -> None:
    record = await run_name_question(env["tmp"], env["keys"]["admin"])
    line = (env["tmp"] / "audit" / "audit.jsonl").read_text()
    assert "Kaya" not in line and "kaya" not in line
    (call,) = record["tool_calls"]
    assert call["customer_ids"] == ["C1004"] and call["arguments"]["customer"].startswith("name:")
    assert record["question"].startswith("Balance of name:")


async def test_an_operator_can_keep_names_or_keep_only_the_question_hash(env: dict[str, Any]) -> None:
    record = await run_name_question(env["tmp"], env["keys"]["admin"], audit_pseudonymize=False)
    assert record["question"] == "Balance of Ayşe Kaya?"
    assert record["tool_calls"][0]["arguments"] == {"customer": "ayşe kaya"}
    hashed = await run_name_question(
        env["tmp"] / "h",
        env["keys"]["admin"],
        audit_question="hash",
        agent_keys_file=env["tmp"] / "keys.yaml",
        agent_policy_file=env["tmp"] / "policy.yaml",
    )
    assert hashed["question"] is None and len(hashed["question_sha256"]) == 64
