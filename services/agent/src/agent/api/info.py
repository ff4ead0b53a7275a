"""The API's informational routes: model lists and details (OpenAI and Ollama flavours), version, health, readiness."""

from __future__ import annotations

import hashlib
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from agent import __version__
from agent.api import access, readiness
from agent.api.bodies import read_json, resolve_model
from agent.api.deps import BackendDep, SettingsDep, StartedDep, ToolBoxDep
from agent.backends.base import ModelStatus
from agent.backends.models import has_model
from agent.errors import AgentError, ModelNotFound
from agent.loop.prompt import SYSTEM_PROMPT
from agent_contract.fingerprint import tool_fingerprints
from agent_contract.policy import ALL_TOOLS, Policy

router = APIRouter()


@router.get("/v1/models")
async def openai_models(settings: SettingsDep, started: StartedDep) -> dict[str, Any]:
    data = [
        {"id": m, "object": "model", "created": started, "owned_by": "local-agent"} for m in settings.served_models()
    ]
    return {"object": "list", "data": data}


@router.get("/api/tags")
async def ollama_tags(settings: SettingsDep, backend: BackendDep) -> dict[str, Any]:
    status: ModelStatus = await backend.status()
    models = []
    for name in settings.served_models():
        entry = _ollama_model(name)
        entry["details"]["available"] = has_model(status.models, name)
        models.append(entry)
    return {"models": models}


@router.get("/v1/models/{model_id:path}")
async def openai_model(model_id: str, settings: SettingsDep, started: StartedDep) -> dict[str, Any]:
    if model_id not in settings.served_models():
        raise ModelNotFound(f"The model `{model_id}` does not exist or is not served by this agent.")
    return {"id": model_id, "object": "model", "created": started, "owned_by": "local-agent"}


@router.get("/api/ps")
async def ollama_ps(settings: SettingsDep, backend: BackendDep) -> dict[str, Any]:
    """Served models the runtime has: Open WebUI asks on every model-list refresh."""
    status: ModelStatus = await backend.status()
    loaded = [m for m in settings.served_models() if m in status.models]
    return {"models": [_ollama_model(m) | {"expires_at": "0001-01-01T00:00:00Z", "size_vram": 0} for m in loaded]}


@router.post("/api/show")
async def ollama_show(request: Request, settings: SettingsDep) -> dict[str, Any]:
    data = await read_json(request, settings.max_body_bytes)
    model = resolve_model({"model": data.get("model") or data.get("name")}, settings)
    return {
        "modelfile": "",
        "parameters": "",
        "template": "",
        "details": _ollama_model(model)["details"],
        "model_info": {"general.architecture": model.split(":")[0], "local_agent.served": True},
        "capabilities": ["completion"],  # tools run inside the agent: clients send none of their own
        "modified_at": "1970-01-01T00:00:00Z",
    }


@router.get("/api/version")
async def ollama_version() -> dict[str, str]:
    return {"version": __version__}


@router.get("/v1/agent/info")
async def agent_info(
    request: Request, settings: SettingsDep, backend: BackendDep, toolbox: ToolBoxDep
) -> dict[str, Any]:
    """What an evaluation run must record: model, runtime version, prompt and tool-description fingerprints.
    The tools are the caller's own (those their role may use); an admin also gets the readiness details."""
    status: ModelStatus = await backend.status()
    role: str = request.state.identity.role
    policy: Policy = request.app.state.security.policy
    info: dict[str, Any] = {
        "agent_version": __version__,
        "model": settings.model_name,
        "models": settings.served_models(),
        "ollama_version": status.version,
        "engine": status.engine or None,
        "engine_scripted": status.scripted,
        "system_prompt_sha256": hashlib.sha256(SYSTEM_PROMPT.encode()).hexdigest(),
        "role": role,
        "tool_calling": settings.tool_calling,
        "tool_decision": settings.tool_decision,
    }
    try:
        tools = await toolbox.list_tools(context=access.request_context(request))
        info |= tool_fingerprints([t for t in tools if policy.allows(role, t.name)])
    except AgentError as exc:  # the tool server is down: the rest still answers, the readiness says why
        info["tools_error"] = exc.client_message
    info |= {"max_tool_rounds": settings.max_tool_rounds, "options": settings.round_options()}
    if ALL_TOOLS in policy.roles.get(role, frozenset()):
        ready, _ = readiness.summary(checks := await readiness.details(settings, backend, toolbox))
        info["readiness"] = {"status": "ready" if ready else "degraded", "checks": checks}
    return info


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request, settings: SettingsDep, backend: BackendDep, toolbox: ToolBoxDep) -> JSONResponse:
    """Open to probes: per component only ready / not ready; the details go to the log (agent.api.readiness)."""
    checks = await readiness.details(settings, backend, toolbox)
    request.app.state.readiness.observe(checks)
    ready, body = readiness.summary(checks)
    return JSONResponse(body, status_code=200 if ready else 503)


def _ollama_model(name: str) -> dict[str, Any]:
    """One served model in Ollama's list shape (/api/tags, /api/ps)."""
    return {
        "name": name,
        "model": name,
        "modified_at": "1970-01-01T00:00:00Z",
        "size": 0,
        "digest": "",
        "details": {
            "parent_model": "",
            "format": "gguf",
            "family": name.split(":")[0],
            "families": [name.split(":")[0]],
            "parameter_size": "",
            "quantization_level": "",
        },
    }
