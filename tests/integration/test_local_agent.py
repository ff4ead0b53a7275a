"""`local-agent` against the scripted Ollama: a tool answer with no Redis and no Docker, then a second start
that keeps what the first one made, and a failed start-up step shown in the chat answer itself.

The scripted model's replies are plumbing, never model accuracy.
"""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path
from typing import Any

import httpx

from tests.integration.conftest import FakeOllama
from tests.support.procs import VENV_BIN, Proc, free_port, running, wait_until

TIME_RULE = {
    "when": {"user_contains": "what time", "last_role": "user"},
    "reply": {"tool_calls": [{"name": "sistem_bilgisi", "arguments": {}}]},
}


def env_for(fake: FakeOllama, port: int, **extra: str) -> dict[str, str]:
    # A Redis URL nobody answers on: if local-agent touched Redis, the chat would fail.
    return {"OLLAMA_URL": fake.url, "AGENT_PORT": str(port), "REDIS_URL": "redis://127.0.0.1:1/0", **extra}


def ask(url: str, key: str, question: str, model: str = "qwen3:4b") -> dict[str, Any]:
    body = {"model": model, "messages": [{"role": "user", "content": question}]}
    resp = httpx.post(f"{url}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


def started(home: Path, fake: FakeOllama, port: int, **extra: str) -> Any:
    return running(
        ["local-agent", "--home", str(home)],
        env=env_for(fake, port, **extra),
        ready_url=f"http://127.0.0.1:{port}/healthz",
        timeout=90,
    )


def output(proc: Proc) -> str:
    return proc.output()


def tool_servers(home: Path) -> list[int]:
    """mcp-server processes started by the local-agent of this state directory (by their DATA_DIR)."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        with contextlib.suppress(OSError):
            if f"DATA_DIR={home / 'mcp-data'}".encode() in environ.read_bytes().split(b"\0"):
                found.append(int(environ.parent.name))
    return found


def test_tool_answer_without_redis_or_docker_then_a_second_start_skips_done_steps(
    fake_ollama: FakeOllama, tmp_path: Path
) -> None:
    fake_ollama.script(rules=[TIME_RULE])
    home, port = tmp_path / "state", free_port()
    url = f"http://127.0.0.1:{port}"
    with started(home, fake_ollama, port) as first:
        key = (home / "admin.key").read_text().strip()
        answer = ask(url, key, "What time is it?")
        assert answer["local_agent"]["tools_used"] == ["sistem_bilgisi"]
        assert answer["local_agent"]["tool_calls"][0]["outcome"] == "ok"
        again = subprocess.run(
            [str(VENV_BIN / "local-agent"), "--home", str(home)],
            env={"AGENT_PORT": str(port), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert again.returncode == 0 and "already serving" in again.stderr
    log = output(first)
    assert "[ok] MCP token generated" in log and "[ok] admin API key generated" in log
    assert f"shown this once (also kept in {home / 'admin.key'}" in log and key in log
    assert "[ok] model qwen3:4b loaded" in log
    loads = [r for r in fake_ollama.requests() if not r.get("messages")]
    assert len(loads) == 1  # one warm-up

    with started(home, fake_ollama, port) as second:
        assert ask(url, key, "What time is it?")["local_agent"]["tools_used"] == ["sistem_bilgisi"]
    wait_until(lambda: tool_servers(home) == [], timeout=15, what="the tool server to stop with local-agent")
    log = output(second)
    assert "[kept] MCP token kept" in log and "[kept] admin API key kept" in log
    assert key not in log and f"admin API key: in {home / 'admin.key'}" in log  # shown once, then only where
    assert "[skipped] warm-up: qwen3:4b is already loaded" in log
    assert len([r for r in fake_ollama.requests() if not r.get("messages")]) == 1  # no second warm-up
    assert (home / "admin.key").read_text().strip() == key


def test_a_failed_step_is_the_chat_answer_with_the_fix(fake_ollama: FakeOllama, tmp_path: Path) -> None:
    fake_ollama.script()
    home, port = tmp_path / "state", free_port()
    with started(home, fake_ollama, port, OLLAMA_MODEL="llama3.2:1b") as proc:
        key = (home / "admin.key").read_text().strip()
        answer = ask(f"http://127.0.0.1:{port}", key, "What time is it?", model="llama3.2:1b")
    text = answer["choices"][0]["message"]["content"]
    assert "model llama3.2:1b is not in Ollama" in text and "`ollama pull llama3.2:1b`" in text
    assert "[FAILED] model llama3.2:1b is not in Ollama" in output(proc)
