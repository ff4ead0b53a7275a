"""The state directory of `local-agent`: what the first start generates and every later start keeps."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from agent.security.auth import add_key, read_keys

ADMIN = "admin"


def default_home() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "local-agent"


def _secret_file(path: Path, make: str) -> tuple[str, bool]:
    """The secret in `path`, created (mode 0600) with `make` on the first start; True when it was created now."""
    if path.is_file():
        return path.read_text().strip(), False
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(make + "\n")
    return make, True


@dataclass(frozen=True)
class State:
    home: Path

    @property
    def keys_file(self) -> Path:
        return self.home / "keys.yaml"

    @property
    def audit_dir(self) -> Path:
        return self.home / "audit"

    @property
    def data_dir(self) -> Path:
        return self.home / "mcp-data"

    @property
    def files_root(self) -> Path:
        return self.home / "files"

    @property
    def audit_key_file(self) -> Path:
        return self.home / "audit.key"  # beside the log would be weaker; the agent warns about that layout

    @property
    def mcp_log(self) -> Path:
        return self.home / "mcp-server.log"

    def mcp_token(self) -> tuple[str, bool]:
        return _secret_file(self.home / "mcp-token", secrets.token_urlsafe(32))

    def admin_key(self) -> tuple[str, bool]:
        """The admin API key: its hash in the keys file, the key itself kept (0600) so the user can read it again."""
        path = self.home / "admin.key"
        if path.is_file() and any(e.name == ADMIN for e in read_keys(self.keys_file)):
            return path.read_text().strip(), False
        path.unlink(missing_ok=True)
        key = add_key(self.keys_file, ADMIN, ADMIN)
        return _secret_file(path, key)[0], True

    def prepare(self) -> list[str]:
        """Create what is missing; says, per item, whether it was made now or kept from an earlier start."""
        for folder in (self.home, self.audit_dir, self.data_dir, self.files_root):
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        _, token_new = self.mcp_token()
        _, key_new = self.admin_key()
        _secret_file(self.audit_key_file, secrets.token_hex(32))
        made = {True: "generated", False: "kept"}
        return [f"MCP token {made[token_new]}", f"admin API key {made[key_new]}"]
