"""`agent-api`: serve the agent's HTTP API with uvicorn."""

from __future__ import annotations

import sys

import structlog
import uvicorn

from agent.api.app import create_app
from agent.api.slowclients import deadline_protocol
from agent.settings import get_settings
from agent_contract.logs import configure


def main() -> None:
    settings = get_settings()
    configure(settings.log_level)
    try:
        settings.mcp_secret()  # read now: an unreadable MCP_TOKEN_FILE is a start-up error, not a 503 later
        app = create_app(settings)
    except ValueError as exc:  # PolicyError, SecretFileError, an unreadable audit key: the message says which
        structlog.get_logger("agent").error("config_refused", error=str(exc))
        print(f"agent-api: {exc}", file=sys.stderr)
        sys.exit(2)
    uvicorn.run(
        app,
        host=settings.agent_host,
        port=settings.agent_port,
        log_config=None,
        access_log=False,
        proxy_headers=False,  # request.client stays the socket peer; X-Forwarded-For is read only from TRUSTED_PROXIES
        http=deadline_protocol(settings.request_read_timeout_seconds),  # half-sent requests are cut
        timeout_graceful_shutdown=5,
    )


if __name__ == "__main__":
    main()
