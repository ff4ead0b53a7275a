"""A refusal is not an answer: agent-eval waits out a 429/503's `Retry-After` and asks again.

The agent refuses when a caller asks faster than RATE_LIMIT_PER_MINUTE or the GPU queue is full, and says
when to come back (`Retry-After`). A run honours it within one budget for the whole run (`--max-wait`), so a
rate-limited stack costs time, never questions; every wait is recorded and reported. A request still refused
when the budget is spent (or refused without a `Retry-After`) is recorded as not answered: scoring leaves it
out, it never counts as the model's mistake.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

REFUSALS = (429, 503)  # "too many requests" and "not now": both carry Retry-After from the agent
DEFAULT_MAX_WAIT = 900.0  # seconds a whole run may spend waiting; the shipped set at 5 per minute needs ~11 min


def retry_after(resp: httpx.Response) -> float | None:
    """The seconds a refusal asks the client to wait (delta-seconds or an HTTP date); None without one."""
    value = resp.headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


@dataclass
class WaitBudget:
    """The run's allowance for waiting on refusals, and what was spent."""

    limit: float = DEFAULT_MAX_WAIT
    spent: float = 0.0
    waits: int = 0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    def wait_for(self, resp: httpx.Response) -> float | None:
        """Sleep for the refusal's Retry-After if the budget allows; the seconds slept, or None (give up)."""
        if resp.status_code not in REFUSALS:
            return None
        delay = retry_after(resp)
        if delay is None or self.spent + delay > self.limit:
            return None
        self.sleep(delay)
        self.spent += delay
        self.waits += 1
        return delay

    def summary(self) -> dict[str, Any]:
        return {"waits": self.waits, "seconds": round(self.spent, 1), "limit_seconds": self.limit}


def post_patiently(
    http: httpx.Client, url: str, body: dict[str, Any], budget: WaitBudget
) -> tuple[httpx.Response, float, int]:
    """POST, waiting out refusals within the budget: (the last response, seconds waited, waits)."""
    waited, waits = 0.0, 0
    while True:
        resp = http.post(url, json=body)
        delay = budget.wait_for(resp)
        if delay is None:
            return resp, waited, waits
        waited, waits = waited + delay, waits + 1
