"""The e2e layer: builds the images once, brings this checkout's compose stack up once per session through
testcontainers (tests/e2e/stack.py), and always takes it down with its volumes.

Without a Docker engine the layer is skipped, unless REQUIRE_E2E=1 (CI), which makes that an error.
Ryuk, testcontainers' reaper container, is off: the session's own finalizer runs `down -v`, on failure and on
Ctrl-C too; a stack a killed session left behind carries this checkout's project name and is removed when
the next session starts. Set E2E_KEEP=1 to leave the stack running after the session (for debugging; remove
it with `docker compose -p <project> down -v`, or let the next run do it).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest
from testcontainers.core.config import testcontainers_config

from tests.e2e.stack import REPO, Stack, docker_available, run, running


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
    # No reaper: nothing here may outlive the session but what E2E_KEEP=1 keeps (and Ryuk's image cannot be
    # pulled on a machine without a registry). Teardown is the `stack` fixture's finally.
    testcontainers_config.ryuk_disabled = True


@pytest.fixture(scope="session")
def built(docker_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Stack:
    """Local base images, the wheelhouse, then every image of the e2e override (cached when unchanged)."""
    stack = Stack(env_file=tmp_path_factory.mktemp("compose") / "e2e.env")
    if os.geteuid() == 0:
        run([str(REPO / "scripts/base-images")], timeout=900)
    run([str(REPO / "scripts/wheelhouse")], env={"PYTHON_IMAGE": stack.env["PYTHON_IMAGE"]}, timeout=900)
    stack.build()
    return stack


@pytest.fixture(scope="session")
def stack(built: Stack) -> Iterator[Stack]:
    with running(built, keep=os.environ.get("E2E_KEEP") == "1") as up:
        yield up


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
