"""bench-retrieval: does tool retrieval offer the needed tool, how much smaller is the prompt, what does it cost?

For the shipped question set (evals/questions.yaml, the questions that need a tool) with the real 11 tools and
with the 50 of MCP_DISTRACTOR_TOOLS, in English and Turkish, per mode: recall@k (every expected tool among
the offered ones) for k = 1..6, the offered tool definitions plus the system prompt in characters per round
(all tools vs offered), and the ranking's cost per request (median, p99). The tool lists are the MCP server's
own (built in process, exactly as listed over MCP). No model is involved: recall here is retrieval's alone.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from agent.eval.questions import Question, load_questions
from agent.loop.prompt import SYSTEM_PROMPT
from agent.loop.retrieval import Ranker, Retriever
from agent.toolspec import ToolSpec
from agent_tools.server import create_server
from agent_tools.settings import Settings as ToolSettings
from tests.bench.stats import pct

KS = (1, 2, 3, 4, 5, 6)
EVALS = Path(__file__).resolve().parents[2] / "evals"
QUESTIONS = [EVALS / "questions.yaml", EVALS / "paraphrases.yaml"]


async def tool_list(distractors: bool) -> list[ToolSpec]:
    """The tools exactly as the MCP server lists them (demo database in a scratch directory)."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-retrieval-"))
    (tmp / "root").mkdir()
    settings = ToolSettings(files_root=tmp / "root", data_dir=tmp, mcp_timezone="UTC", mcp_distractor_tools=distractors)
    server = create_server(settings)
    return [ToolSpec(t.name, t.description or "", dict(t.input_schema)) for t in await server.list_tools()]


def prompt_chars(tools: Sequence[ToolSpec]) -> int:
    """What one round sends besides the conversation: the system prompt and the tool definitions (JSON)."""
    return len(SYSTEM_PROMPT) + len(json.dumps([t.ollama() for t in tools], ensure_ascii=False))


def ask(q: Question) -> list[dict[str, object]]:
    return [{"role": "user", "content": q.text}]


def recall(make: Callable[[int], Retriever], tools: list[ToolSpec], qs: list[Question]) -> dict[int, list[str]]:
    """For each k, the ids of the questions whose expected tools were not all offered."""
    names = [t.name for t in tools]
    missed: dict[int, list[str]] = {}
    for k in KS:
        retriever = make(k)
        missed[k] = [q.id for q in qs if not set(q.expect) <= set(retriever.select(tools, names, ask(q)).names)]
    return missed


def cost_ms(retriever: Retriever, tools: list[ToolSpec], qs: list[Question], repeat: int) -> list[float]:
    names = [t.name for t in tools]
    retriever.select(tools, names, ask(qs[0]))  # the index is built once per fingerprint, not per request
    samples = []
    for _ in range(repeat):
        for q in qs:
            started = time.perf_counter()
            retriever.select(tools, names, ask(q))
            samples.append((time.perf_counter() - started) * 1000)
    return samples


def modes() -> Makers:
    found: Makers = {"lexical": lambda k: Retriever("lexical", k)}
    try:
        embedding = importlib.import_module("agent.loop.embedding")  # the optional extra `embedding`
    except ImportError as exc:
        print(f"embedding mode: not in this build ({exc}); measured and not shipped, see docs/tools.md")
        return found
    cache: dict[str, Ranker] = {}

    def make_ranker(tools: Sequence[ToolSpec]) -> Ranker:
        key = ",".join(t.name for t in tools)
        cache.setdefault(key, embedding.EmbeddingRanker(tools))
        return cache[key]

    found["embedding"] = lambda k: Retriever("embedding", k, make_ranker)
    return found


Makers = dict[str, Callable[[int], Retriever]]


def report(makers: Makers, tools: list[ToolSpec], qs: list[Question], repeat: int, top_k: int) -> None:
    langs = sorted({q.lang for q in qs})
    full = prompt_chars(tools)
    print(f"\n## {len(tools)} tools — all tools + system prompt: {full} characters per round")
    for mode, make in makers.items():
        print(f"\n### {mode}\n\n| lang | n | " + " | ".join(f"recall@{k}" for k in KS) + " |")
        print("| --- | --- |" + " --- |" * len(KS))
        misses: dict[int, list[str]] = {}
        for lang in langs:
            part = [q for q in qs if q.lang == lang]
            missed = recall(make, tools, part)
            cells = " | ".join(f"{1 - len(missed[k]) / len(part):.3f}" for k in KS)
            print(f"| {lang} | {len(part)} | {cells} |")
            for k, ids in missed.items():
                misses.setdefault(k, []).extend(ids)
        print(f"\nmissed at k={top_k}: {', '.join(misses[top_k]) or 'none'}")
        sizes = [prompt_chars(pick(make(top_k), tools, q)) for q in qs]
        after = statistics.median(sizes)
        smaller = 1 - after / full
        print(f"offered prompt at k={top_k}: median {after:.0f} characters, max {max(sizes)} ({smaller:.1%} smaller)")
        samples = cost_ms(make(top_k), tools, qs, repeat)
        median, p99 = statistics.median(samples), pct(samples, 99)
        print(f"ranking cost per request: median {median:.3f} ms, p99 {p99:.3f} ms (n={len(samples)})")


def pick(retriever: Retriever, tools: list[ToolSpec], q: Question) -> list[ToolSpec]:
    by_name = {t.name: t for t in tools}
    return [by_name[n] for n in retriever.select(tools, list(by_name), ask(q)).names]


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench-retrieval", description=__doc__)
    parser.add_argument("--questions", type=Path, nargs="+", default=QUESTIONS, help="question sets, each measured")
    parser.add_argument("--repeat", type=int, default=20, help="timing passes over the question set")
    parser.add_argument("--top-k", type=int, default=4)
    args = parser.parse_args()
    print(f"# bench-retrieval — load average {os.getloadavg()}, {os.cpu_count()} CPUs")
    lists = [asyncio.run(tool_list(distractors)) for distractors in (False, True)]
    makers = modes()
    for path in args.questions:
        qs = [q for q in load_questions(path).questions if q.expect]
        print(f"\n# {path.name}: {len(qs)} questions that need a tool")
        for tools in lists:
            report(makers, tools, qs, args.repeat, args.top_k)


if __name__ == "__main__":
    main()
