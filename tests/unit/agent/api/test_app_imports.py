"""agent-api's app process in direct mode loads no module only queue mode needs (issue 38: redis cost it 18 MB, for
a rate-limit window direct mode keeps in memory)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BUILD = """
import sys
from agent.api.app import create_app, make_backend
from agent.settings import get_settings
settings = get_settings()
create_app(settings, backend=make_backend(settings))
print(" ".join(sys.modules))
"""


def test_direct_mode_builds_its_app_without_redis(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "MODEL_BACKEND": "direct",
        "RATE_LIMIT_PER_MINUTE": "30",  # a limit, kept in memory (RATE_LIMIT_BACKEND=auto)
        "AGENT_AUTH": "none",
        "ANONYMOUS_ROLE": "admin",
        "MCP_TOKEN": "t" * 32,
        "AUDIT_DIR": str(tmp_path),
        "LOG_LEVEL": "ERROR",
    }
    done = subprocess.run([sys.executable, "-c", BUILD], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.split())
    queue_only = {
        m for m in loaded if m.split(".")[0] in ("redis", "rq") or m.startswith(("agent.queue", "agent.redis"))
    }
    assert not queue_only
