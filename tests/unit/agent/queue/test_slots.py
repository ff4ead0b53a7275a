"""A worker's round slots: taken by the RQ thread before a dequeue, claimed by the round, freed when it ends."""

from __future__ import annotations

import threading

import pytest

from agent.queue.slots import Slots


def test_a_worker_takes_no_more_slots_than_it_has_until_a_round_frees_one() -> None:
    slots = Slots(2)
    releases = []
    for _ in range(2):
        assert slots.take(timeout=0)
        releases.append(slots.claim())
    assert not slots.take(timeout=0)  # both rounds still running: the RQ thread does not dequeue
    freer = threading.Timer(0.05, releases[0])  # the round ends on the worker's event-loop thread
    freer.start()
    assert slots.take(timeout=5)
    freer.join()


def test_a_slot_no_round_claimed_goes_back() -> None:
    slots = Slots(1)
    assert slots.take(timeout=0)
    slots.settle()  # empty queue, or the job failed before run_round
    assert slots.take(timeout=0)
    slots.claim()
    slots.settle()  # claimed: the round frees it, not the RQ thread
    assert not slots.take(timeout=0)


def test_a_round_needs_a_taken_slot_and_a_worker_at_least_one() -> None:
    with pytest.raises(RuntimeError, match="slot the worker took"):
        Slots(1).claim()
    with pytest.raises(ValueError, match="at least one slot"):
        Slots(0)
