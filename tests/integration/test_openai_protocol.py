"""agent-api with MODEL_PROTOCOL=openai against the scripted OpenAI-compatible server (real SSE) and a real MCP
server: the tool paths a real tiny model never takes on demand, including arguments cut off by the token limit."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.integration.conftest import FakeOpenAI, McpServer, agent_env
from tests.support.procs import Proc, free_port, running, wait_until


@pytest.fixture(scope="module")
def openai_api_proc(fake_openai: FakeOpenAI, mcp_server: McpServer) -> Iterator[tuple[str, Proc]]:
    port = free_port()
    env = agent_env(fake_openai.url, mcp_server, port, MODEL_PROTOCOL="openai", MODEL_URL=fake_openai.url,
                    EXTRA_MODELS="")  # fmt: skip
    with running(["agent-api"], env=env, ready_url=f"http://127.0.0.1:{port}/healthz") as proc:
        yield f"http://127.0.0.1:{port}", proc


@pytest.fixture(scope="module")
def openai_api(openai_api_proc: tuple[str, Proc]) -> str:
    return openai_api_proc[0]


@pytest.fixture
def sdk(openai_api: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{openai_api}/v1", api_key="unused", max_retries=0) as client:
        yield client


def ask(sdk: openai.OpenAI, text: str) -> Any:
    return sdk.chat.completions.create(model="qwen3:4b", messages=[{"role": "user", "content": text}])


def test_tool_call_in_fragments_runs_and_result_goes_back_with_its_call_id(
    sdk: openai.OpenAI, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(
        {"tool_calls": [{"name": "sistem_bilgisi", "arguments": {}}]},
        {"content": "The system is fine."},
    )
    reply = ask(sdk, "how is the system?")
    assert reply.choices[0].message.content.startswith("The system is fine.")
    trace = (reply.model_extra or {})["local_agent"]
    assert [c["outcome"] for c in trace["tool_calls"]] == ["ok"]
    first, second = fake_openai.requests()
    assert first["stream"] is True and first["cache_prompt"] is False and first["temperature"] == 0
    assert {t["function"]["name"] for t in first["tools"]} >= {"sistem_bilgisi"}
    call = second["messages"][-2]["tool_calls"][0]
    assert call["type"] == "function" and json.loads(call["function"]["arguments"]) == {}
    assert second["messages"][-1] == {**second["messages"][-1], "role": "tool", "tool_call_id": call["id"]}
    assert reply.usage is not None and reply.usage.completion_tokens > 0


def test_cut_off_arguments_are_never_executed(sdk: openai.OpenAI, fake_openai: FakeOpenAI) -> None:
    # The round hits its token limit inside the arguments. sistem_bilgisi needs no argument, so the call would
    # pass schema validation with {}: only the cut-off marker keeps it from running.
    cut = {"tool_calls": [{"name": "sistem_bilgisi", "arguments": '{"section": "disk'}], "finish_reason": "length"}
    fake_openai.script(cut, {"content": "I could not finish that call."})
    reply = ask(sdk, "how is the system?")
    trace = (reply.model_extra or {})["local_agent"]
    assert [(c["name"], c["outcome"]) for c in trace["tool_calls"]] == [("sistem_bilgisi", "invalid_arguments")]
    tool_msg = fake_openai.requests()[1]["messages"][-1]
    assert tool_msg["role"] == "tool" and "cut off" in tool_msg["content"]


def test_server_without_jinja_gives_a_clear_error(
    sdk: openai.OpenAI, fake_openai: FakeOpenAI, openai_api_proc: tuple[str, Proc]
) -> None:
    fake_openai.script({"status": 500, "error": "tools param requires --jinja flag"})
    with pytest.raises(openai.APIStatusError) as err:
        ask(sdk, "hello")
    # The user sees a clear 502 without internals; the operator's log names the missing flag.
    assert err.value.status_code == 502 and "Traceback" not in str(err.value)
    wait_until(
        lambda: "Start llama-server --jinja" in openai_api_proc[1].output(), timeout=10, what="the hint in the log"
    )


def test_prompt_over_the_context_is_a_clear_400(sdk: openai.OpenAI, fake_openai: FakeOpenAI) -> None:
    message = "the request exceeds the available context size, try increasing it"
    fake_openai.script({"status": 400, "error": message, "type": "exceed_context_size_error"})
    with pytest.raises(openai.BadRequestError) as err:
        ask(sdk, "hello")
    assert "context window" in str(err.value) and err.value.code == "context_length_exceeded"


def test_streamed_text_and_reasoning(openai_api: str, sdk: openai.OpenAI, fake_openai: FakeOpenAI) -> None:
    fake_openai.script({"reasoning": "The user greets me.", "content": "Hello there, friend!"})
    chunks = list(
        sdk.chat.completions.create(
            model="qwen3:4b",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            extra_body={"tools": None},  # "tools": null, as some clients send it (the SDK's type has no None)
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello there, friend!" and len([c for c in chunks if c.choices]) > 3
    health = httpx.get(f"{openai_api}/readyz", timeout=5).json()
    assert health["status"] == "ready"


def test_agent_info_names_the_scripted_stand_in(openai_api: str) -> None:
    info = httpx.get(f"{openai_api}/v1/agent/info", timeout=10).json()
    assert info["engine"] == "scripted OpenAI-protocol stand-in" and info["engine_scripted"] is True
