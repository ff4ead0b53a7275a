"""bench-constrained: what constrained tool calling costs per round on the real tiny engine (llama-server +
SmolLM2-135M on the CPU), measured on the agent's own round bodies for the shipped tools.

- extra prompt tokens: the prompt line explaining the schema (English + Turkish), the tool catalogue the
  constrained prompt carries, and whole rounds native vs constrained (the engine's own `usage.prompt_tokens`;
  native rounds carry the tools as `tools`, which the chat template renders — or drops: SmolLM2's own does);
  and a decision's system prompt whole and name-first (TOOL_DECISION: the choice, then one tool's arguments);
- grammar: the same cached prompt asked for one token with and without the decision schema, alternately; the
  difference of the medians is the schema's grammar compile plus one constrained sampling step.
Usage: scripts/bench-constrained [--repeat N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import httpx

from agent.backends.base import RoundRequest
from agent.backends.openai_body import openai_body
from agent.loop.constrained import (
    DECISION_LINE,
    arguments_prompt,
    catalogue,
    choice_prompt,
    decision_schema,
    system_prompt,
)
from agent.loop.prompt import SYSTEM_PROMPT
from agent.toolspec import ToolSpec
from tests.bench.retrieval import tool_list
from tests.support.real_engine import MODEL, engine

QUESTIONS = ["how many dollars were deposited today?", "Kaç çekim onay bekliyor?", "What is a margin call?"]


def body(specs: list[ToolSpec], question: str, constrained: bool, cache: bool) -> dict[str, Any]:
    prompt = system_prompt(SYSTEM_PROMPT, specs) if constrained else SYSTEM_PROMPT
    messages = [{"role": "system", "content": prompt}, {"role": "user", "content": question}]
    request = RoundRequest(MODEL, messages, None if constrained else [s.ollama() for s in specs], {"num_predict": 1},
                           schema=decision_schema(specs) if constrained else None)  # fmt: skip
    return {**openai_body(request, cache), "stream": False, "stream_options": None}


def tokens(http: httpx.Client, url: str, text: str) -> int:
    return len(http.post(f"{url}/tokenize", json={"content": text}).json()["tokens"])


def ask(http: httpx.Client, url: str, payload: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    resp = http.post(f"{url}/v1/chat/completions", json={k: v for k, v in payload.items() if v is not None})
    resp.raise_for_status()
    return time.perf_counter() - started, resp.json()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="cost of constrained tool calling per round")
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args(argv)
    specs = asyncio.run(tool_list(False))
    with engine() as url, httpx.Client(timeout=600) as http:
        print(f"engine: llama-server + SmolLM2-135M (CPU), {len(specs)} tools")
        print(f"prompt line (EN+TR): {tokens(http, url, DECISION_LINE)} tokens; "
              f"tool catalogue: {tokens(http, url, catalogue(specs))} tokens")  # fmt: skip
        whole, choice = (tokens(http, url, p(SYSTEM_PROMPT, specs)) for p in (system_prompt, choice_prompt))
        arguments = sorted(tokens(http, url, arguments_prompt(SYSTEM_PROMPT, s)) for s in specs)
        print(f"system prompt of a decision: whole {whole} tokens; TOOL_DECISION=name_first: the choice {choice} "
              f"tokens, then the chosen tool's arguments {arguments[0]}-{arguments[-1]} tokens")  # fmt: skip
        for q in QUESTIONS:
            native = ask(http, url, body(specs, q, False, False))[1]["usage"]["prompt_tokens"]
            constrained = ask(http, url, body(specs, q, True, False))[1]["usage"]["prompt_tokens"]
            extra = constrained - native
            print(f"round prompt tokens, native {native:5d}  constrained {constrained:5d}  (+{extra}): {q}")
        with_schema, without = body(specs, QUESTIONS[0], True, True), body(specs, QUESTIONS[0], True, True)
        without["response_format"] = None
        ask(http, url, without)  # fill the prompt cache: from here on both differ only in the grammar
        timed: dict[str, list[float]] = {"schema": [], "none": []}
        for _ in range(args.repeat):
            timed["schema"].append(ask(http, url, with_schema)[0])
            timed["none"].append(ask(http, url, without)[0])
        on, off = (statistics.median(timed[k]) * 1000 for k in ("schema", "none"))
        print(f"one-token round on a cached prompt, median of {args.repeat}: with schema {on:.1f} ms, "
              f"without {off:.1f} ms: grammar compile + constrained step {on - off:.1f} ms")  # fmt: skip
        whole_decisions(http, url, specs, args.repeat)


def whole_decisions(http: httpx.Client, url: str, specs: list[ToolSpec], repeat: int) -> None:
    """Whole decision rounds (cached prompt, no token cap): what a decision costs, and so what the extra free-text
    round after "answer" adds over taking an answer from the decision itself."""
    for q in QUESTIONS:
        payload = body(specs, q, True, True)
        payload.pop("max_tokens", None)
        ask(http, url, payload)  # the prompt into the cache
        runs = [ask(http, url, payload) for _ in range(max(3, repeat // 3))]
        content = runs[-1][1]["choices"][0]["message"]["content"]
        completion = runs[-1][1]["usage"]["completion_tokens"]
        wall = statistics.median(r[0] for r in runs) * 1000
        print(f"whole decision round: median {wall:.0f} ms, {completion} tokens: {q} -> {content[:100]}")


if __name__ == "__main__":
    main()
