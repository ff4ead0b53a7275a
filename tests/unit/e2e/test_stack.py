"""tests.e2e.stack.running: the session's stack always comes down with its volumes (a failed start, a failing
session, Ctrl-C during `up` or after it) unless E2E_KEEP keeps a session that got to its end; a stack an
earlier session left under the same project is removed before `up`. Driven with a Stack whose docker calls
are recorded instead of run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.stack import Stack, running


class Recorded(Stack):
    """A Stack that records its lifecycle calls; `fail_up` is raised by `up`, `leftover` found before it."""

    calls: list[str]
    fail_up: BaseException | None = None
    leftover = ""

    def remove_leftover(self) -> str:
        self.calls.append("remove_leftover")
        return self.leftover

    def up(self) -> None:
        self.calls.append("up")
        if self.fail_up is not None:
            raise self.fail_up

    def bootstrap_key(self) -> str:
        return "la-key"

    def down(self, volumes: bool = True) -> None:
        self.calls.append(f"down(volumes={volumes})")

    def logs(self) -> str:
        return "logs"


def recorded(tmp_path: Path) -> Recorded:
    stack = Recorded(env_file=tmp_path / "e2e.env", env={"COMPOSE_PROJECT_NAME": "la-e2e-test"})
    stack.calls = []
    return stack


def test_a_session_brings_the_stack_up_then_down_with_its_volumes(tmp_path: Path) -> None:
    stack = recorded(tmp_path)
    with running(stack) as up:
        assert up.api_key == "la-key" and stack.calls == ["remove_leftover", "up"]
    assert stack.calls == ["remove_leftover", "up", "down(volumes=True)"]


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt(), RuntimeError("unhealthy")])
def test_a_start_that_fails_or_is_interrupted_still_takes_the_stack_down(
    tmp_path: Path, interrupt: BaseException
) -> None:
    stack = recorded(tmp_path)
    stack.fail_up = interrupt
    with pytest.raises(type(interrupt)), running(stack, keep=True):
        pytest.fail("the body must not run")
    assert stack.calls == ["remove_leftover", "up", "down(volumes=True)"]


def test_an_error_or_interrupt_inside_the_session_takes_the_stack_down_even_with_keep(tmp_path: Path) -> None:
    stack = recorded(tmp_path)
    with pytest.raises(KeyboardInterrupt), running(stack, keep=True):
        raise KeyboardInterrupt
    assert stack.calls[-1] == "down(volumes=True)"


def test_keep_leaves_a_session_that_ended_running(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack = recorded(tmp_path)
    with running(stack, keep=True):
        pass
    assert stack.calls == ["remove_leftover", "up"]
    assert "E2E_KEEP=1: stack left running as project la-e2e-test" in capsys.readouterr().err


def test_a_stack_an_earlier_session_left_is_removed_and_named_before_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = recorded(tmp_path)
    stack.leftover = "c0ffee la-e2e-test_redis-data"
    with running(stack):
        pass
    assert stack.calls[:2] == ["remove_leftover", "up"]
    assert "removed project la-e2e-test left by an earlier session: c0ffee" in capsys.readouterr().err
