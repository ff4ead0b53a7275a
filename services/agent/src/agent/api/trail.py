"""What one chat request did, shaped for its audit record: each tool call as the tool received and returned
it, every argument logged the way its tool declares it, and the record cut to a size cap with the cut marked.

Which arguments are personal data (customer names or IDs) and which are free text (note texts, search
patterns) is declared by each tool in the MCP server's tool list (`_meta["local-agent/audit"]`), never
guessed from an argument's name. A name learned that way (or from a customer record a tool returned) is then
pseudonymised in every string argument of the request, whatever its key: a model that puts a customer's name
under a key its tool does not declare does not get it logged in clear. Customer IDs are taken only from declared
personal arguments (what the tool received) and from the customer records of successful results (what it
returned); an error text, or a note that merely mentions an ID, is neither.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent.loop.events import FinalEvent, LoopEvent, ToolCallEvent, ToolResultEvent
from agent.security.privacy import Pseudonymizer, customer_records, every_string
from agent.toolspec import ArgumentRules

MAX_RECORD_BYTES = 16 * 1024  # a record past this is cut (and says so): one request cannot flood the log
MAX_QUESTION_CHARS = 2000
MAX_ARGUMENTS_CHARS = 500
MAX_LOGGED_CALLS = 30
_WHOLE_ID = re.compile(r"^[Cc]\s*-?\s*\d{1,12}$")


NO_RULES = ArgumentRules()


def logged_arguments(
    arguments: dict[str, Any], rules: ArgumentRules, pseudonyms: Pseudonymizer
) -> tuple[dict[str, Any], list[str], list[str]]:
    """(arguments fit for the log, customer names found, customer IDs received)."""
    out, names, ids = dict(arguments), [], []
    for key, value in arguments.items():
        if not isinstance(value, str):
            continue
        if key in rules.personal and _WHOLE_ID.match(value.strip()):
            ids.append(re.sub(r"[\s-]", "", value).upper())
        elif key in rules.personal and value.strip():
            names.append(value.strip())
            out[key] = pseudonyms.token(value)
        elif key in rules.free_text:
            out[key] = pseudonyms.digest(value)
    return out, names, ids


@dataclass
class Trail:
    """Gathers a request's audit facts from the loop's events; `rules` names each tool's declarations."""

    rules: Callable[[str], ArgumentRules] = lambda name: NO_RULES
    calls: list[dict[str, Any]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    answer_sha256: str | None = None
    rounds: int = 0
    grounding: dict[str, Any] | None = None
    offered: list[dict[str, Any]] | None = None  # the tools the model was shown and why (agent.loop.retrieval)
    workers: list[str] = field(default_factory=list)  # the agent-workers that took its rounds (queue backend)
    _round: int = 0

    def observe(self, event: LoopEvent, pseudonyms: Pseudonymizer) -> None:
        if isinstance(event, ToolCallEvent):
            self._round = event.round
        elif isinstance(event, ToolResultEvent):
            self._result(event, pseudonyms)
        elif isinstance(event, FinalEvent):
            self.answer_sha256 = hashlib.sha256(event.answer.encode()).hexdigest()
            self.rounds = event.rounds
            if event.retrieval is not None:
                self.offered = event.retrieval["offered"]
            if event.grounding is not None:  # which figures were not found: the figures only, never the answer
                g = event.grounding
                self.grounding = {
                    "status": g["status"],
                    "figures": g["figures"],
                    "ungrounded": [u["text"] for u in g["ungrounded"]],
                }

    def logged_calls(self, pseudonyms: Pseudonymizer) -> list[dict[str, Any]]:
        """The calls as the record keeps them: every customer name this request met pseudonymised in every string
        argument, whatever its key (a name met only in a later call's result is replaced in earlier calls too)."""
        if not self.names:
            return self.calls

        def hide(text: str) -> str:
            return pseudonyms.text(text, self.names)

        return [call | {"arguments": every_string(call["arguments"], hide)} for call in self.calls]

    def _result(self, event: ToolResultEvent, pseudonyms: Pseudonymizer) -> None:
        arguments, names, ids = logged_arguments(event.call.arguments, self.rules(event.call.name), pseudonyms)
        executed = event.outcome in ("ok", "error", "timeout")
        if event.outcome == "ok":  # what the tool returned; an error text proves nothing about a customer
            returned_names, returned_ids = customer_records(event.content)
            names += returned_names
            ids += returned_ids
        self.names += names
        self.calls.append(
            {
                "name": event.call.name,
                "arguments": arguments,
                "outcome": event.outcome,
                "round": self._round,
                "result_chars": len(event.content) if executed else 0,
                "result_sha256": hashlib.sha256(event.content.encode()).hexdigest() if executed else None,
                "customer_ids": sorted(set(ids)),
            }
        )


def _size(record: dict[str, Any]) -> int:
    return len(json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode())


def capped(record: dict[str, Any], limit: int = MAX_RECORD_BYTES) -> dict[str, Any]:
    """`record` if it fits in `limit` bytes, else a copy with the big parts cut and `truncated` naming them."""
    size = _size(record)
    if size <= limit:
        return record
    out, cut = dict(record), []
    question = out.get("question")
    if isinstance(question, str) and len(question) > MAX_QUESTION_CHARS:
        out["question"] = question[:MAX_QUESTION_CHARS] + "…"
        cut.append("question")
    calls: list[dict[str, Any]] = []
    for call in out.get("tool_calls") or []:
        if _size(call.get("arguments") or {}) > MAX_ARGUMENTS_CHARS:
            call = call | {"arguments": {"cut": True, "bytes": _size(call["arguments"])}}
            cut.append(f"tool_calls[{len(calls)}].arguments")
        calls.append(call)
    if len(calls) > MAX_LOGGED_CALLS:
        cut.append(f"tool_calls[{MAX_LOGGED_CALLS}:{len(calls)}]")
        calls = calls[:MAX_LOGGED_CALLS]
    if "tool_calls" in out:
        out["tool_calls"] = calls
    out["truncated"] = {"original_bytes": size, "cut": cut}
    if _size(out) > limit:  # still too big: keep only the facts that are small by construction
        out = {k: v for k, v in out.items() if k not in ("question", "tool_calls")}
        out["truncated"] = {"original_bytes": size, "cut": [*cut, "question", "tool_calls"]}
    return out
