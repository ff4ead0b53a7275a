"""Issue 35: any worker Redis credential could take every host's GPU slot keys (`agent:gpu:<id>:lock`) and stall
everyone. Slot keys now live under the host's own prefix (`agent:host:<host>:…`), which the shipped ACL lets only
that host's Redis user write: a stolen worker password holds its own host's GPU at most."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from redis.exceptions import NoPermissionError

from agent.queue.keys import gpu_slot_keys
from agent.settings import Settings
from tests.integration.queue_fixtures import RedisServer, login_as, shipped_acl_redis

pytestmark = pytest.mark.integration
HOST = "gpu-host-2"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with shipped_acl_redis(tmp_path_factory, HOST) as found:
        yield found


@pytest.mark.parametrize(("user", "own", "other"), [(f"worker-{HOST}", HOST, "main"), ("worker-main", "main", HOST)])
def test_a_worker_user_holds_its_own_hosts_slots_and_no_other(
    server: RedisServer, user: str, own: str, other: str
) -> None:
    assert Settings(redis_username=user).worker_host() == own  # the prefix its rounds take their slots under
    with login_as(server, user) as worker:
        assert worker.set(gpu_slot_keys(own, "gpu0", 1)[0], "slot:job", nx=True, px=5000)
        for key in gpu_slot_keys(other, f"{other}-gpu0", 2) + gpu_slot_keys(other, "gpu0", 1):
            with pytest.raises(NoPermissionError):
                worker.set(key, "rogue", nx=True, px=600_000)
    assert server.client().get(gpu_slot_keys(other, "gpu0", 1)[0]) != "rogue"
