"""bench-audit: what the audit log's fsync costs the API, one fsync per record on the event loop vs group commit.

C requests end at once, over and over, on one asyncio loop, each writing a chat-sized record (~0.7 KB) and
waiting for it to be durable (timed from the moment it wants to write), as agent-api does: either
`AuditLog.append` on the loop (an fsync per record, the loop blocked meanwhile), as the API did before, or
`GroupCommit.append` (a writer thread; records waiting together share one fsync), as it does now.
A ticker task beside them measures how late a 1 ms timer fires: the time every other request on the loop
(streaming tokens, enqueueing rounds) stood still. Interleaved per repetition; the audit directory is on the
disk the temporary directory is on (AUDIT_BENCH_DIR to choose another). Prints the load average: compare runs
only at similar load.
Usage: scripts/bench-audit [RECORDS_PER_CELL]
"""

from __future__ import annotations

import asyncio
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agent.security.audit import AuditLog
from agent.security.audit_commit import GroupCommit
from tests.bench.stats import pct

CONCURRENCY = (1, 4, 16, 64)
REPETITIONS = 3
Append = Callable[[dict[str, Any]], Awaitable[object]]


def record(i: int) -> dict[str, Any]:
    """About the size of a chat request's record (docs/security.md: ~0.7 KB)."""
    return {
        "event": "chat",
        "request_id": secrets.token_hex(8),
        "user": "ayse@example.com",
        "role": "trader",
        "status": 200,
        "model": "qwen3:4b",
        "question": f"Müşteri C{i:04d} için son on işlemi ve bakiyeyi göster, tutarları TL olarak yaz. " * 3,
        "tool_calls": [{"name": "musteri_islemleri", "arguments": {"customer": f"C{i:04d}"}, "outcome": "ok"}],
        "answer_sha256": secrets.token_hex(32),
        "latency_ms": 812.4,
    }


async def cell(append: Append, concurrency: int, records: int) -> tuple[list[float], list[float], float]:
    """Per-record latency (s), loop lateness samples (s), and wall time for `records` records."""
    latencies: list[float] = []
    lateness: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            start = time.perf_counter()
            await asyncio.sleep(0.001)
            lateness.append(time.perf_counter() - start - 0.001)

    async def request(k: int, start: float) -> None:
        for i in range(k, records, concurrency):
            await append(record(i))
            now = time.perf_counter()
            latencies.append(now - start)  # from wanting to write (the previous record done) to durable
            await asyncio.sleep(0)  # the request's other work: the loop serves the others
            start = now

    tick = asyncio.create_task(ticker())
    started = time.perf_counter()
    await asyncio.gather(*(request(k, started) for k in range(concurrency)))
    wall = time.perf_counter() - started
    done.set()
    await tick
    return latencies, lateness, wall


def counted_fsyncs() -> list[int]:
    """Count os.fsync calls (the bench's own process only)."""
    count = [0]
    real = os.fsync

    def fsync(fd: int) -> None:
        count[0] += 1
        real(fd)

    os.fsync = fsync  # type: ignore[assignment]
    return count


async def bench(directory: Path, records: int) -> None:
    log = AuditLog(directory, b"k" * 32)
    group = GroupCommit(log)

    async def on_loop(rec: dict[str, Any]) -> object:
        return log.append(rec)

    ways: dict[str, Append] = {"fsync per record, on the loop": on_loop, "group commit (writer thread)": group.append}
    fsyncs = counted_fsyncs()
    results: dict[tuple[str, int], list[tuple[list[float], list[float], float, int]]] = {}
    for _ in range(REPETITIONS):
        for concurrency in CONCURRENCY:
            for name, append in ways.items():
                before = fsyncs[0]
                lat, late, wall = await cell(append, concurrency, records)
                results.setdefault((name, concurrency), []).append((lat, late, wall, fsyncs[0] - before))
    group.close()
    report(results, records)


def report(results: dict[tuple[str, int], list[tuple[list[float], list[float], float, int]]], records: int) -> None:
    print("   requests  way                            record durable (median / p99)   loop stalled p99 / max"
          "   records/s   fsyncs/record")  # fmt: skip
    best: dict[int, dict[str, float]] = {}
    for (name, concurrency), runs in results.items():
        lat = [x for run in runs for x in run[0]]
        late = [x for run in runs for x in run[1]]
        rate = statistics.median(records / run[2] for run in runs)
        per = sum(run[3] for run in runs) / (records * len(runs))
        best.setdefault(concurrency, {})[name] = rate
        print(f"   {concurrency:>8}  {name:30} {statistics.median(lat) * 1000:6.2f} / {pct(lat, 99) * 1000:6.2f} ms"
              f"          {pct(late, 99) * 1000:6.2f} / {max(late) * 1000:6.2f} ms"
              f"   {rate:9.0f}   {per:13.2f}")  # fmt: skip
    for concurrency, rates in best.items():
        ratio = rates["group commit (writer thread)"] / rates["fsync per record, on the loop"]
        print(f"   {concurrency:>3} requests at once: group commit writes {ratio:4.1f}x the records per second")


def main() -> None:
    records = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    base = os.environ.get("AUDIT_BENCH_DIR") or None
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    with tempfile.TemporaryDirectory(prefix="bench-audit-", dir=base) as tmp:
        print(f"bench-audit: {records} records per cell, {REPETITIONS} repetitions, in {tmp}, load before {load}")
        asyncio.run(bench(Path(tmp), records))
    print(f"   load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
