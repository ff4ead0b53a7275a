"""Latency benchmark behind scripts/bench-tools: the real server on a free loopback port, one persistent
SDK client over streamable HTTP, median and p99 per tool on the demo data."""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

CASES: list[tuple[str, dict[str, Any]]] = [
    ("sistem_bilgisi", {}),
    ("depozit_ozeti", {"start_date": "today"}),
    ("cekim_ozeti", {"start_date": "yesterday"}),
    ("pozisyon_dagilimi", {"symbol": "EURUSD"}),
    ("islem_hacmi", {"symbol": "XAUUSD", "start_date": "today"}),
    ("musteri_bakiyesi", {"customer": "C1003"}),
    ("kyc_ozeti", {}),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mcp-server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError("mcp-server did not become healthy")


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _measure(url: str, token: str, calls: int, warmup: int) -> list[tuple[str, float, float]]:
    rows = []
    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}", "X-Agent-User": "bench", "X-Agent-Role": "admin"}, timeout=30
        ) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        await client.list_tools()
        for name, args in CASES:
            for _ in range(warmup):
                await client.call_tool(name, args)
            samples = []
            for _ in range(calls):
                started = time.perf_counter()
                result = await client.call_tool(name, args)
                samples.append((time.perf_counter() - started) * 1000)
                if result.is_error:
                    raise RuntimeError(f"{name} failed: {result.content}")
            rows.append((name, statistics.median(samples), _percentile(samples, 0.99)))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=200, help="timed calls per tool")
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-tools-"))
    port, token = _free_port(), secrets.token_urlsafe(24)
    env = {
        **os.environ,
        "MCP_HOST": "127.0.0.1",
        "MCP_PORT": str(port),
        "MCP_TOKEN": token,
        "DATA_DIR": str(work / "data"),
        "FILES_ROOT": str(work),
        "REPORTS_DB_URL": "",
        "LOG_LEVEL": "WARNING",
    }
    server = shutil.which("mcp-server", path=str(Path(sys.executable).parent)) or "mcp-server"
    proc = subprocess.Popen([server], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_healthy(f"http://127.0.0.1:{port}/healthz", proc)
        rows = asyncio.run(_measure(f"http://127.0.0.1:{port}/mcp", token, args.calls, args.warmup))
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        shutil.rmtree(work, ignore_errors=True)
    print(f"mcp-server tool latency over streamable HTTP on loopback ({args.calls} calls each, persistent client)")
    print(f"{'tool':<20} {'median ms':>10} {'p99 ms':>10}")
    for name, median, p99 in rows:
        print(f"{name:<20} {median:>10.2f} {p99:>10.2f}")
    trivial = rows[0][1]
    print(f"target: sistem_bilgisi median <= 5 ms: {'met' if trivial <= 5 else 'NOT met'} ({trivial:.2f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
