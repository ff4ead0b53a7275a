"""Every test layer: the session's round-signing keys in the environment, so every agent-api and agent-worker a
test starts (and every Settings() built in-process) signs and verifies rounds as the shipped stack does."""

from __future__ import annotations

import os

import pytest

from tests.support import round_keys


def pytest_configure(config: pytest.Config) -> None:
    os.environ.update(round_keys.env())
