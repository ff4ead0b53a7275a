"""Tool retrieval: before the first round, narrow the caller's allowed tools to the few that fit the question.

Authorization comes first: the ranking only ever sees the tools the caller's role may use, so it can narrow
that list and never widen it. Always kept, whatever their rank: a tool named in the question, and a tool
called earlier in the conversation (a follow-up such as "and yesterday?" needs it). The set is chosen once
per request: later rounds of the same request keep it (docs/tools.md, "Tool retrieval"). When no word of the
question matches any tool, a rank would be arbitrary: every allowed tool is offered.

The lexical ranking is BM25 over each tool's name, summary line, WHEN TO USE text, trigger phrases and
Example — never its WHEN NOT TO USE part, which names the neighbours' words. Text is folded for Turkish
(İ/I/ı/i and ç ğ ö ş ü to ASCII, so case never matters) and each word is cut to its first five letters, the
cheap stemmer that suits Turkish suffixes ("yatırıldı", "yatırım", "yatırımlar" → "yatir") and English
plurals alike. The index is built once per tool-list fingerprint.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agent.backends.base import Message, last_user_text
from agent.toolspec import ToolSpec
from agent_contract.fingerprint import tool_fingerprints

Mode = Literal["off", "lexical", "embedding"]
Why = Literal["rank", "named", "called earlier", "all", "no match"]

_FOLD = str.maketrans("ışçğöüâîû", "iscgouaiu")
_WORD = re.compile(r"[a-z0-9]+")
STEM = 5
_STOP_EN = "a an the is are was were be been am what which who whom how i me my we our you your it its this that"
_STOP_EN += " these those of on in at for to from by with and or do does did can could please show tell give there"
_STOP_TR = "ve ile bir bu su ne mi mu da de icin gibi bana benim olan nedir"
STOPWORDS = frozenset(f"{_STOP_EN} any all {_STOP_TR}".split())
FIELD_WEIGHTS = {"name": 3.0, "summary": 2.0, "body": 1.0}
K1, B = 1.2, 0.75


def fold(text: str) -> str:
    """Lower case the Turkish way and fold to ASCII: "İSTANBUL", "Istanbul", "ıstanbul" all become "istanbul"."""
    return text.replace("İ", "i").replace("I", "i").lower().replace("\u0307", "").translate(_FOLD)


def stems(text: str) -> list[str]:
    """The text's words, folded, stop words dropped, each cut to its first STEM letters (an English plural
    `s` first)."""
    out = []
    for word in _WORD.findall(fold(text)):
        if word in STOPWORDS or len(word) < 2:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.append(word[:STEM])
    return out


def positive_text(description: str) -> tuple[str, str]:
    """(summary line, the rest before WHEN NOT TO USE): the parts that say what the tool is for."""
    head = description.split("WHEN NOT TO USE", 1)[0]
    summary, _, body = head.partition("\n")
    return summary, body


@dataclass(frozen=True)
class Offered:
    """One tool offered to the model and why: its rank and score, named in the question, or called earlier."""

    name: str
    why: Why
    rank: int | None = None
    score: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "why": self.why}
        if self.rank is not None:
            out |= {"rank": self.rank, "score": self.score}
        return out


@dataclass(frozen=True)
class Selection:
    """The request's offered tools (in the order the model sees them) and what the trace and audit record."""

    mode: Mode
    top_k: int
    allowed: int
    offered: list[Offered]
    ms: float

    @property
    def names(self) -> list[str]:
        return [o.name for o in self.offered]

    def trace(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "top_k": self.top_k,
            "allowed": self.allowed,
            "offered": [o.to_dict() for o in self.offered],
            "ms": round(self.ms, 3),
        }


class Ranker(Protocol):
    """Scores tools against a question; higher is better. One per tool-list fingerprint."""

    def scores(self, question: str, names: Sequence[str]) -> dict[str, float]: ...


@dataclass
class LexicalIndex:
    """BM25 over the tools' positive texts, field-weighted term frequencies."""

    tf: dict[str, Counter[str]] = field(default_factory=dict)
    length: dict[str, float] = field(default_factory=dict)
    idf: dict[str, float] = field(default_factory=dict)
    avg: float = 1.0

    @classmethod
    def build(cls, tools: Sequence[ToolSpec]) -> LexicalIndex:
        index = cls()
        for spec in tools:
            summary, body = positive_text(spec.description)
            tf: Counter[str] = Counter()
            for text, weight in ((spec.name.replace("_", " "), "name"), (summary, "summary"), (body, "body")):
                for stem in stems(text):
                    tf[stem] += FIELD_WEIGHTS[weight]  # type: ignore[assignment]
            index.tf[spec.name], index.length[spec.name] = tf, sum(tf.values())
        n = max(len(tools), 1)
        df = Counter(stem for tf in index.tf.values() for stem in tf)
        index.idf = {s: math.log(1 + (n - d + 0.5) / (d + 0.5)) for s, d in df.items()}
        index.avg = sum(index.length.values()) / n or 1.0
        return index

    def scores(self, question: str, names: Sequence[str]) -> dict[str, float]:
        query = set(stems(question))
        out = {}
        for name in names:
            tf, norm = self.tf.get(name, Counter()), K1 * (1 - B + B * self.length.get(name, 0.0) / self.avg)
            out[name] = sum(self.idf[s] * tf[s] * (K1 + 1) / (tf[s] + norm) for s in query if s in tf)
        return out


def called_earlier(conversation: list[Message]) -> set[str]:
    """Tool names the conversation already called (assistant tool calls and tool results)."""
    names = {str(m["tool_name"]) for m in conversation if m.get("role") == "tool" and m.get("tool_name")}
    for message in conversation:
        for call in message.get("tool_calls") or []:
            name = (call.get("function") or {}).get("name") if isinstance(call, dict) else None
            if name:
                names.add(str(name))
    return names


def named_in(question: str, names: Sequence[str]) -> set[str]:
    """Tools the question names, as written (`depozit_ozeti`) or with spaces (`depozit ozeti`)."""
    folded = " " + " ".join(_WORD.findall(fold(question))) + " "
    return {n for n in names if f" {' '.join(_WORD.findall(fold(n)))} " in folded}


class Retriever:
    """Chooses each request's offered tools; the ranker is rebuilt only when the tool list changes."""

    def __init__(self, mode: Mode, top_k: int, make_ranker: Callable[[Sequence[ToolSpec]], Ranker] | None = None):
        self.mode, self.top_k = mode, top_k
        self.make_ranker = make_ranker or LexicalIndex.build
        self._source: Sequence[ToolSpec] | None = None
        self._fingerprint = ""
        self._ranker: Ranker | None = None

    def ranker(self, tools: Sequence[ToolSpec]) -> Ranker:
        """The ranker for this tool list: rebuilt when the list's fingerprint changes, not on every request."""
        if tools is not self._source or self._ranker is None:
            fingerprint = tool_fingerprints(tools)["tools_sha256"]
            if fingerprint != self._fingerprint or self._ranker is None:
                self._ranker, self._fingerprint = self.make_ranker(tools), fingerprint
            self._source = tools
        return self._ranker

    def select(self, tools: Sequence[ToolSpec], allowed: Sequence[str], conversation: list[Message]) -> Selection:
        """The offered tools among `allowed` (already authorized, in listing order), with the reason for each."""
        started = time.perf_counter()
        if self.mode == "off" or len(allowed) <= self.top_k:
            offered = [Offered(n, "all") for n in allowed]
            return Selection(self.mode, self.top_k, len(allowed), offered, (time.perf_counter() - started) * 1000)
        question = last_user_text(conversation)  # what the ranking reads
        kept: dict[str, Why] = {n: "named" for n in sorted(named_in(question, allowed))}
        kept |= {n: "called earlier" for n in sorted(called_earlier(conversation)) if n in allowed and n not in kept}
        scores = self.ranker(tools).scores(question, allowed)
        if not any(scores.values()):  # no word of the question matched any tool: a rank would be arbitrary
            offered = [Offered(n, "no match") for n in allowed]
            return Selection(self.mode, self.top_k, len(allowed), offered, (time.perf_counter() - started) * 1000)
        order = sorted(allowed, key=lambda n: -scores[n])  # stable: ties keep the listing order
        top = order[: self.top_k]
        offered = [Offered(n, kept.get(n, "rank"), i + 1, round(scores[n], 3)) for i, n in enumerate(top)]
        offered += [Offered(n, kept[n]) for n in allowed if n in kept and n not in top]
        return Selection(self.mode, self.top_k, len(allowed), offered, (time.perf_counter() - started) * 1000)
