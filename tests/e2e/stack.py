"""Drive one compose project of the stack from tests: build, up, ports, exec, inspect, down."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILES = ["docker-compose.yml", "compose.e2e.yml"]


class StackError(RuntimeError):
    """A docker or compose command failed; the message carries the command and its output."""


def run(
    cmd: list[str], *, timeout: float = 600, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )
    if check and proc.returncode != 0:
        raise StackError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def docker_available() -> str | None:
    """None when a Docker engine and Compose v2 answer, else why not."""
    if shutil.which("docker") is None:
        return "no docker client on PATH (scripts/docker-setup installs one)"
    if run(["docker", "info"], check=False, timeout=30).returncode != 0:
        return "no Docker engine answers (scripts/docker-setup starts one)"
    if run(["docker", "compose", "version"], check=False, timeout=30).returncode != 0:
        return "docker compose (v2 plugin) is missing (scripts/docker-setup installs it)"
    return None


def build_env() -> dict[str, str]:
    """Variables the e2e override reads: local bases, the apt mirror of this machine, quiet builds."""
    mirror = run([str(REPO / "scripts/base-images"), "--mirror"], check=False).stdout.strip()
    return {
        "PYTHON_IMAGE": os.environ.get("PYTHON_IMAGE", "local/bookworm-python:latest"),
        "DEBIAN_IMAGE": os.environ.get("DEBIAN_IMAGE", "local/bookworm:latest"),
        "APT_MIRROR": os.environ.get("APT_MIRROR", mirror),
        "COMPOSE_BAKE": "false",
    }


def printed_key(output: str) -> str:
    """The key `agent-admin keys add|bootstrap` prints once, indented by four spaces inside its banner."""
    match = re.search(r"^\s{4}(\S+)\s*$", output, re.M)
    if match is None:
        raise StackError(f"no key in agent-admin's output:\n{output}")
    return match.group(1)


@dataclass
class Stack:
    """One running compose project; every helper names it with -p, so parallel runs do not collide."""

    project: str = field(default_factory=lambda: f"la-e2e-{uuid.uuid4().hex[:8]}")
    env: dict[str, str] = field(default_factory=build_env)
    api_key: str = ""

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def add_api_key(self, name: str, role: str) -> str:
        """Create a key the way an operator does: keys-init (the volume's only writer) runs `agent-admin`."""
        out = self.compose("run", "--rm", "-T", "keys-init", "agent-admin", "keys", "add", name, "--role", role).stdout
        return printed_key(out)

    def bootstrap_key(self) -> str:
        """The first admin key, as an operator reads it: `docker compose logs keys-init`."""
        return printed_key(self.compose("logs", "--no-color", "--no-log-prefix", "keys-init").stdout)

    def compose(self, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
        files = [arg for name in COMPOSE_FILES for arg in ("-f", name)]
        return run(["docker", "compose", "-p", self.project, *files, *args], timeout=timeout, check=check, env=self.env)

    def up(self) -> None:
        self.compose("up", "-d", "--wait", "--wait-timeout", "180", timeout=300)

    def down(self, volumes: bool = True) -> None:
        self.compose("down", "--remove-orphans", "-t", "10", *(["-v"] if volumes else []), timeout=300, check=False)

    def url(self, service: str, port: int) -> str:
        host_port = self.compose("port", service, str(port)).stdout.strip()
        return f"http://{host_port}"

    def container(self, service: str) -> str:
        ids = self.compose("ps", "-q", service).stdout.split()
        if not ids:
            raise StackError(f"no running container for {service} in {self.project}")
        return ids[0]

    def inspect(self, service: str) -> dict[str, Any]:
        data: list[dict[str, Any]] = json.loads(run(["docker", "inspect", self.container(service)]).stdout)
        return data[0]

    def ip(self, service: str, network: str) -> str:
        networks = self.inspect(service)["NetworkSettings"]["Networks"]
        return str(networks[f"{self.project}_{network}"]["IPAddress"])

    def exec(self, service: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run(["docker", "exec", self.container(service), *cmd], check=check, timeout=60)

    def logs(self) -> str:
        return self.compose("logs", "--no-color", "--tail", "60", check=False).stdout
