"""A request must arrive whole in time: uvicorn's h11 protocol plus a read deadline per request.

uvicorn times out idle keep-alive connections but never a request that is still arriving, so a client
sending its headers (or body) a byte at a time holds a socket and a slot forever; a few hundred such
clients exhaust the server. Here the connection is closed when a request is not complete within
`read_timeout` seconds of the connection opening or of the request's first byte.
Both servers (agent-api and mcp-server) run uvicorn with this protocol class.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
import structlog
from uvicorn.protocols.http.h11_impl import H11Protocol

log = structlog.get_logger("agent_contract.slowclients")
_COMPLETE = (h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.ERROR)


def deadline_protocol(read_timeout: float) -> type[H11Protocol]:
    """The protocol class to hand to uvicorn (`http=`), closing requests not read within `read_timeout` s."""

    class DeadlineH11Protocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state in _COMPLETE:
                self._disarm()
            else:
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._deadline is None:
                self._deadline = self.loop.call_later(read_timeout, self._expired)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expired(self) -> None:
            self._deadline = None
            if self.conn.their_state not in _COMPLETE and not self.transport.is_closing():
                log.warning("request_read_timeout", client=(self.client or ("?",))[0], seconds=read_timeout)
                self.transport.close()

    return DeadlineH11Protocol
