"""`agent-admin` finds local-agent's state (--home, LOCAL_AGENT_HOME, or the default directory when nothing in
the environment names another), and an audit query that matches nothing says so."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from agent.home import STATE_PATHS, default_home
from agent.local.state import State
from agent.security import admin
from agent.settings import get_settings

ENV = ("AGENT_KEYS_FILE", "AUDIT_DIR", "AUDIT_KEY", "AUDIT_KEY_FILE", "LOCAL_AGENT_HOME")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg/local-agent"


def run(*args: str) -> tuple[int, str, str]:
    get_settings.cache_clear()
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = admin.main(list(args))
    get_settings.cache_clear()
    return code, out.getvalue(), err.getvalue()


def test_the_layout_is_the_one_local_agent_writes(tmp_path: Path) -> None:
    state = State(tmp_path)
    assert (state.keys_file, state.audit_dir, state.audit_key_file) == tuple(tmp_path / p for p in STATE_PATHS.values())


def test_the_default_state_directory_is_found_without_flags(clean_env: Path) -> None:
    assert default_home() == clean_env
    State(clean_env).prepare()
    code, out, err = run("keys", "list")
    assert code == 0 and "admin" in out and f"local-agent's state in {clean_env}" in err


def test_home_flag_and_env(clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "elsewhere"
    State(home).prepare()
    assert run("--home", str(home), "keys", "list")[1].startswith("admin\tadmin\t")
    monkeypatch.setenv("LOCAL_AGENT_HOME", str(home))
    assert "admin" in run("keys", "list")[1]


def test_an_explicit_keys_file_is_never_second_guessed(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    State(clean_env).prepare()
    monkeypatch.setenv("AGENT_KEYS_FILE", str(clean_env.parent / "other.yaml"))
    _, out, err = run("keys", "list")
    assert "local-agent's state" not in err and "admin" not in out


def test_an_empty_query_says_nothing_matched(clean_env: Path) -> None:
    State(clean_env).prepare()
    code, out, err = run("audit", "query", "--customer", "C1001")
    assert code == 0 and out == ""
    assert f"no audit record matched (--customer C1001) in {clean_env / 'audit'}" in err
