"""What the routes depend on: built once by create_app and its lifespan, handed to each route by FastAPI.

The routers (agent.api.chat, agent.api.info) declare these as parameters instead of closing over create_app's
locals or reading `app.state` themselves, so a route says in its signature what it uses.
"""

from __future__ import annotations

from typing import Annotated, cast

from fastapi import Depends, Request

from agent.backends.base import ModelBackend
from agent.loop.engine import ToolLoop
from agent.loop.tasks import TaskRunner
from agent.mcp_client import ToolBox
from agent.settings import Settings


def _settings(request: Request) -> Settings:
    return cast(Settings, request.app.state.settings)


def _backend(request: Request) -> ModelBackend:
    return cast(ModelBackend, request.app.state.backend)


def _toolbox(request: Request) -> ToolBox:
    return cast(ToolBox, request.app.state.toolbox)


def _loop(request: Request) -> ToolLoop:
    return cast(ToolLoop, request.app.state.loop)


def _tasks(request: Request) -> TaskRunner:
    return cast(TaskRunner, request.app.state.tasks)


def _started(request: Request) -> int:
    return cast(int, request.app.state.started)


SettingsDep = Annotated[Settings, Depends(_settings)]
BackendDep = Annotated[ModelBackend, Depends(_backend)]
ToolBoxDep = Annotated[ToolBox, Depends(_toolbox)]
LoopDep = Annotated[ToolLoop, Depends(_loop)]
TasksDep = Annotated[TaskRunner, Depends(_tasks)]
StartedDep = Annotated[int, Depends(_started)]  # epoch seconds the app was created: the models' `created`
