"""tests.support.procs.wait_until: "not yet" is retried, a failed check is not swallowed."""

from __future__ import annotations

import pytest

from tests.support.procs import wait_until


def test_a_failed_assertion_inside_the_condition_is_raised_at_once() -> None:
    calls: list[int] = []

    def check() -> bool:
        calls.append(1)
        raise AssertionError("wrong value")

    with pytest.raises(AssertionError, match="wrong value"):
        wait_until(check, timeout=5)
    assert len(calls) == 1


def test_errors_mean_not_yet_and_the_last_one_is_chained_to_the_timeout() -> None:
    with pytest.raises(TimeoutError, match="the service") as info:
        wait_until(lambda: dict[str, bool]()["missing"], timeout=0.1, what="the service")
    assert isinstance(info.value.__cause__, KeyError)


def test_a_condition_that_becomes_true_returns() -> None:
    seen: list[int] = []

    def third_call() -> bool:
        seen.append(1)
        return len(seen) >= 3

    wait_until(third_call, timeout=5, interval=0.001)
    assert len(seen) == 3
