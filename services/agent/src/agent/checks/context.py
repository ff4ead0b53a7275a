"""The figures of the client's own texts (questions, earlier answers, tool results it sent), each text indexed once.

A client sends the whole conversation with every request. Scanning all of it for figures on every request made
the grounding check cost grow with the conversation (58% of a request's CPU at 200 messages). Now
each text is scanned the first time it is seen and its figures kept in a bounded cache keyed by the text; a
request reads the cache only when a figure of its answer is not found in its own tool results, and then only
looks that figure up. The verdicts are those of one pool built from every text (docs/grounding.md).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain

from agent.checks.figures import Date, scan

ORIGIN = "question"  # every figure of the client's texts is labelled so (docs/grounding.md)
CACHE_TEXTS = 4096  # texts whose figures are kept: a few hundred conversations of 10-20 messages
CACHE_CHARS = 16_000_000  # and at most this many characters of them (the keys are the texts)
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


class TextIndex:
    """TextFigures by text (a str hash is cheaper than a digest), least recently used dropped first, bounded in
    texts (CACHE_TEXTS) and in the characters they hold (CACHE_CHARS)."""

    def __init__(self) -> None:
        self.entries: OrderedDict[str, TextFigures] = OrderedDict()
        self.chars = 0

    def figures(self, text: str) -> TextFigures:
        if (found := self.entries.get(text)) is not None:
            self.entries.move_to_end(text)
            return found
        found = self.entries[text] = index_text(text)
        self.chars += len(text)
        while len(self.entries) > CACHE_TEXTS or self.chars > CACHE_CHARS:
            self.chars -= len(self.entries.popitem(last=False)[0])
        return found


INDEX = TextIndex()  # one per process: agent-api serves many conversations from one event loop


class ContextFigures:
    """One request's client texts; read from the cache only when the check first asks for them."""

    def __init__(self, texts: Sequence[str]) -> None:
        self._texts = texts
        self._indexed: list[TextFigures] | None = None

    @property
    def indexed(self) -> list[TextFigures]:
        if self._indexed is None:
            self._indexed = [entry for entry in map(INDEX.figures, self._texts) if entry.raw or entry.dates]
        return self._indexed

    @cached_property
    def values(self) -> list[float]:
        """Every text's values in one sorted list: one sort in C beats a bisection per text for each figure."""
        return sorted(set(chain.from_iterable(entry.values for entry in self.indexed)))

    def find(self, value: float, half: float) -> str | None:
        """ORIGIN when some text has a figure within `half` of `value`, else None."""
        return ORIGIN if within(self.values, value, half) is not None else None

    @property
    def dates(self) -> dict[Date, str]:
        return {date: ORIGIN for entry in self.indexed for date in entry.dates}

    @property
    def raw(self) -> list[float]:
        """Every reading value, text after text: what derivations combine when no tool returned a number."""
        return [value for entry in self.indexed for value in entry.raw]
