"""Limits every JSON value from a client must meet before anything acts on it: nesting depth, lone
surrogates and NUL characters are refused with a 400 naming where, never passed on to a model or a log.

Python's json module accepts all three (`"\\ud800"` decodes to a str that cannot be encoded as UTF-8, so it
only fails later, after a round is queued; a ~1000-deep array raises RecursionError), hence one walk here.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent.errors import BadRequest

MAX_DEPTH = 32  # a chat body is ~6 levels deep; tool-call arguments a few more
_BAD_CHARS = re.compile("[\x00\ud800-\udfff]")


def loads(text: str | bytes, what: str) -> Any:
    """json.loads that turns every failure (bad JSON, bad UTF-8, absurd nesting) into a BadRequest."""
    try:
        data = json.loads(text)
    except RecursionError as exc:
        raise BadRequest(f"{what} is nested too deeply (the limit is {MAX_DEPTH} levels)", param=None) from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"{what} is not valid JSON: {exc}") from exc
    check(data, what)
    return data


def check(value: Any, what: str) -> None:
    """Raise BadRequest when `value` nests deeper than MAX_DEPTH or holds a NUL or lone surrogate anywhere."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise BadRequest(f"{what} is nested too deeply (the limit is {MAX_DEPTH} levels)")
        if isinstance(item, str):
            _check_text(item, what)
        elif isinstance(item, dict):
            for key, child in item.items():
                _check_text(key, what)
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)


def _check_text(text: str, what: str) -> None:
    bad = _BAD_CHARS.search(text)
    if bad is not None:
        kind = "a NUL character" if bad.group() == "\x00" else "an unpaired UTF-16 surrogate (not valid Unicode)"
        raise BadRequest(f"{what} contains {kind}")
