"""The agent's hands: one long-lived MCP client over streamable HTTP, a cached tool list, checked calls.

The MCP client's transport lives in a task of its own (anyio scopes must be entered and left in one task),
started lazily so the API starts while the MCP server is down, and restarted after a transport failure.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import httpx2
import jsonschema
import structlog
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from agent.errors import DependencyDown
from agent_contract import headers
from agent_contract.headers import Caller
from agent_contract.policy import Policy

log = structlog.get_logger("agent.mcp_client")
request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")
# The authenticated caller: forwarded so the MCP server checks the same policy again.
identity_var: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("identity", default=None)


AUDIT_META = "local-agent/audit"  # where a tool declares its personal-data and free-text arguments


@dataclass(frozen=True)
class ArgumentRules:
    """How the audit log treats a tool's arguments, as the MCP server declares it with the tool."""

    personal: frozenset[str] = frozenset()  # customer names or IDs: pseudonymised, IDs indexed
    free_text: frozenset[str] = frozenset()  # note texts, search patterns: never logged verbatim

    @classmethod
    def from_meta(cls, meta: dict[str, Any] | None) -> ArgumentRules:
        declared = (meta or {}).get(AUDIT_META)
        if not isinstance(declared, dict):
            return cls()
        return cls(
            *(frozenset(str(a) for a in declared.get(k) or [] if isinstance(a, str)) for k in ("personal", "free_text"))
        )


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]
    audit: ArgumentRules = ArgumentRules()

    def ollama(self) -> dict[str, Any]:
        """The tool as Ollama's `tools[]` entry."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.input_schema},
        }

    def validation_error(self, arguments: dict[str, Any]) -> str | None:
        """A short message if `arguments` break the tool's input schema, else None."""
        validator = jsonschema.Draft202012Validator(self.input_schema)
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))
        if not errors:
            return None
        return "; ".join(f"{'.'.join(map(str, e.path)) or 'arguments'}: {e.message}" for e in errors[:3])


@dataclass(frozen=True)
class ToolResult:
    is_error: bool
    text: str
    timed_out: bool = False  # the tool did not answer within TOOL_TIMEOUT_SECONDS (is_error is True too)


class ToolBox:
    """Lists and calls the MCP server's tools; raises DependencyDown when the server cannot be reached."""

    def __init__(
        self,
        url: str,
        token: str | Callable[[], str | None] | None,
        timeout: float,
        cache_seconds: float,
        policy: Policy | None = None,
    ) -> None:
        # A callable token is read on every request (agent_contract.secrets.RotatingSecret.get): a rotated
        # MCP_TOKEN_FILE applies from the next call, without a restart or a reconnect.
        self.token = token if callable(token) else lambda: token
        self.url, self.timeout, self.cache_seconds = url, timeout, cache_seconds
        self.policy = policy  # checked against every fresh tool list: a tool it names may have been misspelt
        self._unknown: list[str] = []
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._error: BaseException | None = None
        self._lock = asyncio.Lock()
        self._tools: list[ToolSpec] = []
        self._listed_at = 0.0
        self._refused = False  # the MCP server's last answer was 401: the tokens differ

    def _http(self) -> httpx2.AsyncClient:
        async def add_request_id(request: httpx2.Request) -> None:
            if token := self.token():
                request.headers[headers.AUTHORIZATION] = f"Bearer {token}"
            if request_id_var.get():
                request.headers[headers.REQUEST_ID] = request_id_var.get()
            identity = identity_var.get()
            if identity is not None:
                request.headers.update(identity.headers())

        async def note_refusal(response: httpx2.Response) -> None:
            # The MCP SDK turns a 401 into "Server returned an error response": keep the status to name it.
            if response.status_code == 401:
                self._refused = True
            elif response.is_success:
                self._refused = False

        return httpx2.AsyncClient(
            timeout=httpx2.Timeout(self.timeout + 5, connect=3.0),
            event_hooks={"request": [add_request_id], "response": [note_refusal]},
        )

    async def _hold(self) -> None:
        try:
            async with (
                self._http() as http,
                Client(streamable_http_client(self.url, http_client=http), read_timeout_seconds=self.timeout) as client,
            ):
                self._client = client
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:
            self._error = exc
        finally:
            self._client = None
            self._ready.set()

    async def _connected(self) -> Client:
        async with self._lock:
            if self._client is None or self._task is None or self._task.done():
                self._ready, self._stop, self._error = asyncio.Event(), asyncio.Event(), None
                self._task = asyncio.create_task(self._hold(), name="mcp-client")
                try:
                    await asyncio.wait_for(self._ready.wait(), self.timeout)
                except TimeoutError:
                    self._reset()
                    raise self._down("no answer") from None
            if self._client is None:
                raise self._down(_describe(self._error))
            return self._client

    def _down(self, why: str) -> DependencyDown:
        if self._refused:
            detail = (
                f"The MCP tool server at {self.url} refused the agent's token (401 Unauthorized): agent-api and "
                "mcp-server hold different MCP_TOKENs. In the compose stack both read the mcp-secret volume and "
                "pick up a new token within a second of `docker compose up -d` (secrets-init rewrites it); "
                "elsewhere give both services the same MCP_TOKEN or MCP_TOKEN_FILE."
            )
        else:
            detail = (
                f"The MCP tool server is unreachable at {self.url} ({why}). Check that the "
                "`mcp-server` service is running and that MCP_URL and MCP_TOKEN match it."
            )
        down = DependencyDown(detail, code="mcp_unavailable")
        down.public = (
            "The company's tools are unavailable right now. Try again in a minute; "
            "if it keeps happening, tell the operator (details in /readyz)."
        )
        return down

    def _reset(self) -> None:
        self._stop.set()
        self._client = None

    async def list_tools(self, refresh: bool = False) -> list[ToolSpec]:
        fresh = time.monotonic() - self._listed_at < self.cache_seconds
        if self._tools and fresh and not refresh:
            return self._tools
        for attempt in (1, 2):
            client = await self._connected()
            try:
                result = await client.list_tools(cache_mode="refresh")
                break
            except Exception as exc:
                self._reset()
                if attempt == 2:
                    raise self._down(_describe(exc)) from exc
        self._tools = [
            ToolSpec(t.name, t.description or "", dict(t.input_schema), ArgumentRules.from_meta(t.meta))
            for t in result.tools
        ]
        self._listed_at = time.monotonic()
        self._check_policy()
        return self._tools

    def _check_policy(self) -> None:
        """Log loudly (once per change) when the policy names tools the MCP server does not have."""
        unknown = self.policy.unknown_tools(t.name for t in self._tools) if self.policy else []
        if unknown and unknown != self._unknown:
            log.error(
                "policy_names_unknown_tools",
                policy=self.policy.source if self.policy else None,
                unknown=unknown,
                hint="a misspelt tool name grants nothing; fix the policy file (AGENT_POLICY_FILE)",
            )
        self._unknown = unknown

    def audit_rules(self, name: str) -> ArgumentRules:
        """The declared audit rules of a tool from the cached list (no network: used while writing a record)."""
        return next((t.audit for t in self._tools if t.name == name), ArgumentRules())

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Run a tool; an expected tool failure is a ToolResult with is_error, a dead server raises."""
        client = await self._connected()
        try:
            result = await client.call_tool(name, arguments, read_timeout_seconds=self.timeout)
        except Exception as exc:
            if _is_timeout(exc):
                return ToolResult(
                    True, f"The tool {name} did not answer within {self.timeout:g} seconds.", timed_out=True
                )
            self._reset()
            raise self._down(_describe(exc)) from exc
        text = "\n".join(getattr(block, "text", "") for block in result.content if getattr(block, "text", ""))
        if not text and result.structured_content is not None:
            text = json.dumps(result.structured_content, ensure_ascii=False)
        return ToolResult(bool(result.is_error), text)

    async def problem(self) -> str | None:
        """What keeps the tools from working (the operator's message, for /readyz), or None."""
        try:
            await self.list_tools(refresh=True)
        except DependencyDown as exc:
            return str(exc)
        return None

    async def aclose(self) -> None:
        self._reset()
        if self._task is not None:
            await asyncio.wait([self._task], timeout=5)


def _is_timeout(exc: BaseException) -> bool:
    return getattr(getattr(exc, "error", None), "code", None) == -32001 or isinstance(exc, TimeoutError)


def _leaves(exc: BaseException) -> Iterable[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for sub in exc.exceptions:
            yield from _leaves(sub)
    else:
        yield exc


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return "not connected"
    leaf = next(iter(_leaves(exc)), exc)
    text = str(leaf)[:200]
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__
