"""Where `local-agent` keeps its state: read by local-agent itself and by `agent-admin`, which finds it there.

Only the layout lives here (core, importable by every layer); agent.local.state creates and keeps the files.
"""

from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "LOCAL_AGENT_HOME"
# Settings field -> its path inside the state directory (the API's keys, the audit log and its key).
STATE_PATHS = {"agent_keys_file": "keys.yaml", "audit_dir": "audit", "audit_key_file": "audit.key"}
# Set in the environment, any of these says "not local-agent's state": agent-admin then never guesses.
EXPLICIT_ENV = ("AGENT_KEYS_FILE", "AUDIT_DIR", "AUDIT_KEY", "AUDIT_KEY_FILE", HOME_ENV)


def default_home() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "local-agent"


def state_settings(home: Path) -> dict[str, Path]:
    """The Settings fields that point into a local-agent state directory."""
    return {field: home / name for field, name in STATE_PATHS.items()}


def found_home(explicit: Path | None) -> Path | None:
    """The state directory agent-admin should use: --home, else LOCAL_AGENT_HOME, else local-agent's default one
    when it exists and nothing in the environment names another keys file, audit log or key."""
    if explicit is not None:
        return explicit
    if os.environ.get(HOME_ENV):
        return Path(os.environ[HOME_ENV])
    if any(os.environ.get(name) for name in EXPLICIT_ENV):
        return None
    home = default_home()
    return home if (home / STATE_PATHS["agent_keys_file"]).is_file() else None
