"""No script or test prunes the Docker host: a prune removes whatever on the machine matches, other checkouts'
images and another user's stopped containers included. A run removes what it made by name, or by the label of
its own compose project (tests/e2e/stack.py).

Read from every file the repository runs (scripts, CI, Makefile, tests, images, services), both as shell
commands and as argument lists or Docker SDK calls in Python.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PRUNE = [
    # `docker image prune`, `docker system prune -af`, ["docker", "volume", "prune"], `docker buildx prune`, …
    re.compile(r"\b(image|images|system|container|volume|network|builder|buildx)\b[\"',\s]{1,8}prune\b"),
    # docker SDK: client.images.prune(), client.containers.prune(), …
    re.compile(r"\.(images|containers|volumes|networks)\.prune\("),
    # every image or container of the host fed to a removal: docker rmi $(docker images -q)
    re.compile(r"\b(rmi|rm)\b[^\n]*\$\(docker (images|image ls|ps|container ls)\b[^)]*-a?q"),
]
NOT_RUN = {".md", ".lock", ".png", ".svg", ".json", ".gguf"}


def runnable_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    here = Path(__file__).resolve()
    paths = [REPO / name for name in listed if Path(name).suffix not in NOT_RUN]
    return [p for p in paths if p.is_file() and p.resolve() != here]


def prunes(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if any(p.search(line) for p in PRUNE)]


def test_no_file_the_repository_runs_prunes_the_docker_host() -> None:
    found = {
        str(p.relative_to(REPO)): hits for p in runnable_files() if (hits := prunes(p.read_text(errors="replace")))
    }
    assert found == {}


@pytest.mark.parametrize(
    "line",
    [
        "docker image prune -f --filter label=local-agent.image >/dev/null || true",
        "docker system prune -af",
        'run(["docker", "volume", "prune", "-f"])',
        "client.images.prune(filters={'dangling': True})",
        "docker rmi $(docker images -q)",
        "docker rm -f $(docker ps -aq)",
    ],
)
def test_the_check_recognises_a_prune(line: str) -> None:
    assert prunes(line) == [line]


@pytest.mark.parametrize(
    "line",
    ['run(["docker", "rmi", old], check=False)', "docker compose -p la-try down -v --remove-orphans", "# pruned"],
)
def test_removing_what_a_run_made_by_name_is_no_prune(line: str) -> None:
    assert prunes(line) == []
