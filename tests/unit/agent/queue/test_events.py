"""The error entry of a round's event stream: written by the worker, re-raised by the API as the same class."""

from __future__ import annotations

import pytest

from agent.backends.base import RoundDone, event_from_dict, event_to_dict
from agent.errors import AgentError, BadRequest, DependencyDown, ModelNotFound, QueueTimeout, UpstreamError
from agent.queue.keys import error_entry, error_from


@pytest.mark.parametrize(
    "exc",
    [
        ModelNotFound("Model 'x' is not available: pull it", param="model"),
        QueueTimeout("waited too long"),
        DependencyDown("Ollama is unreachable", retry_after=5),
        BadRequest("does not fit the context window", param="messages", code="context_length_exceeded"),
    ],
)
def test_worker_errors_come_back_as_the_same_class(exc: AgentError) -> None:
    rebuilt = error_from(error_entry(exc))
    assert type(rebuilt) is type(exc)
    assert (rebuilt.message, rebuilt.param, rebuilt.retry_after) == (exc.message, exc.param, exc.retry_after)
    assert (rebuilt.code, rebuilt.client_message) == (exc.code, exc.client_message)


def test_unknown_worker_error_names_become_upstream_errors() -> None:
    assert type(error_from({"kind": "error", "error": "ValueError", "message": "boom"})) is UpstreamError
    assert type(error_from({"kind": "error", "error": "os", "message": "boom"})) is UpstreamError


def test_a_done_entry_round_trips_and_fields_of_another_release_are_dropped() -> None:
    done = RoundDone(done_reason="length", prompt_tokens=3, completion_tokens=2, time_to_first_token_s=0.5)
    assert event_from_dict(event_to_dict(done)) == done
    older = {**event_to_dict(done), "total_duration_s": 1.0, "queue_wait_s": None}  # what the last release wrote
    assert event_from_dict(older) == done
