"""`agent-api`: serve the agent's HTTP API with uvicorn (settings from the environment).

`agent-api` binds the port and supervises (agent.api.supervisor); the supervisor runs this same module with
`--listen-fd` as the app process that serves on the socket it inherited.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from agent import cli

if TYPE_CHECKING:
    from agent.api.supervisor import Listen

DESCRIPTION = """Serve the OpenAI- and Ollama-compatible agent API. Configured by environment variables
(AGENT_HOST, AGENT_PORT, OLLAMA_URL, MODEL_NAME, MCP_URL, MODEL_BACKEND, ...): docs/configuration.md."""


def supervise() -> int:
    """Bind the port (a busy one is a one-line error) and keep an app process serving on it.

    This process imports the standard library alone (agent.api.supervisor says why); Settings only when one of
    its three variables is spelled in a way only Settings can judge.
    """
    from agent.api.server import PortBusy, bind
    from agent.api.supervisor import listen_settings
    from agent.api.supervisor import supervise as run_supervisor

    listen = listen_settings(os.environ) or validated_listen()
    try:
        sock = bind(listen)
    except PortBusy as exc:
        raise cli.UsageError(str(exc)) from exc
    return run_supervisor(sock, listen.log_level)


def validated_listen() -> Listen:
    """The supervisor's settings through Settings: its one-line error for a value it refuses."""
    from agent.api.supervisor import LEVELS, Listen
    from agent.settings import get_settings

    settings = get_settings()
    if settings.log_level.upper() not in LEVELS:
        raise cli.UsageError(f"invalid setting LOG_LEVEL={settings.log_level!r}: one of {', '.join(LEVELS)}")
    return Listen(settings.agent_host, settings.agent_port, settings.log_level)


def serve(listen_fd: int, parent_fd: int | None) -> int:
    """The app process: check the configuration, build the app, serve on the inherited socket."""
    import structlog

    from agent.api.app import create_app, make_backend
    from agent.api.server import adopt
    from agent.api.server import serve as serve_app
    from agent.settings import get_settings
    from agent_contract.logs import configure

    settings = get_settings()
    configure(settings.log_level)
    try:
        settings.mcp_secret()  # read now: an unreadable MCP_TOKEN_FILE is a start-up error, not a 503 later
        if settings.model_backend == "queue" or settings.rate_limit_backend == "redis":
            from agent.redisconn import connection_options  # imports redis: direct mode never needs it

            connection_options(settings)  # the same for REDIS_PASSWORD_FILE and the TLS files
        # built now: queue mode without its round signing key (or an unreadable one) is a start-up error
        app = create_app(settings, backend=make_backend(settings))
    except ValueError as exc:  # PolicyError, SecretFileError, an unreadable audit key
        structlog.get_logger("agent").error("config_refused", error=str(exc))
        raise cli.UsageError(str(exc)) from exc
    serve_app(app, settings, adopt(listen_fd, parent_fd))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = cli.parser("agent-api", DESCRIPTION)
    # Set only by the supervisor, for the app process: not part of the command's interface.
    parser.add_argument("--listen-fd", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--parent-fd", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.listen_fd is None:
        return cli.run("agent-api", supervise)
    return cli.run("agent-api", lambda: serve(args.listen_fd, args.parent_fd))


if __name__ == "__main__":
    raise SystemExit(main())
