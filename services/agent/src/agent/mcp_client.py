"""The agent's hands: one long-lived MCP client over streamable HTTP, a cached tool list, checked calls.

The MCP client's transport lives in a task of its own (anyio scopes must be entered and left in one task),
started lazily so the API starts while the MCP server is down, and restarted after a transport failure.

A restarting tool server costs a call latency, not its answer: a call whose request never left (no connection,
or the reconnect failed) waits up to `reconnect_seconds` for the server to accept the agent again and is sent
once more. A call whose request bytes had started to go out is never repeated: the tool may have run (some
write, like `not_kaydet`), so that failure is reported instead.

Each call is given its request's RequestContext: its HTTP request carries that request's id and caller. The MCP
SDK's `call_tool` and `list_tools` take neither headers nor httpx extensions, and its transport sends each request
in the caller's contextvars context (`post_writer`: `sender_ctx.run`): that is the SDK's only way from a call to its
HTTP request, so `_current` carries the call (its context and whether it went out) for exactly that one SDK call,
set and reset here. It is this module's own, never read or set by another layer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from typing import Any

import httpx2
import structlog
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from agent.context import RequestContext
from agent.errors import DependencyDown
from agent.toolspec import ArgumentRules, ToolResult, ToolSpec
from agent_contract import headers
from agent_contract.policy import Policy

log = structlog.get_logger("agent.mcp_client")
RECONNECT_POLL = 0.25  # s between attempts to reach a restarting MCP server
CONNECT_WAIT = 10.0  # s at least for the MCP handshake: a short TOOL_TIMEOUT_SECONDS bounds tools, not a busy start


class _Call:
    """One SDK call under way: the request it is made for, and whether its HTTP request started to go out (then
    a tool may have run and must not be repeated)."""

    def __init__(self, context: RequestContext | None) -> None:
        self.context = context
        self.sent = False


# The SDK call under way in this task, set only around it (_calling): see the module docstring.
_current: ContextVar[_Call | None] = ContextVar("mcp_call", default=None)


async def _note_sending(call: _Call, event: str, info: dict[str, Any]) -> None:
    if event.startswith("http11.send_request_headers") or event.startswith("http2.send_request_headers"):
        call.sent = True


class ToolBox:
    """Lists and calls the MCP server's tools; raises DependencyDown when the server cannot be reached."""

    def __init__(
        self,
        url: str,
        token: str | Callable[[], str | None] | None,
        timeout: float,
        cache_seconds: float,
        policy: Policy | None = None,
        reconnect_seconds: float = 0.0,
    ) -> None:
        # A callable token is read on every request (agent_contract.secrets.RotatingSecret.get): a rotated
        # MCP_TOKEN_FILE applies from the next call, without a restart or a reconnect.
        self.token = token if callable(token) else lambda: token
        self.url, self.timeout, self.cache_seconds = url, timeout, cache_seconds
        self.reconnect_seconds = reconnect_seconds  # how long a call that never reached the server waits for it
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
            if (call := _current.get()) is None:
                return  # the connection's own requests (the handshake, its stream): no request's
            request.extensions["trace"] = functools.partial(_note_sending, call)
            if call.context is None:
                return
            if call.context.request_id:
                request.headers[headers.REQUEST_ID] = call.context.request_id
            if call.context.identity is not None:
                request.headers.update(call.context.identity.headers())

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
                    await asyncio.wait_for(self._ready.wait(), max(self.timeout, CONNECT_WAIT))
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
            "if it keeps happening, tell the operator."
        )
        down.public_tr = (
            "Şirketin araçlarına şu an ulaşılamıyor. Bir dakika sonra yeniden deneyin; sürerse operatöre haber verin."
        )
        return down

    def _reset(self) -> None:
        self._stop.set()
        self._client = None

    async def list_tools(
        self, refresh: bool = False, wait: bool = True, context: RequestContext | None = None
    ) -> list[ToolSpec]:
        """The server's tools, cached for cache_seconds (a list fetched for the request `context` carries its id).
        Listing changes nothing, so a failed list is tried again: at once (a connection a restart closed), and with
        `wait` until the server is back (reconnect_seconds)."""
        fresh = time.monotonic() - self._listed_at < self.cache_seconds
        if self._tools and fresh and not refresh:
            return self._tools
        try:
            result = await self._list_once(context)
        except DependencyDown:
            await self._reconnect(self.reconnect_seconds if wait else 0.0)
            result = await self._list_once(context)
        self._tools = [
            ToolSpec(t.name, t.description or "", dict(t.input_schema), ArgumentRules.from_meta(t.meta))
            for t in result.tools
        ]
        self._listed_at = time.monotonic()
        self._check_policy()
        return self._tools

    async def _list_once(self, context: RequestContext | None) -> Any:
        client = await self._connected()
        try:
            with _calling(context):
                return await client.list_tools(cache_mode="refresh")
        except Exception as exc:
            self._reset()
            raise self._down(_describe(exc)) from exc

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

    async def call(self, name: str, arguments: dict[str, Any], context: RequestContext | None = None) -> ToolResult:
        """Run a tool for the request `context` (its id and caller go with the call); an expected tool failure is a
        ToolResult with is_error, a dead server raises. A call that never reached the server is sent once more, as
        soon as the server is back within reconnect_seconds."""
        try:
            return await self._call_once(name, arguments, context)
        except _NotSent as exc:
            log.info("tool_call_retrying", tool=name, why=str(exc.down))
            await self._reconnect(self.reconnect_seconds)
        try:
            return await self._call_once(name, arguments, context)
        except _NotSent as exc:
            raise exc.down from exc.__cause__

    async def _call_once(self, name: str, arguments: dict[str, Any], context: RequestContext | None) -> ToolResult:
        try:
            client = await self._connected()
        except DependencyDown as exc:
            raise _NotSent(exc) from exc
        with _calling(context) as call:
            try:
                result = await client.call_tool(name, arguments, read_timeout_seconds=self.timeout)
            except Exception as exc:
                if _is_timeout(exc):
                    return ToolResult(
                        True, f"The tool {name} did not answer within {self.timeout:g} seconds.", timed_out=True
                    )
                self._reset()
                down = self._down(_describe(exc))
                if not call.sent:
                    raise _NotSent(down) from exc
                raise down from exc
        text = "\n".join(getattr(block, "text", "") for block in result.content if getattr(block, "text", ""))
        if not text and result.structured_content is not None:
            text = json.dumps(result.structured_content, ensure_ascii=False)
        return ToolResult(bool(result.is_error), text)

    async def _reconnect(self, seconds: float) -> None:
        """Try to reach the MCP server at once, then every RECONNECT_POLL s for up to `seconds`; the caller's next
        attempt reports it if it is still down."""
        deadline = time.monotonic() + seconds
        while True:
            with contextlib.suppress(DependencyDown):
                await self._connected()
                return
            if self._refused or time.monotonic() >= deadline:  # a refused token does not heal by waiting
                return
            await asyncio.sleep(RECONNECT_POLL)

    async def problem(self) -> str | None:
        """What keeps the tools from working (the operator's message, for /readyz), or None."""
        try:
            await self.list_tools(refresh=True, wait=False)  # /readyz answers now, it does not wait for a restart
        except DependencyDown as exc:
            return str(exc)
        return None

    async def aclose(self) -> None:
        self._reset()
        if self._task is not None:
            await asyncio.wait([self._task], timeout=5)


@contextlib.contextmanager
def _calling(context: RequestContext | None) -> Iterator[_Call]:
    """Around one SDK call, after the connection is up (the connection's task must not inherit it): the call the
    request hook sees."""
    call = _Call(context)
    token = _current.set(call)
    try:
        yield call
    finally:
        _current.reset(token)


class _NotSent(Exception):
    """A tool call failed before its request left: safe to send again."""

    def __init__(self, down: DependencyDown) -> None:
        super().__init__(str(down))
        self.down = down


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
