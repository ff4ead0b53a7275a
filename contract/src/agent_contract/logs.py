"""Process logging for every local-agent service: structlog, JSON lines unless on a TTY, context via contextvars.

Call `configure()` once per process before anything else starts: stdlib loggers (RQ, uvicorn, httpx, the
MCP SDK) are routed through the same renderer, so RQ finds a handler and does not add its own. Every line
carries `service` (the compose service name) and, inside a request or a round, `request_id`.
"""

from __future__ import annotations

import logging
import sys

import structlog
from structlog.types import EventDict, Processor, WrappedLogger

# Libraries that log a line per request or job at INFO; our own events already cover those.
_QUIET = ("httpx", "httpx2", "httpcore", "rq.worker", "uvicorn.access", "mcp.server.streamable_http")
# The MCP SDK logs each ToolError's text (which can quote arguments such as a customer name) at INFO:
# kept at WARNING even in DEBUG; our tool_called line has the outcome.
_PRIVATE = ("mcp.server.mcpserver.server",)

_configured = False


def configure(level: str = "INFO", service: str = "agent-api", *, json_logs: bool | None = None) -> None:
    """Set up structlog and the stdlib root logger for this process (later calls do nothing)."""
    global _configured
    if _configured:
        return
    _configured = True
    as_json = not sys.stderr.isatty() if json_logs is None else json_logs

    def add_service(_: WrappedLogger, __: str, event: EventDict) -> EventDict:
        event.setdefault("service", service)
        return event

    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        add_service,
    ]
    structlog.configure(
        processors=[
            *shared,
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    _route_stdlib(shared, as_json, level.upper())


def _route_stdlib(shared: list[Processor], as_json: bool, level: str) -> None:
    renderer: Processor = (
        structlog.processors.JSONRenderer(ensure_ascii=False) if as_json else structlog.dev.ConsoleRenderer()
    )
    final: list[Processor] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta]
    if as_json:
        final.append(structlog.processors.format_exc_info)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(foreign_pre_chain=shared, processors=[*final, renderer]))
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):  # through the root handler, once
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
    for name in (*_QUIET, *_PRIVATE) if level != "DEBUG" else _PRIVATE:
        logging.getLogger(name).setLevel(logging.WARNING)


def bind_request_id(request_id: str) -> None:
    """Carry `request_id` on every log line of this task/context (an HTTP request or a worker round)."""
    structlog.contextvars.bind_contextvars(request_id=request_id)
