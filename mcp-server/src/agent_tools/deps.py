"""What tools need at call time (settings, reports DB, notes store, clock), reached via `current()`.

The server sets the context variable around every tool call; worker threads inherit it, so tool
functions stay plain typed functions without a Context parameter.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from zoneinfo import ZoneInfo

from mcp.server.mcpserver.exceptions import ToolError

from agent_tools.db import Database, DatabaseError, Row
from agent_tools.notes_store import NotesStore
from agent_tools.settings import Settings


@dataclass
class Deps:
    settings: Settings
    reports: Database
    notes: NotesStore
    files_root: Path
    zone: ZoneInfo
    clock: Callable[[], dt.datetime] = field(default=lambda: dt.datetime.now(dt.UTC))
    started_monotonic: float = field(default_factory=time.monotonic)

    def now(self) -> dt.datetime:
        return self.clock().astimezone(self.zone)

    def today(self) -> dt.date:
        return self.now().date()

    def query(self, sql: str, params: tuple[object, ...] = ()) -> list[Row]:
        """Reports query; a database failure becomes a ToolError the model can relay."""
        try:
            return self.reports.query(sql, params)
        except DatabaseError as exc:
            raise ToolError(f"the reports database did not answer: {exc}") from exc


_current: contextvars.ContextVar[Deps] = contextvars.ContextVar("agent_tools_deps")
# The user the agent forwarded for this call ("" when none was: in-process calls, or a server without a token)
_user: contextvars.ContextVar[str] = contextvars.ContextVar("agent_tools_user", default="")


def user() -> str:
    """Whose call this is: tools that keep per-user data (notes) key it by this, never by an argument."""
    return _user.get()


def bind_user(name: str) -> contextvars.Token[str]:
    return _user.set(name)


def unbind_user(token: contextvars.Token[str]) -> None:
    _user.reset(token)


def current() -> Deps:
    try:
        return _current.get()
    except LookupError:
        raise ToolError("tool called outside the MCP server (no dependencies bound)") from None


def bind(deps: Deps) -> contextvars.Token[Deps]:
    return _current.set(deps)


def unbind(token: contextvars.Token[Deps]) -> None:
    _current.reset(token)
