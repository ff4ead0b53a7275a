"""bench-webui: what Open WebUI's background tasks cost the user and the GPU, on both of its connections.

Starts redis-server, the scripted Ollama (slow: ~1 s to the first token, ~2 s rounds), the MCP server, one
agent-worker and one agent-api per task mode (GPU queue) on loopback, then plays 3-turn chats the way Open
WebUI 0.12.4 sends them (open_webui/utils/middleware.py, background_tasks_handler): each turn a streamed tool
question; after each answer, one after the other, follow-up suggestions, then on the first turn the title and
the tags (non-streamed `### Task:` prompts); the user's next question THINK seconds after the answer, while
those are under way (0.5 s: the worst case seen in a browser test). Every conversation is played once per mode
and connection, interleaved, so the machine's load falls on all alike.
  tasks off            no background tasks sent at all (the baseline)
  CLIENT_TASKS=model   a tool-less round below every user round, preempted by the next question
  CLIENT_TASKS=local   answered without the model (the shipped default)
Connections: Ollama (/api/chat, NDJSON) and OpenAI (/v1/chat/completions, SSE). Figures per mode: the user's
first token (median, ratio to tasks off on the same connection), GPU rounds started for tasks, and the GPU
seconds of rounds cut short (wasted) as a share of all GPU seconds. Numbers against the fake measure plumbing
and scheduling only, never a model. Usage: scripts/bench-webui [CHATS] [THINK_SECONDS]
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.bench.webui_stack import api_env, services

MODEL = "qwen2.5:3b"  # no think hold-back: content streams as the fake makes it
QUESTIONS = ["how many deposits today?", "and the deposits yesterday?", "deposits this week?"]
HISTORY = "<chat_history>\nUSER: {q}\nASSISTANT: 12 deposits.\n</chat_history>"
TASKS = {
    "title": '### Task:\nGenerate a concise title.\n### Output:\nJSON format: { "title": "t" }\n' + HISTORY,
    "tags": '### Task:\nGenerate 1-3 tags.\n### Output:\nJSON format: { "tags": ["a"] }\n' + HISTORY,
    "follow_ups": '### Task:\nSuggest follow-ups.\n### Output:\nJSON format: { "follow_ups": ["q?"] }\n' + HISTORY,
}
MODES = {"tasks off": None, "CLIENT_TASKS=model": "model", "CLIENT_TASKS=local": "local"}
PATHS = {"ollama": "/api/chat", "openai": "/v1/chat/completions"}


def first_content(connection: str, line: str) -> bool:
    """Does this stream line carry answer text? (NDJSON for Ollama, SSE `data:` for OpenAI)."""
    if connection == "ollama":
        return bool(line and (json.loads(line).get("message") or {}).get("content"))
    if not line.startswith("data: {"):
        return False
    return bool(((json.loads(line[6:]).get("choices") or [{}])[0].get("delta") or {}).get("content"))


async def chat(http: httpx.AsyncClient, connection: str, question: str) -> float:
    """One streamed user question; returns seconds to the first content token."""
    started, first = time.perf_counter(), None
    body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": question}]}
    async with http.stream("POST", PATHS[connection], json=body) as resp:
        async for line in resp.aiter_lines():
            if first is None and first_content(connection, line):
                first = time.perf_counter() - started
    assert first is not None, "the answer never streamed"
    return first


async def background(http: httpx.AsyncClient, connection: str, kinds: tuple[str, ...], question: str) -> None:
    """Open WebUI's tasks after one answer: one after the other, each waiting for the previous answer."""
    for kind in kinds:
        body = {
            "model": MODEL,
            "stream": False,
            "messages": [{"role": "user", "content": TASKS[kind].replace("{q}", question)}],
        }
        (await http.post(PATHS[connection], json=body)).raise_for_status()


async def conversation(url: str, connection: str, with_tasks: bool, think: float) -> list[float]:
    firsts: list[float] = []
    pending: list[asyncio.Task[None]] = []
    async with httpx.AsyncClient(base_url=url, timeout=300) as http:
        for turn, question in enumerate(QUESTIONS):
            firsts.append(await chat(http, connection, question))
            if with_tasks:
                kinds = ("follow_ups", "title", "tags") if turn == 0 else ("follow_ups",)
                pending.append(asyncio.create_task(background(http, connection, kinds, question)))
            await asyncio.sleep(think)  # the user reads, then asks the next question
        await asyncio.gather(*pending)
    return firsts


def gpu_seconds(requests: list[dict[str, Any]]) -> tuple[float, float, int]:
    """From the fake's log: GPU seconds of every generation, of those cut short, and the task rounds started."""
    done = [r for r in requests if r.get("ended_at") and r.get("outcome") in ("completed", "cancelled")]
    total = sum(r["ended_at"] - r["started_at"] for r in done)
    wasted = sum(r["ended_at"] - r["started_at"] for r in done if r["outcome"] == "cancelled")
    tasks = sum(1 for r in done if str((r["messages"] or [{}])[-1].get("content", "")).startswith("### Task"))
    return total, wasted, tasks


def ended(fake: str, mark: int) -> list[dict[str, Any]]:
    """The fake's log since `mark` once every generation in it has ended (a cut one ends just after its client)."""
    deadline = time.monotonic() + 30
    while True:
        rows: list[dict[str, Any]] = httpx.get(f"{fake}/_fake/requests").json()[mark:]
        if all(r.get("ended_at") for r in rows) or time.monotonic() > deadline:
            return rows
        time.sleep(0.05)


@dataclass
class Tally:
    """One mode on one connection, summed over its conversations."""

    firsts: list[float] = field(default_factory=list)
    gpu: float = 0.0
    wasted: float = 0.0
    tasks: int = 0

    def add(self, firsts: list[float], gpu: float, wasted: float, tasks: int) -> None:
        self.firsts += firsts
        self.gpu, self.wasted, self.tasks = self.gpu + gpu, self.wasted + wasted, self.tasks + tasks


def report(results: dict[tuple[str, str], Tally], chats: int, think: float) -> None:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    turns = f"{chats} chats x {len(QUESTIONS)} turns"
    print(f"bench-webui: {turns} per mode and connection, think {think:g} s, load average {load}")
    for connection in PATHS:
        base = statistics.median(results["tasks off", connection].firsts)
        for mode in MODES:
            r = results[mode, connection]
            median = statistics.median(r.firsts)
            share = r.wasted / r.gpu if r.gpu else 0.0
            print(
                f"  {connection:6} {mode:19} first token median {median:5.2f} s ({median / base:4.2f}x of tasks off)"
                f"  max {max(r.firsts):5.2f} s  task GPU rounds/chat {r.tasks / chats:4.1f}"
                f"  wasted GPU {r.wasted / chats:5.2f} s/chat ({share:5.1%} of GPU time)"
            )
    print("  targets: first token <= 1.05x of tasks off on both connections; wasted GPU <= 5% of GPU time")


def main() -> None:
    chats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    think = float(sys.argv[2]) if len(sys.argv) > 2 else 0.5
    tmp = Path(tempfile.mkdtemp(prefix="bench-webui-"))
    results = {(m, c): Tally() for m in MODES for c in PATHS}
    with services(tmp, MODEL) as (fake, env, start_api):
        urls = {mode: start_api(api_env(env, tasks)) for mode, tasks in MODES.items()}
        for _ in range(chats):
            for mode, tasks in MODES.items():
                for connection in PATHS:
                    mark = len(httpx.get(f"{fake}/_fake/requests").json())
                    firsts = asyncio.run(conversation(urls[mode], connection, tasks is not None, think))
                    results[mode, connection].add(firsts, *gpu_seconds(ended(fake, mark)))
    report(results, chats, think)


if __name__ == "__main__":
    main()
