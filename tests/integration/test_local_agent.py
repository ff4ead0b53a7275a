"""`local-agent` against the scripted Ollama: a tool answer with no Redis and no Docker, then a second start
that keeps what the first one made, and a failed start-up step shown in the chat answer itself; against the
scripted OpenAI-protocol server (MODEL_PROTOCOL=openai, MODEL_URL) as agent-api reads them; a busy port.

The scripted model's replies are plumbing, never model accuracy.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
from pathlib import Path
from typing import Any

import httpx

from tests.integration.conftest import FakeOllama, FakeOpenAI
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
    with started(home, fake_ollama, port, MODEL_NAME="llama3.2:1b") as proc:
        key = (home / "admin.key").read_text().strip()
        answer = ask(f"http://127.0.0.1:{port}", key, "What time is it?", model="llama3.2:1b")
    text = answer["choices"][0]["message"]["content"]
    assert "model llama3.2:1b is not in Ollama" in text and "`ollama pull llama3.2:1b`" in text
    assert "[FAILED] model llama3.2:1b is not in Ollama" in output(proc)


def test_model_protocol_openai_and_model_url_are_honoured(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    """The rounds and the start-up checks go to MODEL_URL in OpenAI's protocol, never to OLLAMA_URL."""
    fake_openai.script({"content": "Deposits today: see the tool."}, models=["smollm2:135m"])
    home, port = tmp_path / "state", free_port()
    nobody = f"http://127.0.0.1:{free_port()}"  # OLLAMA_URL where nothing answers: using it would fail the chat
    env = {"OLLAMA_URL": nobody, "MODEL_PROTOCOL": "openai", "MODEL_URL": fake_openai.url,
           "MODEL_NAME": "smollm2:135m", "AGENT_PORT": str(port), "REDIS_URL": "redis://127.0.0.1:1/0"}  # fmt: skip
    cmd = ["local-agent", "--home", str(home)]
    with running(cmd, env=env, ready_url=f"http://127.0.0.1:{port}/healthz", timeout=90) as proc:
        key = (home / "admin.key").read_text().strip()
        answer = ask(f"http://127.0.0.1:{port}", key, "How many dollars were deposited today?", model="smollm2:135m")
    assert answer["choices"][0]["message"]["content"] == "Deposits today: see the tool."
    sent = fake_openai.requests()
    assert len(sent) == 1 and sent[0]["model"] == "smollm2:135m" and sent[0]["tools"]
    log = output(proc)
    assert f"OpenAI-protocol model server answers at {fake_openai.url}" in log
    assert "[ok] model smollm2:135m is served" in log and "Ollama" not in log.split("serving on")[0]


def test_a_busy_port_fails_before_anything_says_serving(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [str(VENV_BIN / "local-agent"), "--home", str(tmp_path / "state")],
            env={"AGENT_PORT": str(port), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 2, done.stderr
    assert f"127.0.0.1:{port} is in use by another program" in done.stderr and "AGENT_PORT=" in done.stderr
    assert "serving" not in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "state").exists()  # nothing generated, no tool server started
