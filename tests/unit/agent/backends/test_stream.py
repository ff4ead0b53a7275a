"""Both protocols' streams over a mock transport: a malformed line, a cut stream, transport failures."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from agent.backends.base import RoundDone, RoundEvent, RoundRequest, TextDelta
from agent.backends.ollama import stream_chat
from agent.backends.openai_compat import stream_completions
from agent.errors import AgentError, DependencyDown, UpstreamError, UpstreamTimeout

REQUEST = RoundRequest(model="qwen3:4b", messages=[{"role": "user", "content": "hi"}], tools=None, options={})
Stream = Callable[[httpx.AsyncClient], AsyncIterator[RoundEvent]]


def ollama(http: httpx.AsyncClient) -> AsyncIterator[RoundEvent]:
    return stream_chat(http, "http://ollama", REQUEST, holdback=False)


def openai(http: httpx.AsyncClient) -> AsyncIterator[RoundEvent]:
    return stream_completions(http, "http://llama", REQUEST, holdback=False)


def ndjson(*lines: str) -> bytes:
    return "".join(line + "\n" for line in lines).encode()


def sse(*payloads: str) -> bytes:
    return "".join(f"data: {p}\n\n" for p in payloads).encode()


TEXT_OLLAMA = json.dumps({"message": {"role": "assistant", "content": "Hi"}, "done": False})
DONE_OLLAMA = json.dumps({"message": {"role": "assistant", "content": ""}, "done": True, "eval_count": 1})
TEXT_OPENAI = json.dumps({"choices": [{"delta": {"content": "Hi"}, "finish_reason": None}]})
DONE_OPENAI = json.dumps({"choices": [{"delta": {}, "finish_reason": "stop"}], "usage": {"completion_tokens": 1}})


async def run(stream: Stream, handler: Callable[[httpx.Request], httpx.Response]) -> list[RoundEvent]:
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        return [event async for event in stream(http)]


async def failure(stream: Stream, handler: Callable[[httpx.Request], httpx.Response]) -> AgentError:
    with pytest.raises(AgentError) as caught:
        await run(stream, handler)
    return caught.value


@pytest.mark.parametrize(
    ("stream", "line", "server", "why"),
    [
        (ollama, '{"message": {"content": "cut', "Ollama", "not JSON"),
        (ollama, "[1, 2]", "Ollama", "not a JSON object"),
        (openai, "{not json}", "The model server", "not JSON"),
        (openai, '"a string"', "The model server", "not a JSON object"),
    ],
)
async def test_a_malformed_line_is_an_upstream_error_that_quotes_it(
    stream: Stream, line: str, server: str, why: str
) -> None:
    body = ndjson(TEXT_OLLAMA, line, DONE_OLLAMA) if stream is ollama else sse(TEXT_OPENAI, line, DONE_OPENAI, "[DONE]")
    error = await failure(stream, lambda request: httpx.Response(200, content=body))
    assert type(error) is UpstreamError and error.status == 502
    assert error.message.startswith(f"{server} sent a malformed stream line ({why}")
    assert error.message.endswith(repr(line))


async def test_a_non_object_message_field_is_a_malformed_line() -> None:
    line = json.dumps({"message": "text", "done": False})
    error = await failure(ollama, lambda request: httpx.Response(200, content=ndjson(line)))
    assert type(error) is UpstreamError and "malformed stream line" in error.message


@pytest.mark.parametrize(
    ("stream", "body"), [(ollama, ndjson(TEXT_OLLAMA, DONE_OLLAMA)), (openai, sse(TEXT_OPENAI, DONE_OPENAI, "[DONE]"))]
)
async def test_well_formed_streams_still_give_text_and_done(stream: Stream, body: bytes) -> None:
    events = await run(stream, lambda request: httpx.Response(200, content=body))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hi"]
    done = events[-1]
    assert isinstance(done, RoundDone) and done.completion_tokens == 1 and done.time_to_first_token_s is not None


async def test_a_stream_cut_before_done_is_named() -> None:
    error = await failure(ollama, lambda request: httpx.Response(200, content=ndjson(TEXT_OLLAMA)))
    assert type(error) is UpstreamError and "before the answer was complete" in error.message


def raising(exc: Exception) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    return handler


@pytest.mark.parametrize(
    ("stream", "server", "fix"),
    [(ollama, "Ollama", "OLLAMA_URL is right"), (openai, "The model server", "MODEL_URL is right")],
)
async def test_transport_failures_name_the_server_and_the_fix(stream: Stream, server: str, fix: str) -> None:
    down = await failure(stream, raising(httpx.ConnectError("refused")))
    assert type(down) is DependencyDown and down.message.startswith(f"{server} is unreachable at http://")
    assert "(ConnectError)" in down.message and down.message.endswith(fix + ".")
    slow = await failure(stream, raising(httpx.ReadTimeout("slow")))
    assert type(slow) is UpstreamTimeout and slow.message.startswith(f"{server} at http://")
    assert slow.message.endswith("did not answer in time (ReadTimeout)")


async def test_a_connection_closed_before_any_answer_is_tried_once_more_on_the_openai_protocol() -> None:
    sent: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(1)
        if len(sent) == 1:  # a stale keep-alive connection: closed before any byte came back
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)
        return httpx.Response(200, content=sse(TEXT_OPENAI, DONE_OPENAI, "[DONE]"))

    events = await run(openai, handler)
    assert len(sent) == 2 and [type(e).__name__ for e in events] == ["TextDelta", "RoundDone"]
    sent.clear()
    refused = await failure(openai, lambda r: (_ for _ in ()).throw(httpx.ConnectError("refused", request=r)))
    assert "unreachable" in refused.message  # any other transport error fails as before
