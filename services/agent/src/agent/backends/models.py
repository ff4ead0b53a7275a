"""Ollama model names: the one rule for "is this the same model", used by routing, /readyz, /api/tags, the worker.

Ollama names a model `name:tag`, and a name without a tag means `name:latest`: `llama3` and
`llama3:latest` are one model wherever the agent compares names.
"""

from __future__ import annotations

from collections.abc import Iterable

DEFAULT_TAG = "latest"


def canonical(name: str) -> str:
    """`name:tag`, with `:latest` added when the name has no tag."""
    name = name.strip()
    return name if ":" in name else f"{name}:{DEFAULT_TAG}"


def find_model(wanted: str, available: Iterable[str]) -> str | None:
    """The entry of `available` that names the same model as `wanted`, as `available` spells it; else None."""
    key = canonical(wanted)
    return next((name for name in available if canonical(name) == key), None)


def has_model(available: Iterable[str], wanted: str) -> bool:
    return find_model(wanted, available) is not None
