"""The entries of a round's event stream, as the worker writes them and the API reads them.

accepted  the worker took the job (from then on it pings every PING_INTERVAL s, even while waiting)
started   the per-GPU lock is held and the request goes to Ollama
text / thinking / tool_calls / done   agent.backends.base events, as Ollama produces them
error     an agent.errors class name, message and client message; the API re-raises it as the same class
ping      the worker is alive (the API treats silence as worker death)
"""

from __future__ import annotations

from typing import Any

from agent import errors
from agent.errors import AgentError


def error_entry(exc: AgentError) -> dict[str, Any]:
    return {
        "kind": "error",
        "error": type(exc).__name__,
        "message": exc.message,
        "public": exc.public,
        "public_tr": exc.public_tr,
        "param": exc.param,
        "code": exc.code,
        "retry_after": exc.retry_after,
    }


def error_from(data: dict[str, Any]) -> AgentError:
    """Rebuild the worker's error as the same agent.errors class (unknown names become UpstreamError)."""
    cls = getattr(errors, str(data.get("error")), None)
    if not (isinstance(cls, type) and issubclass(cls, AgentError)):
        cls = errors.UpstreamError
    code = data.get("code")
    error = cls(
        str(data.get("message")), param=data.get("param"), code=code or None, retry_after=data.get("retry_after")
    )
    if data.get("public"):
        error.public = str(data["public"])
        error.public_tr = str(data["public_tr"]) if data.get("public_tr") else None
    return error
