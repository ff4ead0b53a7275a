"""Regression: every response after the first on a kept-alive connection took ~40 ms more than its handler.

agent-api binds its port itself (agent.api.server.bind) with a socket whose proto was 0, and asyncio sets
TCP_NODELAY only on sockets whose proto says TCP. uvicorn writes a response as headers, then body: with Nagle
on, the body waited for the client's delayed ACK of the headers (~40 ms on Linux), and streamed chunks bunched
up the same way. scripts/bench-loop showed it as 48 ms of "agent overhead per round" against a 7 ms handler.
"""

from __future__ import annotations

import asyncio
import socket

from agent.api.server import bind
from agent.settings import Settings
from tests.support.procs import free_port


async def test_connections_accepted_on_the_agent_port_send_without_nagle() -> None:
    listening = bind(Settings(agent_host="127.0.0.1", agent_port=free_port()))
    nodelay: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = writer.get_extra_info("socket")
        nodelay.set_result(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(accepted, sock=listening)
    try:
        _, writer = await asyncio.open_connection(*listening.getsockname()[:2])
        assert await asyncio.wait_for(nodelay, 5) != 0
        writer.close()
    finally:
        server.close()
        await server.wait_closed()
