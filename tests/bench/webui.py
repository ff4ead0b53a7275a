"""bench-webui: what Open WebUI's background tasks cost the user, against a slow scripted model.

Starts redis-server, the scripted Ollama (slow: ~1 s to the first token, ~2 s rounds), the MCP server, one
agent-worker and agent-api (GPU queue) on loopback, then plays 3-turn chats the way Open WebUI 0.12 sends
them: each turn a streamed tool question; the title task leaves with the first question (sent just ahead
of it, the worst case), tags and follow-ups after each answer, the next question while they are under way.
Three ways, each with its own agent-api:
  tasks off         no background tasks sent at all (the baseline)
  tasks (agent)     CLIENT_TASKS=model: recognised, tool-less, below user rounds, preempted, local fallback
  tasks (before)    CLIENT_TASK_PATTERN='' : served as ordinary questions, as before this change
Prints the user's first-token time and the GPU rounds and tool calls spent on tasks per user turn.
Numbers against the fake measure plumbing and scheduling only, never a model. Usage: scripts/bench-webui [CHATS]
"""

from __future__ import annotations

import asyncio
import json
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import redis

from tests.support.procs import VENV_BIN, free_port, redis_server_cmd, running

MODEL = "qwen2.5:3b"  # no think hold-back: content streams as the fake makes it
QUESTIONS = ["how many deposits today?", "and the deposits yesterday?", "deposits this week?"]
HISTORY = "<chat_history>\nUSER: {q}\nASSISTANT: 12 deposits.\n</chat_history>"
TASKS = {
    "title": '### Task:\nGenerate a concise title.\n### Output:\nJSON format: { "title": "t" }\n' + HISTORY,
    "tags": '### Task:\nGenerate 1-3 tags.\n### Output:\nJSON format: { "tags": ["a"] }\n' + HISTORY,
    "follow_ups": '### Task:\nSuggest follow-ups.\n### Output:\nJSON format: { "follow_ups": ["q?"] }\n' + HISTORY,
}
SLOW = {"first_token_delay": 1.0, "token_delay": 0.1}
SCRIPT = {
    "rules": [
        {
            "when": {"user_contains": "deposit", "last_role": "user", "has_tools": True},
            "reply": {"tool_calls": [{"name": "sistem_bilgisi", "arguments": {}}], **SLOW},
        },
    ],
    "default": {"content": "There were 12 deposits today according to the report.", **SLOW},
}
# name → (Open WebUI sends tasks?, agent-api environment)
MODES = {
    "tasks off": (False, {}),
    "tasks (agent)": (True, {"CLIENT_TASKS": "model"}),
    "tasks (before)": (True, {"CLIENT_TASK_PATTERN": ""}),
}


async def chat(http: httpx.AsyncClient, question: str) -> float:
    """One streamed user question; returns seconds to the first content token."""
    started, first = time.perf_counter(), None
    body = {"model": MODEL, "messages": [{"role": "user", "content": question}]}
    async with http.stream("POST", "/api/chat", json=body) as resp:
        async for line in resp.aiter_lines():
            if first is None and line and (json.loads(line).get("message") or {}).get("content"):
                first = time.perf_counter() - started
    assert first is not None, "the answer never streamed"
    return first


async def task(http: httpx.AsyncClient, kind: str, question: str) -> None:
    body = {
        "model": MODEL,
        "stream": False,
        "messages": [{"role": "user", "content": TASKS[kind].replace("{q}", question)}],
    }
    (await http.post("/api/chat", json=body)).raise_for_status()


async def conversation(url: str, with_tasks: bool) -> list[float]:
    firsts: list[float] = []
    background: list[asyncio.Task[None]] = []
    async with httpx.AsyncClient(base_url=url, timeout=300) as http:
        for turn, question in enumerate(QUESTIONS):
            if with_tasks and turn == 0:
                background.append(asyncio.create_task(task(http, "title", question)))
                await asyncio.sleep(0.05)
            firsts.append(await chat(http, question))
            if with_tasks:
                kinds = ("tags", "follow_ups") if turn == 0 else ("follow_ups",)
                background += [asyncio.create_task(task(http, k, question)) for k in kinds]
            await asyncio.sleep(0.5)  # the user reads, then asks the next question
        await asyncio.gather(*background)
    return firsts


def task_usage(requests: list[dict[str, Any]]) -> tuple[int, int, int, int]:
    """From the fake's log: GPU rounds started for tasks, of them cut short, tool calls made inside tasks,
    and the most rounds one task took (a task is known by its prompt; with our system prompt in front
    when served as a question)."""

    def prompt(r: dict[str, Any]) -> str:
        users = [str(m.get("content", "")) for m in r["messages"] if m.get("role") == "user"]
        return users[0] if users else ""

    rounds = [r for r in requests if r["messages"] and prompt(r).startswith("### Task")]
    cut = sum(1 for r in rounds if r["outcome"] == "cancelled")
    tools = sum(1 for r in rounds if r["messages"][-1]["role"] == "tool")
    per_task: dict[str, int] = {}
    for r in rounds:  # the same prompt is sent once per chat: count rounds with no tool result as new tasks
        if r["messages"][-1]["role"] != "tool":
            per_task[prompt(r) + str(len(per_task))] = 1
        else:
            last = list(per_task)[-1]
            per_task[last] += 1
    return len(rounds), cut, tools, max(per_task.values(), default=0)


def run_mode(
    env: dict[str, str], fake: str, with_tasks: bool, extra: dict[str, str], chats: int
) -> tuple[list[float], tuple[int, int, int, int]]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with running(["agent-api"], env={**env, "AGENT_PORT": str(port), **extra}, ready_url=f"{url}/healthz"):
        httpx.post(f"{fake}/_fake/reset").raise_for_status()
        httpx.post(f"{fake}/_fake/script", json=SCRIPT).raise_for_status()
        firsts: list[float] = []
        for _ in range(chats):
            firsts += asyncio.run(conversation(url, with_tasks))
        usage = task_usage(httpx.get(f"{fake}/_fake/requests").json())
    return firsts, usage


def main() -> None:
    chats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    tmp = Path(tempfile.mkdtemp(prefix="bench-webui-"))
    r_port, o_port, m_port, token = free_port(), free_port(), free_port(), secrets.token_urlsafe(16)
    fake, redis_url = f"http://127.0.0.1:{o_port}", f"redis://127.0.0.1:{r_port}/0"
    worker_env = {
        "REDIS_URL": redis_url,
        "OLLAMA_URL": fake,
        "OLLAMA_MODEL": MODEL,
        "LOG_LEVEL": "WARNING",
        "WORKER_METRICS_PORT": str(free_port()),
        "THINK_HOLDBACK_MODELS": "",
    }
    mcp_env = {
        "MCP_PORT": str(m_port),
        "MCP_TOKEN": token,
        "FILES_ROOT": str(tmp),
        "DATA_DIR": str(tmp),
        "LOG_LEVEL": "WARNING",
    }
    api_env = {
        "OLLAMA_URL": fake,
        "OLLAMA_MODEL": MODEL,
        "REDIS_URL": redis_url,
        "MODEL_BACKEND": "queue",
        "MCP_URL": f"http://127.0.0.1:{m_port}/mcp",
        "MCP_TOKEN": token,
        "LOG_LEVEL": "WARNING",
        "AGENT_AUTH": "none",
        "ANONYMOUS_ROLE": "admin",
        "RATE_LIMIT_PER_MINUTE": "0",
        "AUDIT_DIR": str(tmp / "audit"),
        "THINK_HOLDBACK_MODELS": "",
    }
    with (
        running(redis_server_cmd(r_port, tmp), ready=lambda: bool(redis.Redis(port=r_port).ping())),
        running(
            [sys.executable, "-m", "tests.fakes.fake_ollama", "--port", str(o_port), "--models", MODEL],
            ready_url=f"{fake}/api/version",
        ),
        running(["mcp-server"], env=mcp_env, ready_url=f"http://127.0.0.1:{m_port}/healthz", timeout=60),
        running(
            [str(VENV_BIN / "agent-worker")],
            env=worker_env,
            ready=lambda: bool(redis.Redis(port=r_port).smembers("agent:workers")),
        ),
    ):
        print(
            f"bench-webui: {chats} chats x {len(QUESTIONS)} turns per mode, Open WebUI's request pattern, scripted "
            "Ollama (1 s to first token, ~2 s rounds, tool question = 2 rounds), GPU queue, 1 agent-worker"
        )
        turns = chats * len(QUESTIONS)
        baseline = None
        for name, (with_tasks, extra) in MODES.items():
            firsts, (rounds, cut, tools, most) = run_mode(api_env, fake, with_tasks, extra, chats)
            mean = statistics.mean(firsts)
            baseline = baseline or mean
            print(
                f"  {name:15} user first token mean {mean:5.2f} s  max {max(firsts):5.2f} s  "
                f"({mean / baseline:4.2f}x of tasks off)   task GPU rounds/turn {rounds / turns:4.2f} "
                f"(cut short {cut}, most rounds per task {most})   tool calls in tasks {tools}"
            )
        print("  targets: first token within 1.2x of tasks off; tasks <= 1 round each, 0 tool calls")


if __name__ == "__main__":
    main()
