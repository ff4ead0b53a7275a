"""agent-api's supervisor (agent.api.supervisor), real processes on loopback: a killed app process costs the
requests it held and latency, never a refused connection; a config error is one line, not a restart loop;
SIGTERM lets open requests finish."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import FakeOllama, McpServer, agent_env
from tests.support.procs import START_TIMEOUT, VENV_BIN, Proc, free_port, running, wait_until

pytestmark = pytest.mark.integration
CHAT = {"model": "qwen3:4b", "messages": [{"role": "user", "content": "hello"}]}


def app_pid(proc: Proc) -> int | None:
    """The supervisor's child: the app process serving the socket."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == proc.popen.pid:
                return int(entry.name)
    return None


def gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"  # killed, not yet reaped by the supervisor


def ask(url: str) -> tuple[int, str]:
    response = httpx.post(f"{url}/v1/chat/completions", json=CHAT, timeout=START_TIMEOUT)
    return response.status_code, response.json()["choices"][0]["message"]["content"]


def test_requests_sent_while_the_app_process_restarts_are_answered_not_refused(
    ollama: FakeOllama, mcp_server: McpServer
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with running(["agent-api"], env=agent_env(ollama.url, mcp_server, port), ready_url=f"{url}/healthz") as proc:
        old = app_pid(proc) or proc.popen.pid  # without a supervisor: the one process
        os.kill(old, signal.SIGKILL)  # as the OOM killer does
        wait_until(lambda: gone(old), what="the app process died")
        with ThreadPoolExecutor(4) as pool:  # sent now: no process is serving the port
            answers = list(pool.map(lambda _: ask(url), range(4)))
        assert [status for status, _ in answers] == [200] * 4, answers
        assert all(text for _, text in answers)
        new = app_pid(proc)
        assert new not in (None, old)
        assert proc.popen.poll() is None, "the supervisor itself lives on"
        exits = [json.loads(line) for line in proc.output().splitlines() if "api_process_exited" in line]
        assert [(e["pid"], e["cause"]) for e in exits] == [(old, "signal SIGKILL")]


def test_a_config_error_is_one_line_and_one_start_not_a_restart_loop(mcp_server: McpServer, tmp_path: Path) -> None:
    env = agent_env("http://127.0.0.1:1", mcp_server, free_port(), MCP_TOKEN="", MCP_TOKEN_FILE="/nonexistent/token")
    done = subprocess.run(
        ["agent-api"],
        env={**os.environ, "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}", **env},
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 2, done
    usage = [line for line in done.stderr.splitlines() if line.startswith("agent-api:")]
    assert len(usage) == 1 and "MCP_TOKEN_FILE /nonexistent/token cannot be read" in usage[0], done.stderr
    assert done.stderr.count('"config_refused"') == 1, "the app process was started once"
    assert "api_process_exited" not in done.stderr and "Traceback" not in done.stderr


def test_sigterm_lets_an_open_stream_finish_then_everything_exits(ollama: FakeOllama, mcp_server: McpServer) -> None:
    ollama.script(default={"content": " ".join(["word"] * 40)}, token_delay=0.05)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with running(["agent-api"], env=agent_env(ollama.url, mcp_server, port), ready_url=f"{url}/healthz") as proc:
        app = app_pid(proc) or proc.popen.pid
        lines = []
        with httpx.stream("POST", f"{url}/v1/chat/completions", json={**CHAT, "stream": True}, timeout=60) as stream:
            chunks = stream.iter_lines()
            lines.append(next(chunks))  # the stream is open and answering
            proc.popen.send_signal(signal.SIGTERM)
            lines.extend(line for line in chunks if line)
        assert stream.status_code == 200 and lines[-1] == "data: [DONE]", lines[-3:]
        text = "".join(
            (json.loads(line[6:])["choices"][0]["delta"].get("content") or "")
            for line in lines
            if line.startswith("data: {")
        )
        assert text.split() == ["word"] * 40
        assert proc.popen.wait(timeout=START_TIMEOUT) == 0, proc.output()[-2000:]
        assert gone(app)
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{url}/healthz", timeout=5)


def test_an_app_process_whose_supervisor_was_killed_stops_and_frees_the_port(
    ollama: FakeOllama, mcp_server: McpServer
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with running(["agent-api"], env=agent_env(ollama.url, mcp_server, port), ready_url=f"{url}/healthz") as proc:
        app = app_pid(proc)
        assert app is not None
        proc.kill(signal.SIGKILL)  # the supervisor alone
        wait_until(lambda: gone(app), timeout=START_TIMEOUT, what="the orphaned app process stopped")
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{url}/healthz", timeout=5)
