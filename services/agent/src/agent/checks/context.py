"""The figures of the client's own texts (questions, earlier answers, tool results it sent), each text indexed once.

A client sends the whole conversation with every request. Scanning all of it for figures on every request made
the grounding check cost grow with the conversation (issue 29: 58% of a request's CPU at 200 messages). Now
each text is scanned the first time it is seen and its figures kept under a digest of the text, in a bounded
cache; a request reads the cache only when a figure of its answer is not found in its own tool results, and
then only looks that figure up. The verdicts are those of one pool built from every text (docs/grounding.md).
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from agent.checks.figures import Date, scan

ORIGIN = "question"  # every figure of the client's texts is labelled so (docs/grounding.md)
CACHE_TEXTS = 4096  # texts whose figures are kept: a few hundred conversations of 10-20 messages
_EPS = 1e-9


def within(values: Sequence[float], value: float, half: float) -> int | None:
    """Index of a value of `values` (sorted) within `half` of `abs(value)`, or None."""
    i = bisect_left(values, abs(value) - half - _EPS)
    return i if i < len(values) and values[i] <= abs(value) + half + _EPS else None


@dataclass(frozen=True, slots=True)
class TextFigures:
    """What the check needs of one text: its reading values sorted (lookups) and in order (derivations), its dates."""

    values: tuple[float, ...]
    raw: tuple[float, ...]
    dates: tuple[Date, ...]


def index_text(text: str) -> TextFigures:
    """Every reading of every figure `scan` finds (exempt ones too: a year copied from the question is copied)."""
    raw: list[float] = []
    dates: dict[Date, None] = {}
    for figure in scan(text):
        if figure.date is not None:
            dates.setdefault(figure.date)
        raw += [value for value, _ in figure.readings]
    return TextFigures(tuple(sorted(set(raw))), tuple(raw), tuple(dates))


_CACHE: OrderedDict[bytes, TextFigures] = OrderedDict()


def text_figures(text: str) -> TextFigures:
    """`index_text(text)`, computed once per distinct text while it stays among the last CACHE_TEXTS used."""
    key = hashlib.blake2b(text.encode(errors="surrogatepass"), digest_size=16).digest()
    if (found := _CACHE.get(key)) is not None:
        _CACHE.move_to_end(key)
        return found
    found = _CACHE[key] = index_text(text)
    if len(_CACHE) > CACHE_TEXTS:
        _CACHE.popitem(last=False)
    return found


class ContextFigures:
    """One request's client texts; read from the cache only when the check first asks for them."""

    def __init__(self, texts: Sequence[str]) -> None:
        self._texts = texts
        self._indexed: list[TextFigures] | None = None

    @property
    def indexed(self) -> list[TextFigures]:
        if self._indexed is None:
            self._indexed = [entry for entry in map(text_figures, self._texts) if entry.raw or entry.dates]
        return self._indexed

    def find(self, value: float, half: float) -> str | None:
        """ORIGIN when some text has a figure within `half` of `value`, else None."""
        return ORIGIN if any(within(t.values, value, half) is not None for t in self.indexed) else None

    @property
    def dates(self) -> dict[Date, str]:
        return {date: ORIGIN for entry in self.indexed for date in entry.dates}

    @property
    def raw(self) -> list[float]:
        """Every reading value, text after text: what derivations combine when no tool returned a number."""
        return [value for entry in self.indexed for value in entry.raw]
