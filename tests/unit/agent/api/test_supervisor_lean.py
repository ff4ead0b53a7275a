"""agent-api's supervisor stays small (issue 38: 46 MB to hold a socket): it imports the standard library alone,
reads its three settings exactly as Settings does, and logs in agent_contract.logs's shape without structlog."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Iterator

import pytest

from agent import __main__ as agent_api
from agent.api.supervisor import LEVELS, Lines, Listen, listen_settings
from agent.settings import Settings, get_settings

# What the app process needs and the supervisor must not load (each cost it MB: pydantic, structlog with rich).
HEAVY = ("pydantic", "pydantic_core", "pydantic_settings", "structlog", "rich", "fastapi", "starlette", "uvicorn",
         "httpx", "httpx2", "anyio", "mcp", "redis", "yaml", "cryptography", "prometheus_client")  # fmt: skip
# What `agent-api` runs until the app process starts: its entry point, and supervise()'s own imports.
SUPERVISOR = "import agent.__main__, agent.api.server, agent.api.supervisor, sys; print(' '.join(sys.modules))"

ENVIRONMENTS = [
    {},
    {"AGENT_HOST": "0.0.0.0", "AGENT_PORT": "8010", "LOG_LEVEL": "WARNING"},
    {"agent_host": "::1", "Agent_Port": "0", "log_level": "debug"},  # Settings reads names in any case
    {"AGENT_PORT": "08000", "LOG_LEVEL": "warn"},
    {"AGENT_HOST": "", "LOG_LEVEL": "notset"},
    {"AGENT_PORT": "99999"},  # no range in Settings: bind() refuses it, with the fix
]
ONLY_SETTINGS_JUDGES = [{"AGENT_PORT": "abc"}, {"AGENT_PORT": ""}, {"AGENT_PORT": " 8000"}, {"AGENT_PORT": "8e3"},
                        {"AGENT_PORT": "-1"}, {"LOG_LEVEL": "verbose"}, {"AGENT_PORT": "٨٠٠٠"}]  # fmt: skip


@pytest.fixture
def fresh_settings() -> Iterator[None]:
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_the_supervisor_imports_nothing_heavy() -> None:
    done = subprocess.run([sys.executable, "-c", SUPERVISOR], capture_output=True, text=True, timeout=60, check=True)
    loaded = set(done.stdout.split())
    assert not {m for m in loaded if m.split(".")[0] in HEAVY}, "the supervisor must stay stdlib-only"
    assert "agent.settings" not in loaded


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_the_supervisor_reads_its_settings_as_settings_does(env: dict[str, str]) -> None:
    with pytest.MonkeyPatch.context() as patch:
        for name in ("AGENT_HOST", "AGENT_PORT", "LOG_LEVEL"):
            patch.delenv(name, raising=False)
        for name, value in env.items():
            patch.setenv(name, value)
        settings = Settings()
    mine = listen_settings(env)
    assert mine == Listen(settings.agent_host, settings.agent_port, settings.log_level)


def test_its_defaults_are_the_settings_defaults() -> None:
    fields = Settings.model_fields
    assert Listen() == Listen(*(fields[name].default for name in ("agent_host", "agent_port", "log_level")))


@pytest.mark.parametrize("env", ONLY_SETTINGS_JUDGES)
def test_a_value_it_cannot_judge_is_left_to_settings(env: dict[str, str]) -> None:
    assert listen_settings(env) is None


def test_a_refused_port_is_the_same_one_line_error_as_before(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], fresh_settings: None
) -> None:
    monkeypatch.setenv("AGENT_PORT", "abc")
    assert agent_api.main([]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "agent-api: invalid setting AGENT_PORT='abc': Input should be a valid integer, unable to parse string as an"
        " integer"
    ]


def test_an_unknown_log_level_is_a_one_line_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], fresh_settings: None
) -> None:
    monkeypatch.setenv("LOG_LEVEL", "verbose")
    assert agent_api.main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("agent-api: invalid setting LOG_LEVEL='verbose': one of CRITICAL") and err.count("\n") == 1


def test_its_level_names_are_loggings() -> None:
    assert logging.getLevelNamesMapping() == LEVELS


LOGS_SCRIPT = """
import structlog
from agent_contract.logs import configure
configure("INFO", json_logs=True)
structlog.get_logger("agent.api.supervisor").error("api_process_exited", pid=7, cause="signal SIGKILL", lived_s=1.5)
"""


def test_its_log_lines_have_the_keys_of_every_other_line(capsys: pytest.CaptureFixture[str]) -> None:
    # agent_contract.logs in a child process: configure() changes the root logger, which pytest's capture relies on.
    done = subprocess.run([sys.executable, "-c", LOGS_SCRIPT], capture_output=True, text=True, timeout=30, check=True)
    theirs = json.loads(done.stderr)
    Lines("INFO").error("api_process_exited", pid=7, cause="signal SIGKILL", lived_s=1.5)
    mine = json.loads(capsys.readouterr().err)
    assert list(mine) == list(theirs)
    assert {k: v for k, v in mine.items() if k != "timestamp"} == {k: v for k, v in theirs.items() if k != "timestamp"}
    assert len(mine["timestamp"]) == len(theirs["timestamp"]) and mine["timestamp"].endswith("Z")


def test_its_level_hides_what_is_below_it(capsys: pytest.CaptureFixture[str]) -> None:
    Lines("WARNING").info("api_stopping", signal="SIGTERM")
    Lines("warning").error("api_given_up", failures=5)
    assert [json.loads(line)["event"] for line in capsys.readouterr().err.splitlines()] == ["api_given_up"]
