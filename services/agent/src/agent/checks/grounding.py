"""The grounding check: is every figure in the final answer found in this request's tool results?

A figure is grounded when one of its readings (agent.checks.figures) equals, within the rounding of the
precision it is shown with, a figure of a tool result (or a count/sum/average of a JSON list in one), or
is a simple derivation of two of them (sum, difference, average, a percentage or a percentage change).
A figure found only in the user's messages or an earlier turn is "copied from the question": not flagged,
but labelled. The answer is scanned first and only its figures are looked up: in this request's tool results
(indexed once per request), then in the client's texts (each indexed once, agent.checks.context), so the cost
follows the answer, not the length of the conversation. Rules, examples and limits: docs/grounding.md. Pure,
no I/O; bench: scripts/bench-grounding.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import repeat
from typing import Any, Literal

from agent.checks.aggregates import aggregates, numbers, parse
from agent.checks.context import ContextFigures, within
from agent.checks.figures import Date, Figure, scan, source_values

Source = Literal["tool", "derived", "question", "none"]
Status = Literal["grounded", "ungrounded", "no_tool_call", "general", "figure_dropped", "no_figures", "skipped"]
ASKS_FOR_FIGURE = re.compile(
    r"\b(?:how (?:many|much)|total|number of|count|average|sum|kaç|ne kadar|toplam|sayısı|tutar|ortalama)", re.I
)
DERIVATION_POOL = 400  # distinct tool values tried in pairs; beyond this only direct matches (see docs)
PAIR_PRECISION = 0.01  # sums, differences and averages only for figures shown to units or to 1% or finer
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class Check:
    figure: Figure
    source: Source
    where: str = ""  # the tool name, "question", or how it was derived
    nearest: str = ""  # for an ungrounded figure: the closest tool figure, to show next to it

    def as_dict(self) -> dict[str, Any]:
        entry = {"text": self.figure.text, "kind": self.figure.kind, "source": self.source, "where": self.where}
        return entry | ({"nearest": self.nearest} if self.nearest else {})


@dataclass(frozen=True)
class Grounding:
    """The verdict on one answer: a check per figure, exempt ones (years, ordinals, ...) listed apart."""

    checks: list[Check]
    exempt: list[Figure]
    tools_called: bool
    tool_figures: int = 0  # distinct numbers in the tool results
    asked_for_figure: bool = False  # the question asks how many / how much
    skipped: bool = False  # not checked: past its CPU budget (ANSWER_CHECK_BUDGET_SECONDS)

    @property
    def ungrounded(self) -> list[Check]:
        return [c for c in self.checks if c.source == "none"]

    @property
    def status(self) -> Status:
        if self.skipped:
            return "skipped"
        if not self.checks:  # dropped: not a single number, not even a time or a small count
            dropped = self.asked_for_figure and self.tool_figures and self.tools_called and not self.exempt
            return "figure_dropped" if dropped else "no_figures"
        if not self.ungrounded:
            return "grounded"
        if self.tools_called:
            return "ungrounded"
        # No tool at all: a question asking how many / how much is a domain question answered from nowhere;
        # otherwise (arithmetic, general knowledge: "366 days") the figures are recorded but not flagged.
        return "no_tool_call" if self.asked_for_figure else "general"

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "figures": len(self.checks),
            "tool_figures": self.tool_figures,
            "grounded": len(self.checks) - len(self.ungrounded),
            "ungrounded": [c.as_dict() for c in self.ungrounded],
            "checked": [c.as_dict() for c in self.checks],
            "exempt": [{"text": f.text, "why": f.exempt} for f in self.exempt],
        }


class _Pool:
    """Source values, sorted for bisection, each with the text it was written as and where it came from."""

    def __init__(self) -> None:
        self.raw: list[float] = []
        self.label: dict[float, tuple[str, str]] = {}  # value -> (as written, origin)
        self.dates: dict[Date, str] = {}
        self.values: list[float] = []

    def add(self, values: list[float], texts: list[str], origin: str) -> None:
        self.raw += values
        self.label.update(zip(values, zip(texts, repeat(origin)), strict=True))

    def add_source(self, text: str, origin: str) -> None:
        values, tokens, dates = source_values(text)
        self.add(values, tokens, origin)
        self.dates.update(dict.fromkeys(dates, origin))

    def freeze(self) -> _Pool:
        self.values = sorted(set(self.raw))
        return self

    def find(self, value: float, half: float) -> str | None:
        """The origin of a source value within `half` of `value`, or None."""
        i = within(self.values, value, half)
        return None if i is None else self.label[self.values[i]][1]

    def nearest(self, value: float) -> str:
        if not self.values:
            return ""
        i = bisect_left(self.values, abs(value))
        near = min((j for j in (i - 1, i) if 0 <= j < len(self.values)), key=lambda j: abs(self.values[j] - value))
        text, origin = self.label[self.values[near]]
        return f"{text} ({origin})"


class _Sources:
    """The pools one check looks in; the JSON aggregates are built only when a figure is not found directly."""

    def __init__(self, tool_results: Sequence[tuple[str, str]], context: Sequence[str]) -> None:
        self.results = tool_results
        self.tools, self.context = _Pool(), ContextFigures(context)
        for name, content in tool_results:
            self.tools.add_source(content, name)
        self.tools.freeze()
        self._aggregates: _Pool | None = None
        self._derivable: list[float] | None = None

    @cached_property
    def parsed(self) -> dict[int, tuple[str, Any]]:
        """The JSON results, by their index in `results`."""
        found = ((i, name, parse(content)) for i, (name, content) in enumerate(self.results))
        return {i: (name, data) for i, name, data in found if data is not None}

    @property
    def aggregates(self) -> _Pool:
        """Counts, sums and averages of the JSON lists: built only when a figure is not found directly."""
        if self._aggregates is None:
            pool = _Pool()
            for name, data in self.parsed.values():
                found = list(aggregates(data))
                pool.add([abs(v) for v, _ in found], [f"{v:g} = {how}" for v, how in found], name)
            self._aggregates = pool.freeze()
        return self._aggregates

    @property
    def derivable(self) -> list[float]:
        """What derivations combine: JSON numbers (not id digits) and the numbers of plain-text results."""
        if self._derivable is None:
            found: list[float] = []
            for i, (_, content) in enumerate(self.results):
                found += numbers(self.parsed[i][1]) if i in self.parsed else source_values(content)[0]
            found = found or self.context.raw
            self._derivable = sorted(list(dict.fromkeys(found))[:DERIVATION_POOL])
        return self._derivable


def _derived(pool: list[float], value: float, half: float, percent: bool) -> str:
    """How `value` follows from two pool values, or "" (pool sorted ascending, non-negative)."""
    lo, hi = value - half - _EPS, value + half + _EPS
    if half > max(0.5, value * PAIR_PRECISION):  # "1.2k" matches too many pairs to mean anything: direct only
        return _percent_of(pool, value, half) if percent else ""
    if (pair := _pair_sum(pool, lo, hi)) is not None:
        return f"sum of {pair[0]:g} and {pair[1]:g}"
    if (pair := _pair_sum(pool, 2 * lo, 2 * hi)) is not None:
        return f"average of {pair[0]:g} and {pair[1]:g}"
    if (pair := _pair_difference(pool, lo, hi)) is not None:
        return f"difference of {pair[1]:g} and {pair[0]:g}"
    return _percent_of(pool, value, half) if percent else ""


def _percent_of(pool: list[float], value: float, half: float) -> str:
    for ratio, how in ((value, "share"), (100 + value, "increase"), (100 - value, "decrease")):
        if (pair := _pair_ratio(pool, (ratio - half) / 100, (ratio + half) / 100)) is not None:
            return f"{how}: {pair[0]:g} / {pair[1]:g}"
    return ""


def _pair_sum(xs: list[float], lo: float, hi: float) -> tuple[float, float] | None:
    if not xs or lo > 2 * xs[-1]:  # above any sum of two: an invented large figure costs no walk
        return None
    for i, x in enumerate(xs):  # a bisection per value (C) beats a two-pointer walk in Python
        if 2 * x > hi:
            break
        j = bisect_left(xs, lo - x, i + 1)
        if j < len(xs) and xs[j] <= hi - x:
            return x, xs[j]
    return None


def _pair_difference(xs: list[float], lo: float, hi: float) -> tuple[float, float] | None:
    if not xs or lo > xs[-1] - xs[0]:
        return None
    for i, x in enumerate(xs):
        j = bisect_left(xs, x + lo, i + 1)
        if j < len(xs) and xs[j] <= x + hi:
            return x, xs[j]
    return None


def _pair_ratio(xs: list[float], lo: float, hi: float) -> tuple[float, float] | None:
    for b in xs:
        if b > 0:
            i = bisect_left(xs, lo * b - _EPS)
            if i < len(xs) and xs[i] <= hi * b + _EPS:
                return xs[i], b
    return None


def _check(figure: Figure, sources: _Sources) -> Check:
    tools, context = sources.tools, sources.context
    if figure.date is not None:
        return _check_date(figure, tools, context)
    direct = figure.readings
    if figure.kind == "percent":  # 12.5% also matches the ratio a tool may return: 0.125
        direct += tuple((v / 100, h / 100) for v, h in figure.readings)
    for value, half in direct:
        if (origin := tools.find(value, half)) is not None:
            return Check(figure, "tool", origin)
    for value, half in direct:
        if (origin := context.find(value, half)) is not None:
            return Check(figure, "question", origin)
    for value, half in direct:
        if (origin := sources.aggregates.find(value, half)) is not None:
            return Check(figure, "tool", origin)
    for value, half in figure.readings:
        if how := _derived(sources.derivable, abs(value), half, figure.kind == "percent"):
            return Check(figure, "derived", how)
    return Check(figure, "none", nearest=tools.nearest(figure.readings[0][0]))


def _check_date(figure: Figure, tools: _Pool, context: ContextFigures) -> Check:
    shown = figure.date
    pools: tuple[tuple[_Pool | ContextFigures, Source], ...] = ((tools, "tool"), (context, "question"))
    for pool, source in pools:
        for date, origin in pool.dates.items():  # the client's texts are read only if no tool date matches
            if shown is not None and _same_day(shown, date):
                return Check(figure, source, origin)
    return Check(figure, "none", nearest=", ".join(f"{y:04}-{m:02}-{d:02}" for y, m, d in list(tools.dates)[:3]))


def _same_day(shown: Date, known: Date) -> bool:
    (y, m, d), (ky, km, kd) = shown, known
    return m == km and (y in (0, ky) or ky == 0) and (d in (0, kd) or kd == 0)


def check(
    answer: str,
    tool_results: Sequence[tuple[str, str]],
    context: Sequence[str] = (),
    *,
    tools_called: bool,
    question: str = "",
) -> Grounding:
    """Check every figure of `answer` against (tool name, result text) pairs and the conversation's texts.

    `question` (the last user message) only decides whether an answer without figures dropped the one asked for.
    """
    figures = scan(answer)  # first: the context is read only for a figure no tool result grounds
    sources = _Sources(tool_results, context)
    checks: list[Check] = []
    exempt: list[Figure] = []
    for figure in figures:
        if figure.exempt is None:
            checks.append(_check(figure, sources))
        else:
            exempt.append(figure)
    asked = bool(ASKS_FOR_FIGURE.search(question))
    return Grounding(checks, exempt, tools_called, len(sources.tools.values), asked)
