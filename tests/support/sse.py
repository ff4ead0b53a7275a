"""Streaming chat completions collected in a thread, so a test can act (kill a worker, pull a cable) mid-answer."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx


def collect(
    url: str,
    body: dict[str, Any],
    sink: list[dict[str, Any]],
    done: threading.Event,
    headers: dict[str, str] | None = None,
    read_timeout: float = 120,
) -> None:
    """POST a streaming chat to `url`; append {"status": …}, then each SSE data object, or {"transport_error": …};
    set `done` at the end, whatever happened."""
    try:
        timeout = httpx.Timeout(10, read=read_timeout)
        with httpx.stream("POST", url, json=body, headers=headers, timeout=timeout) as r:
            sink.append({"status": r.status_code})
            for line in r.iter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    sink.append(json.loads(line.removeprefix("data: ")))
    except httpx.HTTPError as exc:
        sink.append({"transport_error": repr(exc)})
    finally:
        done.set()
