"""Logging for agent-api and agent-worker: structlog, JSON lines unless on a TTY, request_id via contextvars.

Call `configure()` once per process before anything else starts: stdlib loggers (RQ, uvicorn, httpx) are
routed through the same renderer, so RQ finds a handler and does not add its own.
"""

from __future__ import annotations

import logging
import sys

import structlog
from structlog.types import EventDict, Processor, WrappedLogger

_configured = False
# Libraries that log a line per request or job at INFO; our own events already cover those.
_QUIET = ("httpx", "httpcore", "rq.worker", "uvicorn.access")


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
    renderer: Processor = structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer()
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
    final: list[Processor] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta]
    if as_json:
        final.append(structlog.processors.format_exc_info)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(foreign_pre_chain=shared, processors=[*final, renderer]))
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level.upper())
    if level.upper() != "DEBUG":
        for name in _QUIET:
            logging.getLogger(name).setLevel(logging.WARNING)


def bind_request_id(request_id: str) -> None:
    """Carry `request_id` on every log line of this task/context (API request or worker round)."""
    structlog.contextvars.bind_contextvars(request_id=request_id)
