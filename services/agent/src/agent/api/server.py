"""How every agent HTTP process serves (`agent-api`, `local-agent`): the port bound first, then uvicorn.

One place for the server's options, so the one-machine command and the service behave alike: asyncio's loop
(not uvloop, installed for agent-worker), half-sent requests cut after REQUEST_READ_TIMEOUT_SECONDS, the
socket peer as the client (X-Forwarded-For is read only from TRUSTED_PROXIES). The port is bound before the
caller says "serving": a busy port is a one-line error naming AGENT_PORT, not a failure after the banner.
`agent-api` binds in its supervisor (agent.api.supervisor) and serves in an app process that adopts the socket.
The supervisor imports this module: it imports the standard library alone (uvicorn and Settings only to serve).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import sys
import threading
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agent.settings import Settings

STARTUP_FAILURE = 3  # uvicorn's own exit status when the app's start-up fails


class PortBusy(OSError):
    """AGENT_HOST:AGENT_PORT cannot be bound (another process has it, or the address is not this machine's)."""


class Address(Protocol):
    """Where to listen: Settings, or the supervisor's own reading of the same two variables."""

    @property
    def agent_host(self) -> str: ...

    @property
    def agent_port(self) -> int: ...


def bind(settings: Address) -> socket.socket:
    """A listening socket on AGENT_HOST:AGENT_PORT, or PortBusy with the fix."""
    host, port = settings.agent_host, settings.agent_port
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP spelled out: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and without it a
    # response written as headers then body waited ~40 ms for the client's delayed ACK (Nagle), on every request
    # after the first on a kept-alive connection, and streamed chunks bunched up the same way.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: a restart reuses a TIME_WAIT port
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        why = "is in use by another program" if exc.errno == errno.EADDRINUSE else f"cannot be bound ({exc.strerror})"
        raise PortBusy(
            f"{host}:{port} {why}: stop that program, or choose another port with AGENT_PORT=… "
            "(and AGENT_HOST=… for another address)"
        ) from exc
    sock.set_inheritable(True)
    return sock


def adopt(listen_fd: int, parent_fd: int | None) -> socket.socket:
    """The listening socket an app process inherited from agent-api's supervisor (agent.api.supervisor).

    `parent_fd` is the read end of a pipe whose write end only the supervisor holds: end-of-file means the
    supervisor is gone, and this process stops gracefully rather than keep the port as an orphan.
    """
    if parent_fd is not None:

        def stop_when_orphaned() -> None:
            with contextlib.suppress(OSError):
                while os.read(parent_fd, 1):
                    pass
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=stop_when_orphaned, name="supervisor-watch", daemon=True).start()
    return socket.socket(fileno=listen_fd)


def serve(app: Any, settings: Settings, sock: socket.socket) -> None:
    """Serve `app` on the bound socket until SIGINT/SIGTERM; exit 3 when the app's start-up failed."""
    import uvicorn  # imported only to serve: `--help` and `--version` start nothing

    from agent_contract.slowclients import deadline_protocol

    config = uvicorn.Config(
        app,
        host=settings.agent_host,
        port=settings.agent_port,
        log_config=None,
        access_log=False,
        proxy_headers=False,  # request.client stays the socket peer; X-Forwarded-For only from TRUSTED_PROXIES
        http=deadline_protocol(settings.request_read_timeout_seconds),  # half-sent requests are cut
        timeout_graceful_shutdown=5,
        loop="asyncio",  # not uvicorn's "auto", which would take uvloop (installed for agent-worker) untested here
    )
    server = uvicorn.Server(config)
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[sock])
    if not server.started:
        sys.exit(STARTUP_FAILURE)
