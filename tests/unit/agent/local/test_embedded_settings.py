"""local-agent reads every setting from the environment as agent-api does, except the few one-machine choices
docs/operating.md lists (the issue: MODEL_PROTOCOL and MODEL_URL were documented and ignored)."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest

from agent.local.main import embedded_settings
from agent.local.state import State
from agent.settings import Settings

# What local-agent sets itself: the list docs/operating.md gives ("the one-machine choices").
EMBEDDED = {"model_backend", "mcp_url", "mcp_token", "agent_auth", "agent_keys_file", "audit_dir", "audit_key_file",
            "rate_limit_backend", "log_level"}  # fmt: skip


def other_value(name: str) -> str | None:
    """A value other than the default for a field of a simple type, as an environment variable would give it."""
    info = Settings.model_fields[name]
    default, kind = info.default, info.annotation
    if typing.get_origin(kind) is typing.Literal:
        return next((str(v) for v in typing.get_args(kind) if v != default), None)
    if isinstance(default, bool):
        return str(not default).lower()
    if isinstance(default, int | float):
        return str(default + 1)
    return None


def test_every_other_setting_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    changed = {}
    for name in Settings.model_fields:
        value = other_value(name)
        if value is not None and name not in EMBEDDED:
            monkeypatch.setenv(name.upper(), value)
            changed[name] = value
    monkeypatch.setenv("MODEL_URL", "http://127.0.0.1:8080")
    assert {"model_protocol", "round_timeout_seconds", "request_read_timeout_seconds"} <= set(changed)
    local, service = embedded_settings(State(tmp_path), "http://127.0.0.1:9/mcp", "t" * 32), Settings()
    ours = {k: v for k, v in local.model_dump().items() if k not in EMBEDDED}
    assert ours == {k: v for k, v in service.model_dump().items() if k not in EMBEDDED}
    assert local.model_protocol == "openai" and local.model_endpoint() == "http://127.0.0.1:8080"


def test_the_one_machine_choices_are_the_documented_ones() -> None:
    text = (Path(__file__).resolve().parents[4] / "docs/operating.md").read_text(encoding="utf-8")
    for name in EMBEDDED - {"mcp_token"}:
        assert f"`{name.upper()}" in text, name
