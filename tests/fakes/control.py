"""Test-side helpers to run the scripted Ollama (a child process or a server in the test's loop) and drive it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from tests.fakes.fake_ollama import FakeState, create_app
from tests.support.procs import Proc, free_port, running

Json = dict[str, Any]
SOURCE = Path(__file__).with_name("fake_ollama.py")


@dataclass
class FakeOllama:
    """A running fake reached over HTTP: `url` is what the agent gets as its Ollama base URL."""

    url: str
    proc: Proc | None = None

    def script(self, script: Json) -> None:
        httpx.post(f"{self.url}/_fake/script", json=script, timeout=5).raise_for_status()

    def reset(self) -> None:
        httpx.post(f"{self.url}/_fake/reset", timeout=5).raise_for_status()

    def stats(self) -> Json:
        result: Json = httpx.get(f"{self.url}/_fake/stats", timeout=5).json()
        return result

    def requests(self) -> list[Json]:
        result: list[Json] = httpx.get(f"{self.url}/_fake/requests", timeout=5).json()
        return result


@dataclass(frozen=True)
class Busy:
    """How the fake's generations filled time: what a GPU-busy fraction means when the model is scripted."""

    generations: int
    span: float  # first generation's start to last one's end, seconds
    busy: float  # seconds with at least one generation running
    gaps: list[float]  # idle stretches between generations, seconds (none while they overlap)

    @property
    def fraction(self) -> float:
        return self.busy / self.span if self.span > 0 else 0.0


def busy_from(requests: list[Json]) -> Busy:
    """Union of the completed generations' [started_at, ended_at] in the fake's /_fake/requests rows."""
    spans = sorted((r["started_at"], r["ended_at"]) for r in requests if r["messages"] and r["ended_at"])
    if not spans:
        return Busy(0, 0.0, 0.0, [])
    busy, gaps = 0.0, list[float]()
    start, end = spans[0]
    for s, e in spans[1:]:
        if s > end:
            busy, gaps = busy + end - start, [*gaps, s - end]
            start, end = s, e
        else:
            end = max(end, e)
    busy += end - start
    return Busy(len(spans), max(e for _, e in spans) - spans[0][0], busy, gaps)


@contextlib.contextmanager
def fake_ollama_process(
    script: Json | None = None, models: str | None = None, host: str = "127.0.0.1"
) -> Iterator[FakeOllama]:
    """Start fake_ollama.py as a standalone child process on a free loopback port; stop it afterwards."""
    port = free_port()
    cmd = [sys.executable, str(SOURCE), "--host", host, "--port", str(port)]
    if models:
        cmd += ["--models", models]
    with tempfile.TemporaryDirectory(prefix="fake-ollama-") as tmp:
        if script is not None:
            path = Path(tmp) / "script.json"
            path.write_text(json.dumps(script), encoding="utf-8")
            cmd += ["--script", str(path)]
        with running(cmd, ready_url=f"http://{host}:{port}/api/version") as proc:
            yield FakeOllama(url=f"http://{host}:{port}", proc=proc)


@contextlib.asynccontextmanager
async def serve_in_loop(state: FakeState | None = None, within: float = 10.0) -> AsyncIterator[str]:
    """Serve the fake with uvicorn inside the running event loop (real sockets, in-process state); yields the URL.

    Use this rather than httpx.ASGITransport when a test needs real streaming or client disconnects.
    """
    config = uvicorn.Config(
        create_app(state), host="127.0.0.1", port=free_port(), log_level="warning", lifespan="off", ws="none"
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    try:
        deadline = time.monotonic() + within
        while not server.started:
            if serving.done() or time.monotonic() > deadline:
                raise RuntimeError("the scripted Ollama did not start")
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{config.port}"
    finally:
        server.should_exit = True
        await serving
