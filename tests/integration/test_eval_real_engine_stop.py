"""scripts/eval-real-engine stopped mid-run (kill, pkill, a CI timeout) stops what it started: the engine, agent-api
and mcp-server. Before, a SIGTERM ended only its Python, and the rest ran on under init."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.bench.stats import tree_pids
from tests.support.engine import built
from tests.support.procs import REPO, wait_until


def descendants(pid: int) -> dict[int, str]:
    """Every live process below `pid` (children, their children…), with its command line."""
    found = {}
    for child in tree_pids(pid) - {pid}:
        try:
            found[child] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # ended meanwhile
    return found


def running(pid: int) -> bool:
    """Alive and not a zombie waiting for its reaper."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def test_a_stopped_eval_run_stops_the_engine_and_the_stack_it_started(tmp_path: Path) -> None:
    built("smollm2")
    cmd = [sys.executable, "-m", "tests.bench.real_engine_eval", "--model", "smollm2", "--modes", "native",
           "--ctx", "1024", "--n-predict", "8", "--out", str(tmp_path), "--only", "greeting-en"]  # fmt: skip
    run = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started: dict[int, str] = {}
    try:
        wait_until(lambda: any("agent-api" in c for c in descendants(run.pid).values()), timeout=300,
                   what="the eval run's agent-api")  # fmt: skip
        started = descendants(run.pid)
        assert any("llama-server" in c for c in started.values()), started
        os.kill(run.pid, signal.SIGTERM)
        assert run.wait(timeout=120) == 128 + signal.SIGTERM
        wait_until(lambda: not any(running(pid) for pid in started), timeout=60, what="what the run started")
    finally:  # a failing run leaves nothing behind either
        if run.poll() is None:
            run.kill()
        for pid in (*started, *descendants(run.pid)):
            if running(pid):
                os.kill(pid, signal.SIGKILL)
