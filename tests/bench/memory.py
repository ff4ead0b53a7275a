"""bench-memory: agent-api's resident memory after N requests, its supervisor and its app process apart, beside
ollama-mcp-bridge's in the same run.

Each iteration sends one tool round (the model calls a tool, the tool runs on the MCP server, the model answers)
to agent-api in direct mode and, when PEERS_VENVS holds it, to ollama-mcp-bridge pointed at the same zero-latency
scripted Ollama and the same mcp-server: the same work, interleaved. With --queue, agent-api in queue mode (a
private redis-server and one agent-worker) gets the same rounds too. Printed: the RSS (VmRSS, /proc) of each
process at start (ready, no request yet) and after the N requests, its PSS after them (Pss, smaps_rollup: a page
shared by N processes counted 1/N), then the app process's memory by top-level package
(tests/bench/import_rss.py). Figures, never a pass/fail.

agent-api runs from --venv: scripts/bench-memory makes one holding only what ships (local-agent without the dev
group, as the image installs it), as the bridge's venv holds only the bridge. In the dev venv, structlog and
httpcore import the test tools they find there (rich, trio): agent-api's app process counted ~9 MB more.
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import tempfile
from contextlib import ExitStack
from pathlib import Path

import httpx

from tests.bench import tool_round
from tests.bench.stats import parents, pss_mb, rss_mb, tree_pss_mb, tree_rss_mb
from tests.support import round_keys
from tests.support.procs import REPO, VENV_BIN, Proc, free_port, running

DIRECT, QUEUE = "agent-api, direct mode", "agent-api, queue mode"
Part = tuple[int, bool]  # a pid, and whether the processes under it count too


def agent_parts(name: str, api: Proc) -> dict[str, Part]:
    """agent-api's supervisor alone, and its app process."""
    supervisor = api.popen.pid
    apps = [child for child, parent in parents().items() if parent == supervisor]
    assert len(apps) == 1, f"agent-api's supervisor runs one app process, not {apps}"
    return {f"{name}: supervisor": (supervisor, False), f"{name}: app process": (apps[0], True)}


def measure(parts: dict[str, Part], pss: bool = False) -> dict[str, float]:
    """Each part's RSS, or with `pss` its proportional set size (a page shared with N processes counted 1/N)."""
    one, whole = (pss_mb, tree_pss_mb) if pss else (rss_mb, tree_rss_mb)
    return {name: whole(pid) if tree else one(pid) for name, (pid, tree) in parts.items()}


def agent_env(tmp: Path, ollama_url: str, mcp_url: str, token: str) -> dict[str, str]:
    return {
        "AGENT_PORT": str(free_port()),
        "OLLAMA_URL": ollama_url,
        "MCP_URL": mcp_url,
        "MCP_TOKEN": token,
        "MODEL_BACKEND": "direct",
        "LOG_LEVEL": "WARNING",
        "AGENT_AUTH": "none",
        "ANONYMOUS_ROLE": "admin",
        "RATE_LIMIT_PER_MINUTE": "0",
        "AUDIT_DIR": str(tmp / "audit"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="agent-api's RSS after N requests, beside ollama-mcp-bridge's")
    parser.add_argument("--requests", type=int, default=2000, help="tool rounds sent to each (default 2000)")
    parser.add_argument("--queue", action="store_true", help="also agent-api in queue mode and its agent-worker")
    parser.add_argument("--venv", type=Path, default=VENV_BIN.parent, help="where agent-api is installed")
    args = parser.parse_args()
    bin_dir = args.venv.resolve() / "bin"
    os.environ.update(round_keys.env())  # a round-key pair, as secrets-init makes one: agent-api signs, workers verify
    tmp = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    o_port, m_port, token = free_port(), free_port(), secrets.token_urlsafe(16)
    o_url, mcp_url = f"http://127.0.0.1:{o_port}", f"http://127.0.0.1:{m_port}/mcp"
    mcp_env = {"MCP_PORT": str(m_port), "MCP_TOKEN": token, "FILES_ROOT": str(tmp), "DATA_DIR": str(tmp)}
    env = agent_env(tmp, o_url, mcp_url, token)
    a_url = f"http://127.0.0.1:{env['AGENT_PORT']}"
    with (
        ExitStack() as stack,
        running(["python", "-m", "tests.fakes.fake_ollama", "--port", str(o_port)], ready_url=f"{o_url}/"),
        running(
            ["mcp-server"], env={**mcp_env, "LOG_LEVEL": "WARNING"}, ready_url=f"http://127.0.0.1:{m_port}/healthz"
        ),
        running([str(bin_dir / "agent-api")], env=env, ready_url=f"{a_url}/healthz", timeout=90) as api,
    ):
        rule = {
            "when": {"user_contains": "time", "last_role": "user"},
            "reply": {"tool_calls": [{"name": tool_round.TOOL, "arguments": {}}]},
        }
        script = {"rules": [*tool_round.rules(), rule], "default": {"content": "ok"}}
        httpx.post(f"{o_url}/_fake/script", json=script).raise_for_status()
        calls, parts = {DIRECT: tool_round.agent_call(a_url)}, agent_parts(DIRECT, api)
        if args.queue:
            q_url, q_api, worker = stack.enter_context(tool_round.queue_api(stack, env, bin_dir))
            calls[QUEUE] = tool_round.agent_call(q_url)
            parts |= {**agent_parts(QUEUE, q_api), "agent-worker (and its slot processes)": (worker.popen.pid, True)}
        peer = tool_round.bridge(stack, o_url, mcp_url, token)
        if peer:
            calls[peer[1]] = tool_round.bridge_call(peer[0])
            parts[peer[1]] = (peer[2].popen.pid, True)
        at_start = measure(parts)
        with httpx.Client(timeout=60) as http:
            for _ in range(args.requests):
                for call in calls.values():
                    call(http)
        report(args.requests, at_start, measure(parts), measure(parts, pss=True), peer[1] if peer else None)
    print(f"  agent-api from {args.venv}")
    by_module = [str(bin_dir / "python"), "-m", "tests.bench.import_rss"]
    subprocess.run(
        by_module,
        env={**os.environ, **env, "AUDIT_DIR": str(tmp / "by-module"), "LOG_LEVEL": "ERROR"},
        cwd=REPO,
        check=True,
    )


def report(
    n: int, at_start: dict[str, float], after: dict[str, float], pss: dict[str, float], peer: str | None
) -> None:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"bench-memory: RSS before and after {n} tool rounds each, interleaved, scripted Ollama, load {load}")
    print("  (PSS: a page shared by N processes counted 1/N: what the processes cost the machine together)")
    print(f"  {'':46} {'RSS at start':>12} {f'RSS after {n}':>15} {f'PSS after {n}':>15}")
    rows = [(name, at_start[name], after[name], pss[name]) for name in at_start]
    for mode in (DIRECT, QUEUE):
        if f"{mode}: supervisor" in at_start:
            start, end, shared = (sum(v for k, v in fs.items() if k.startswith(mode)) for fs in (at_start, after, pss))
            last = max(i for i, row in enumerate(rows) if row[0].startswith(mode))
            rows.insert(last + 1, (f"{mode}, whole", start, end, shared))
    for name, start, end, shared in rows:
        print(f"  {name:46} {start:9.1f} MB {end:12.1f} MB {shared:12.1f} MB")
    if peer is None:
        print("  peers: ollama-mcp-bridge not found (PEERS_VENVS): nothing to compare with")
        return
    for figure, figures in (("RSS", after), ("PSS", pss)):
        direct = sum(v for k, v in figures.items() if k.startswith(DIRECT))
        print(f"  agent-api (direct mode, whole) / {peer}, {figure}: {direct / figures[peer]:4.2f}x   (target <= 1x)")


if __name__ == "__main__":
    main()
