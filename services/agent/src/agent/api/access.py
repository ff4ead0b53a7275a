"""The API's access layer: authenticate every protected request, rate-limit chats, build the caller's
tool permissions from the policy, forward the identity to the MCP server and audit every chat request.

`install(app, settings)` adds one router dependency (`guard`) to every route declared after it; routes
that must stay open for probes and scrapes are listed in OPEN_PATHS.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import structlog
from fastapi import Depends, FastAPI, Request

from agent import metrics
from agent.api.admission import check_body_type, check_origin, parse_origins
from agent.api.trail import Trail, capped
from agent.backends.base import Message, last_user_text
from agent.context import RequestContext
from agent.errors import AgentError, Unauthorized
from agent.loop.events import Caller, LoopEvent
from agent.loop.tasks import ClientTask
from agent.security.audit import AuditLog, resolve_key
from agent.security.audit_commit import GroupCommit
from agent.security.auth import Authenticator, Identity
from agent.security.flood import FLOOD_STATUSES, FloodGate
from agent.security.names import RefusedName, escaped
from agent.security.privacy import Pseudonymizer, pseudonymizer
from agent.security.ratelimit import RateLimiter, enforce, make_limiter
from agent.settings import Settings
from agent.toolspec import ArgumentRules
from agent_contract.headers import Caller as Identified
from agent_contract.policy import Policy, load_policy
from agent_contract.secrets import read_secret

log = structlog.get_logger("agent.api.access")
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/api/version"})
CHAT_PATHS = frozenset({"/v1/chat/completions", "/api/chat"})


@dataclass
class Security:
    settings: Settings
    policy: Policy
    authenticator: Authenticator
    limiter: RateLimiter
    audit: AuditLog
    pseudonyms: Pseudonymizer
    flood: FloodGate = field(default_factory=FloodGate)
    origins: frozenset[str] = frozenset()  # ALLOWED_ORIGINS, parsed once
    commit: GroupCommit = field(init=False)  # the API's writer of `audit`: records ending together share an fsync

    def __post_init__(self) -> None:
        self.commit = GroupCommit(self.audit)

    @classmethod
    def build(cls, settings: Settings) -> Security:
        policy = load_policy(settings.agent_policy_file)
        key = resolve_key(
            settings.audit_dir, read_secret(settings.audit_key, None, "AUDIT_KEY"), settings.audit_key_file, create=True
        )
        audit = AuditLog(
            settings.audit_dir,
            key,
            rotate_bytes=settings.audit_rotate_bytes,
            retention_days=settings.audit_retention_days,
        )
        return cls(
            settings,
            policy,
            Authenticator(settings, policy),
            make_limiter(settings),
            audit,
            pseudonymizer(settings, key),
            origins=parse_origins(settings.allowed_origins),
        )


def install(app: FastAPI, settings: Settings) -> Security:
    security = Security.build(settings)
    app.state.security = security
    app.router.dependencies.append(Depends(guard))
    for warning in security.authenticator.startup_warnings():
        log.warning("auth_config", message=warning)
    log.info(
        "access_ready",
        auth=settings.agent_auth,
        policy=security.policy.source,
        roles=sorted(security.policy.roles),
        audit_dir=str(settings.audit_dir),
    )
    return security


async def guard(request: Request) -> None:
    """Runs before every protected route: 401 without a valid identity, 403 from a foreign web page
    (trusted_header), 415 for a body that is not JSON, 429 past the user's rate."""
    request.state.started = time.monotonic()
    if request.url.path in OPEN_PATHS:
        return
    security: Security = request.app.state.security
    try:
        identity = security.authenticator.authenticate(request, chat=request.url.path in CHAT_PATHS)
    except Unauthorized:
        metrics.REJECTED.labels("unauthorized").inc()
        raise
    request.state.identity = identity
    structlog.contextvars.bind_contextvars(user=identity.user, role=identity.role)
    _admit(request, security)
    if request.url.path in CHAT_PATHS and security.settings.rate_limit_per_minute:
        who = identity.limit_key if identity.method != "none" else f"anonymous@{identity.client}"
        try:
            await enforce(security.limiter, who, security.settings.rate_limit_per_minute)
        except AgentError as exc:
            metrics.REJECTED.labels("rate_limited" if exc.status == 429 else "limiter_unavailable").inc()
            raise


def _admit(request: Request, security: Security) -> None:
    """Refuse what a foreign web page could send with the user's ambient SSO session (agent.api.admission)."""
    try:
        if security.settings.agent_auth == "trusted_header":
            check_origin(request.headers, security.origins)
        check_body_type(request.method, request.headers)
    except AgentError as exc:
        metrics.REJECTED.labels("foreign_origin" if exc.status == 403 else "not_json").inc()
        raise


def caller(request: Request) -> Caller:
    """The loop's view of the authenticated caller: the tool list is built from this, never by the model."""
    identity: Identity = request.state.identity
    policy = request.app.state.security.policy
    share = identity.limit_key if identity.method != "none" else ""  # AGENT_AUTH=none: no users to be fair between
    return Caller(identity.user, identity.role, policy.checker(identity.role), share)


def request_context(request: Request) -> RequestContext:
    """The request's context for the layers below (the loop, the MCP client, the backends): its id, and the caller
    the MCP server is told of, so it checks the same policy again."""
    identity: Identity | None = getattr(request.state, "identity", None)
    who = Identified(identity.user, identity.role) if identity is not None else None
    return RequestContext(getattr(request.state, "request_id", ""), who)


def _base_record(request: Request, status: int, error: str | None) -> dict[str, Any]:
    identity: Identity | None = getattr(request.state, "identity", None)
    started = getattr(request.state, "started", time.monotonic())
    return {
        "event": "request",
        "request_id": getattr(request.state, "request_id", None) or None,
        "client_request_id": getattr(request.state, "client_request_id", None),
        "endpoint": request.url.path,
        "user": identity.user if identity else None,
        "role": identity.role if identity else None,
        "auth": identity.method if identity else None,
        "via": identity.via if identity else None,
        "client": identity.client if identity else request.app.state.security.authenticator.client_of(request),
        "status": status,
        "error": error,
        "latency_ms": round((time.monotonic() - started) * 1000, 1),
    }


async def _write(request: Request, record: dict[str, Any]) -> None:
    """Returns once the records are durable (their fsync returned): the response ends only after it. They are
    queued before the first await, so a request cancelled while it waits (its client gone) still has its record."""
    request.state.audited = True
    security: Security = request.app.state.security
    pending = security.commit.submit([*security.flood.due(), capped(record)])
    for future in pending:
        future.add_done_callback(_failed)
    await asyncio.wait(pending)


def _failed(future: asyncio.Future[dict[str, Any]]) -> None:
    """The answer is already out: a record that could not be written is made loud (metric, error log) instead."""
    exc = None if future.cancelled() else future.exception()
    if exc is not None:
        metrics.AUDIT_FAILURES.inc()
        log.error("audit_write_failed", error=f"{type(exc).__name__}: {exc}")


def flush(security: Security) -> None:
    """At shutdown: write the records still waiting, then the summaries of refusal floods still open (nothing
    counted is lost)."""
    security.commit.close()
    for summary in security.flood.due(everything=True):
        try:
            security.audit.append(summary)
        except Exception as exc:
            metrics.AUDIT_FAILURES.inc()
            log.error("audit_write_failed", error=f"{type(exc).__name__}: {exc}")


class Audited:
    """The loop's events passed through under the audit trail, whose one record is written when they end, however
    they end. `aclose()` ends them too, before their first event included: a generator alone cannot record that
    (a body never started has no `finally` to run), and a chat screen's stream sends its first line before it pulls
    an event. The chat routes' responses close it as they end, so no record waits for the garbage collector. Its
    `workers` are those the queue noted in the `context` the loop ran under."""

    def __init__(
        self,
        request: Request,
        model: str,
        conversation: list[Message],
        events: AsyncIterator[LoopEvent],
        context: RequestContext,
        task: ClientTask | None = None,
    ) -> None:
        toolbox = getattr(request.app.state, "toolbox", None)
        rules = toolbox.audit_rules if toolbox else lambda name: ArgumentRules()
        self.request, self.model, self.conversation, self.task = request, model, conversation, task
        self.security: Security = request.app.state.security
        self.trail = Trail(rules, workers=context.workers)
        self._events = self._pass(events)
        self._started = False

    def __aiter__(self) -> Audited:
        return self

    async def __anext__(self) -> LoopEvent:
        self._started = True
        return await anext(self._events)

    async def aclose(self) -> None:
        """Started, the events write their record as they close (none if it is written already); never started,
        the record is written here: only a client gone leaves a stream unread."""
        unstarted, self._started = not self._started, True
        await self._events.aclose()
        if unstarted:
            await self._record(499, "client_closed")

    async def _pass(self, events: AsyncIterator[LoopEvent]) -> AsyncGenerator[LoopEvent, None]:
        status, error = 200, None
        try:
            async for event in events:
                self.trail.observe(event, self.security.pseudonyms)
                yield event
        except AgentError as exc:  # the client reads exc.client_message; the operator's detail is logged here
            status, error = exc.status, exc.code or type(exc).__name__
            log.warning("request_failed", status=exc.status, error=type(exc).__name__, message=exc.message)
            self.request.state.failure_logged = True  # the exception handler answering it must not log it again
            raise
        except BaseException as exc:  # cancelled by a client that left, or a bug: still one record
            if self.trail.answer_sha256 is None or isinstance(exc, Exception):  # closed after the answer: it was served
                status, error = (499, "client_closed") if not isinstance(exc, Exception) else (500, type(exc).__name__)
            raise
        finally:
            await self._record(status, error)

    async def _record(self, status: int, error: str | None) -> None:
        content = _content(self.security, self.model, self.conversation, self.trail, self.task)
        await _write(self.request, _base_record(self.request, status, error) | content)


def _content(
    security: Security, model: str, conversation: list[Message], trail: Trail, task: ClientTask | None
) -> dict[str, Any]:
    """What was asked and done. A client task is recorded as one, never as the user's question, and with its
    prompt's hash like every request; not its text, which carries the chat's answers (names the pseudonymiser
    never met in this request)."""
    base = {
        "model": model,
        "tool_calls": trail.logged_calls(security.pseudonyms),
        "rounds": trail.rounds,
        "answer_sha256": trail.answer_sha256,
        "grounding": trail.grounding,
        "tools_offered": trail.offered,
        "workers": trail.workers,
    }
    question = last_user_text(conversation)
    digest = hashlib.sha256(question.encode()).hexdigest()
    if task is not None:
        return base | {"kind": "client_task", "task": task.kind, "question": None, "question_sha256": digest}
    text = security.pseudonyms.text(question, trail.names)
    return base | {
        "kind": "chat",
        "question": text if security.settings.audit_question == "text" else None,
        "question_sha256": digest,
    }


async def audit_failure(request: Request, exc: AgentError) -> None:
    """Audit a request refused before the loop ran (401, 429, 400, 404, 413): the fact, never a key."""
    if getattr(request.state, "audited", False) or not hasattr(request.app.state, "security"):
        return
    if request.url.path in CHAT_PATHS or exc.status in (401, 403):
        record = _base_record(request, exc.status, exc.code or type(exc).__name__)
        if isinstance(exc, RefusedName):  # who it claimed to be, as received, readable in any terminal
            record["claimed_user"] = escaped(exc.received)
        security: Security = request.app.state.security
        if exc.status in FLOOD_STATUSES and not security.flood.admit(str(record["client"]), exc.status):
            request.state.audited = True  # counted: written in the window's `refusals_suppressed` summary
            return
        await _write(request, record)
