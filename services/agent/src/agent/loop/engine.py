"""The tool loop: one engine that turns a conversation into events; both HTTP flavours only render them.

The model decides (is a tool needed, which one); this code manages everything else: which tools the caller
may see, validation, execution limits, duplicates, failures, truncation, the round limit and the trace.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import structlog

from agent import metrics
from agent.backends.base import (
    Message,
    ModelBackend,
    RoundDone,
    RoundRequest,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolCallsDelta,
)
from agent.checks import mode
from agent.context import RequestContext
from agent.loop import constrained as decision
from agent.loop.events import (
    Caller,
    FinalEvent,
    LoopEvent,
    Outcome,
    TextEvent,
    ThinkingEvent,
    ToolCallEvent,
    ToolResultEvent,
    TraceEntry,
    Usage,
    footer,
    tools_used,
)
from agent.loop.prompt import LOOP_NOTE, SYSTEM_PROMPT, answer_messages, tool_result_message
from agent.loop.retrieval import Retriever
from agent.loop.textcall import could_be_call, parse_text_call
from agent.mcp_client import ToolBox
from agent.settings import Settings
from agent.toolspec import ToolSpec
from agent_contract.labels import TOOL_CALLED, duration_ms, tool_label

log = structlog.get_logger("agent.loop.engine")
# Outcomes whose tool message is the loop telling the model what to do next, not a result.
LOOP_NOTES = frozenset({"duplicate", "failed_before"})


def _key(call: ToolCall) -> str:
    return call.name + json.dumps(call.arguments, sort_keys=True, ensure_ascii=False)


class ToolLoop:
    """Runs one request: rounds against the model backend, tool calls against the MCP server."""

    def __init__(self, settings: Settings, backend: ModelBackend, toolbox: ToolBox) -> None:
        self.settings, self.backend, self.toolbox = settings, backend, toolbox
        self.retriever = Retriever(settings.tool_retrieval, settings.tool_top_k)
        # the answer check's one thread: off the event loop, at most one core for all requests' checks
        self.checks = ThreadPoolExecutor(max_workers=1, thread_name_prefix="answer-check")

    async def run(
        self, conversation: list[Message], model: str, caller: Caller, context: RequestContext
    ) -> AsyncIterator[LoopEvent]:
        """The request's events; `context` (its id and caller) goes with every round and tool call it makes."""
        tools = await self.toolbox.list_tools(context=context)
        specs = {s.name: s for s in tools if caller.may_use(s.name)}  # authorization first: retrieval only narrows
        selection = self.retriever.select(tools, list(specs), conversation)  # once: every round offers this set
        constrained = self.settings.tool_calling == "constrained"
        offer = [specs[n] for n in selection.names]
        prompt = SYSTEM_PROMPT
        if constrained:
            name_first = self.settings.tool_decision == "name_first"
            prompt = (decision.choice_prompt if name_first else decision.system_prompt)(SYSTEM_PROMPT, offer)
        state = _State(
            [{"role": "system", "content": prompt}, *conversation],
            context,
            retrieval=selection.trace(),
            share=caller.share,
        )
        # withhold mode: no answer text leaves before the grounding check (docs/grounding.md, "Streaming")
        hold = self.settings.grounding_mode == "withhold"
        max_rounds = self.settings.max_tool_rounds
        rnd = 0
        while True:
            rnd += 1
            final = rnd > max_rounds or state.force_final
            open_specs = [] if rnd > max_rounds else [specs[n] for n in selection.names if n not in state.failed]
            offered = None if final else [s.ollama() for s in open_specs] or None
            calls: list[ToolCall] = []
            state.text_call = state.redirected = False
            if constrained and offered:  # a decision round: one schema, nothing streams to the user
                choice = await self._decide(state, model, open_specs, rnd)
                state.force_final = choice is None  # "answer now": the next round is the free-text answer
                calls = [choice] if choice is not None else []
                if not calls:
                    continue
            else:
                # A call written as text may name the tools this round could call: natively the offered ones;
                # in constrained mode's answer round, the ones its decision could have chosen.
                watch = open_specs if offered or (constrained and state.force_final) else []
                # The answer round has its own prompt: constrained, every round without schema; natively, the
                # round without tools (a real model kept writing calls as text there, issue 37).
                answer = constrained or final
                async for event in self._round(state, model, offered, rnd, watch, answer):
                    if isinstance(event, ToolCallsDelta):
                        calls.extend(event.calls)
                    elif not (hold and isinstance(event, TextEvent)):
                        yield event
                if state.text_call:  # the answer round called a tool after all: decide again after its result
                    state.force_final = False
                if state.redirected:  # a reply that was neither a call nor an answer: the answer round next
                    state.force_final = True
                    continue
            if not calls or (final and not state.text_call):
                break
            state.messages.append(
                {
                    "role": "assistant",
                    "content": state.round_text,
                    "tool_calls": [
                        {"id": c.id, "function": {"index": i, "name": c.name, "arguments": c.arguments}}
                        for i, c in enumerate(calls)
                    ],
                }
            )
            for call in calls:
                yield ToolCallEvent(call, rnd)
                outcome, content = await self._execute(call, specs, caller, state)
                state.trace.append(TraceEntry(call.name, call.arguments, outcome, rnd, len(content)))
                message: Message = {
                    "role": "tool",
                    "tool_name": call.name,
                    "content": tool_result_message(call.name, content, self.settings.tool_result_max_chars),
                }
                if outcome in LOOP_NOTES:
                    message[LOOP_NOTE] = True  # the loop's word to the model, not data: the answer round drops it
                state.messages.append(message)
                if outcome == "ok":
                    state.results.append((call.name, content))
                yield ToolResultEvent(call, outcome, content)
        metrics.ROUNDS_PER_REQUEST.observe(rnd)
        async for last in self._finish(state, conversation, hold, rnd):
            yield last

    async def _finish(
        self, state: _State, conversation: list[Message], hold: bool, rnd: int
    ) -> AsyncIterator[TextEvent | FinalEvent]:
        """Check the answer's figures (GROUNDING_MODE), then send what is left: warning or held text, footer."""
        used = tools_used(state.trace)
        verdict = await mode.judge_aside(
            self.checks,
            self.settings.answer_check_budget_seconds,
            self.settings.grounding_mode,
            state.answer,
            state.results,
            conversation,
            tools_called=bool(used),
        )
        if verdict.replaces:
            state.answer = verdict.text
        elif verdict.text:
            state.answer += verdict.text
            if not hold:
                yield TextEvent(verdict.text)
        if hold and state.answer:
            yield TextEvent(state.answer)
        if tail := footer(used):
            state.answer += tail
            yield TextEvent(tail)
        yield FinalEvent(
            state.answer, state.finish_reason, state.usage, rnd, state.trace, verdict.trace(), state.retrieval
        )

    async def _decide(self, state: _State, model: str, offered: list[ToolSpec], rnd: int) -> ToolCall | None:
        """The constrained decision: one round (TOOL_DECISION=whole), or a name, then that tool's arguments."""
        state.round_text = ""
        if self.settings.tool_decision == "whole":
            request = self._json_request(state, model, rnd, state.messages, decision.decision_schema(offered))
            return await decision.decide(self.backend, request, state.usage, state.context)
        request = self._json_request(state, model, rnd, state.messages, decision.choice_schema(offered))
        choice = await decision.decide(self.backend, request, state.usage, state.context)
        if choice is None:
            return None
        spec = next(s for s in offered if s.name == choice.name)  # the schema's enum admits no other name
        if not decision.takes_arguments(spec):
            return choice
        system: Message = {"role": "system", "content": decision.arguments_prompt(SYSTEM_PROMPT, spec)}
        schema = decision.arguments_schema(spec)
        request = self._json_request(state, model, rnd, [system, *state.messages[1:]], schema)
        text, cut_off = await decision.json_round(self.backend, request, state.usage, state.context)
        return ToolCall(choice.id, spec.name, decision.parse_arguments(text, schema, spec.name, cut_off))

    def _json_request(
        self, state: _State, model: str, rnd: int, messages: list[Message], schema: dict[str, Any]
    ) -> RoundRequest:
        return RoundRequest(
            model=model,
            messages=list(messages),
            tools=None,
            options={**self.settings.round_options(), "num_predict": decision.DECISION_MAX_TOKENS},
            think=self.settings.think_value(),
            request_id=state.context.request_id,
            round=rnd,
            schema=schema,
            share=state.share,
        )

    async def _round(
        self,
        state: _State,
        model: str,
        tools: list[dict[str, Any]] | None,
        rnd: int,
        watch: list[ToolSpec],
        answer: bool = False,
    ) -> AsyncIterator[TextEvent | ThinkingEvent | ToolCallsDelta]:
        """One streamed round (an `answer` round sends the answer round's own prompt, agent.loop.prompt). With
        `watch`, text that opens like a call written as text is held back until it cannot be one, or until the
        round ends: then it is either a call of a watched tool (agent.loop.textcall) or sent as the text it is."""
        messages = answer_messages(state.messages, SYSTEM_PROMPT) if answer else list(state.messages)
        request = RoundRequest(
            model=model,
            messages=messages,
            tools=tools,
            options=self.settings.round_options(),
            think=self.settings.think_value(),
            request_id=state.context.request_id,
            round=rnd,
            share=state.share,
        )
        state.round_text = ""
        held, holding, native = "", bool(watch), False
        async for event in self.backend.stream_round(request, state.context):
            if isinstance(event, TextDelta):
                if holding:
                    held += event.text
                    if could_be_call(held):
                        continue
                    holding, text, held = False, held, ""
                else:
                    text = event.text
                for out in _text(state, text):
                    yield out
            elif isinstance(event, ThinkingDelta):
                yield ThinkingEvent(event.text)
            elif isinstance(event, ToolCallsDelta):
                native = True
                yield event
            elif isinstance(event, RoundDone):
                state.usage.prompt_tokens += event.prompt_tokens
                state.usage.completion_tokens += event.completion_tokens
                state.finish_reason = "length" if event.done_reason == "length" else "stop"
        call = None if native or not held else parse_text_call(held, watch, f"call_{request.request_id or 'r'}_{rnd}")
        if call is not None:
            state.text_call = True
            log.info("text_tool_call_recognised", tool=call.name, round=rnd)
            yield ToolCallsDelta([call])
        elif held and not native and state.trace and not answer:
            # JSON that is no call, after a tool result, in a round that offered tools: the model re-wrote its call
            # with the result pasted after it (Qwen2.5-Coder-0.5B, 6 of 12 answers). Not shown; the answer round
            # comes next, under its own prompt.
            state.redirected = True
            log.info("text_reply_redirected", round=rnd, chars=len(held))
        elif held:
            for out in _text(state, held):
                yield out

    async def _execute(
        self, call: ToolCall, specs: dict[str, ToolSpec], caller: Caller, state: _State
    ) -> tuple[Outcome, str]:
        """Decide whether a call may run, run it, and say what the model should read back."""
        spec = specs.get(call.name)
        outcome: Outcome
        if spec is None:
            known = [s.name for s in await self.toolbox.list_tools(context=state.context)]
            outcome = "forbidden" if call.name in known else "unknown_tool"
            label = tool_label(call.name, call.name in known)
            metrics.TOOL_CALLS.labels(label, outcome).inc()
            log.warning("tool_refused", tool=label, outcome=outcome, role=caller.role)
            names = ", ".join(sorted(specs)) or "none"
            return outcome, f"Error: there is no tool named {call.name!r} available to you. Available tools: {names}."
        if call.name in state.failed:
            outcome, content = (
                "failed_before",
                (
                    f"Error: {call.name} already failed in this conversation; do not "
                    "call it again. Explain the earlier error to the user."
                ),
            )
        elif _key(call) in state.seen:
            state.force_final = True
            outcome, content = (
                "duplicate",
                (
                    "This exact call was already made; its result is above. "
                    "Answer the user now from the results you have."
                ),
            )
        elif call.invalid is not None:  # e.g. arguments cut off by the token limit: never run a guessed call
            outcome, content = "invalid_arguments", f"Error: invalid arguments for {call.name}: {call.invalid}"
        elif (problem := spec.validation_error(call.arguments)) is not None:
            outcome, content = "invalid_arguments", f"Error: invalid arguments for {call.name}: {problem}"
        else:
            return await self._run_tool(call, state)
        metrics.TOOL_CALLS.labels(call.name, outcome).inc()
        return outcome, content

    async def _run_tool(self, call: ToolCall, state: _State) -> tuple[Outcome, str]:
        state.seen.add(_key(call))
        started = time.monotonic()
        result = await self.toolbox.call(call.name, call.arguments, state.context)
        elapsed = time.monotonic() - started
        metrics.TOOL_DURATION.labels(call.name).observe(elapsed)
        outcome: Outcome = "ok"
        if result.is_error:
            outcome = "timeout" if result.timed_out else "error"
            state.failed.add(call.name)
        metrics.TOOL_CALLS.labels(call.name, outcome).inc()
        log.info(
            TOOL_CALLED,
            tool=call.name,
            outcome=outcome,
            duration_ms=duration_ms(elapsed),
            result_chars=len(result.text),
        )
        return outcome, result.text


def _text(state: _State, text: str) -> list[TextEvent]:
    """The round's text as it reaches the user (a blank line between two rounds' texts), kept in the answer."""
    events = []
    if not state.round_text and state.answer:
        state.answer += "\n\n"
        events.append(TextEvent("\n\n"))
    state.round_text += text
    state.answer += text
    events.append(TextEvent(text))
    return events


@dataclass
class _State:
    messages: list[Message]
    context: RequestContext  # the request's id and caller, for every round and tool call
    trace: list[TraceEntry] = field(default_factory=list)
    results: list[tuple[str, str]] = field(default_factory=list)  # (tool, result) of the calls that succeeded
    seen: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)
    usage: Usage = field(default_factory=Usage)
    answer: str = ""
    round_text: str = ""
    finish_reason: str = "stop"
    force_final: bool = False
    text_call: bool = False  # this round's call was written as text (agent.loop.textcall)
    redirected: bool = False  # this round's reply was JSON but no call, after a tool result: not shown
    retrieval: dict[str, Any] | None = None
    share: str = ""  # the caller's fair-share key, on every round it queues
