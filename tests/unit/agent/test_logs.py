"""agent_contract.logs as the agent uses it: JSON lines, stdlib loggers (RQ) through one renderer, request_id."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import logging, structlog
from agent_contract.logs import bind_request_id, configure
configure("INFO", service="agent-worker", json_logs=True)
configure("DEBUG", service="other")  # a second call changes nothing
bind_request_id("req-42")
structlog.get_logger("agent.queue.jobs").info("round_started", round=2)
logging.getLogger("rq.worker").warning("stdlib line")
logging.getLogger("httpx").info("HTTP Request: POST /api/chat")  # quietened
structlog.get_logger("agent.queue.jobs").debug("hidden")
"""


def test_logs_are_json_lines_with_service_and_request_id() -> None:
    # A child process: configure() changes the root logger, which pytest's own capture relies on.
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=30, check=True)
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    assert [line["event"] for line in lines] == ["round_started", "stdlib line"]
    assert all(line["service"] == "agent-worker" and line["request_id"] == "req-42" for line in lines)
    assert lines[0]["round"] == 2 and lines[0]["level"] == "info" and "timestamp" in lines[0]
    assert lines[1]["logger"] == "rq.worker" and lines[1]["level"] == "warning"
