"""Fuzzing the agent API: a bounded schemathesis run over every operation of /openapi.json, plus a corpus of
hostile bodies. Every answer must be below 500, and every chat request must leave exactly one audit record.

Bounded on purpose (CI time): FUZZ_EXAMPLES examples per operation, derandomized so a failure reproduces.
Driven through hypothesis directly (schemathesis' pytest plugin does not run under pytest 9 here).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.core.result import Err

from agent.security.auth import add_key
from tests.integration.conftest import FakeOllama, McpServer, agent_env
from tests.support.procs import free_port, running

pytestmark = pytest.mark.integration
FUZZ_EXAMPLES = 10
CHAT = ("/v1/chat/completions", "/api/chat")


@dataclass
class Target:
    url: str
    headers: dict[str, str]
    audit: Path

    def records(self) -> int:
        return len(self.audit.read_text().splitlines()) if self.audit.exists() else 0


@pytest.fixture(scope="module")
def target(
    fake_ollama: FakeOllama, mcp_server: McpServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Target]:
    fake_ollama.script()  # the session's fake may still carry an earlier module's script (a stream error)
    tmp, port = tmp_path_factory.mktemp("fuzz"), free_port()
    key = add_key(tmp / "keys.yaml", "fuzzer", "admin")
    env = agent_env(
        fake_ollama.url,
        mcp_server,
        port,
        AGENT_AUTH="api_key",
        AGENT_KEYS_FILE=str(tmp / "keys.yaml"),
        AUDIT_DIR=str(tmp / "audit"),
    )
    with running(["agent-api"], env=env, ready_url=f"http://127.0.0.1:{port}/healthz"):
        yield Target(f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {key}"}, tmp / "audit" / "audit.jsonl")


def operations(target: Target) -> list[Any]:
    raw = httpx.get(f"{target.url}/openapi.json", headers=target.headers, timeout=10).json()
    found = []
    for result in schemathesis.openapi.from_dict(raw).get_all_operations():
        if isinstance(result, Err):  # an operation schemathesis cannot read is a failure, not a skip
            raise result.err()
        found.append(result.ok())
    return found


def test_no_operation_answers_5xx_and_every_chat_is_audited(target: Target) -> None:
    ops = operations(target)
    assert {op.path for op in ops} >= set(CHAT)
    for op in ops:

        @given(case=op.as_strategy())
        @settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
        def call(case: Any) -> None:
            before = target.records()
            response = case.call(base_url=target.url, headers=target.headers, timeout=30)
            assert response.status_code < 500, (case.path, case.body, response.text[:300])
            if case.path in CHAT:
                assert target.records() == before + 1, (case.path, case.body, response.status_code)

        call()


def _chat(messages: Any) -> bytes:
    return json.dumps({"model": "qwen3:4b", "messages": messages}).encode()


CORPUS: dict[str, bytes] = {
    "ten_thousand_messages": _chat([{"role": "user", "content": f"m{i}"} for i in range(10_000)]),
    "huge_message": _chat([{"role": "user", "content": "x" * 900_000}]),
    "over_the_body_limit": _chat([{"role": "user", "content": "x" * 1_100_000}]),
    "invalid_utf8": b'{"model":"qwen3:4b","messages":[{"role":"user","content":"\xc3\x28\xa0\xa1"}]}',
    "nul_bytes_raw": b'{"model":"qwen3:4b","messages":[{"role":"user","content":"a\x00b"}]}',
    "nul_escaped": _chat([{"role": "user", "content": "a\u0000b"}]),
    "lone_surrogate": b'{"model":"qwen3:4b","messages":[{"role":"user","content":"\\udfff"}]}',
    "deep_nesting": b'{"model":"qwen3:4b","messages":' + b"[" * 5000 + b"]" * 5000 + b"}",
    "deep_tool_arguments": _chat(
        [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "tool_calls": [{"function": {"name": "x", "arguments": '{"a":' * 900 + "1" + "}" * 900}}],
            },
            {"role": "user", "content": "and?"},
        ]
    ),
    "not_json": b"model=qwen3:4b&messages=hi",
    "empty": b"",
    "array": b"[]",
    "number_model": json.dumps({"model": 7, "messages": [{"role": "user", "content": "hi"}]}).encode(),
    "unknown_fields": json.dumps(
        {"model": "qwen3:4b", "messages": [{"role": "user", "content": "hi", "x": {}}], "temperature": "hot"}
    ).encode(),
}


@pytest.mark.parametrize("path", CHAT)
@pytest.mark.parametrize("case", sorted(CORPUS))
def test_the_hostile_corpus_gets_no_5xx_and_one_audit_record_each(target: Target, case: str, path: str) -> None:
    before = target.records()
    headers = target.headers | {"Content-Type": "application/json"}
    response = httpx.post(target.url + path, content=CORPUS[case], headers=headers, timeout=60)
    assert response.status_code < 500, response.text[:300]
    assert "Traceback" not in response.text
    assert target.records() == before + 1
