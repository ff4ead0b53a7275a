"""RequestContext: one request's id, caller and the worker hosts that ran its rounds, bounded."""

from __future__ import annotations

import dataclasses

import pytest

from agent.context import MAX_WORKER_NAME, MAX_WORKERS_NAMED, RequestContext
from agent_contract.headers import Caller


def test_a_worker_is_noted_once_and_what_it_says_of_itself_is_bounded() -> None:
    context = RequestContext("rid", Caller("ayse", "desk"))
    for name in ("gpu-a", "gpu-b", "gpu-a", "x" * 1000):
        context.note_worker(name)
    assert context.workers == ["gpu-a", "gpu-b", "x" * MAX_WORKER_NAME]
    for n in range(100):
        context.note_worker(f"host-{n}")
    assert len(context.workers) == MAX_WORKERS_NAMED


def test_two_requests_never_share_workers_and_an_id_cannot_change() -> None:
    first, second = RequestContext("a"), RequestContext("b")
    first.note_worker("gpu-a")
    assert second.workers == []
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.request_id = "b"  # type: ignore[misc]
