"""scripts/soak: a seeded chaos soak — clients asking questions while the parts of the stack fail and come back.

Clients (OpenAI API, streaming and not, questions with and without a tool call) run for the whole soak while a
fault schedule hits the stack (tests/bench/soak_stack.py) every FAULT_EVERY seconds: SIGKILL of agent-worker,
mcp-server and Redis (AOF on), each started again about a second later as a restart policy does; SIGKILL of
agent-api's app process (`api`: its supervisor starts it again) or of all of agent-api (`api-container`, as
`docker kill`: started again a second later, and not among the kinds drawn unless --faults names it);
the model server slow for a while; the model server hung (its requests never answer); a network cut between Redis
and every other part for a few seconds (its packets dropped, where iptables allows). Then it prints requests,
the share answered per fault window and overall, latency, 5xx by kind, audit records against requests, the
model server's peak concurrent generations against WORKER_SLOTS, queue state left behind, and memory growth.

The model is scripted (tests/fakes): the figures are plumbing and fault handling, never model quality.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.bench.soak_stack import SoakStack, cut, netcut_unavailable

QUESTIONS = [
    ("how many dollars were deposited today?", True),
    ("bugün kaç dolar yatırıldı?", True),
    ("hello, what can you do?", False),
]
SCRIPT: dict[str, Any] = {
    "rules": [
        {"when": {"user_contains": "deposit", "last_role": "user"},
         "reply": {"tool_calls": [{"name": "depozit_ozeti", "arguments": {}}]}},
        {"when": {"user_contains": "yatır", "last_role": "user"},
         "reply": {"tool_calls": [{"name": "depozit_ozeti", "arguments": {}}]}},
        {"when": {"last_role": "tool"}, "reply": {"content": "According to the tool: {tool_result}"}},
    ],
    "default": {"content": " ".join(["word"] * 20)},
    "token_delay": 0.02,
}  # fmt: skip
RESTART_AFTER = 1.0  # s from a kill to the restart, as `restart: unless-stopped` does
SETTLE = 2.0  # s a fault window lasts past the part being back
REFUSED_PAUSE = 1.0  # s a client waits after its request found no agent-api
KILLS = {"worker": "worker", "mcp": "mcp", "redis": "redis", "api-container": "api"}  # fault: the part killed whole
FAULTS = ("worker", "api", "mcp", "redis", "model_slow", "model_hung", "netcut", "api-container")
# A whole agent-api killed is an outage of the one replica (refused until it is back): measured apart, on demand.
ON_DEMAND = ("api-container",)
API_KILLS = ("api", "api-container")  # faults that kill the process holding requests: they cannot be audited
NETCUT_SECONDS = 3.0  # how long Redis is cut off from every other part (its packets dropped, not refused)


@dataclass
class Outcome:
    start: float
    end: float
    status: int  # 0: no HTTP answer (connection refused or cut)
    answered: bool
    kind: str  # "ok", or what went wrong: "http_503:dependency_down", "connect", "stream_error:...", ...


@dataclass
class Window:
    fault: str
    start: float
    end: float = 0.0


@dataclass
class Soak:
    stack: SoakStack
    seconds: float
    fault_every: float
    clients: int
    rng: random.Random
    schedule: list[str] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def client(self, number: int) -> None:
        rng = random.Random(self.rng.random())
        async with httpx.AsyncClient(base_url=self.stack.api_url, timeout=300) as http:
            while not self.stop.is_set():
                question, _tool = rng.choice(QUESTIONS)
                outcome = await ask(http, question, stream=rng.random() < 0.5)
                self.outcomes.append(outcome)
                # a client refused at the socket (agent-api down) waits a second, as a person or a client's retry
                # does, instead of counting hundreds of refusals a second
                await asyncio.sleep(REFUSED_PAUSE if outcome.status == 0 else rng.uniform(0, 0.5))

    async def faults(self) -> None:
        started = time.time()
        for index, fault in enumerate(self.schedule):
            due = started + self.fault_every * (index + 0.5)
            if due > started + self.seconds - self.fault_every / 2:
                break
            await asyncio.sleep(max(0.0, due - time.time()))
            window = Window(fault, time.time())
            self.windows.append(window)
            window.end = await asyncio.to_thread(self.inject, fault) + SETTLE
        await asyncio.sleep(max(0.0, started + self.seconds - time.time()))
        self.stop.set()

    def inject(self, fault: str) -> float:
        """Apply one fault and undo it; returns when the stack had recovered from it."""
        if fault in KILLS:
            part = self.stack.parts[KILLS[fault]]
            part.kill()
            time.sleep(RESTART_AFTER)
            return part.start()
        if fault == "api":
            return self.stack.crash_app()
        if fault == "netcut":
            with cut(self.stack.ports["redis"]):
                time.sleep(NETCUT_SECONDS)
            return time.time()
        if fault == "model_slow":
            self.stack.script(**{**SCRIPT, "token_delay": 0.2})
        else:  # model_hung: requests arriving now get no first token (ROUND_TIMEOUT_SECONDS ends them)
            self.stack.script(**{**SCRIPT, "first_token_delay": 3600.0})
        time.sleep(5.0)
        self.stack.script(**SCRIPT)
        return time.time()

    async def run(self) -> None:
        await asyncio.gather(self.faults(), *(self.client(i) for i in range(self.clients)))


async def ask(http: httpx.AsyncClient, question: str, stream: bool) -> Outcome:
    body = {"model": "qwen3:4b", "messages": [{"role": "user", "content": question}], "stream": stream}
    start = time.time()
    try:
        if stream:
            status, kind = await _streamed(http, body)
        else:
            response = await http.post("/v1/chat/completions", json=body)
            status = response.status_code
            kind = "ok" if status == 200 and response.json()["choices"][0]["message"]["content"] else _kind(response)
    except httpx.HTTPError as exc:
        status, kind = 0, f"transport:{type(exc).__name__}"
    return Outcome(start, time.time(), status, kind == "ok", kind)


async def _streamed(http: httpx.AsyncClient, body: dict[str, Any]) -> tuple[int, str]:
    async with http.stream("POST", "/v1/chat/completions", json=body) as response:
        if response.status_code != 200:
            await response.aread()
            return response.status_code, _kind(response)
        text, done = "", False
        async for line in response.aiter_lines():
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: "):
                chunk = json.loads(line[6:])
                if "error" in chunk:
                    return 200, f"stream_error:{chunk['error'].get('code') or chunk['error'].get('type')}"
                text += "".join((c.get("delta") or {}).get("content") or "" for c in chunk.get("choices") or [])
        return 200, "ok" if done and text else "stream_cut"


def _kind(response: httpx.Response) -> str:
    try:
        error = response.json().get("error") or {}
        code = error.get("code") or error.get("type") if isinstance(error, dict) else str(error)[:40]
    except ValueError:
        code = "not_json"
    return f"http_{response.status_code}:{code}"


def report(soak: Soak, before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    done = soak.outcomes
    latencies = sorted(o.end - o.start for o in done if o.answered) or [0.0]
    per_window = []
    for w in soak.windows:
        hit = [o for o in done if o.start < w.end and o.end > w.start]
        per_window.append((w.fault, round(w.end - w.start, 1), len(hit), sum(o.answered for o in hit)))
    stats = soak.stack.fake_stats()
    return {
        "requests": len(done),
        "answered": sum(o.answered for o in done),
        "p50_s": round(statistics.median(latencies), 3),
        "p99_s": round(latencies[int(0.99 * (len(latencies) - 1))], 3),
        "failures": dict(Counter(o.kind for o in done if not o.answered)),
        "http_500": sum(o.status == 500 for o in done),
        "windows": per_window,
        "audit_records": soak.stack.audit_records(),
        "audited_expected": sum(o.status != 0 and not _api_killed_during(o, soak.windows) for o in done),
        "gpu_peak": stats.get("peak"),
        "slots": soak.stack.slots,
        "leftovers": soak.stack.leftovers(),
        "rss_mb_before": before,
        "rss_mb_after": after,
    }


def _api_killed_during(outcome: Outcome, windows: list[Window]) -> bool:
    """The API process died while it held this request: it could not write the request's audit record."""
    return any(w.fault in API_KILLS and outcome.start < w.end and outcome.end > w.start for w in windows)


def print_report(result: dict[str, Any], seed: int) -> None:
    total, answered = result["requests"], result["answered"]
    print(f"soak (seed {seed}): {total} requests, {answered} answered ({100 * answered / max(1, total):.1f} %), "
          f"p50 {result['p50_s']} s, p99 {result['p99_s']} s, HTTP 500: {result['http_500']}")  # fmt: skip
    print("fault window                     seconds  requests  answered")
    by_kind: dict[str, list[int]] = {}
    for fault, seconds, hit, ok in result["windows"]:
        print(f"  {fault:<30} {seconds:>7} {hit:>9} {ok:>9}  ({100 * ok / max(1, hit):.0f} %)")
        by_kind.setdefault(fault, [0, 0])[0] += hit
        by_kind[fault][1] += ok
    for fault, (hit, ok) in sorted(by_kind.items()):
        print(f"  all {fault:<26} {'':>7} {hit:>9} {ok:>9}  ({100 * ok / max(1, hit):.0f} %)")
    print(f"failures by kind: {result['failures'] or 'none'}")
    print(f"audit records {result['audit_records']} for {result['audited_expected']} requests answered by an API "
          f"that lived through them (of {total}); model peak {result['gpu_peak']} "
          f"generations at once, WORKER_SLOTS={result['slots']}; left behind: {result['leftovers']}")  # fmt: skip
    print(f"memory MB (api, worker) at start {result['rss_mb_before']} -> end {result['rss_mb_after']}")


def rss(stack: SoakStack) -> dict[str, float]:
    return {name: round(stack.parts[name].rss_mb(), 1) for name in ("api", "worker")}


def quiesce(stack: SoakStack, limit: float = 120.0) -> None:
    """Wait until the queue holds nothing: every request is over, so what remains is left behind."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and any(stack.leftovers().values()):
        time.sleep(0.5)


def default_faults() -> list[str]:
    """Every kind this machine can apply (netcut needs iptables), but the on-demand ones."""
    return [k for k in FAULTS if k not in ON_DEMAND and (k != "netcut" or not netcut_unavailable())]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/soak", description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--fault-every", type=float, default=30.0, help="seconds between two faults")
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--faults",
        default="",
        help=f"kinds to draw from, in order if --in-order: {FAULTS} (default: all it can but {ON_DEMAND})",
    )
    parser.add_argument("--in-order", action="store_true", help="apply --faults in the order given, cycling")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object too")
    args = parser.parse_args(argv)
    kinds = [k for k in args.faults.split(",") if k] or default_faults()
    unknown = set(kinds) - set(FAULTS)
    if unknown:
        parser.error(f"unknown fault kinds {sorted(unknown)}; known: {FAULTS}")
    if "netcut" in kinds and (why := netcut_unavailable()):
        parser.error(f"{why}; leave netcut out of --faults")
    rng = random.Random(args.seed)
    seconds = args.minutes * 60
    count = int(seconds // args.fault_every) + 1
    schedule = (
        [kinds[i % len(kinds)] for i in range(count)] if args.in_order else [rng.choice(kinds) for _ in range(count)]
    )
    result = run(seconds, args.fault_every, args.clients, rng, schedule)
    print_report(result, args.seed)
    if args.json:
        print(json.dumps(result))
    return 0


def run(seconds: float, fault_every: float, clients: int, rng: random.Random, schedule: list[str]) -> dict[str, Any]:
    stack = SoakStack()
    try:
        stack.start()
        stack.script(**SCRIPT)
        soak = Soak(stack, seconds, fault_every, clients, rng, schedule)
        before = rss(stack)
        asyncio.run(soak.run())
        quiesce(stack)
        return report(soak, before, rss(stack))
    finally:
        stack.stop()
        print(f"soak logs: {stack.workdir / 'logs'}")


if __name__ == "__main__":
    raise SystemExit(main())
