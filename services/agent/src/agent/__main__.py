"""`agent-api`: serve the agent's HTTP API with uvicorn (settings from the environment)."""

from __future__ import annotations

from collections.abc import Sequence

from agent import cli

DESCRIPTION = """Serve the OpenAI- and Ollama-compatible agent API. Configured by environment variables
(AGENT_HOST, AGENT_PORT, OLLAMA_URL, OLLAMA_MODEL, MCP_URL, MODEL_BACKEND, ...): docs/configuration.md."""


def serve() -> int:
    import structlog

    from agent.api.app import create_app
    from agent.api.server import PortBusy, bind
    from agent.api.server import serve as serve_app
    from agent.redisconn import connection_options
    from agent.settings import get_settings
    from agent_contract.logs import configure

    settings = get_settings()
    configure(settings.log_level)
    try:
        settings.mcp_secret()  # read now: an unreadable MCP_TOKEN_FILE is a start-up error, not a 503 later
        if settings.model_backend == "queue" or settings.rate_limit_backend == "redis":
            connection_options(settings)  # the same for REDIS_PASSWORD_FILE and the TLS files
        app = create_app(settings)
        sock = bind(settings)
    except (ValueError, PortBusy) as exc:  # PolicyError, SecretFileError, an unreadable audit key, a busy port
        structlog.get_logger("agent").error("config_refused", error=str(exc))
        raise cli.UsageError(str(exc)) from exc
    serve_app(app, settings, sock)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    cli.parser("agent-api", DESCRIPTION).parse_args(argv)
    return cli.run("agent-api", serve)


if __name__ == "__main__":
    raise SystemExit(main())
