"""The e2e stack: this checkout's compose project, started and stopped through testcontainers' DockerCompose.

testcontainers runs `up --wait` and `down --volumes` and answers ports, containers and exec. The compose verbs
it has no method for (build, run, restart, logs with a tail, down keeping volumes) run on the command line it
builds, so every call names the same files, env file and project. Variables reach compose through an env
file outside the repo, rewritten before each call from `Stack.env`: the checkout's image tags and project
(tests/e2e/names.py), the local bases and apt mirror, and whatever a test sets (a new MCP_TOKEN, say).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testcontainers.compose import DockerCompose

from tests.e2e.names import REPO, checkout_env

COMPOSE_FILES = ["docker-compose.yml", "compose.e2e.yml"]
__all__ = ["COMPOSE_FILES", "REPO", "Stack", "StackError", "docker_available", "printed_key", "run", "running"]


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
    """The variables compose gets: this checkout's names, local bases, the machine's apt mirror, quiet builds.

    A variable already in the environment wins, as it would in compose itself (an env file never overrides
    the shell), so `Stack.env` is what compose really uses. The project name alone is never taken from the
    environment: a COMPOSE_PROJECT_NAME there would point the teardown at someone else's stack.
    """
    if "COMPOSE_PROJECT_NAME" in os.environ:
        raise StackError("unset COMPOSE_PROJECT_NAME: the e2e layer names its own project (tests/e2e/names.py)")
    names = checkout_env()
    defaults = {
        "PYTHON_IMAGE": "local/bookworm-python:latest",
        "DEBIAN_IMAGE": "local/bookworm:latest",
        "APT_MIRROR": run([str(REPO / "scripts/base-images"), "--mirror"], check=False).stdout.strip(),
        **{name: value for name, value in names.items() if name != "COMPOSE_PROJECT_NAME"},
    }
    env = {name: os.environ.get(name, value) for name, value in defaults.items()}
    return env | {"COMPOSE_PROJECT_NAME": names["COMPOSE_PROJECT_NAME"], "COMPOSE_BAKE": "false"}


def drop_dangling(project: str) -> list[str]:
    """Remove the untagged images compose's builds labelled with `project`: the one a rebuild moved a tag off,
    and the copies compose builds for each service that shares an image. The label is the project's, so
    nothing another checkout or user made matches; `docker rmi` without force keeps one a container uses."""
    label = f"label=com.docker.compose.project={project}"
    found = run(["docker", "images", "-q", "--no-trunc", "--filter", "dangling=true", "--filter", label]).stdout
    return [image for image in found.split() if run(["docker", "rmi", image], check=False).returncode == 0]


def printed_key(output: str) -> str:
    """The key `agent-admin keys add|bootstrap` prints once, indented by four spaces inside its banner."""
    match = re.search(r"^\s{4}(\S+)\s*$", output, re.M)
    if match is None:
        raise StackError(f"no key in agent-admin's output:\n{output}")
    return match.group(1)


@dataclass
class Stack:
    """This checkout's compose project; `env_file` lives outside the repo (a pytest temp dir)."""

    env_file: Path
    env: dict[str, str] = field(default_factory=build_env)
    api_key: str = ""

    def __post_init__(self) -> None:
        self.docker_compose = DockerCompose(
            REPO, compose_file_name=COMPOSE_FILES, env_file=str(self.env_file), wait=True
        )

    @property
    def project(self) -> str:
        return self.env["COMPOSE_PROJECT_NAME"]

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def _sync_env(self) -> list[str]:
        """Write `env` into the env file (single-quoted: compose takes it literally); the compose command line."""
        bad = [name for name, value in self.env.items() if "'" in value or "\n" in value]
        if bad:
            raise StackError(f"cannot pass {bad} to compose through an env file (a quote or newline in the value)")
        self.env_file.write_text("".join(f"{name}='{value}'\n" for name, value in self.env.items()))
        return self.docker_compose.docker_compose_command()

    def compose(self, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run([*self._sync_env(), *args], timeout=timeout, check=check, env=self.env)

    def build(self) -> None:
        """Build every image (cached when unchanged; the tagged images stay for the next run), then drop the
        untagged ones this checkout's builds left (drop_dangling)."""
        self.compose("build", "--quiet", timeout=1200)
        drop_dangling(self.project)

    def remove_leftover(self) -> str:
        """`down -v` of this checkout's project if a killed session or E2E_KEEP=1 left it; what was there."""
        label = f"label=com.docker.compose.project={self.project}"
        found = run(["docker", "ps", "-aq", "--filter", label]).stdout.split()
        found += run(["docker", "volume", "ls", "-q", "--filter", label]).stdout.split()
        if found:
            self.down()
        return " ".join(found)

    def up(self) -> None:
        self._sync_env()
        try:
            self.docker_compose.start()
        except subprocess.CalledProcessError as exc:
            raise StackError(f"compose up --wait exited {exc.returncode}:\n{exc.stderr.decode()[-3000:]}") from exc

    def down(self, volumes: bool = True) -> None:
        """`down -v` through testcontainers; without volumes (a restart that keeps state), compose's own `down`."""
        if not volumes:
            self.compose("down", "-t", "10", timeout=300)
            return
        self._sync_env()
        try:
            self.docker_compose.stop()
        except subprocess.CalledProcessError:  # e.g. a test's extra service still holds a network: remove it too
            self.compose("down", "-v", "--remove-orphans", "-t", "10", timeout=300)

    def url(self, service: str, port: int) -> str:
        host, host_port = self.docker_compose.get_service_host_and_port(service, port)
        return f"http://{host}:{host_port}"

    def container(self, service: str) -> str:
        container_id = self.docker_compose.get_container(service).ID
        if not container_id:
            raise StackError(f"no running container for {service} in {self.project}")
        return container_id

    def inspect(self, service: str) -> dict[str, Any]:
        data: list[dict[str, Any]] = json.loads(run(["docker", "inspect", self.container(service)]).stdout)
        return data[0]

    def ip(self, service: str, network: str) -> str:
        networks = self.inspect(service)["NetworkSettings"]["Networks"]
        return str(networks[f"{self.project}_{network}"]["IPAddress"])

    def exec(self, service: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """`compose exec -T` through testcontainers; a non-zero exit is returned (check=False) or raised."""
        try:
            out, err, code = self.docker_compose.exec_in_container(list(cmd), service)
        except subprocess.CalledProcessError as exc:
            out, err, code = exc.stdout.decode(), exc.stderr.decode(), exc.returncode
        proc = subprocess.CompletedProcess([service, *cmd], code, out, err)
        if check and code != 0:
            raise StackError(f"exec {service} {' '.join(cmd)} exited {code}:\n{out[-3000:]}\n{err[-3000:]}")
        return proc

    def add_api_key(self, name: str, role: str) -> str:
        """Create a key the way an operator does: keys-init (the volume's only writer) runs `agent-admin`."""
        out = self.compose("run", "--rm", "-T", "keys-init", "agent-admin", "keys", "add", name, "--role", role).stdout
        return printed_key(out)

    def bootstrap_key(self) -> str:
        """The first admin key, as an operator reads it: `docker compose logs keys-init`."""
        return printed_key(self.compose("logs", "--no-color", "--no-log-prefix", "keys-init").stdout)

    def logs(self) -> str:
        return self.compose("logs", "--no-color", "--tail", "60", check=False).stdout


@contextmanager
def running(stack: Stack, *, keep: bool = False) -> Iterator[Stack]:
    """The session's stack: what a killed session left under this project removed, then up, its first key read.
    On the way out `down -v`, after a failed start, an error or a Ctrl-C too (BaseException); `keep` (E2E_KEEP=1)
    leaves it up, but only once the session got that far."""
    if leftover := stack.remove_leftover():
        print(f"\nremoved project {stack.project} left by an earlier session: {leftover}", file=sys.stderr)
    try:
        try:
            stack.up()
            stack.api_key = stack.bootstrap_key()  # what keys-init printed on the first start
        except Exception:
            print(stack.logs(), file=sys.stderr)
            raise
        yield stack
    except BaseException:
        stack.down()
        raise
    if keep:
        print(f"\nE2E_KEEP=1: stack left running as project {stack.project}", file=sys.stderr)
    else:
        stack.down()
