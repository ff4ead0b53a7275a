"""Request helpers: model resolution and the opt-in raw-request capture."""

import json
import stat
from pathlib import Path

import pytest

from agent.api.bodies import capture, resolve_model
from agent.errors import BadRequest, ModelNotFound
from agent.settings import Settings


def test_capture_is_off_by_default_and_owner_only_when_on(tmp_path: Path) -> None:
    capture(None, {"messages": []})  # off: writes nothing anywhere
    target = tmp_path / "last-request.json"
    capture(target, {"model": "qwen3:4b", "messages": [{"role": "user", "content": "Ayşe'nin bakiyesi"}]})
    assert json.loads(target.read_text())["messages"][0]["content"] == "Ayşe'nin bakiyesi"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    capture(target, {"model": "x"})
    assert json.loads(target.read_text()) == {"model": "x"}  # only the last request is kept


def test_model_names_resolve_with_and_without_tag() -> None:
    settings = Settings(model_name="qwen3:latest", extra_models="qwen2.5:3b")
    assert resolve_model({"model": "qwen3"}, settings) == "qwen3:latest"
    assert resolve_model({"model": "qwen2.5:3b"}, settings) == "qwen2.5:3b"
    with pytest.raises(ModelNotFound):
        resolve_model({"model": "qwen2.5"}, settings)
    with pytest.raises(BadRequest):
        resolve_model({}, settings)
