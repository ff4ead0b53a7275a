"""Readiness of what the agent depends on (the model runtime, the tool server): the full details for the
logs and for admins (/v1/agent/info), and only ready / not ready per component for the open /readyz.

/readyz answers anyone who can reach the port: URLs, ports, host names, worker names and pull commands
would map the internal network for them, so they stay here.
"""

from __future__ import annotations

from typing import Any

import structlog

from agent.backends.base import ModelBackend, ModelStatus
from agent.backends.models import has_model
from agent.backends.ollama import pull_hint
from agent.mcp_client import ToolBox
from agent.settings import Settings

log = structlog.get_logger("agent.api.readiness")
READY, NOT_READY = "ready", "not ready"


async def details(settings: Settings, backend: ModelBackend, toolbox: ToolBox) -> dict[str, dict[str, Any]]:
    """Per component: `ok`, and what an operator needs to act (versions, missing models, the fix)."""
    status: ModelStatus = await backend.status()
    # Unreachable (Ollama, the worker or Redis down) says nothing about the models: never call them missing.
    missing = [m for m in settings.served_models() if not has_model(status.models, m)] if status.reachable else []
    model_check: dict[str, Any] = {
        "ok": status.reachable and not missing,
        "version": status.version,
        "served": settings.served_models(),
        "missing": missing,
        "detail": status.detail,
    }
    if status.reachable and missing:
        model_check["fix"] = "; ".join(pull_hint(m) for m in missing)
    elif not status.reachable:
        model_check["fix"] = status.detail  # names what is down and how to start it
    mcp_problem = await toolbox.problem()
    mcp_check = {"ok": mcp_problem is None, "url": settings.mcp_url}
    return {"model": model_check, "mcp_server": mcp_check | ({"detail": mcp_problem} if mcp_problem else {})}


class Readiness:
    """Logs the details when they change (a probe every few seconds must not repeat the same lines): a
    component that becomes ready once, one that is not ready again whenever what it says changes."""

    def __init__(self) -> None:
        self._last: dict[str, Any] | None = None

    def observe(self, checks: dict[str, dict[str, Any]]) -> None:
        seen = {name: check if not check["ok"] else READY for name, check in checks.items()}
        if seen == self._last:
            return
        self._last = seen
        for name, check in checks.items():
            if not check["ok"]:
                log.warning("component_not_ready", component=name, **{k: v for k, v in check.items() if k != "ok"})
            else:
                log.info("component_ready", component=name)


def summary(checks: dict[str, dict[str, Any]]) -> tuple[bool, dict[str, Any]]:
    """(all ready, the body of /readyz): the status and per component only ready / not ready."""
    ready = all(c["ok"] for c in checks.values())
    states = {name: READY if c["ok"] else NOT_READY for name, c in checks.items()}
    return ready, {"status": "ready" if ready else "degraded", "checks": states}
