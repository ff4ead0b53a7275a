"""Two checkouts on one host keep apart: every local-agent image the e2e compose files name and the compose
project carry the checkout's own name (tests/e2e/names.py), and a run removes only images it made garbage.

Read from what compose itself resolves (`docker compose config`), for each set of files the e2e layer runs
(the stack, the second-GPU recipe, the try route), so an image added later with a fixed tag fails here.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.names import REPO, checkout_env
from tests.e2e.stack import COMPOSE_FILES, Stack, drop_dangling, run

pytestmark = pytest.mark.e2e

FILE_SETS = [
    COMPOSE_FILES,
    [*COMPOSE_FILES, "compose.gpu1.yml", "tests/e2e/compose.gpu1-standin.yml"],
    [*COMPOSE_FILES, "compose.try.yml"],
]


def resolved(files: list[str], names: dict[str, str]) -> tuple[str, set[str]]:
    """The project and the local-agent images compose resolves from `names` alone (none from the shell)."""
    shell = {k: v for k, v in os.environ.items() if k not in names and not k.startswith("COMPOSE_")}
    args = [arg for name in files for arg in ("-f", name)]
    out = subprocess.run(
        ["docker", "compose", *args, "config", "--format", "json"],
        env=shell | names | {"COMPOSE_PROFILES": "webui,grafana"},  # every service, optional ones too
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    data = json.loads(out)
    images = {svc["image"] for svc in data["services"].values() if svc["image"].startswith("local-agent/")}
    return str(data["name"]), images


@pytest.mark.parametrize("files", FILE_SETS, ids=["stack", "second-gpu", "try"])
def test_every_local_image_and_the_project_carry_the_checkouts_name(docker_ready: None, files: list[str]) -> None:
    names = checkout_env()
    project, images = resolved(files, names)
    assert project == names["COMPOSE_PROJECT_NAME"]
    assert images and all(ref.endswith(f":{names['STANDIN_TAG']}") for ref in images), images


@pytest.mark.parametrize("files", FILE_SETS, ids=["stack", "second-gpu", "try"])
def test_two_checkouts_share_no_image_and_no_project(docker_ready: None, files: list[str], tmp_path: Path) -> None:
    ours = resolved(files, checkout_env())
    theirs = resolved(files, checkout_env(tmp_path / "local-agent"))
    assert ours[0] != theirs[0] and not ours[1] & theirs[1], (ours, theirs)


def test_the_running_stack_is_this_checkouts_project_on_its_own_images(stack: Stack) -> None:
    assert stack.project == checkout_env()["COMPOSE_PROJECT_NAME"]
    ids = run(["docker", "ps", "-q", "--filter", f"label=com.docker.compose.project={stack.project}"]).stdout.split()
    used = {json.loads(run(["docker", "inspect", i]).stdout)[0]["Config"]["Image"] for i in ids}
    standins = ("fake-ollama", "redis-debian", "prometheus-debian")
    allowed = {stack.env["AGENT_IMAGE"], stack.env["MCP_IMAGE"]}
    allowed |= {f"local-agent/{name}:{stack.env['STANDIN_TAG']}" for name in standins}
    assert ids and used <= allowed, used


@pytest.fixture
def probe() -> Iterator[str]:
    """A name no one else uses; every image and container labelled with it is removed afterwards."""
    name = f"la-e2e-probe-{uuid.uuid4().hex[:8]}"
    yield name
    containers = run(["docker", "ps", "-aq", "--filter", f"label=probe={name}"]).stdout.split()
    if containers:
        run(["docker", "rm", "-f", *containers], check=False)
    for image in run(["docker", "images", "-q", "--filter", f"label=probe={name}"]).stdout.split():
        run(["docker", "rmi", "-f", image], check=False)


def image_id(ref: str) -> str:
    return run(["docker", "image", "inspect", "-f", "{{.Id}}", ref], check=False).stdout.strip()


def new_image(ref: str, probe: str, project: str) -> str:
    """A new empty image tagged `ref`, labelled as compose labels what it builds for `project`; its ID. A tag
    that named another image moves here and leaves that one untagged, as a rebuild does."""
    empty = io.BytesIO()
    tarfile.open(fileobj=empty, mode="w").close()
    labels = ["-c", f"LABEL probe={probe}", "-c", f"LABEL com.docker.compose.project={project}"]
    subprocess.run(["docker", "import", *labels, "-", ref], input=empty.getvalue(), capture_output=True, check=True)
    return image_id(ref)


def test_after_a_build_only_its_projects_unused_untagged_images_are_removed(docker_ready: None, probe: str) -> None:
    ours, theirs = f"{probe}-ours", f"{probe}-theirs"
    garbage = new_image(f"{probe}:a", probe, ours)
    current = new_image(f"{probe}:a", probe, ours)  # rebuilt: `garbage` has no tag now
    in_use = new_image(f"{probe}:b", probe, ours)
    run(["docker", "create", "--label", f"probe={probe}", in_use, "/none"])  # a container still uses it
    in_use_successor = new_image(f"{probe}:b", probe, ours)
    other = new_image(f"{probe}:c", probe, theirs)
    new_image(f"{probe}:c", probe, theirs)  # another project's untagged image

    assert drop_dangling(ours) == [garbage]
    assert image_id(garbage) == ""
    for kept in (current, in_use, in_use_successor, other):
        assert image_id(kept) == kept
    assert drop_dangling(ours) == []


def project_resources(project: str) -> list[str]:
    label = f"label=com.docker.compose.project={project}"
    kinds = (["ps", "-aq"], ["volume", "ls", "-q"], ["network", "ls", "-q"])
    return [item for kind in kinds for item in run(["docker", *kind, "--filter", label]).stdout.split()]


def test_a_stack_a_killed_session_left_is_found_and_removed_with_its_volumes(built: Stack, tmp_path: Path) -> None:
    project = f"la-e2e-probe-{uuid.uuid4().hex[:8]}"  # not the session's own project, which may be up
    left = Stack(env_file=tmp_path / "e2e.env", env=built.env | {"COMPOSE_PROJECT_NAME": project})
    try:
        left.compose("up", "-d", "--wait", "redis", timeout=300)  # containers and volumes, then no teardown
        assert project_resources(project)
        assert left.remove_leftover()
        assert project_resources(project) == []
        assert left.remove_leftover() == ""  # nothing left: nothing to do
    finally:
        left.compose("down", "-v", "-t", "5", check=False)
