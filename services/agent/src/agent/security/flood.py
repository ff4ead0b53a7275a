"""Bounded audit cost for refusals anyone can cause: 401s (no or a wrong key) and 429s (over the limit).

Per client and status, the first PER_WINDOW refusals of each minute are written in full; the rest are
only counted, and one `refusals_suppressed` record per client, status and window carries the count. So
an outsider hammering the API costs at most PER_WINDOW + 1 records a minute per address, and at most
MAX_KEYS addresses are tracked (beyond that they share one `*` key): the disk stays bounded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

FLOOD_STATUSES = frozenset({401, 429})
PER_WINDOW = 5
WINDOW_S = 60.0
MAX_KEYS = 1000


@dataclass
class _Window:
    started: float
    started_at: str
    written: int = 0
    suppressed: int = 0


class FloodGate:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._windows: dict[tuple[str, int], _Window] = {}

    def admit(self, client: str, status: int) -> bool:
        """Whether this refusal gets a full record; if not, it is counted for the window's summary."""
        key = (client, status)
        if key not in self._windows and len(self._windows) >= MAX_KEYS:
            key = ("*", status)
        window = self._windows.get(key)
        if window is None:
            window = self._windows[key] = _Window(self.clock(), datetime.now(UTC).isoformat(timespec="seconds"))
        if window.written < PER_WINDOW:
            window.written += 1
            return True
        window.suppressed += 1
        return False

    def due(self, everything: bool = False) -> list[dict[str, Any]]:
        """Summary records of the windows that closed (all of them with `everything`, e.g. at shutdown)."""
        now, out = self.clock(), []
        for key, window in list(self._windows.items()):
            if everything or now - window.started >= WINDOW_S:
                del self._windows[key]
                if window.suppressed:
                    out.append(
                        {
                            "event": "refusals_suppressed",
                            "client": key[0],
                            "status": key[1],
                            "count": window.suppressed,
                            "since": window.started_at,
                            "window_seconds": WINDOW_S,
                        }
                    )
        return out
