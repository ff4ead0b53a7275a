"""What the agent does with the grounding verdict of a finished answer (GROUNDING_MODE): record, warn, withhold.

Every mode records the verdict (trace field, metric; the audit record reads it from the trace). `warn` adds
one line under the answer; `withhold` replaces an answer that has an ungrounded figure with the tool
results' own key/value summary. Rules and limits: docs/grounding.md.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from agent import metrics
from agent.backends.base import Message, last_user_text
from agent.checks.grounding import Grounding, check

Mode = Literal["record", "warn", "withhold"]
FLAGGED = ("ungrounded", "no_tool_call", "figure_dropped")
_TURKISH = re.compile(r"[çğışöüÇĞİŞÖÜ]")
SUMMARY_MAX_LINES = 40
SUMMARY_MAX_CHARS = 200


@dataclass(frozen=True)
class Outcome:
    verdict: Grounding
    mode: Mode
    text: str  # what to add under the answer (warn), or the replacement (withhold); "" for none
    replaces: bool  # True: `text` replaces the answer

    def trace(self) -> dict[str, Any]:
        action = "withheld" if self.replaces else "warned" if self.text else "none"
        return {"mode": self.mode, "action": action, **self.verdict.as_dict()}


def context_texts(conversation: Sequence[Message]) -> list[str]:
    """The client's own messages (questions, earlier answers, tool results it sent): figures copied from them."""
    return [str(m.get("content") or "") for m in conversation if m.get("role") in ("user", "assistant", "tool")]


def _work(
    answer: str, tool_results: Sequence[tuple[str, str]], conversation: Sequence[Message], tools_called: bool
) -> tuple[str, Callable[[], Grounding]]:
    """The question asked, and the check of the answer against the tools and the conversation, ready to run."""
    question = last_user_text(list(conversation))
    context = context_texts(conversation)
    return question, partial(check, answer, tool_results, context, tools_called=tools_called, question=question)


def judge(
    mode: Mode,
    answer: str,
    tool_results: Sequence[tuple[str, str]],
    conversation: Sequence[Message],
    *,
    tools_called: bool,
) -> Outcome:
    """The check on the calling thread (tests, tools); the API's loop uses `judge_aside`."""
    question, work = _work(answer, tool_results, conversation, tools_called)
    return decide(mode, work(), tool_results, question)


async def judge_aside(
    checks: Executor,
    budget: float,
    mode: Mode,
    answer: str,
    tool_results: Sequence[tuple[str, str]],
    conversation: Sequence[Message],
    *,
    tools_called: bool,
) -> Outcome:
    """The check on `checks` (one thread), never on the event loop: a long, figure-filled history costs the API's
    other requests nothing. Past `budget` seconds (waiting included) the verdict is `skipped` and the answer goes
    out as it is; a check not yet started is dropped, one under way finishes aside and is discarded."""
    question, work = _work(answer, tool_results, conversation, tools_called)
    try:
        verdict = await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(checks, work), budget)
    except TimeoutError:
        verdict = Grounding([], [], tools_called, skipped=True)
    return decide(mode, verdict, tool_results, question)


def decide(mode: Mode, verdict: Grounding, tool_results: Sequence[tuple[str, str]], question: str) -> Outcome:
    """What GROUNDING_MODE does with a verdict; every verdict is counted."""
    metrics.GROUNDING_CHECKS.labels(verdict.status).inc()
    for item in verdict.ungrounded:
        metrics.UNGROUNDED_FIGURES.labels(item.figure.kind).inc()
    if verdict.status not in FLAGGED or mode == "record":
        return Outcome(verdict, mode, "", False)
    turkish = bool(_TURKISH.search(question))
    if mode == "warn":
        return Outcome(verdict, mode, "\n\n" + warning_line(verdict, turkish), False)
    return Outcome(verdict, mode, withheld_text(verdict, tool_results, turkish), True)


def _figures(verdict: Grounding) -> str:
    return ", ".join(dict.fromkeys(c.figure.text for c in verdict.ungrounded))


WARNINGS = {
    ("no_tool_call", False): "⚠ No company tool was called: {} did not come from company data — verify before use.",
    ("no_tool_call", True): "⚠ Hiçbir şirket aracı çağrılmadı: {} şirket verisi değil — kullanmadan önce doğrulayın.",
    ("figure_dropped", False): "⚠ The answer gives no figure, though the tools returned figures — ask again.",
    ("figure_dropped", True): "⚠ Yanıt hiç rakam vermiyor, oysa araçlar rakam döndürdü — yeniden sorun.",
    ("ungrounded", False): "⚠ Not found in the tool results: {} — check before acting on it.",
    ("ungrounded", True): "⚠ Araç sonuçlarında bulunamadı: {} — kullanmadan önce doğrulayın.",
}
WITHHELD = {
    ("no_tool_call", False): "The answer was withheld: it gave figures ({}) without calling any company tool. "
    "Please ask again.",
    ("no_tool_call", True): "Yanıt gösterilmedi: hiçbir araç çağrılmadan rakam verdi ({}). Lütfen yeniden sorun.",
    ("figure_dropped", False): "The answer was withheld: it gave no figure. What the tools returned:",
    ("figure_dropped", True): "Yanıt gösterilmedi: hiç rakam vermedi. Araçların döndürdüğü:",
    ("ungrounded", False): "The answer was withheld: it contained figures not found in the tool results ({}). "
    "What the tools returned:",
    ("ungrounded", True): "Yanıt gösterilmedi: araç sonuçlarında bulunmayan rakamlar içeriyordu ({}). "
    "Araçların döndürdüğü:",
}  # fmt: skip


def warning_line(verdict: Grounding, turkish: bool) -> str:
    return WARNINGS[verdict.status, turkish].format(_figures(verdict))


def withheld_text(verdict: Grounding, tool_results: Sequence[tuple[str, str]], turkish: bool) -> str:
    head = WITHHELD[verdict.status, turkish].format(_figures(verdict))
    return head if verdict.status == "no_tool_call" else "\n".join([head, *tool_summary(tool_results)])


def tool_summary(tool_results: Sequence[tuple[str, str]]) -> list[str]:
    """The tool results themselves, one `tool: key: value` line per scalar, so nothing is restated by a model."""
    lines: list[str] = []
    for name, content in tool_results:
        try:
            data: Any = json.loads(content)
        except ValueError:
            data = content.strip()
        lines += [f"- {name}: {line}" for line in _flatten(data, "")]
    if len(lines) > SUMMARY_MAX_LINES:
        lines = [*lines[:SUMMARY_MAX_LINES], f"- … {len(lines) - SUMMARY_MAX_LINES} more lines"]
    return lines


def _flatten(data: Any, path: str) -> list[str]:
    if isinstance(data, dict):
        return [line for key, value in data.items() for line in _flatten(value, f"{path}{key}.")]
    if isinstance(data, list):
        return [line for i, value in enumerate(data, 1) for line in _flatten(value, f"{path}{i}.")]
    text = str(data) if len(str(data)) <= SUMMARY_MAX_CHARS else str(data)[:SUMMARY_MAX_CHARS] + "…"
    return [f"{path.rstrip('.')}: {text}" if path else text]
