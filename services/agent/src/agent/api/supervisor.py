"""`agent-api`'s supervisor: it owns the listening socket and keeps one app process serving on it.

A killed app process (the OOM killer, a native crash) must cost users latency, not answers. The socket stays
open here while the app process starts again, so a client that connects meanwhile waits in the listen backlog
and is served by the next process instead of being refused. Only the requests the dead process held are lost.

- The app process is `python -P -m agent --listen-fd N --parent-fd M`: the same `agent-api` start-up (settings,
  secrets, the app) on the inherited socket. The parent fd is a pipe's read end: when the supervisor dies
  (a container kill), it reads end-of-file and stops, so no orphan keeps the port.
- The first app process failing at start-up (a config error: exit 2, or uvicorn's 3) ends the supervisor with
  that status and adds no line to the app's one-line error: a config error is not a restart loop.
- Any other exit is restarted: at once, and after 1, 2, 5, 10, 30 s when the second, third... in a row
  died young (within YOUNG_SECONDS); each exit is logged with its cause. After RESTART_LIMIT start-up
  failures in a row the supervisor gives up with that status (the container's restart policy takes over).
- SIGTERM or SIGINT: the socket is closed here and SIGTERM sent to the app process, which finishes its open
  requests (uvicorn's graceful shutdown); the supervisor exits when it has.

The supervisor imports the standard library alone (tests/unit/agent/api/test_supervisor_lean.py): it holds a
socket and restarts a child, and with pydantic's Settings and structlog it held 41 MB (45 where rich is installed)
to do it; now 14, of which a bare interpreter is 8.6. It reads its three settings (AGENT_HOST, AGENT_PORT,
LOG_LEVEL) as Settings would and writes its few log lines in agent_contract.logs's shape; the app process validates
every setting at its start.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from types import FrameType
from typing import NamedTuple

from agent.api.server import STARTUP_FAILURE
from agent.cli import EXIT_USAGE

START_FAILED = (EXIT_USAGE, STARTUP_FAILURE)  # a setting, secret or file refused; the app's start-up failed
BACKOFF_SECONDS = (0.0, 0.0, 1.0, 2.0, 5.0, 10.0, 30.0)  # by how many app processes in a row died young
YOUNG_SECONDS = 60.0  # an app process that dies sooner counts towards the backoff
RESTART_LIMIT = 5  # start-up failures in a row after which a restarted app is given up


# The level names logging.Logger.setLevel takes (agent_contract.logs passes LOG_LEVEL to it), and their numbers.
LEVELS = {"CRITICAL": 50, "FATAL": 50, "ERROR": 40, "WARN": 30, "WARNING": 30, "INFO": 20, "DEBUG": 10, "NOTSET": 0}


class Listen(NamedTuple):
    """What the supervisor reads of the environment: these fields of agent.settings.Settings, same defaults (a
    NamedTuple: dataclasses, with the inspect module it loads, cost the supervisor 3 MB)."""

    agent_host: str = "127.0.0.1"
    agent_port: int = 8000
    log_level: str = "INFO"


def listen_settings(environ: Mapping[str, str]) -> Listen | None:
    """AGENT_HOST, AGENT_PORT and LOG_LEVEL read as Settings reads them (a name in any case), or None for a value
    only Settings can judge (a port not written in plain digits, a level logging does not know): the caller then
    builds Settings, for the same value or the same one-line error as before."""
    env = {name.lower(): value for name, value in environ.items()}
    default = Listen()
    port, level = env.get("agent_port"), env.get("log_level", default.log_level)
    if (port is not None and not (port.isascii() and port.isdigit())) or level.upper() not in LEVELS:
        return None
    return Listen(env.get("agent_host", default.agent_host), default.agent_port if port is None else int(port), level)


class Lines:
    """The supervisor's few log lines in agent_contract.logs's shape (the same JSON keys; key=value on a TTY),
    written without structlog: imported alone, structlog is 13 MB (20 with rich, which it takes where installed)."""

    def __init__(self, level: str = "INFO", logger: str = "agent.api.supervisor") -> None:
        self.threshold, self.logger = LEVELS.get(level.upper(), LEVELS["INFO"]), logger

    def info(self, event: str, **fields: object) -> None:
        self.write("info", event, fields)

    def error(self, event: str, **fields: object) -> None:
        self.write("error", event, fields)

    def write(self, level: str, event: str, fields: Mapping[str, object]) -> None:
        if LEVELS[level.upper()] < self.threshold:
            return
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        line = {**fields, "event": event, "level": level, "logger": self.logger, "timestamp": stamp}
        line["service"] = "agent-api"
        if sys.stderr.isatty():
            pairs = " ".join(f"{key}={value}" for key, value in fields.items())
            print(f"{stamp} [{level:9}] {event} [{self.logger}] {pairs}", file=sys.stderr, flush=True)
        else:
            print(json.dumps(line, ensure_ascii=False, default=str), file=sys.stderr, flush=True)


def cause(status: int) -> str:
    """`signal SIGKILL` or `status 1`: how an app process ended, for the log."""
    if status < 0:
        try:
            return f"signal {signal.Signals(-status).name}"
        except ValueError:
            return f"signal {-status}"
    return f"status {status}"


class Supervisor:
    """Runs app processes on `sock` one after another until stopped; `run()` returns the exit status."""

    def __init__(self, sock: socket.socket, log: Lines | None = None) -> None:
        self.sock, self.fd = sock, sock.fileno()
        self.log = log or Lines()
        self.stopping = threading.Event()
        self.child: subprocess.Popen[bytes] | None = None
        self.alive_read, self.alive_write = os.pipe()  # the write end is never inherited: EOF when we die

    def command(self) -> list[str]:
        # -P: the working directory is not put on sys.path, so a folder named `agent` there cannot stand in
        app = [sys.executable, "-P", "-m", "agent"]
        return [*app, "--listen-fd", str(self.fd), "--parent-fd", str(self.alive_read)]

    def stop(self, signum: int, _frame: FrameType | None) -> None:
        """Close the socket (new clients are refused once the app's copy closes too) and drain the app."""
        if not self.stopping.is_set():
            self.log.info("api_stopping", signal=signal.Signals(signum).name)
        self.stopping.set()
        self.sock.close()
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signal.SIGTERM)

    def start(self) -> subprocess.Popen[bytes] | None:
        """The next app process, or None when stopping got there first (the socket is closed)."""
        try:
            child = subprocess.Popen(self.command(), pass_fds=(self.fd, self.alive_read))
        except OSError:
            if self.stopping.is_set():
                return None
            raise
        self.child = child
        if self.stopping.is_set():  # stopped between the loop's check and the start
            child.send_signal(signal.SIGTERM)
        return child

    def run(self) -> int:
        previous = {signum: signal.signal(signum, self.stop) for signum in (signal.SIGTERM, signal.SIGINT)}
        try:
            return self.keep_serving()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            self.sock.close()
            os.close(self.alive_read)
            os.close(self.alive_write)

    def keep_serving(self) -> int:
        young = start_failures = 0
        first = True
        while not self.stopping.is_set():
            started = time.monotonic()
            child = self.start()
            if child is None:
                return 0
            status = child.wait()
            if self.stopping.is_set():
                return status if status > 0 and status not in START_FAILED else 0
            if status in START_FAILED and first:
                return status  # the app printed its one-line error: nothing to add, nothing to retry
            first = False
            lived = time.monotonic() - started
            young = young + 1 if lived < YOUNG_SECONDS else 0
            start_failures = start_failures + 1 if status in START_FAILED else 0
            if start_failures >= RESTART_LIMIT:
                self.log.error("api_given_up", pid=child.pid, cause=cause(status), failures=start_failures)
                return status
            delay = BACKOFF_SECONDS[min(young, len(BACKOFF_SECONDS) - 1)]
            lived_s = round(lived, 1)
            exited = {"pid": child.pid, "cause": cause(status), "lived_s": lived_s, "restart_in_s": delay}
            self.log.error("api_process_exited", **exited)
            self.stopping.wait(delay)
        return 0


def supervise(sock: socket.socket, log_level: str = "INFO") -> int:
    """Serve `agent-api` on `sock` through restarted app processes; the status to exit with."""
    return Supervisor(sock, Lines(log_level)).run()
