"""bench-admission: what the checks every request now passes cost (agent.api.admission, the outcome label).

Two figures: the checks alone (Origin against ALLOWED_ORIGINS, the body's Content-Type) per call, and a
whole chat request through the app in process (trusted_header, a listed Origin, a scripted zero-latency
model) with the checks on and replaced by a no-op, interleaved, so the difference is their cost inside a
real request. Prints medians; asserts nothing (the target, under 0.5 ms median, is read by a person).
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
from pydantic import SecretStr
from starlette.datastructures import Headers

from agent.api import access
from agent.api.admission import check_body_type, check_origin, parse_origins
from agent.api.app import create_app
from agent.settings import Settings
from tests.bench.stats import summary_ms
from tests.unit.agent.conftest import MemoryToolBox, ScriptedBackend

ORIGIN = "https://chat.intranet.example"
HEADERS = {
    "content-type": "application/json",
    "content-length": "120",
    "origin": ORIGIN,
    "x-forwarded-user": "ayse@example.com",
    "x-forwarded-groups": "cn=traders",
}
ASK = {"model": "qwen3:4b", "messages": [{"role": "user", "content": "EURUSD positions?"}]}


def checks_alone(n: int) -> list[float]:
    headers, allowed = Headers(HEADERS), parse_origins(f"{ORIGIN}, http://localhost:3000")
    times = []
    for _ in range(n):
        started = time.perf_counter()
        check_origin(headers, allowed)
        check_body_type("POST", headers)
        times.append(time.perf_counter() - started)
    return times


def bench_settings() -> Settings:
    # The audit log's fsync per request dwarfs what is measured: on tmpfs when there is one.
    shm = Path("/dev/shm")
    tmp = Path(tempfile.mkdtemp(prefix="bench-admission-", dir=shm if shm.is_dir() else None))
    (tmp / "policy.yaml").write_text("roles:\n  desk: [sistem_bilgisi]\ngroups:\n  cn=traders: desk\n")
    return Settings(
        model_backend="direct",
        agent_auth="trusted_header",
        trusted_proxies="10.1.0.0/24",
        allowed_origins=ORIGIN,
        agent_policy_file=tmp / "policy.yaml",
        audit_dir=tmp / "audit",
        audit_key=SecretStr("bench-audit-key-0123456789abcdef"),
        rate_limit_per_minute=0,
        log_level="WARNING",
    )


async def whole_requests(settings: Settings, n: int) -> tuple[list[float], list[float]]:
    app = create_app(settings, backend=ScriptedBackend([]), toolbox=MemoryToolBox())  # type: ignore[arg-type]
    real, off = access._admit, lambda request, security: None
    on_times: list[float] = []
    off_times: list[float] = []
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("10.1.0.3", 4000))
        async with httpx.AsyncClient(transport=transport, base_url="http://agent") as http:
            for i in range(n + 10):
                pair = {}
                for admit_on in (True, False) if i % 2 else (False, True):  # ABBA: drift cancels out
                    access._admit = real if admit_on else off
                    started = time.perf_counter()
                    resp = await http.post("/v1/chat/completions", json=ASK, headers=HEADERS)
                    pair[admit_on] = time.perf_counter() - started
                    assert resp.status_code == 200, resp.text
                if i >= 10:  # the first rounds warm caches up
                    on_times.append(pair[True])
                    off_times.append(pair[False])
    access._admit = real
    return on_times, off_times


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    alone = checks_alone(100_000)
    print(f"admission checks alone:           median {statistics.median(alone) * 1e6:6.2f} µs (n={len(alone)})")
    settings = bench_settings()
    try:
        on, off = asyncio.run(whole_requests(settings, n))
    finally:
        shutil.rmtree(settings.audit_dir.parent, ignore_errors=True)
    print(f"chat request, checks on:          {summary_ms(on)}")
    print(f"chat request, checks replaced:    {summary_ms(off)}")
    paired = statistics.median(a - b for a, b in zip(on, off, strict=True)) * 1000
    print(f"added per request (median of paired differences): {paired:+.3f} ms   (target < 0.5 ms)")


if __name__ == "__main__":
    main()
