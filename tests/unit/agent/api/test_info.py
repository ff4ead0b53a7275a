"""/readyz, /api/tags and routing agree on model names (`llama3` is `llama3:latest`) and report what is missing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from pydantic import SecretStr

from agent.api.app import create_app
from agent.backends.base import ModelStatus
from agent.settings import Settings
from tests.unit.agent.conftest import MemoryToolBox, ScriptedBackend


class Ollama(ScriptedBackend):
    """A backend whose Ollama holds exactly `models`."""

    def __init__(self, models: list[str]) -> None:
        super().__init__(["hello"])
        self.models = models

    async def status(self) -> ModelStatus:
        return ModelStatus(True, self.models, "test")


@asynccontextmanager
async def agent(tmp_path: Path, served: str, extra: str, ollama: list[str]) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        model_name=served,
        extra_models=extra,
        model_backend="direct",
        agent_auth="none",
        anonymous_role="admin",
        audit_dir=tmp_path / "audit",
        audit_key=SecretStr("unit-test-audit-key-0123456789"),
        rate_limit_per_minute=0,
    )
    app = create_app(settings, backend=Ollama(ollama), toolbox=MemoryToolBox())  # type: ignore[arg-type]
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://agent") as http:
            yield http


async def test_an_untagged_served_model_is_found_under_its_latest_tag(tmp_path: Path) -> None:
    async with agent(tmp_path, "llama3", "", ["llama3:latest"]) as http:
        ready = await http.get("/readyz")
        tags = (await http.get("/api/tags")).json()["models"]
        chat = await http.post(
            "/api/chat",
            json={"model": "llama3:latest", "messages": [{"role": "user", "content": "hi"}], "stream": False},
        )
    assert ready.status_code == 200 and ready.json()["checks"]["model"] == "ready"
    assert [(m["name"], m["details"]["available"]) for m in tags] == [("llama3", True)]
    assert chat.status_code == 200


async def test_a_missing_model_makes_readyz_degraded_and_names_the_fix(tmp_path: Path) -> None:
    async with agent(tmp_path, "qwen3:4b", "qwen2.5:3b", ["qwen3:4b"]) as http:
        ready = await http.get("/readyz")
        tags = (await http.get("/api/tags")).json()["models"]
        model = (await http.get("/v1/agent/info")).json()["readiness"]["checks"]["model"]
    assert ready.status_code == 503 and ready.json() == {
        "status": "degraded",
        "checks": {"model": "not ready", "mcp_server": "ready"},
    }
    assert model["ok"] is False and model["missing"] == ["qwen2.5:3b"] and "qwen2.5:3b" in model["fix"]
    assert [(m["name"], m["details"]["available"]) for m in tags] == [("qwen3:4b", True), ("qwen2.5:3b", False)]
