"""The Redis password stays in its file: no process of the agent image carries it in its environment (a
`docker inspect`, a core dump or /proc/<pid>/environ would show it). The queue still works: every chat test of
the e2e layer goes through Redis with the password read from REDIS_PASSWORD_FILE by the agent itself."""

from __future__ import annotations

import pytest

from tests.e2e.stack import Stack

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("service, user", [("agent-api", "api"), ("agent-worker", "worker-main")])
def test_no_process_holds_the_redis_password_in_its_environment(stack: Stack, service: str, user: str) -> None:
    password = stack.exec(service, "cat", f"/run/local-agent/redis/{user}.password").stdout.strip()
    assert len(password) >= 32
    environ = stack.exec(service, "cat", "/proc/1/environ").stdout
    assert "REDIS_URL=redis://redis:6379/0" in environ.split("\0")
    assert password not in environ
    assert password not in str(stack.inspect(service)["Config"]["Env"])
