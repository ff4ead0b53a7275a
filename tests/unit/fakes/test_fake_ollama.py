"""Tests of the scripted Ollama: the real `ollama` client and raw NDJSON must see Ollama's wire protocol."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import ollama
import pytest
from starlette.types import Message

from tests.fakes.control import fake_ollama_process, serve_in_loop
from tests.fakes.fake_ollama import GREETING, FakeState, Generation, GenerationResponse, Plan, create_app

Json = dict[str, Any]
USER = [{"role": "user", "content": "What is the weather in Tokyo?"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]
METRICS = (
    "total_duration",
    "load_duration",
    "prompt_eval_count",
    "prompt_eval_duration",
    "eval_count",
    "eval_duration",
)


@pytest.fixture
def state() -> FakeState:
    return FakeState()


@pytest.fixture
async def http(state: FakeState) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(state))
    async with httpx.AsyncClient(transport=transport, base_url="http://fake") as client:
        yield client


@pytest.fixture
async def olla(state: FakeState) -> AsyncIterator[ollama.AsyncClient]:
    async with ollama.AsyncClient(host="http://fake", transport=httpx.ASGITransport(app=create_app(state))) as c:
        yield c


async def ndjson(http: httpx.AsyncClient, body: Json) -> list[Json]:
    response = await http.post("/api/chat", json=body)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/x-ndjson"
    return [json.loads(line) for line in response.text.splitlines()]


async def wait_for(cond: Callable[[], bool], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not cond():
        assert time.monotonic() < deadline, "condition not met before the deadline"
        await asyncio.sleep(0.01)


# ---------------------------------------------------------------- the real ollama client


async def test_ollama_client_streams_default_greeting(olla: ollama.AsyncClient) -> None:
    parts = [part async for part in await olla.chat(model="qwen3:4b", messages=USER, stream=True)]
    assert "".join(p.message.content or "" for p in parts) == GREETING
    assert len(parts) > 2 and not any(p.done for p in parts[:-1])
    assert parts[-1].done and parts[-1].done_reason == "stop" and parts[-1].eval_count == len(parts) - 1


async def test_ollama_client_non_streaming_tool_call_with_thinking(olla: ollama.AsyncClient, state: FakeState) -> None:
    state.configure(
        {
            "rules": [
                {
                    "when": {"user_contains": "WEATHER", "has_tools": True},
                    "reply": {
                        "thinking": "The user wants weather.",
                        "tool_calls": [{"name": "get_weather", "arguments": {"city": "Tokyo"}}],
                    },
                }
            ]
        }
    )
    reply = await olla.chat(model="qwen3:4b", messages=USER, tools=TOOLS, stream=False)
    assert reply.message.thinking == "The user wants weather."
    assert reply.message.content == "" and reply.done_reason == "stop"
    calls = reply.message.tool_calls or []
    assert [(c.function.name, dict(c.function.arguments)) for c in calls] == [("get_weather", {"city": "Tokyo"})]


async def test_ollama_client_sees_400_for_thinking_on_a_non_thinking_model(olla: ollama.AsyncClient) -> None:
    with pytest.raises(ollama.ResponseError) as err:
        await olla.chat(model="qwen2.5:3b", messages=USER, think=True)
    assert err.value.status_code == 400
    assert err.value.error == '"qwen2.5:3b" does not support thinking'


async def test_ollama_client_raises_on_mid_stream_error(olla: ollama.AsyncClient, state: FakeState) -> None:
    state.configure(
        {"default": {"content": "one two three four", "stream_error": {"after_tokens": 2, "message": "runner crashed"}}}
    )
    seen: list[str] = []
    with pytest.raises(ollama.ResponseError, match="runner crashed"):
        async for part in await olla.chat(model="qwen3:4b", messages=USER, stream=True):
            seen.append(part.message.content or "")
    assert seen == ["one ", "two "]
    assert state.requests[-1]["outcome"] == "error"


# ---------------------------------------------------------------- NDJSON details


async def test_done_chunk_carries_metrics_and_counts(http: httpx.AsyncClient) -> None:
    lines = await ndjson(http, {"model": "qwen3:4b", "messages": USER})
    done = lines[-1]
    assert done["done"] is True and done["done_reason"] == "stop" and done["message"]["content"] == ""
    assert all(isinstance(done[key], int) and done[key] > 0 for key in METRICS)
    assert done["eval_count"] == len(lines) - 1
    assert done["total_duration"] >= done["load_duration"]
    assert all(line["done"] is False and line["message"]["role"] == "assistant" for line in lines[:-1])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z", done["created_at"])


async def test_tool_calls_are_whole_with_index_and_id(http: httpx.AsyncClient, state: FakeState) -> None:
    calls = [{"name": "get_weather", "arguments": {"city": "Tokyo"}}, {"name": "get_time", "arguments": {}}]
    state.configure({"default": {"content": "Let me look.", "tool_calls": calls}})
    lines = await ndjson(http, {"model": "qwen3:4b", "messages": USER, "tools": TOOLS})
    streamed = [c for line in lines[:-1] for c in line["message"].get("tool_calls", [])]
    assert [c["function"]["index"] for c in streamed] == [0, 1]
    assert [c["function"]["arguments"] for c in streamed] == [{"city": "Tokyo"}, {}]
    assert all(re.fullmatch(r"call_[a-z0-9]{8}", c["id"]) for c in streamed)
    assert lines[-1]["done_reason"] == "stop" and "tool_calls" not in lines[-1]["message"]


async def test_tool_calls_on_done_arrive_only_on_the_final_chunk(http: httpx.AsyncClient, state: FakeState) -> None:
    state.configure(
        {
            "default": {
                "tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}],
                "tool_calls_on_done": True,
            }
        }
    )
    lines = await ndjson(http, {"model": "qwen3:4b", "messages": USER, "tools": TOOLS})
    assert not any("tool_calls" in line["message"] for line in lines[:-1])
    assert lines[-1]["done"] and lines[-1]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"


async def test_thinking_is_on_by_default_and_off_with_think_false(http: httpx.AsyncClient, state: FakeState) -> None:
    state.configure({"default": {"thinking": "Hmm, let me think.", "content": "Answer."}})
    on = await ndjson(http, {"model": "qwen3:4b", "messages": USER})
    assert "".join(line["message"].get("thinking", "") for line in on) == "Hmm, let me think."
    assert on[0]["message"] == {"role": "assistant", "content": "", "thinking": "Hmm, "}
    off = await ndjson(http, {"model": "qwen3:4b", "messages": USER, "think": False})
    assert not any("thinking" in line["message"] for line in off)
    assert "".join(line["message"]["content"] for line in off) == "Answer."


async def test_raw_content_passes_stray_think_tag_verbatim(http: httpx.AsyncClient, state: FakeState) -> None:
    state.configure({"default": {"raw_content": "reasoning here</think>The answer."}})
    lines = await ndjson(http, {"model": "qwen3:4b", "messages": USER})
    assert "".join(line["message"]["content"] for line in lines) == "reasoning here</think>The answer."
    assert not any("thinking" in line["message"] for line in lines)


async def test_num_predict_cuts_with_done_reason_length(http: httpx.AsyncClient, state: FakeState) -> None:
    state.configure({"default": {"tokens": ["a", "b", "c", "d", "e"]}})
    lines = await ndjson(http, {"model": "qwen3:4b", "messages": USER, "options": {"num_predict": 3}})
    assert [line["message"]["content"] for line in lines[:-1]] == ["a", "b", "c"]
    assert lines[-1]["done_reason"] == "length" and lines[-1]["eval_count"] == 3


async def test_stream_error_line_after_tokens_keeps_status_200(http: httpx.AsyncClient, state: FakeState) -> None:
    state.configure({"default": {"content": "a b c", "stream_error": {"after_tokens": 1, "message": "boom"}}})
    lines = await ndjson(http, {"model": "qwen3:4b", "messages": USER})
    assert lines == [lines[0], {"error": "boom"}] and lines[0]["message"]["content"] == "a "


async def test_stream_error_line_is_sent_verbatim(http: httpx.AsyncClient, state: FakeState) -> None:
    state.configure({"default": {"content": "a b c", "stream_error": {"after_tokens": 2, "line": '{"cut'}}})
    response = await http.post("/api/chat", json={"model": "qwen3:4b", "messages": USER})
    assert response.status_code == 200
    lines = response.text.splitlines()
    assert len(lines) == 3 and lines[-1] == '{"cut' and json.loads(lines[1])["message"]["content"] == "b "
    state.configure({"default": {"content": "a", "stream_error": {"line": "nope"}}})
    whole = await http.post("/api/chat", json={"model": "qwen3:4b", "messages": USER, "stream": False})
    assert (whole.status_code, whole.text) == (500, "nope")


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        ({"model": "nope:1b", "messages": USER}, 404, "model 'nope:1b' not found"),
        ({"messages": USER}, 400, "model is required"),
        (
            {"model": "qwen3:4b", "messages": ["hi"]},
            400,
            "json: cannot unmarshal messages: want a list of message objects",
        ),
    ],
)
async def test_request_errors(http: httpx.AsyncClient, body: Json, status: int, error: str) -> None:
    response = await http.post("/api/chat", json=body)
    assert (response.status_code, response.json()) == (status, {"error": error})


async def test_malformed_json_and_scripted_error_before_first_byte(http: httpx.AsyncClient, state: FakeState) -> None:
    bad = await http.post("/api/chat", content=b"{not json")
    assert bad.status_code == 400 and "error" in bad.json()
    state.configure({"default": {"error": {"status": 503, "message": "server busy, please try again."}}})
    busy = await http.post("/api/chat", json={"model": "qwen3:4b", "messages": USER})
    assert (busy.status_code, busy.json()) == (503, {"error": "server busy, please try again."})
    assert state.requests[-1]["outcome"] == "error" and state.generations == 0


async def test_empty_messages_and_empty_prompt_load_the_model(http: httpx.AsyncClient) -> None:
    chat = (await http.post("/api/chat", json={"model": "qwen3:4b", "messages": []})).json()
    assert chat["done"] is True and chat["done_reason"] == "load"
    gen = (await http.post("/api/generate", json={"model": "qwen2.5:3b"})).json()
    assert gen["done_reason"] == "load" and gen["response"] == ""
    loaded = (await http.get("/api/ps")).json()["models"]
    assert sorted(m["name"] for m in loaded) == ["qwen2.5:3b", "qwen3:4b"]


# ---------------------------------------------------------------- scripting


async def test_rules_match_on_round_role_tool_result_and_times(http: httpx.AsyncClient, state: FakeState) -> None:
    state.configure(
        {
            "rules": [
                {"when": {"tool_result_contains": "SUNNY"}, "reply": {"content": "Done: {tool_result}"}},
                {"when": {"round": 1}, "times": 1, "reply": {"content": "first"}},
                {"when": {"last_role": "user", "model": "qwen2.5:3b"}, "reply": {"content": "You said {user}"}},
            ]
        }
    )

    async def say(model: str, messages: list[Json]) -> str:
        lines = await ndjson(http, {"model": model, "messages": messages})
        return "".join(line["message"]["content"] for line in lines)

    assert await say("qwen3:4b", USER) == "first"
    assert await say("qwen3:4b", USER) == GREETING  # `times` used up, no other rule matches
    assert await say("qwen2.5:3b", [{"role": "user", "content": "ping"}]) == "You said ping"
    history = [*USER, {"role": "assistant", "content": ""}, {"role": "tool", "content": "sunny, 21 C"}]
    assert await say("qwen3:4b", history) == "Done: sunny, 21 C"
    assert [r["matched_rule"] for r in state.requests] == [1, None, 2, 0]


async def test_default_reply_echoes_the_tool_result(http: httpx.AsyncClient) -> None:
    history = [*USER, {"role": "assistant", "content": ""}, {"role": "tool", "content": "x" * 400}]
    lines = await ndjson(http, {"model": "qwen3:4b", "messages": history})
    assert "".join(line["message"]["content"] for line in lines) == "According to the tool: " + "x" * 300


async def test_script_endpoint_validates_and_reset_restores_defaults(http: httpx.AsyncClient, state: FakeState) -> None:
    typo = await http.post("/_fake/script", json={"rules": [{"when": {"user_contain": "x"}, "reply": {}}]})
    assert typo.status_code == 400 and "user_contain" in typo.json()["error"]
    ok = await http.post("/_fake/script", json={"default": {"content": "scripted"}, "models": ["llama3.2"]})
    assert ok.status_code == 200
    assert [m["name"] for m in (await http.get("/api/tags")).json()["models"]] == ["llama3.2:latest"]
    await ndjson(http, {"model": "llama3.2", "messages": USER})
    assert (await http.get("/_fake/stats")).json()["chats"] == 1
    assert (await http.post("/_fake/reset")).status_code == 200
    assert (await http.get("/_fake/requests")).json() == []
    assert (await http.get("/_fake/stats")).json() == {
        "active": 0,
        "peak": 0,
        "chats": 0,
        "cancelled": 0,
        "generations": 0,
    }
    assert [m["name"] for m in (await http.get("/api/tags")).json()["models"]] == ["qwen3:4b", "qwen2.5:3b"]


async def test_metadata_endpoints(http: httpx.AsyncClient) -> None:
    assert (await http.get("/")).text == "Ollama is running"
    assert (await http.get("/api/version")).json() == {"version": "0.33.0-fake"}
    tag = (await http.get("/api/tags")).json()["models"][0]
    assert {"name", "model", "modified_at", "size", "digest", "details"} <= set(tag)
    assert {"format", "family", "parameter_size", "quantization_level"} <= set(tag["details"])
    show = (await http.post("/api/show", json={"model": "qwen3:4b"})).json()
    assert show["capabilities"] == ["completion", "tools", "thinking"]
    assert show["model_info"]["qwen3.context_length"] > 0
    assert "thinking" not in (await http.post("/api/show", json={"model": "qwen2.5:3b"})).json()["capabilities"]
    assert (await http.post("/api/show", json={"model": "nope"})).status_code == 404


# ---------------------------------------------------------------- concurrency and cancellation


async def test_peak_counts_two_concurrent_generations(http: httpx.AsyncClient, state: FakeState) -> None:
    state.configure({"default": {"tokens": ["a", "b", "c"]}, "token_delay": 0.05})
    body = {"model": "qwen3:4b", "messages": USER}
    await ndjson(http, body)
    assert state.peak == 1
    _, whole = await asyncio.gather(ndjson(http, body), http.post("/api/chat", json={**body, "stream": False}))
    assert whole.json()["message"]["content"] == "abc"
    assert state.stats() == {"active": 0, "peak": 2, "chats": 3, "cancelled": 0, "generations": 3}
    first, second = state.requests[1:]
    assert first["started_at"] < second["ended_at"] and second["started_at"] < first["ended_at"]


async def test_client_disconnect_cancels_generation(state: FakeState) -> None:
    state.configure({"default": {"tokens": ["t"] * 200}, "token_delay": 0.02})
    async with serve_in_loop(state) as url, httpx.AsyncClient() as client:
        async with client.stream("POST", f"{url}/api/chat", json={"model": "qwen3:4b", "messages": USER}) as reply:
            lines = reply.aiter_lines()
            assert json.loads(await anext(lines))["message"]["content"] == "t"
            assert state.active == 1
        await wait_for(lambda: state.cancelled == 1)
        assert state.active == 0 and state.requests[0]["outcome"] == "cancelled"
        assert state.requests[0]["ended_at"] - state.requests[0]["started_at"] < 2.0  # not the full 4 s reply


# ---------------------------------------------------------------- as a real process


def test_standalone_process_with_script_file() -> None:
    script = {"rules": [{"when": {"user_contains": "hello"}, "reply": {"content": "Hi there"}}]}
    # fake_ollama_process runs the file itself (`python .../fake_ollama.py`): no imports from the repository
    with fake_ollama_process(script, models="qwen3:4b,phi4") as fake, ollama.Client(host=fake.url) as client:
        assert [m.model for m in client.list().models] == ["qwen3:4b", "phi4:latest"]
        hello = client.chat(model="qwen3:4b", messages=[{"role": "user", "content": "Hello"}])
        assert hello.message.content == "Hi there"
        fake.script({"default": {"content": "reprogrammed"}})
        parts = list(client.chat(model="phi4", messages=[{"role": "user", "content": "x"}], stream=True))
        assert "".join(p.message.content or "" for p in parts) == "reprogrammed"
        assert fake.stats()["chats"] == 2 and fake.stats()["peak"] == 1
        assert [r["outcome"] for r in fake.requests()] == ["completed", "completed"]


async def test_a_generation_is_over_when_its_last_chunk_is_produced(state: FakeState) -> None:
    # A client that sends its next request as soon as it reads the done chunk must never be counted as a second
    # generation beside the first: the generation ends with its done chunk, not with the response's clean-up.
    active_at_done: list[int] = []

    async def send(message: Message) -> None:
        if b'"done":true' in message.get("body", b""):
            active_at_done.append(state.active)

    async def receive() -> Message:
        await asyncio.sleep(10)  # the client stays: only the body ends the response
        return {"type": "http.disconnect"}

    record: Json = {"started_at": 0.0}
    plan = Plan([("content", "a"), ("content", "b")], False, "stop", 0.0, 0.0, None, 0.0)
    response = GenerationResponse(state, record, Generation("qwen3:4b", plan, {}), stream=True)
    await response({"type": "http"}, receive, send)
    assert active_at_done == [0] and record["outcome"] == "completed"
    assert state.stats()["peak"] == 1 and state.active == 0


FORMAT = {"type": "object", "properties": {"city": {"const": "Tokyo"}}, "required": ["city"]}


async def test_format_admits_only_json_fitting_the_schema_unless_the_reply_ignores_it(
    http: httpx.AsyncClient, state: FakeState
) -> None:
    body = {"model": "qwen3:4b", "messages": USER, "stream": False, "think": False, "format": FORMAT}
    cases = [({"content": '{"city": "Tokyo"}'}, 200), ({"content": '{"city": "Paris"}'}, 500),
             ({"content": "Tokyo"}, 500), ({"tool_calls": [{"name": "get_weather", "arguments": {}}]}, 500),
             ({"content": "Tokyo", "ignores_format": True}, 200)]  # fmt: skip
    for reply, status in cases:
        state.configure({"default": reply, "rules": [{"when": {"has_format": False}, "reply": {"content": "x"}}]})
        resp = await http.post("/api/chat", json=body)
        assert resp.status_code == status, (reply, resp.text)
        if status == 500:
            assert "cannot be produced under `format`" in resp.json()["error"]
