"""A restarting MCP server costs a tool call latency, not its answer — but a call that reached it never runs twice.

The server is a real process on loopback (tests/support/mcp_journal.py) that journals every run of its tool;
it is killed with SIGKILL and started again on the same port, as a compose restart policy does.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog.testing

from agent.errors import DependencyDown
from agent.mcp_client import ToolBox
from tests.support.procs import Proc, free_port, start, wait_until

# Two cold server starts per test on a loaded 2-core machine: give each test more than the suite's 120 s.
pytestmark = pytest.mark.timeout(600)


class JournalServer:
    def __init__(self, journal: Path) -> None:
        self.port, self.journal = free_port(), journal
        self.proc: Proc | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        self.proc = start(
            ["python", "-m", "tests.support.mcp_journal", str(self.port), str(self.journal)],
            ready=self._listening,
            timeout=180,  # a cold Python start on a loaded 2-core machine has taken over 30 s
        )

    def _listening(self) -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", self.port)) == 0

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()

    def runs(self) -> list[str]:
        return self.journal.read_text().split() if self.journal.exists() else []


@pytest.fixture
def server(tmp_path: Path) -> Iterator[JournalServer]:
    srv = JournalServer(tmp_path / "journal")
    srv.start()
    yield srv
    if srv.proc is not None:
        srv.proc.stop()


async def test_a_call_that_could_not_connect_waits_for_the_restarted_server_and_runs_once(
    server: JournalServer,
) -> None:
    box = ToolBox(server.url, None, timeout=10, cache_seconds=60, reconnect_seconds=240)
    try:
        assert (await box.call("record", {"tag": "before"})).text == "recorded before"
        server.kill()
        with structlog.testing.capture_logs() as logs:
            call = asyncio.create_task(box.call("record", {"tag": "during"}))
            await asyncio.to_thread(
                wait_until, lambda: any(e["event"] == "tool_call_retrying" for e in logs), 60, what="the retry"
            )
            assert not call.done()
            await asyncio.to_thread(server.start)  # back while the call waits, as after `restart: unless-stopped`
            result = await asyncio.wait_for(call, 270)
        assert not result.is_error and result.text == "recorded during"
        assert server.runs() == ["before", "during"]
    finally:
        await box.aclose()


async def test_without_the_server_coming_back_the_call_fails_clearly_after_the_wait(server: JournalServer) -> None:
    box = ToolBox(server.url, None, timeout=10, cache_seconds=60, reconnect_seconds=0.5)
    try:
        server.kill()
        with pytest.raises(DependencyDown, match="MCP tool server is unreachable"):
            await box.call("record", {"tag": "lost"})
        assert server.runs() == []
    finally:
        await box.aclose()


async def test_a_call_that_reached_the_server_is_never_sent_again(server: JournalServer) -> None:
    """The tool ran (it journals first), then the server died before answering: repeating it could write twice.
    With the retry open to every failure, the call would run again on the restarted server."""
    box = ToolBox(server.url, None, timeout=120, cache_seconds=60, reconnect_seconds=240)
    try:
        call = asyncio.create_task(box.call("record", {"tag": "once", "hold": 600}))
        await asyncio.to_thread(wait_until, lambda: server.runs() == ["once"], 60, what="the tool to run")
        server.kill()
        await asyncio.to_thread(server.start)
        with pytest.raises(DependencyDown):
            await asyncio.wait_for(call, 270)
        assert (await box.call("record", {"tag": "next"})).text == "recorded next"  # the server is back
        assert server.runs() == ["once", "next"]
    finally:
        await box.aclose()


async def test_the_tool_list_waits_for_a_restarting_server(server: JournalServer) -> None:
    """A request starts by listing the tools (once the cache expired): that too rides through a restart."""
    box = ToolBox(server.url, None, timeout=10, cache_seconds=0, reconnect_seconds=240)
    try:
        server.kill()
        listed = asyncio.create_task(box.list_tools())
        await asyncio.to_thread(server.start)  # a cold start takes seconds; the list's first attempts fail at once
        assert [t.name for t in await asyncio.wait_for(listed, 270)] == ["record"]
    finally:
        await box.aclose()
