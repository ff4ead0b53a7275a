"""Regression (issue 11, item 6): customer IDs were harvested from error texts (`audit query --customer
C1001` listed requests that never returned C1001's data); names were pseudonymised only when an argument
was literally called `customer`; note texts and search patterns were logged verbatim; a record could be
~1 MB; unauthenticated 401s cost ~400 bytes each without bound."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.integration.conftest import FakeOllama
from tests.integration.test_auth_api import Stack, agent_process, calls, stack

pytestmark = pytest.mark.integration
__all__ = ["stack"]
NOTE = "Müşteri Ayşe Kaya maaşını erken istedi"
PATTERN = "ayse-kaya-maas"


def test_customer_ids_come_only_from_what_tools_received_and_returned(stack: Stack, ollama: FakeOllama) -> None:
    ollama.script(rules=[{"when": {"last_role": "user"}, "reply": calls(("dosya_oku", {"path": "C1001-gizli.txt"}))}])
    start = stack.audit()[-1]["time"] if (stack.audit_dir / "audit.jsonl").exists() else "2000-01-01"
    resp = stack.chat("support", "read the file of C1001")
    (call,) = resp.json()["local_agent"]["tool_calls"]
    assert call["outcome"] == "error"  # its error text names C1001, but no data of C1001 came back
    assert stack.audit()[-1]["tool_calls"][0]["customer_ids"] == []
    who = stack.admin("audit", "query", "--customer", "C1001", "--since", start)
    assert who.returncode == 0 and who.stdout.strip() == "", who.stdout


def test_declared_personal_and_free_text_arguments_are_not_logged_verbatim(stack: Stack, ollama: FakeOllama) -> None:
    ollama.script(
        rules=[
            {"when": {"user_contains": "note", "last_role": "user"}, "reply": calls(("not_kaydet", {"text": NOTE}))},
            {
                "when": {"user_contains": "find", "last_role": "user"},
                "reply": calls(("dosya_ara", {"pattern": PATTERN})),
            },
            {
                "when": {"user_contains": "balance", "last_role": "user"},
                "reply": calls(("musteri_bakiyesi", {"customer": "Ayşe Kaya"})),
            },
        ]
    )
    for question in ("take a note", "find the file", "balance please"):
        assert stack.chat("support", question).status_code == 200
    logged = json.dumps(stack.audit()[-3:], ensure_ascii=False)
    assert NOTE not in logged and PATTERN not in logged and "Ayşe Kaya" not in logged
    note_call, search_call, balance_call = (r["tool_calls"][0] for r in stack.audit()[-3:])
    assert note_call["arguments"]["text"].startswith("text:") and str(len(NOTE)) in note_call["arguments"]["text"]
    assert search_call["arguments"]["pattern"].startswith("text:")
    assert balance_call["arguments"]["customer"].startswith("name:")


def test_a_huge_question_gives_a_capped_record_that_says_it_was_cut(stack: Stack, ollama: FakeOllama) -> None:
    assert stack.chat("support", "x" * 300_000).status_code == 200
    line = (stack.audit_dir / "audit.jsonl").read_text().splitlines()[-1]
    record = json.loads(line)
    assert len(line.encode()) < 20_000
    assert record["truncated"]["original_bytes"] > 300_000 and "question" in record["truncated"]["cut"]
    verified = stack.admin("audit", "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_flood_of_401s_costs_a_bounded_number_of_records(stack: Stack, ollama: FakeOllama) -> None:
    with agent_process(ollama, f"{stack.mcp_base}/mcp", stack.mcp_token, stack.audit_dir.parent) as (url, _):
        before = len(stack.audit())
        with httpx.Client(timeout=30) as http:
            codes = {http.post(f"{url}/v1/chat/completions", json={}).status_code for _ in range(60)}
        assert codes == {401}
        full = [r for r in stack.audit()[before:] if r.get("status") == 401]
        assert len(full) == 5
    summary = [r for r in stack.audit()[before:] if r.get("event") == "refusals_suppressed"]
    assert [(s["client"], s["status"], s["count"]) for s in summary] == [("127.0.0.1", 401, 55)]
