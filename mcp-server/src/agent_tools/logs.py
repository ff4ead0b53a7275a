"""Process logging: structlog JSON lines (stdlib records from uvicorn and the SDK go through the same renderer)."""

from __future__ import annotations

import logging
import re
import sys

import structlog

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")


def configure(level: str = "INFO") -> None:
    """Called once per process, before the server starts."""
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                structlog.processors.JSONRenderer(ensure_ascii=False),
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    structlog.contextvars.bind_contextvars(service="mcp-server")
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
    # The SDK logs "Terminating session: None" at INFO for every stateless request, and each ToolError's
    # text (which can quote arguments such as a customer name) at INFO; our tool_called line has the outcome.
    logging.getLogger("mcp.server.streamable_http").setLevel(logging.WARNING)
    logging.getLogger("mcp.server.mcpserver.server").setLevel(logging.WARNING)
    # Access lines are written by our own middleware (with request_id); uvicorn's would duplicate them.
    logging.getLogger("uvicorn.access").disabled = True


def clean_request_id(value: str | None) -> str | None:
    """An incoming X-Request-ID if it is a sane token; anything else is dropped rather than logged."""
    if value and _REQUEST_ID.match(value):
        return value
    return None
