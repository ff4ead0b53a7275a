"""The scripted Ollama's batching knob and the busy-time summary the queue bench and slot tests read."""

from __future__ import annotations

import pytest

from tests.fakes.control import busy_from
from tests.fakes.fake_ollama import FakeState, Generation, Plan, ScriptError


def plan(state: FakeState) -> Plan:
    behaviour = state.behaviour
    return Plan([], False, "stop", behaviour.token_delay, 0.0, None, behaviour.batch_exponent)


@pytest.mark.parametrize(("exponent", "running", "delay"), [(0.0, 4, 0.01), (0.5, 4, 0.02), (1.0, 4, 0.04)])
def test_each_chunk_waits_longer_while_other_generations_run(exponent: float, running: int, delay: float) -> None:
    state = FakeState()
    state.configure({"token_delay": 0.01, "batch_exponent": exponent})
    assert Generation("m", plan(state), {}, lambda: running).token_delay() == pytest.approx(delay)
    assert Generation("m", plan(state), {}, lambda: 0).token_delay() == pytest.approx(0.01)


def test_an_unknown_script_key_is_still_refused() -> None:
    with pytest.raises(ScriptError, match="unknown script keys"):
        FakeState().configure({"batch_exponant": 0.5})


def test_busy_time_is_the_union_of_generations_and_gaps_are_what_lies_between() -> None:
    rows = [
        {"messages": [1], "started_at": 10.0, "ended_at": 11.0},
        {"messages": [1], "started_at": 10.5, "ended_at": 11.5},  # overlaps the first: no gap
        {"messages": [1], "started_at": 11.6, "ended_at": 12.0},
        {"messages": [], "started_at": 11.5, "ended_at": 11.5},  # a model load, not a generation
        {"messages": [1], "started_at": 12.0, "ended_at": None},  # cancelled before its end was recorded
    ]
    busy = busy_from(rows)
    assert busy.generations == 3
    assert busy.span == pytest.approx(2.0)
    assert busy.busy == pytest.approx(1.9)
    assert busy.gaps == [pytest.approx(0.1)]
    assert busy.fraction == pytest.approx(0.95)
    assert busy_from([]).fraction == 0.0
