"""User names from headers and tokens: checked, never repaired.

A name is who the policy, the rate limit, the audit log and the MCP server's notes take the caller to be.
Dropping an invisible character before the policy lookup made `bo\\u200bss@example.com` boss; so a name is
accepted exactly as received or refused with a 401 that says why. Refused: what agent_contract.names refuses
(control, format and default-ignorable characters, blank look-alikes, every space but U+0020 and a space at
either end, Latin mixed with Cyrillic or Greek letters), bytes that are not UTF-8, and names longer than
MAX_USER_CHARS (cutting them could make two names one). No Unicode normalisation or case folding happens
here; the policy compares e-mail addresses ASCII-case-insensitively and nothing more
(agent_contract.policy.role_for_user).
"""

from __future__ import annotations

from agent.errors import Unauthorized
from agent_contract.headers import MAX_USER_CHARS
from agent_contract.names import problem, refused_char


class RefusedName(Unauthorized):
    """A user name that is not accepted as it is; `received` is the name as it arrived (for the audit)."""

    def __init__(self, message: str, received: str) -> None:
        super().__init__(message, code="invalid_user_name")
        self.received = received


def checked(name: str, source: str) -> str:
    """`name` unchanged when it may be a user name; else RefusedName naming the first bad character."""
    if len(name) > MAX_USER_CHARS:
        raise RefusedName(f"The user name in {source} is longer than {MAX_USER_CHARS} characters: refused.", name)
    why = problem(name)
    if why is not None:
        raise RefusedName(
            f"The user name in {source} {why}: refused; user names are compared exactly, never cleaned.", name
        )
    return name


def from_header(raw: str, source: str) -> str:
    """A header value as a name: its bytes must be UTF-8 (SSO proxies send "ayşe" that way), then `checked`.

    Starlette hands header values over decoded as latin-1; a value that is not valid UTF-8 is refused rather
    than read as latin-1, which would make two different byte strings the same name."""
    try:
        name = raw.encode("latin-1").decode("utf-8")
    except UnicodeEncodeError:  # already text beyond latin-1 (in-process callers): take it as it is
        name = raw
    except UnicodeDecodeError as exc:
        raise RefusedName(f"The user name in {source} is not UTF-8: refused.", raw) from exc
    return checked(name, source)


def escaped(name: str) -> str:
    """The name as received, printable: every character of a refused category as \\uXXXX, `\\` doubled."""
    return "".join(_escape(ch) for ch in name)


def _escape(ch: str) -> str:
    if refused_char(ch):
        return f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}"
    return "\\\\" if ch == "\\" else ch
