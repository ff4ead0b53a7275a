"""The e2e layer: builds the images, brings the compose stack up once per session, always tears it down.

Without a Docker engine the layer is skipped, unless REQUIRE_E2E=1 (CI), which makes that an error.
Set E2E_KEEP=1 to leave the stack running after the session (for debugging; remove it with
`docker compose -p <project> down -v`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.e2e.stack import REPO, Stack, docker_available, run


def _require_docker() -> None:
    why = docker_available()
    if why is None:
        return
    if os.environ.get("REQUIRE_E2E") == "1":
        pytest.fail(f"REQUIRE_E2E=1 but the e2e layer cannot run: {why}", pytrace=False)
    pytest.skip(why)


@pytest.fixture(scope="session")
def docker_ready() -> None:
    _require_docker()


@pytest.fixture(scope="session")
def built(docker_ready: None) -> Stack:
    """Local base images, the wheelhouse, then every image of the e2e override (cached when unchanged)."""
    stack = Stack()
    if os.geteuid() == 0:
        run([str(REPO / "scripts/base-images")], timeout=900)
    run([str(REPO / "scripts/wheelhouse")], env={"PYTHON_IMAGE": stack.env["PYTHON_IMAGE"]}, timeout=900)
    stack.compose("build", "--quiet", timeout=1200)
    return stack


@pytest.fixture(scope="session")
def stack(built: Stack) -> Iterator[Stack]:
    try:
        built.up()
        built.api_key = built.bootstrap_key()  # what keys-init printed on the first start
    except Exception:
        print(built.logs(), file=sys.stderr)
        built.down()
        raise
    try:
        yield built
    finally:
        if os.environ.get("E2E_KEEP") == "1":
            print(f"\nE2E_KEEP=1: stack left running as project {built.project}", file=sys.stderr)
        else:
            built.down()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """On a failed e2e test, attach the stack's recent logs to the report."""
    outcome = yield
    report = outcome.get_result()
    stack = item.funcargs.get("stack") if hasattr(item, "funcargs") else None
    if report.failed and call.when == "call" and isinstance(stack, Stack):
        try:
            report.sections.append(("compose logs", stack.logs()))
        except (subprocess.SubprocessError, OSError) as exc:
            report.sections.append(("compose logs", f"unavailable: {exc}"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Whichever e2e test runs first also builds the images and starts the stack: allow it the time."""
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.path).startswith(here) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(900))
