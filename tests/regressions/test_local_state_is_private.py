"""Regression (issue 26, finding 4): `local-agent --home DIR` on a world-writable directory kept it 0777, so
another local user replaced `keys.yaml` with their own key and got 200. `--home /proc/nope` ended in a
traceback.

Now the state directory is created 0700, and an existing one (or anything in it) that another user owns or
may write is refused with one line naming the fix, before any key in it is read or any process started.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from agent.cli import UsageError
from agent.local.state import State
from agent.security.auth import add_key
from tests.support.procs import VENV_BIN, free_port

OTHER_UID = 54321


def local_agent(home: Path) -> subprocess.CompletedProcess[str]:
    """Nothing answers on the ports given: a start that got past the state directory would hang, not exit 2."""
    env = {"PATH": "/usr/bin:/bin", "AGENT_PORT": str(free_port()), "OLLAMA_URL": f"http://127.0.0.1:{free_port()}"}
    return subprocess.run(
        [str(VENV_BIN / "local-agent"), "--home", str(home)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def refused(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr
    banner, *rest = result.stderr.strip().splitlines()  # `local-agent 0.x, state in HOME`, then the one error line
    assert banner.startswith("local-agent ") and len(rest) == 1 and "Traceback" not in result.stderr, result.stderr
    return rest[0]


def test_a_world_writable_home_with_a_planted_key_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "shared"
    home.mkdir()
    home.chmod(0o777)
    add_key(home / "keys.yaml", "mallory", "admin")  # what the other user planted: their own admin key
    line = refused(local_agent(home))
    assert line.startswith("local-agent: ") and f"chmod go-w {home}" in line and "mode 777" in line
    assert not (home / "admin.key").exists() and not (home / "mcp-server.log").exists()  # nothing was started


def test_a_planted_file_inside_a_private_home_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "keys.yaml").write_text("keys: []\n")
    (home / "keys.yaml").chmod(0o666)
    assert f"chmod go-w {home / 'keys.yaml'}" in refused(local_agent(home))


@pytest.mark.skipif(os.getuid() != 0, reason="giving a directory to another user needs root")
def test_a_home_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "theirs"
    home.mkdir(mode=0o700)
    os.chown(home, OTHER_UID, OTHER_UID)
    line = refused(local_agent(home))
    assert f"belongs to another user (uid {OTHER_UID})" in line and "--home DIR" in line


def test_an_impossible_home_is_one_clear_line() -> None:
    line = refused(local_agent(Path("/proc/nope")))
    assert "cannot use /proc/nope as the state directory" in line and "--home DIR" in line


def test_a_new_home_and_its_folders_are_private(tmp_path: Path) -> None:
    state = State(tmp_path / "a" / "new" / "home")
    old = os.umask(0o000)  # the most permissive umask still yields owner-only state
    try:
        made = state.prepare()
    finally:
        os.umask(old)
    assert made == {"MCP token": True, "admin API key": True}
    for folder in (state.home, state.audit_dir, state.data_dir, state.files_root):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    for secret in ("admin.key", "mcp-token", "audit.key"):
        assert stat.S_IMODE((state.home / secret).stat().st_mode) == 0o600, secret
    assert State(state.home).prepare() == {"MCP token": False, "admin API key": False}


def test_a_symlinked_entry_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "keys.yaml").symlink_to(tmp_path / "elsewhere.yaml")
    with pytest.raises(UsageError, match="symbolic link"):
        State(home).prepare()
