"""The start-up checks of `local-agent` and the gate that answers chats with a failed check's fix.

On a laptop nobody reads logs: when the model server is not running or the model is not there, every chat
answers with the exact fix ("run `ollama pull qwen3:4b`") as the assistant's message, in any client, and the
checks run again before the next chat, so the fix takes effect without a restart. The checks speak the
protocol the rounds use (MODEL_PROTOCOL at MODEL_URL, else Ollama at OLLAMA_URL), as agent-api's /readyz does.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx

from agent.backends.base import ModelBackend, ModelStatus, RoundDone, RoundEvent, RoundRequest, TextDelta
from agent.backends.engine import engine_status
from agent.backends.models import has_model
from agent.backends.ollama import warm_up
from agent.context import RequestContext
from agent.settings import Settings

RECHECK_SECONDS = 2.0  # a chat after a fix sees it; a burst of chats does not hammer Ollama


@dataclass
class Step:
    status: str  # "ok", "kept", "skipped", "FAILED"
    text: str

    def line(self) -> str:
        return f"  [{self.status}] {self.text}"


@dataclass
class Checks:
    """The model server answers, serves the model, has it loaded: in order, stopping at the first failure."""

    settings: Settings
    problem: str | None = "the start-up checks have not run yet"
    checked_at: float = 0.0
    _http: httpx.AsyncClient | None = field(default=None, repr=False)

    @property
    def http(self) -> httpx.AsyncClient:
        """Made on first use, in the event loop that uses it (start-up and serving run in different loops)."""
        if self._http is None:
            self._http = httpx.AsyncClient(
                timeout=httpx.Timeout(self.settings.round_timeout_seconds, connect=3.0),
                headers=self.settings.model_headers(),
            )
        return self._http

    async def reset_client(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    @property
    def url(self) -> str:
        return self.settings.model_endpoint()

    @property
    def ollama(self) -> bool:
        return self.settings.model_protocol == "ollama"

    async def run(self) -> list[Step]:
        self.checked_at = time.monotonic()
        model = self.settings.model_name
        status = await engine_status(self.http, self.settings)
        if not status.reachable:
            return self._failed(self._unreachable())
        if self.ollama:
            steps = [Step("ok", f"Ollama {status.version or '?'} answers at {self.url}")]
        else:
            steps = [Step("ok", f"the OpenAI-protocol model server answers at {self.url}")]
        if not has_model(status.models, model):
            return [*steps, *self._failed(self._missing(model, status.models))]
        steps.append(Step("ok", f"model {model} is pulled" if self.ollama else f"model {model} is served"))
        if status.detail:
            steps.append(Step("note", status.detail))
        steps.append(await self._warm(model))
        if steps[-1].status == "FAILED":
            self.problem = steps[-1].text
            return steps
        self.problem = None
        return steps

    def _unreachable(self) -> str:
        if self.ollama:
            return (
                f"Ollama is not answering at {self.url}: install Ollama and start it (`ollama serve`), "
                "or point OLLAMA_URL at it (no Ollama? any OpenAI-protocol server: MODEL_PROTOCOL=openai MODEL_URL=…)"
            )
        return (
            f"the model server (MODEL_PROTOCOL=openai) is not answering at {self.url}: start it "
            "(e.g. `scripts/llama-server serve` from a source checkout), or point MODEL_URL at it"
        )

    def _missing(self, model: str, served: list[str]) -> str:
        if self.ollama:
            return f"model {model} is not in Ollama at {self.url}: run `ollama pull {model}`"
        names = ", ".join(served) or "none"
        return f"model {model} is not served at {self.url} (it serves: {names}): set MODEL_NAME to one of them"

    def _failed(self, problem: str) -> list[Step]:
        self.problem = problem
        return [Step("FAILED", f"{problem} (chats answer with this until it is fixed)")]

    async def _warm(self, model: str) -> Step:
        if not self.ollama:  # llama-server, vLLM and the like load their model when they start
            return Step("skipped", f"warm-up: an OpenAI-protocol server loads {model} when it starts")
        if await self._loaded(model):
            return Step("skipped", f"warm-up: {model} is already loaded")
        started = time.monotonic()
        ok, detail = await warm_up(self.http, self.url, model, self.settings.round_options())
        if not ok:
            return Step("FAILED", f"model {model} did not load in Ollama at {self.url}: {detail}")
        return Step("ok", f"model {model} loaded in {time.monotonic() - started:.1f} s")

    async def _loaded(self, model: str) -> bool:
        try:
            ps = (await self.http.get(f"{self.url}/api/ps", timeout=3.0)).json()
        except (httpx.HTTPError, ValueError):
            return False
        return has_model([str(m.get("name", "")) for m in ps.get("models", [])], model)

    async def refresh(self) -> str | None:
        """Before a chat: run the checks again when the last one failed (after a fix, the chat just works)."""
        if self.problem is not None and time.monotonic() - self.checked_at >= RECHECK_SECONDS:
            await self.run()
        return self.problem


class GatedBackend:
    """The direct backend (either protocol) behind the start-up checks: a failed check becomes the assistant's
    answer."""

    def __init__(self, inner: ModelBackend, checks: Checks) -> None:
        self.inner, self.checks = inner, checks

    async def stream_round(
        self, request: RoundRequest, context: RequestContext | None = None
    ) -> AsyncIterator[RoundEvent]:
        problem = await self.checks.refresh()
        if problem is not None:
            yield TextDelta(f"local-agent is not ready: {problem}. Then ask again; no restart needed.")
            yield RoundDone(done_reason="stop")
            return
        async for event in self.inner.stream_round(request, context):
            yield event

    async def status(self) -> ModelStatus:
        return await self.inner.status()

    async def aclose(self) -> None:
        await self.checks.reset_client()
        await self.inner.aclose()
