"""The readiness details /readyz no longer shows: an admin reads them in /v1/agent/info (agent.api.readiness)."""

from __future__ import annotations

from typing import Any

import httpx


def details(api: str, headers: dict[str, str] | None = None, timeout: float = 60) -> dict[str, Any]:
    """Per component the operator's details (`ok`, `detail`, `fix`, …), as an admin caller sees them."""
    info = httpx.get(f"{api}/v1/agent/info", headers=headers or {}, timeout=timeout)
    assert info.status_code == 200, info.text
    return dict(info.json()["readiness"]["checks"])
