"""agent-api's supervisor deciding what an app process's exit means: restart, give up, or pass a config error on.
The app processes here are tiny Python commands that exit as the real one would."""

from __future__ import annotations

import signal
import socket
import sys

import pytest

from agent.api import supervisor
from agent.api.supervisor import Supervisor, cause

KILLED = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"  # as the OOM killer ends it
CONFIG_ERROR = "import sys; sys.exit(2)"  # agent.cli's one-line usage error


class Scripted(Supervisor):
    """Runs the given Python snippets as its app processes, one per start, the last one again and again."""

    def __init__(self, snippets: list[str]) -> None:
        super().__init__(socket.socket())
        self.snippets, self.starts = snippets, 0

    def command(self) -> list[str]:
        self.starts += 1
        return [sys.executable, "-c", self.snippets[min(self.starts, len(self.snippets)) - 1]]


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(supervisor, "BACKOFF_SECONDS", (0.0,))


def test_a_config_error_at_the_first_start_is_passed_on_without_a_restart() -> None:
    scripted = Scripted([CONFIG_ERROR])
    assert scripted.run() == 2
    assert scripted.starts == 1


def test_a_killed_app_is_restarted_and_one_that_then_cannot_start_is_given_up() -> None:
    scripted = Scripted([KILLED, KILLED, CONFIG_ERROR])
    assert scripted.run() == 2
    assert scripted.starts == 2 + supervisor.RESTART_LIMIT


def test_the_exit_cause_names_the_signal() -> None:
    assert cause(-signal.SIGKILL) == "signal SIGKILL"
    assert cause(1) == "status 1"
