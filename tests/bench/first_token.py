"""bench-loop, second part: when the first answer token reaches the client, against a scripted round that streams.

The scripted Ollama streams a 30-word answer a token every TOKEN_DELAY seconds (thinking off, as THINK=false).
Interleaved, per iteration: the model itself (/api/chat), then agent-api (OpenAI SSE) with a model that opens
its own think block (`qwen3:8b`, hybrid Qwen3), with one held strictly (`qwen3:4b`, whose template opens the
block in the prompt: THINK_HOLDBACK_MODELS) answering plainly and answering after untagged reasoning, then
each installed peer. Printed: the first answer token as a fraction of the round (target <= 0.35 for a model
not held), the time to first token the agent adds to the model's own, and that against the best peer's
(target <= 1.5x). Peers are not part of the repository: bench-loop uses those it finds in the venvs PEERS_VENVS
lists (`:`-separated; `litellm[proxy]` 1.106.12 and `ollama-mcp-bridge` 0.12.2 need two: their `mcp` pins
conflict), docs/development.md.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx

from tests.bench.stats import venv_version
from tests.support.procs import free_port, running

TOKEN_DELAY = 0.004
ANSWER = " ".join(f"word{i}" for i in range(30)) + "."
REASONING = "Okay, the user asks for the words; I should list them in order and add nothing else at all. </think>\n\n"
MODELS = ["qwen3:4b", "qwen3:8b"]
ANSWER_WORD = re.compile(r"word[0-9]")  # the reasoning says "words": not an answer token
# A peer's own calls out (the bridge asks PyPI for updates at start) go to a closed loopback port and fail fast.
PEER_KEY = "sk-bench-" + secrets.token_hex(8)
CLOSED = "http://127.0.0.1:9"
LOOPBACK_ONLY = {"HTTP_PROXY": CLOSED, "HTTPS_PROXY": CLOSED, "NO_PROXY": "127.0.0.1,localhost"}
Timing = tuple[float, float]  # (first answer token, end of the round), seconds from the request


def script(fake_url: str) -> None:
    rule = {"when": {"user_contains": "reason"}, "reply": {"raw_content": REASONING + ANSWER}}
    body = {"rules": [rule], "default": {"content": ANSWER}, "token_delay": TOKEN_DELAY, "models": MODELS}
    httpx.post(f"{fake_url}/_fake/script", json=body).raise_for_status()


def timed(http: httpx.Client, url: str, body: dict[str, object], first: Callable[[str], bool]) -> Timing:
    """Stream one request; the first line for which `first` holds is the first answer token."""
    t0, t_first = time.perf_counter(), 0.0
    with http.stream("POST", url, json=body) as resp:
        assert resp.status_code == 200, resp.read()
        for line in resp.iter_lines():
            if not t_first and first(line):
                t_first = time.perf_counter() - t0
    assert t_first, f"no answer token from {url}"
    return t_first, time.perf_counter() - t0


def ollama_text(line: str) -> bool:
    """An /api/chat line carrying an answer word (the scripted answer's words are `word0`…, the reasoning's not)."""
    if not line.strip():
        return False
    return ANSWER_WORD.search((json.loads(line).get("message") or {}).get("content") or "") is not None


def sse_text(line: str) -> bool:
    if not line.startswith("data: {"):
        return False
    choices = json.loads(line.removeprefix("data: ")).get("choices") or [{}]
    return ANSWER_WORD.search((choices[0].get("delta") or {}).get("content") or "") is not None


def chat(model: str, question: str = "list the words") -> dict[str, object]:
    return {"model": model, "messages": [{"role": "user", "content": question}], "stream": True}


@contextmanager
def peers(fake_url: str, stack: ExitStack) -> Iterator[dict[str, tuple[str, dict[str, object], Callable[[str], bool]]]]:
    """The installed peers, started on loopback in front of the scripted model: name -> (url, body, first)."""
    found: dict[str, tuple[str, dict[str, object], Callable[[str], bool]]] = {}
    for venv in filter(None, os.environ.get("PEERS_VENVS", "").split(":")):
        bin_dir = Path(venv) / "bin"
        if (bin_dir / "litellm").exists():
            port = free_port()
            env = {
                **LOOPBACK_ONLY,
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                "LITELLM_LOG": "ERROR",
                "LITELLM_MASTER_KEY": PEER_KEY,
            }  # it refuses to start without one
            cmd = [str(bin_dir / "litellm"), "--model", "ollama_chat/qwen3:8b", "--api_base", fake_url,
                   "--host", "127.0.0.1", "--port", str(port), "--telemetry", "False"]  # fmt: skip
            stack.enter_context(running(cmd, env=env, ready_url=f"http://127.0.0.1:{port}/health/liveliness",
                                        timeout=600))  # fmt: skip
            body = chat("ollama_chat/qwen3:8b")
            found[f"LiteLLM {venv_version(venv, 'litellm')}"] = (
                f"http://127.0.0.1:{port}/v1/chat/completions",
                body,
                sse_text,
            )
        if (bin_dir / "ollama-mcp-bridge").exists():
            port, config = free_port(), Path(stack.enter_context(_tmpdir())) / "mcp-config.json"
            config.write_text(json.dumps({"mcpServers": {}}))
            cmd = [str(bin_dir / "ollama-mcp-bridge"), "--config", str(config), "--host", "127.0.0.1",
                   "--port", str(port), "--ollama-url", fake_url]  # fmt: skip
            ready = f"http://127.0.0.1:{port}/health"
            stack.enter_context(running(cmd, env=LOOPBACK_ONLY, ready_url=ready, timeout=120))
            found[f"ollama-mcp-bridge {venv_version(venv, 'ollama-mcp-bridge')}"] = (
                f"http://127.0.0.1:{port}/api/chat",
                chat("qwen3:8b"),
                ollama_text,
            )
    yield found


@contextmanager
def _tmpdir() -> Iterator[str]:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bench-peer-") as path:
        yield path


def run(fake_url: str, agent_url: str, n: int) -> None:
    script(fake_url)
    chat_url = f"{agent_url}/v1/chat/completions"
    reasoning = chat("qwen3:4b", "reason, then list the words")
    cases: dict[str, tuple[str, dict[str, object], Callable[[str], bool]]] = {
        "model itself (/api/chat)": (f"{fake_url}/api/chat", {**chat("qwen3:8b"), "think": False}, ollama_text),
        "model itself, reasoning first": (f"{fake_url}/api/chat", {**reasoning, "think": False}, ollama_text),
        "agent, qwen3:8b (streams)": (chat_url, chat("qwen3:8b"), sse_text),
        "agent, qwen3:4b held, plain": (chat_url, chat("qwen3:4b"), sse_text),
        "agent, qwen3:4b held, reasoning": (chat_url, reasoning, sse_text),
    }
    auth = {"Authorization": f"Bearer {PEER_KEY}"}  # LiteLLM's; the agent (AGENT_AUTH=none) and the model ignore it
    with ExitStack() as stack, peers(fake_url, stack) as found, httpx.Client(timeout=60, headers=auth) as http:
        cases |= found
        times: dict[str, list[Timing]] = {name: [] for name in cases}
        for i in range(n + 5):
            for name, (url, body, first) in cases.items():
                timing = timed(http, url, body, first)
                if i >= 5:  # warm-up discarded
                    times[name].append(timing)
    report(times, list(found))


def report(times: dict[str, list[Timing]], peer_names: list[str]) -> None:
    plain, reasoned = ([t for t, _ in times[k]] for k in ("model itself (/api/chat)", "model itself, reasoning first"))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    words, delay = len(ANSWER.split()), TOKEN_DELAY * 1000
    print(f"first answer token: scripted round of {words} words, a token every {delay:g} ms, THINK=false, load {load}")
    added: dict[str, float] = {}
    for name, rows in times.items():
        fraction = statistics.median(t / end for t, end in rows)
        base = reasoned if "reasoning" in name else plain  # the model's own first answer word, same script
        added[name] = statistics.median(t - b for (t, _), b in zip(rows, base, strict=True))
        ttft = statistics.median(t for t, _ in rows) * 1000
        print(f"  {name:34} first token {ttft:7.2f} ms = {fraction:4.2f} of the round   "
              f"added to the model's {added[name] * 1000:6.2f} ms")  # fmt: skip
    print("  target: first token <= 0.35 of the round for a model not held (qwen3:8b)")
    if not peer_names:
        print("  peers: none found (PEERS_VENVS: venvs with litellm[proxy]==1.106.12, ollama-mcp-bridge==0.12.2)")
        return
    best = min(peer_names, key=lambda name: added[name])
    ratio = added["agent, qwen3:8b (streams)"] / added[best]
    print(f"  TTFT added, agent (qwen3:8b) / best peer ({best}): {ratio:4.2f}x   (target <= 1.5x)")
