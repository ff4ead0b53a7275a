"""Could the code produce this message? Quoted messages in the docs checked against every string the code holds.

A message in the code is often an f-string: its literal parts are fixed, the `{…}` parts vary. A quote in the
docs is a piece of one message, with example values where the code has placeholders and `…` where the docs
leave a part out. `could_produce(quote, template)` says whether some message made from `template` contains the
quote; `templates()` collects the string literals (f-strings as their literal parts) of the shipped code and the
text of the scripts.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYTHON_ROOTS = ("services/agent/src", "contract/src", "mcp-server/src")
TEXT_ROOTS = ("scripts", "images")
Template = tuple[str, ...]  # literal parts; a placeholder sits between each two


def _literal_parts(node: ast.JoinedStr) -> Template:
    parts, current = [], ""
    for value in node.values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            current += value.value
        else:
            parts.append(current)
            current = ""
    return (*parts, current)


def templates() -> Iterator[Template]:
    for root in PYTHON_ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.JoinedStr):
                    yield _literal_parts(node)
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    yield (node.value,)
    for root in TEXT_ROOTS:
        for path in sorted((REPO / root).rglob("*")):
            if path.is_file():
                yield (path.read_text(encoding="utf-8", errors="replace"),)


FILL, FILL_PART = r"(\S+)", r"(\S*)"  # an example value in a quote stands for a placeholder: one word, no spaces


def _starts(quote: str, template: Template) -> Iterator[tuple[str, int, bool]]:
    """Where the quote may begin: (the rest of it, the next literal's index, whether it began in a placeholder)."""
    for i, literal in enumerate(template):
        for k in range(len(literal)):
            if quote.startswith(literal[k:]):
                yield quote[len(literal) - k :], i + 1, False
        if i >= 1:
            yield quote, i, True


def _filled(pattern: str, text: str) -> int | None:
    """Characters of `text` taken by placeholder fillers when it matches `pattern`, else None."""
    match = re.fullmatch(pattern, text)
    return None if match is None else sum(len(g) for g in match.groups())


def _ends(rest: str, template: Template, nxt: int, in_placeholder: bool) -> Iterator[int]:
    """For each way `rest` is whole literals from `nxt` on, a placeholder filler before each, ending inside a
    placeholder or a literal: how many of its characters the fillers take."""
    for j in range(nxt, len(template)):
        fills = [FILL_PART if in_placeholder and m == nxt else FILL for m in range(nxt, j + 1)]
        body = "".join(f + re.escape(template[m]) for f, m in zip(fills, range(nxt, j), strict=False))
        if not (in_placeholder and j == nxt) and (filled := _filled(body + FILL_PART, rest)) is not None:
            yield filled  # ends inside the placeholder before literal j
        for p in range(len(rest)):
            if template[j].startswith(rest[p:]) and (filled := _filled(body + fills[-1], rest[:p])) is not None:
                yield filled  # ends inside literal j


def could_produce(quote: str, template: Template) -> bool:
    """Whether `quote` is a piece of some message made from `template`: each placeholder filled with one word,
    and the fillers at most half the quote (the rest is the code's own wording)."""
    if any(quote in literal for literal in template):
        return True
    return any(
        2 * filled <= len(quote)
        for rest, nxt, inside in _starts(quote, template)
        for filled in _ends(rest, template, nxt, inside)
    )


def quoted_messages(markdown: str) -> list[str]:
    """Double-quoted text in the first cell (the symptom) of every table row, code spans left out."""
    found = []
    for line in markdown.splitlines():
        if not line.startswith("| ") or line.startswith("| ---"):
            continue
        symptom = re.sub(r"`[^`]*`", "", line.split(" | ")[0])
        found += re.findall(r'"([^"]+)"', symptom)
    return found


def pieces(quote: str) -> list[str]:
    """The parts of a quote the code must produce: `…` stands for text the docs leave out."""
    return [p.strip() for p in quote.split("…") if p.strip()]
