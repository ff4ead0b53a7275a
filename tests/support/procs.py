"""Helpers for tests that run real processes on loopback: free ports, waiting on conditions, services."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
# The least any process gets to become ready. A cold Python start (agent-api, mcp-server) took over 40 s on a
# 2-core host running two suites and more; a deadline only matters when something is broken, so it is generous.
START_TIMEOUT = 180.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(cond: Callable[[], bool], timeout: float = 15.0, interval: float = 0.02, what: str = "") -> None:
    """Poll `cond` until it is true; fail with `what` after `timeout` seconds (no fixed sleeps in tests).

    An exception from `cond` (a service not up yet) means "not yet", and the last one is chained to the
    TimeoutError; an AssertionError is a failed check, never "not yet": it is re-raised at once.
    """
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if cond():
                return
        except AssertionError:
            raise
        except Exception as exc:
            last = exc
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what or cond}") from last


def http_ok(url: str) -> bool:
    return httpx.get(url, timeout=1.0).status_code == 200


@dataclass
class Proc:
    """A child process with its combined output in a log file (shown when a test fails)."""

    popen: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            self.popen.wait(timeout=10)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=10)


def start(
    cmd: list[str],
    env: dict[str, str] | None = None,
    ready_url: str | None = None,
    ready: Callable[[], bool] | None = None,
    timeout: float = 30.0,
    cwd: Path = REPO,
) -> Proc:
    """Start `cmd` with the venv's bin first on PATH and wait until it answers `ready_url` (or `ready`)."""
    full_env = {**os.environ, "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}", **(env or {})}
    fd, name = tempfile.mkstemp(prefix="proc-", suffix=".log")
    popen = subprocess.Popen(cmd, env=full_env, stdout=fd, stderr=subprocess.STDOUT, cwd=cwd)
    os.close(fd)
    proc = Proc(popen, Path(name))
    check = ready or ((lambda: http_ok(ready_url)) if ready_url else None)
    if check is not None:

        def alive_and_ready() -> bool:
            if popen.poll() is not None:  # it will never be ready: say so now, not at the deadline
                raise AssertionError(f"exited with status {popen.returncode}")
            return check()

        try:
            wait_until(alive_and_ready, timeout=max(timeout, START_TIMEOUT), what=" ".join(cmd))
        except (TimeoutError, AssertionError) as exc:
            proc.stop()
            raise RuntimeError(f"{cmd[0]} did not become ready ({exc}):\n{proc.output()[-4000:]}") from exc
        except BaseException:  # interrupted while it starts (Ctrl-C, a SIGTERM made SystemExit): not left running
            proc.stop()
            raise
    return proc


@contextlib.contextmanager
def running(cmd: list[str], **kwargs: object) -> Iterator[Proc]:
    proc = start(cmd, **kwargs)  # type: ignore[arg-type]
    try:
        yield proc
    finally:
        proc.stop()


def redis_server_cmd(port: int, workdir: Path) -> list[str]:
    """A private redis-server on loopback, configured as the queue's (AOF everysec, noeviction)."""
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    return [
        binary,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
        "--maxmemory-policy",
        "noeviction",
        "--dir",
        str(workdir),
    ]
