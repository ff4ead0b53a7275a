"""Redis's shipped ACL users for tests: images/entrypoint/init-secrets run into a temporary folder as the secrets-init
service runs it (and again to add or revoke a worker host, as scripts/worker-host does), plus one test-only
`harness` user that set-up and clean-up use (FLUSHALL between tests); no role under test gets its rights."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.procs import REPO

INIT_SECRETS = REPO / "images" / "entrypoint" / "init-secrets"
HARNESS = "harness"
_VOLUMES = ("mcp", "redis", "audit", "grafana", "frontend", "webui-admin", "round-signing", "round-verify")


@dataclass
class RedisUsers:
    vault: Path  # what the secret volumes hold
    harness_password: str = field(default_factory=lambda: secrets.token_hex(16))
    hosts: dict[str, str] = field(default_factory=dict)  # worker host → the password printed when it was added

    @classmethod
    def generate(cls, vault: Path) -> RedisUsers:
        for name in _VOLUMES:
            (vault / name).mkdir(parents=True, exist_ok=True)
        users = cls(vault)
        users.run()
        return users

    @property
    def acl_file(self) -> Path:
        return self.vault / "redis" / "users.acl"

    def run(self, **env: str) -> subprocess.CompletedProcess[str]:
        """init-secrets once more (with WORKER_HOST_ADD / WORKER_HOST_REVOKE); the harness user re-appended."""
        done = subprocess.run(
            ["sh", str(INIT_SECRETS)],
            env={"PATH": os.environ["PATH"], "SECRETS_DIR": str(self.vault), **env},
            capture_output=True,
            text=True,
            check=True,
        )
        with self.acl_file.open("a") as acl:
            acl.write(f"user {HARNESS} on >{self.harness_password} ~* &* +@all\n")
        return done

    def add_host(self, name: str) -> str:
        printed = self.run(WORKER_HOST_ADD=name).stderr
        match = re.search(rf"worker host {re.escape(name)}: user worker-{re.escape(name)}, password (\w+)", printed)
        assert match, printed
        self.hosts[name] = match.group(1)
        return match.group(1)

    def revoke_host(self, name: str) -> None:
        self.run(WORKER_HOST_REVOKE=name)
        self.hosts.pop(name, None)

    def password(self, user: str) -> str:
        """The clear password of a role (api, worker-main, operator, or worker-NAME of an added host)."""
        if user == HARNESS:
            return self.harness_password
        if user.startswith("worker-") and user[len("worker-") :] in self.hosts:
            return self.hosts[user[len("worker-") :]]
        return (self.vault / "redis" / f"{user}.password").read_text().strip()

    def url(self, port: int, user: str) -> str:
        return f"redis://{user}:{self.password(user)}@127.0.0.1:{port}/0"
