"""bench-grounding: what the grounding check costs per answer, and how that grows with the conversation.

Three answers against the same tool results (a deposit summary and a list of 120 transactions, ~16,000
characters, twice what the model is shown): a grounded English answer, a grounded Turkish one with a
derived percentage, and one with three invented figures (the slow path: JSON aggregates are built and every
derivation is tried and fails). Each is judged (GROUNDING_MODE=warn, as the tool loop does) under a
conversation of 1, 50 and 200 messages, the earlier ones figure-rich (amounts, percents, dates), in three ways,
interleaved: `warm` (a conversation under way: the two newest messages are new to the process, the rest were
sent with the previous request), `cold` (every message new: a first request bringing a long history) and
`eager`, the check before issue 29 (tests/support/grounding_eager.py), which scanned every message every time.
Target (issue 29): warm 200 / warm 1 <= 1.5.

Last, the worst case (issue 36): a 199-message, ~880 KB history of distinct amounts and an answer of amounts no
tool gave (tests/support/figure_history.py). Printed: the check's CPU time, and the event loop's longest stall
while the check runs on the loop (as before issue 36) and aside on its thread with the shipped budget
(ANSWER_CHECK_BUDGET_SECONDS), as the ratio of the two: what every other request waits meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Awaitable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agent.checks import mode
from agent.checks.grounding import check
from agent.settings import Settings
from tests.bench.stats import summary_ms
from tests.support import figure_history, grounding_eager


def tool_results() -> list[tuple[str, str]]:
    rng = random.Random(16)
    rows: list[dict[str, Any]] = [
        {
            "id": f"TX-{1000 + i}",
            "customer": f"C-{rng.randint(1000, 9999)}",
            "amount_usd": round(rng.uniform(10, 5000), 2),
            "method": rng.choice(["card", "bank_transfer", "crypto", "e_wallet"]),
            "status": rng.choice(["completed", "pending"]),
            "created_at": f"2026-12-03T{rng.randint(0, 23):02}:{rng.randint(0, 59):02}:00Z",
        }
        for i in range(120)
    ]
    total = round(sum(r["amount_usd"] for r in rows), 2)
    summary = {"start": "2026-12-03", "end": "2026-12-03", "currency": "USD", "count": len(rows),
               "total_usd": total, "average_usd": round(total / len(rows), 2)}  # fmt: skip
    return [("depozit_ozeti", json.dumps(summary)), ("islem_listesi", json.dumps(rows))]


def answers(results: list[tuple[str, str]]) -> dict[str, str]:
    summary = json.loads(results[0][1])
    total, count, avg = summary["total_usd"], summary["count"], summary["average_usd"]
    tr_total = f"{total:,.2f}".replace(",", "_").replace(".", ",").replace("_", ".")
    return {
        "grounded EN": f"On 3 December 2026 there were {count} deposits totalling ${total:,.2f} "
        f"(average {avg:,.2f} USD). The largest method was card.",
        "grounded TR": f"3 Aralık 2026 tarihinde {count} yatırım yapıldı, toplam {tr_total} USD; "
        f"ortalama {round(avg)} dolar, yüzde 50 kartla.",
        "invented": f"There were {count} deposits totalling ${total:,.2f}; 7,777,777.77 USD is pending "
        "and 98.76% of 31,415 customers were verified.",
    }


LENGTHS = (1, 50, 200)
WAYS = ("warm", "cold", "eager")


def history(n: int, salt: str) -> list[dict[str, str]]:
    """`n - 1` earlier messages, user and assistant in turn, each with six figures; then the question."""
    rng = random.Random(n)
    said = []
    for i in range(n - 1):
        amounts = [f"{rng.uniform(1000, 99999):,.2f}" for _ in range(3)]
        said.append({"role": ("user", "assistant")[i % 2], "content": f"On 2025-0{1 + i % 9}-1{i % 10} the desk "
                     f"moved ${amounts[0]} and {amounts[1]} USD ({rng.uniform(1000, 9999):.1f}% of plan), "
                     f"{rng.randint(1000, 9999)} accounts, fee {amounts[2]} TL. Note {salt}{i}."})  # fmt: skip
    return [*said, {"role": "user", "content": f"How much was deposited today? ({salt})"}]


def judge_once(way: str, answer: str, results: list[tuple[str, str]], conversation: list[dict[str, str]]) -> float:
    started = time.process_time()  # CPU, not wall time: the machine is shared
    if way == "eager":
        grounding_eager.check(answer, results, mode.context_texts(conversation), tools_called=True)
    else:
        mode.judge("warn", answer, results, conversation, tools_called=True)
    return time.process_time() - started


def conversation_for(way: str, n: int, i: int) -> list[dict[str, str]]:
    """warm: only the last answer and the new question differ from the previous request; cold: all differ."""
    if way == "cold":
        return history(n, f"cold{i}-")
    base = history(n, "w-")
    fresh = [{**m, "content": f"{m['content']} (turn {i})"} for m in base[-2:]]
    return [*base[:-2], *fresh] if n > 1 else fresh


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    results = tool_results()
    chars = sum(len(text) for _, text in results)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"bench-grounding: {n} checks per cell (CPU time), tool results {chars} characters, load average {load}")
    for name, answer in answers(results).items():
        times: dict[tuple[str, int], list[float]] = {(w, k): [] for w in WAYS for k in LENGTHS}
        for k in LENGTHS:  # warm: the earlier messages were sent with the request before
            mode.judge("warn", answer, results, history(k, "w-"), tools_called=True)
        for i in range(n):
            for way in WAYS:
                for k in LENGTHS:
                    times[way, k].append(judge_once(way, answer, results, conversation_for(way, k, i)))
        verdict = check(answer, results, ["How much was deposited today?"], tools_called=True)
        print(f"  {name}  -> {verdict.status}, {len(verdict.ungrounded)} ungrounded")
        for way in WAYS:
            cells = "   ".join(f"{k:3} msgs {statistics.median(times[way, k]) * 1000:6.2f} ms" for k in LENGTHS)
            ratio = statistics.median(times[way, 200]) / statistics.median(times[way, 1])
            print(f"    {way:5}  {cells}   200/1 = {ratio:4.2f}x" + ("   (target <= 1.5x)" if way == "warm" else ""))
        print(f"    p99 warm 200 msgs: {summary_ms(times['warm', 200])}")


async def longest_stall(checking: Awaitable[Any]) -> float:
    """The longest gap between two 5 ms ticks of the event loop while `checking` runs on it."""
    gaps: list[float] = []
    done = False

    async def tick() -> None:
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.02)
    await checking
    done = True
    await ticker
    return max(gaps)


def worst_case() -> None:
    conversation, answer = figure_history.history(), figure_history.invented_answer()
    chars = sum(len(m["content"]) for m in conversation)
    started = time.process_time()
    verdict = mode.judge("warn", answer, [], conversation, tools_called=False).verdict
    cpu = time.process_time() - started
    budget = Settings.model_fields["answer_check_budget_seconds"].default

    first, second = figure_history.history(seed=1), figure_history.history(seed=2)  # new texts: the full cost

    async def on_loop() -> None:  # as the tool loop ran it before issue 36
        mode.judge("warn", answer, [], first, tools_called=False)

    checks = ThreadPoolExecutor(max_workers=1)  # as the tool loop's; a check past its budget finishes aside

    async def aside() -> None:
        await mode.judge_aside(checks, budget, "warn", answer, [], second, tools_called=False)

    inline, off = asyncio.run(longest_stall(on_loop())), asyncio.run(longest_stall(aside()))
    checks.shutdown(wait=True)
    print(f"  worst case: {len(conversation)} messages, {chars / 1000:.0f} KB of amounts, an invented answer")
    print(f"    check CPU {cpu * 1000:.0f} ms ({verdict.status}); budget {budget} s")
    print(
        f"    event loop's longest stall: on the loop {inline * 1000:.0f} ms, aside {off * 1000:.0f} ms"
        f"   ({inline / off:.0f}x less)"
    )


if __name__ == "__main__":
    main()
    worst_case()
