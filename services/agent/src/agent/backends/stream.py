"""What both model-server protocols share while streaming a round: line parsing, transport errors, timing.

agent.backends.ollama (NDJSON) and agent.backends.openai_compat (SSE) differ in framing and field names only;
a line that is not JSON, a timeout or a refused connection is the same error class and wording for both, in
direct mode and in the worker (which relays the error to the API by class name and message).
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from agent.backends.base import RoundEvent, TextDelta, ThinkingDelta
from agent.errors import DependencyDown, UpstreamError, UpstreamTimeout

SHOWN = 120  # characters of a malformed line quoted in the error (enough to recognise, bounded for the logs)
Trace = Callable[[str, dict[str, Any]], Awaitable[None]]  # an httpcore trace callback: (event name, its details)


def traced(trace: Trace | None) -> dict[str, Any]:
    """httpx request extensions giving one request its own trace callback (agent.queue.jobs: how far the round's
    model request got); none: no extensions."""
    return {"trace": trace} if trace is not None else {}


def json_object(line: str, server: str) -> dict[str, Any]:
    """One streamed payload as a JSON object, or an UpstreamError that quotes the line."""
    try:
        value = json.loads(line)
    except ValueError as exc:
        raise UpstreamError(f"{server} sent a malformed stream line (not JSON: {exc}): {line[:SHOWN]!r}") from exc
    if not isinstance(value, dict):
        raise UpstreamError(f"{server} sent a malformed stream line (not a JSON object): {line[:SHOWN]!r}")
    return value


@contextmanager
def transport_errors(server: str, url: str, fix: str) -> Iterator[None]:
    """httpx timeouts and connection failures as the agent's errors (504 and 503), naming the server and fix."""
    try:
        yield
    except httpx.TimeoutException as exc:
        raise UpstreamTimeout(f"{server} at {url} did not answer in time ({type(exc).__name__})") from exc
    except httpx.TransportError as exc:
        raise DependencyDown(f"{server} is unreachable at {url} ({type(exc).__name__}). {fix}") from exc


class RoundTimer:
    """Seconds from the request being sent to the first token (thinking, text or a tool call)."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.first_token: float | None = None

    def token(self) -> None:
        if self.first_token is None:
            self.first_token = time.monotonic() - self.started


def text_events(thinking: str, answer: str) -> list[RoundEvent]:
    """A ThinkFilter's (thinking, answer) pair as the events to forward now (empty parts dropped)."""
    events: list[RoundEvent] = [ThinkingDelta(thinking)] if thinking else []
    return [*events, TextDelta(answer)] if answer else events
