"""Runs a question set against an OpenAI-compatible endpoint and records what the model did, per question.

The tools called come from the agent's machine-readable trace (`local_agent.tool_calls`), never from
parsing the answer text. One question at a time: the agent serves one generation per GPU anyway, and
latency measured under our own concurrency would say nothing about a user's wait.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any

import httpx

from agent.eval.errors import AgentRefused, AgentUnreachable
from agent.eval.patience import WaitBudget, post_patiently
from agent.eval.questions import QuestionSet
from agent.eval.records import Call, Record, Run
from agent.eval.retrieval import offered_names
from agent.eval.scoring import judge, score

Progress = Callable[[int, int, Record], None]
SCRIPTED_MARK = "[scripted model, not a real LLM]"  # how scripts/try's stand-in opens every answer


class AgentClient:
    """The few HTTP calls agent-eval makes: chat completions, model list, agent info, version."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 300.0,
        transport: httpx.BaseTransport | None = None,
        budget: WaitBudget | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.budget = budget or WaitBudget()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(headers=headers, timeout=httpx.Timeout(timeout, connect=5.0), transport=transport)

    @property
    def root(self) -> str:
        """The server root: `/api/version` lives beside `/v1`, not under it."""
        return self.base_url.removesuffix("/v1")

    def close(self) -> None:
        self.http.close()

    def _get_json(self, url: str) -> dict[str, Any] | None:
        """GET a JSON object; None when the endpoint is missing or answers something else (optional facts)."""
        try:
            resp = self.http.get(url)
        except httpx.TransportError as exc:
            raise AgentUnreachable(url, f"{type(exc).__name__}: {exc}") from exc
        if resp.status_code in (401, 403):  # "cannot reach" would send the operator after the wrong problem
            raise AgentRefused(url, resp.status_code, _error_text(resp).partition(": ")[2])
        if resp.status_code != 200:
            return None
        try:
            body = resp.json()
        except ValueError:
            return None
        return body if isinstance(body, dict) else None

    def models(self) -> list[str]:
        body = self._get_json(f"{self.base_url}/models") or {}
        return [str(m["id"]) for m in body.get("data", []) if isinstance(m, dict) and "id" in m]

    def info(self) -> dict[str, Any] | None:
        return self._get_json(f"{self.base_url}/agent/info")

    def api_version(self) -> str | None:
        body = self._get_json(f"{self.root}/api/version") or {}
        version = body.get("version")
        return str(version) if version is not None else None

    def ask(self, model: str, record: Record) -> Record:
        """Send one question; fill in calls, answer, rounds, latency (or the error) on `record`."""
        body = {"model": model, "stream": False, "messages": [{"role": "user", "content": record.text}]}
        started = time.monotonic()
        waited = 0.0
        try:
            url = f"{self.base_url}/chat/completions"
            resp, waited, record.waits = post_patiently(self.http, url, body, self.budget)
        except httpx.HTTPError as exc:
            record.latency_s = round(time.monotonic() - started, 3)
            record.error = f"{type(exc).__name__}: {exc}"
            return record
        record.waited_s = round(waited, 3)
        record.latency_s = round(time.monotonic() - started - waited, 3)  # the answer's time, not our waiting
        _read_reply(resp, record)
        return record


def _error_text(resp: httpx.Response) -> str:
    try:
        message = resp.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = resp.text[:300]
    return f"HTTP {resp.status_code}: {message}"


def _read_reply(resp: httpx.Response, record: Record) -> None:
    if resp.status_code != 200:
        record.error = _error_text(resp)
        return
    try:
        data = resp.json()
        record.answer = str(data["choices"][0]["message"].get("content") or "")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        record.error = f"not a chat completion: {resp.text[:200]}"
        return
    trace = data.get("local_agent")
    if not isinstance(trace, dict):
        record.error = "the reply has no `local_agent` trace: is this the local-agent API?"
        return
    record.rounds = int(trace.get("rounds") or 0)
    record.grounding = trace["grounding"] if isinstance(trace.get("grounding"), dict) else None
    record.offered = offered_names(trace.get("retrieval"))
    record.calls = [
        Call(
            name=str(c.get("name")),
            arguments=dict(c.get("arguments") or {}),
            outcome=str(c.get("outcome", "ok")),
            round=int(c.get("round") or 1),
        )
        for c in trace.get("tool_calls") or []
        if isinstance(c, dict)
    ]


def collect_meta(
    client: AgentClient,
    model: str,
    questions: QuestionSet,
    repeat: int,
    tool_fingerprints: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What a run measured: model, versions, prompt and tool fingerprints, question set, date."""
    info = client.info() or {}
    fingerprints = tool_fingerprints or {}
    return {
        "date": dt.date.today().isoformat(),
        "started_at": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "base_url": client.base_url,
        "model": model,
        "repeat": repeat,
        "ollama_version": info.get("ollama_version"),
        "api_version": client.api_version(),
        "agent_version": info.get("agent_version"),
        "agent_default_model": info.get("model"),
        "engine": info.get("engine"),
        "scripted": bool(info.get("engine_scripted")),
        "system_prompt_sha256": info.get("system_prompt_sha256"),
        "tools_sha256": info.get("tools_sha256") or fingerprints.get("tools_sha256"),
        "tool_sha256": info.get("tool_sha256") or fingerprints.get("tool_sha256"),
        "mcp_tools_sha256": fingerprints.get("tools_sha256"),  # read from the MCP server itself (--mcp-url)
        "tools": info.get("tools") or fingerprints.get("tools"),
        "agent_options": info.get("options"),
        "max_tool_rounds": info.get("max_tool_rounds"),
        "tool_calling": info.get("tool_calling"),
        "tool_decision": info.get("tool_decision"),
        "agent_info_available": bool(info),
        "questions_file": questions.source,
        "questions_sha256": questions.sha256,
        "question_count": len(questions.questions),
    }


def run_model(
    client: AgentClient,
    model: str,
    questions: QuestionSet,
    repeat: int = 1,
    progress: Progress | None = None,
    tool_fingerprints: dict[str, Any] | None = None,
) -> Run:
    """Ask every question `repeat` times with `model`; judge each record; score the run."""
    meta = collect_meta(client, model, questions, repeat, tool_fingerprints)
    today = dt.date.fromisoformat(meta["date"])
    total, records = len(questions.questions) * repeat, []
    for n in range(1, repeat + 1):
        for q in questions.questions:
            record = judge(client.ask(model, Record.for_question(q, n)), today)
            records.append(record)
            if progress is not None:
                progress(len(records), total, record)
    meta["finished_at"] = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    meta["refusal_waits"] = client.budget.summary()
    meta["scripted"] = meta["scripted"] or any(r.answer.startswith(SCRIPTED_MARK) for r in records)
    return Run(meta, records, score(records))


def resolve_models(client: AgentClient, wanted: list[str]) -> list[str]:
    """The models to run: those asked for, else the agent's default (from /v1/agent/info or /v1/models)."""
    if wanted:
        return wanted
    info = client.info() or {}
    if info.get("model"):
        return [str(info["model"])]
    served = client.models()
    if not served:
        raise AgentUnreachable(client.base_url, "it lists no models at /v1/models; name one with --model")
    return served[:1]
