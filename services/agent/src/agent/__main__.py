"""`agent-api`: serve the agent's HTTP API with uvicorn."""

from __future__ import annotations

import uvicorn

from agent.api.app import create_app
from agent.logs import configure
from agent.settings import get_settings


def main() -> None:
    settings = get_settings()
    configure(settings.log_level)
    uvicorn.run(
        create_app(settings),
        host=settings.agent_host,
        port=settings.agent_port,
        log_config=None,
        access_log=False,
        proxy_headers=False,  # request.client stays the socket peer; X-Forwarded-For is read only from TRUSTED_PROXIES
        timeout_graceful_shutdown=5,
    )


if __name__ == "__main__":
    main()
