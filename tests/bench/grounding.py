"""bench-grounding: what the grounding check costs per answer, on long tool results (target: < 1 ms median).

Three answers against the same tool results (a deposit summary and a list of 120 transactions, ~16,000
characters, twice what the model is shown): a grounded English answer, a grounded Turkish one with a
derived percentage, and one with three invented figures (the slow path: JSON aggregates are built and every
derivation is tried and fails).
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from typing import Any

from agent.checks.grounding import check
from tests.bench.stats import summary_ms


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


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    results = tool_results()
    chars = sum(len(text) for _, text in results)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"bench-grounding: {n} checks per answer, tool results {chars} characters, load average {load}")
    for name, answer in answers(results).items():
        verdict = check(answer, results, ["How much was deposited today?"], tools_called=True)
        times = []
        for _ in range(n):
            started = time.perf_counter()
            check(answer, results, ["How much was deposited today?"], tools_called=True)
            times.append(time.perf_counter() - started)
        best = min(times) * 1000
        print(f"  {name:12} {summary_ms(times)}   min {best:5.2f} ms   -> {verdict.status}, "
              f"{len(verdict.ungrounded)} ungrounded")  # fmt: skip


if __name__ == "__main__":
    main()
