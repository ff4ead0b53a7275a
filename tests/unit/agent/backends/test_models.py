"""The one model-name matcher: a name without a tag is `name:latest`, everywhere the agent compares names."""

from __future__ import annotations

import pytest

from agent.backends.models import canonical, find_model, has_model


def test_a_missing_tag_means_latest() -> None:
    assert canonical("llama3") == canonical("llama3:latest") == "llama3:latest"
    assert canonical("qwen3:4b") == "qwen3:4b"


@pytest.mark.parametrize(
    ("wanted", "available", "found"),
    [
        ("llama3", ["llama3:latest"], "llama3:latest"),
        ("llama3:latest", ["llama3"], "llama3"),  # answered as the list spells it
        ("qwen3:4b", ["qwen3:8b", "qwen3:4b"], "qwen3:4b"),
        ("qwen3", ["qwen3:4b"], None),  # `qwen3` is qwen3:latest, not any qwen3
        ("llama3:8b", ["llama3:latest"], None),
    ],
)
def test_find_model(wanted: str, available: list[str], found: str | None) -> None:
    assert find_model(wanted, available) == found
    assert has_model(available, wanted) is (found is not None)
