"""The request-id rule both services apply, so an id the agent logs is the id the MCP server logs.

A request id is a sane token (letters, digits and `._:-`, at most 128 characters). The agent makes its own for
every request and keeps a client's valid X-Request-ID only beside it; the MCP server (which only ever sees the
agent's ids) drops an invalid one rather than log it.
"""

from __future__ import annotations

import re
import uuid

PATTERN = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")


def clean(value: str | None) -> str | None:
    """`value` if it is a valid request id, else None."""
    if value and PATTERN.match(value):
        return value
    return None


def new() -> str:
    """A fresh request id (the agent makes one for every request it serves)."""
    return uuid.uuid4().hex


def clean_or_new(value: str | None) -> str:
    """`value` if it is a valid request id, else a fresh one."""
    return clean(value) or new()
