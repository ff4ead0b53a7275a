"""Scripted OpenAI-compatible model server for tests: /v1/chat/completions with real SSE, answers from a script.

It reproduces the wire format of llama.cpp's llama-server and vLLM for the paths a real tiny model will not
take on demand: tool calls whose arguments arrive in fragments across chunks, tool calls cut off by the token
limit (`finish_reason: length`, arguments invalid JSON), errors before the first byte (the 500 a server without
`--jinja` gives for tools, a context overflow 400). Nothing it says measures a model.

Script (POST /_fake/script): {"replies": [reply, ...], "models": [...]} — one reply per request, in order;
the last one repeats. A reply: {"content": str, "reasoning": str, "tool_calls": [{"name": str, "arguments":
str | object}], "finish_reason": str, "status": int, "error": str, "stream_error": str, "token_delay": s,
"hang": "before_headers" | {"after_tokens": n}, "ignores_format": bool} (hang: nothing more, connection open, until
the client leaves; a request with a json_schema `response_format` is held to it, as llama-server does).
GET /_fake/requests gives the bodies received. Standalone: `python fake_openai.py --port P`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import jsonschema
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

Json = dict[str, Any]
DEFAULT_REPLY: Json = {"content": "Hello from the scripted OpenAI server."}


@dataclass
class FakeState:
    replies: list[Json] = field(default_factory=lambda: [DEFAULT_REPLY])
    models: list[str] = field(default_factory=lambda: ["qwen3:4b"])
    requests: list[Json] = field(default_factory=list)
    served: int = 0
    active: int = 0
    peak: int = 0

    def next_reply(self) -> Json:
        reply = self.replies[min(self.served, len(self.replies) - 1)]
        self.served += 1
        return reply


def _pieces(text: str, size: int = 4) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _chunk(model: str, delta: Json, finish: str | None = None) -> Json:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
            "choices": [choice]}  # fmt: skip


def _tool_deltas(calls: list[Json]) -> list[Json]:
    """Each call as OpenAI streams it: id and name first, then the arguments string in fragments."""
    deltas = []
    for index, call in enumerate(calls):
        args = call.get("arguments", {})
        text = args if isinstance(args, str) else json.dumps(args)
        head = {"index": index, "id": f"call_fake_{index}", "type": "function",
                "function": {"name": call["name"], "arguments": ""}}  # fmt: skip
        deltas.append({"tool_calls": [head]})
        deltas += [{"tool_calls": [{"index": index, "function": {"arguments": p}}]} for p in _pieces(text, 5)]
    return deltas


async def _events(state: FakeState, reply: Json, body: Json) -> AsyncIterator[bytes]:
    model, delay = str(body.get("model", "")), float(reply.get("token_delay", 0.0))
    deltas: list[Json] = [{"role": "assistant", "content": None}]
    deltas += [{"reasoning_content": p} for p in _pieces(reply.get("reasoning", ""))] if reply.get("reasoning") else []
    deltas += [{"content": p} for p in _pieces(reply.get("content", ""))] if reply.get("content") else []
    deltas += _tool_deltas(reply.get("tool_calls", []))
    state.active += 1
    state.peak = max(state.peak, state.active)
    try:
        hang = reply.get("hang")
        for n, delta in enumerate(deltas):
            if isinstance(hang, dict) and n == int(hang["after_tokens"]):
                await asyncio.Event().wait()  # stuck mid-answer: nothing more until the client leaves
            if delay:
                await asyncio.sleep(delay)
            if reply.get("stream_error") and n == len(deltas) // 2:
                yield _sse({"error": {"code": 500, "message": reply["stream_error"], "type": "server_error"}})
                return
            yield _sse(_chunk(model, delta))
        finish = reply.get("finish_reason") or ("tool_calls" if reply.get("tool_calls") else "stop")
        yield _sse(_chunk(model, {}, finish))
        prompt = sum(len(str(m.get("content") or "")) // 4 + 1 for m in body.get("messages", []))
        completion = max(1, len(deltas) - 1)
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        yield _sse({**_chunk(model, {}), "choices": [], "usage": usage})
        yield b"data: [DONE]\n\n"
    finally:
        state.active -= 1


def _sse(obj: Json) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


def schema_misfit(response_format: Any, reply: Json) -> str | None:
    """Why a server enforcing `response_format` json_schema (llama-server's grammar) could not produce `reply`."""
    if not isinstance(response_format, dict) or response_format.get("type") != "json_schema":
        return None
    if reply.get("ignores_format") or reply.get("status"):
        return None
    if reply.get("tool_calls"):
        return "constrained output is content only"
    try:
        value = json.loads(reply.get("content", ""))
    except ValueError as exc:
        return f"content is not JSON ({exc})"
    schema = (response_format.get("json_schema") or {}).get("schema") or {}
    problem = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(value))
    return None if problem is None else f"content does not fit the schema: {problem.message}"


async def completions(request: Request) -> Response:
    state: FakeState = request.app.state.fake
    body = await request.json()
    state.requests.append(body)
    reply = state.next_reply()
    if (misfit := schema_misfit(body.get("response_format"), reply)) is not None:
        message = f"fake: the scripted reply cannot be produced: {misfit}"
        error = {"code": 500, "message": message, "type": "server_error"}
        return JSONResponse({"error": error}, status_code=500)
    if reply.get("hang") == "before_headers":  # accepted, never answered
        await asyncio.Event().wait()
    if reply.get("status"):
        error = {"code": reply["status"], "message": reply.get("error", "failed"), "type": reply.get("type", "")}
        return JSONResponse({"error": error}, status_code=int(reply["status"]))
    return StreamingResponse(_events(state, reply, body), media_type="text/event-stream")


async def models(request: Request) -> Response:
    names = request.app.state.fake.models
    return JSONResponse({"object": "list", "data": [{"id": n, "object": "model", "owned_by": "fake"} for n in names]})


async def script(request: Request) -> Response:
    data = await request.json()
    fake = request.app.state.fake
    fake.replies, fake.served, fake.requests, fake.peak = data.get("replies") or [DEFAULT_REPLY], 0, [], 0
    fake.models = data.get("models") or fake.models
    return JSONResponse({"ok": True})


async def recorded(request: Request) -> Response:
    fake = request.app.state.fake
    return JSONResponse({"requests": fake.requests, "peak": fake.peak})


def create_app(state: FakeState | None = None) -> Starlette:
    app = Starlette(
        routes=[
            Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/_fake/script", script, methods=["POST"]),
            Route("/_fake/requests", recorded, methods=["GET"]),
        ]
    )
    app.state.fake = state or FakeState()
    return app


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    uvicorn.run(create_app(), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
