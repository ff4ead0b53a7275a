"""Issue 36: `local-agent --home` trusted the folder above it. Another user who owned the parent swapped the home
under a running server and planted keys.yaml: their key got admin, the owner's key 401, the audit went to their
folder. Now every folder above the home must be the user's or root's and not writable by others (unless sticky,
like /tmp), as OpenSSH's StrictModes asks, and the running server reads its state through one handle on the
folder it checked: a swap under it changes nothing it reads."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from agent.cli import UsageError
from agent.local.state import State
from agent.security.audit_check import records
from agent.security.auth import add_key
from tests.integration.conftest import FakeOllama
from tests.integration.test_local_agent import ask, started
from tests.support.procs import free_port, wait_until

OTHER_UID = 54321


@pytest.mark.skipif(os.getuid() != 0, reason="giving a folder to another user needs root")
def test_a_home_below_another_users_folder_is_refused(tmp_path: Path) -> None:
    parent = tmp_path / "theirs"
    parent.mkdir(mode=0o755)
    os.chown(parent, OTHER_UID, OTHER_UID)
    with pytest.raises(
        UsageError, match=f"theirs, above the state directory, belongs to another user .uid {OTHER_UID}"
    ):
        State(parent / "home").prepare()


def test_a_home_below_a_folder_others_may_write_is_refused_unless_sticky(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(UsageError, match="shared, above the state directory, is writable by other users"):
        State(shared / "home").prepare()
    shared.chmod(0o1777)  # sticky, as /tmp: others cannot rename or remove what is ours
    assert State(shared / "home").prepare()


def test_a_home_swapped_under_a_running_server_changes_nothing_it_reads(
    fake_ollama: FakeOllama, tmp_path: Path
) -> None:
    home, port = tmp_path / "parent" / "home", free_port()
    url = f"http://127.0.0.1:{port}"
    with started(home, fake_ollama, port):
        owner = (home / "admin.key").read_text().strip()
        home.rename(tmp_path / "parent" / "moved")  # the swap: the real home renamed, another planted in its place
        home.mkdir(mode=0o700)
        planted = add_key(home / "keys.yaml", "admin", "admin")
        (home / "audit").mkdir(mode=0o700)

        def status(key: str) -> int:
            return httpx.get(f"{url}/v1/models", headers={"Authorization": f"Bearer {key}"}, timeout=10).status_code

        wait_until(lambda: status(owner) == 200, timeout=10, what="the owner's key still served")
        assert status(planted) == 401
        ask(url, owner, "hello")
    assert not list((home / "audit").iterdir())  # nothing written into the planted folder
    audited = [r for r in records(tmp_path / "parent" / "moved" / "audit") if r["event"] == "request"]
    assert any(r["status"] == 200 and r["user"] == "admin" for r in audited)
