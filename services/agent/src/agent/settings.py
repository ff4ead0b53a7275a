"""The agent's configuration: one Settings object read from the environment, reached through get_settings()."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from fnmatch import fnmatchcase
from functools import lru_cache
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from agent_contract.secrets import RotatingSecret, read_secret


class Settings(BaseSettings):
    """Every setting has a default that works on one machine with services on loopback; compose overrides."""

    # The docstring under each field is its description: docs/configuration.md is generated from them.
    model_config = SettingsConfigDict(
        env_file=None, extra="ignore", case_sensitive=False, use_attribute_docstrings=True, populate_by_name=True
    )

    agent_host: str = "127.0.0.1"
    """where `agent-api` (and `local-agent`) listens"""
    agent_port: int = 8000
    """the API port"""
    ollama_url: str = "http://127.0.0.1:11434"
    """Ollama base URL"""
    model_name: str = Field(default="qwen3:4b", validation_alias=AliasChoices("model_name", "ollama_model"))
    """the model the agent serves by default, as the model server names it (any engine; `OLLAMA_MODEL`, its name
    before, still works and logs a deprecation notice once); `qwen2.5:3b` is the faster, less accurate alternative"""
    extra_models: str = ""
    """other Ollama models the agent also serves by name, comma separated (e.g. `qwen2.5:3b`)"""
    model_protocol: Literal["ollama", "openai"] = "ollama"
    """the model server this process (direct mode) or worker talks to: `ollama` (Ollama's /api/chat) or `openai`
    (any OpenAI-compatible /v1/chat/completions: vLLM, llama-server, LM Studio, TGI, SGLang) at `MODEL_URL`"""
    model_url: str | None = None
    """the model server's URL; unset: `OLLAMA_URL`"""
    model_api_key: SecretStr | None = None
    """sent as a bearer token to the model server of either protocol (OpenAI-compatible, or a proxy before Ollama)"""
    model_cache_prompt: bool = False
    """llama.cpp's prompt cache makes temperature-0 answers differ run to run: off unless asked for"""
    redis_url: str = "redis://127.0.0.1:6379/0"
    """the GPU queue (API and worker); also the rate-limit window with `RATE_LIMIT_BACKEND=auto`. `rediss://` for TLS.
    Credentials in the URL win over `REDIS_USERNAME` / `REDIS_PASSWORD`; messages show it without them"""
    redis_username: str | None = None
    """the Redis ACL user: compose sets `api` for agent-api, `worker-main` for the local worker, `worker-NAME` on a
    worker host (`scripts/worker-host`); unset: `default`, which the shipped Redis has off"""
    redis_password: SecretStr | None = None
    """the Redis password, when `REDIS_URL` carries none"""
    redis_password_file: Path | None = None
    """a file holding the Redis user's password, read when `REDIS_PASSWORD` is unset (compose: written by
    `secrets-init`, one per user; a worker host: the password `scripts/worker-host add` printed)"""
    redis_tls_ca_file: Path | None = None
    """`rediss://`: the CA certificate(s) that signed the Redis server's certificate (unset: the system's CAs)"""
    redis_tls_cert_file: Path | None = None
    """`rediss://`: this client's certificate, when Redis checks clients' certificates (`tls-auth-clients yes`)"""
    redis_tls_key_file: Path | None = None
    """`rediss://`: the key of `REDIS_TLS_CERT_FILE`"""
    redis_reconnect_seconds: float = Field(default=5.0, ge=0)
    """a request that finds Redis unreachable (restarting, loading its AOF) retries with backoff for this long before
    it fails: a Redis restart costs users latency, not answers. 0 fails at once"""
    mcp_url: str = "http://127.0.0.1:8001/mcp"
    """the MCP tool server"""
    mcp_token: SecretStr | None = None
    """bearer secret shared with the MCP server"""
    mcp_token_file: Path | None = None
    """a file holding the MCP token, read when `MCP_TOKEN` is unset (docker secrets)"""

    round_signing_key: SecretStr | None = None
    """agent-api, queue mode: the Ed25519 key (32 bytes, base64) it signs every round it enqueues with; only
    agent-api holds it (compose: secrets-init writes it; docs/security.md, "Signed rounds")"""
    round_signing_key_file: Path | None = None
    """a file holding `ROUND_SIGNING_KEY`"""
    round_verify_key: str | None = None
    """agent-worker: agent-api's public round key (base64); a job without a valid signature never runs"""
    round_verify_key_file: Path | None = None
    """a file holding `ROUND_VERIFY_KEY` (compose: secrets-init; a worker host: `scripts/worker-host add` prints it)"""

    max_tool_rounds: int = Field(default=5, ge=0, le=20)
    """tool rounds before one final answer without tools (0–20)"""
    keep_client_system: bool = False
    """`false`: drop client system/developer messages; `true`: keep them after ours"""
    temperature: float = 0.0
    """sent to Ollama on every round"""
    num_ctx: int = 8192
    """context window sent on every round and by the worker's warm-up (a different value reloads the model)"""
    think: str = "unset"
    """`unset` sends no `think` field (Ollama's default: on for thinking models); `true`, `false` or a level (`low`…)
    sends it"""
    think_holdback_models: str = "qwen3:4b,qwen3:30b,qwen3:235b,*thinking*,deepseek-r1,qwq,!*instruct*"
    """models whose reasoning may reach content without an opening `<think>` (their template opens it in the
    prompt): their content is held back until `</think>` or the end of the round, so reasoning never streams as
    answer text; other models' content streams as soon as it cannot be a `<think>` block. Comma-separated: a
    name prefix, a glob (`*thinking*`), `!glob` excludes — [api.md](api.md#thinking-models)"""

    tool_timeout_seconds: float = 20.0
    """per tool call"""
    tool_reconnect_seconds: float = Field(default=5.0, ge=0)
    """a tool call that could not reach the MCP server (restarting) waits this long for it to come back and is then
    sent once more; a call that reached the server is never repeated"""
    tool_result_max_chars: int = 8000
    """a tool result is cut to this before the model reads it"""
    tools_cache_seconds: float = 60.0
    """how long the MCP tool list is cached (a changed docstring reaches the model after this)"""
    tool_retrieval: Literal["off", "lexical"] = "off"
    """before the first round, offer the model only the `TOOL_TOP_K` allowed tools that best fit the question (plus
    any named in it or called earlier): `lexical` (BM25 with Turkish folding, no dependency) or `off` (every allowed
    tool; the default: with the shipped 11 tools a missed tool costs more than the prompt it saves) —
    [tools.md](tools.md#tool-retrieval)"""
    tool_top_k: int = Field(default=4, ge=1, le=100)
    """how many ranked tools `TOOL_RETRIEVAL` offers per request"""
    tool_calling: Literal["native", "constrained"] = "native"
    """`native`: the tools go to the model server as `tools` and the model writes calls its own way;
    `constrained`: each tool-deciding round asks for one JSON decision (one offered tool with arguments valid for
    it, or `answer_directly`) under a schema the server enforces while decoding —
    [tools.md](tools.md#constrained-tool-calling)"""
    tool_decision: Literal["whole", "name_first"] = "whole"
    """with `TOOL_CALLING=constrained`: `whole`, one decision round under every offered tool's description and
    arguments; `name_first`, a round choosing among the tool names under one summary line per tool, then, for a
    tool with arguments, a round writing them under that tool's description alone —
    [tools.md](tools.md#constrained-tool-calling)"""
    round_timeout_seconds: float = 120.0
    """longest single LLM round, from the request to the model server to its last token, before 504: the whole
    round (a server that trickles tokens is stopped too), in direct and queue mode, with either `MODEL_PROTOCOL`"""
    max_body_bytes: int = 1_000_000
    """larger request bodies get 413"""
    request_read_timeout_seconds: float = Field(default=15.0, gt=0)
    """a request (headers and body) must arrive whole this many seconds after its first byte; slower ones are cut"""
    max_messages: int = 200
    """longer conversations get 400"""

    # GPU queue (agent.queue.client): "direct" calls Ollama from the API process, "queue" routes rounds through RQ.
    model_backend: Literal["direct", "queue"] = "queue"
    """`queue`: rounds go through Redis/RQ to `agent-worker`; `direct`: the API calls Ollama itself (one machine, no
    GPU sharing; `local-agent` uses it)"""
    max_queue_depth: int = 32
    """waiting rounds before 429 + `Retry-After`"""
    max_rounds_per_user: int = Field(default=3, ge=0)
    """fair share: a user's rounds queued or on the GPU at once; past it a new question is a 429 naming this limit
    (a round of a conversation under way is never refused). 0: no per-user limit. Users are API keys and the
    front-end's signed users; AGENT_AUTH=none has no users, so no fair share"""
    queue_timeout_seconds: float = 300.0
    """longest wait for the GPU before 503"""
    worker_metrics_port: int = 9101
    """the worker's Prometheus `/metrics` port"""
    worker_metrics_host: str = "127.0.0.1"
    """where the worker's `/metrics` listens; compose sets `0.0.0.0` so Prometheus can scrape it"""
    gpu_id: str = "gpu0"
    """names the GPU lock and the `gpu` metric label: unique per GPU, identical for workers sharing one Ollama"""
    worker_slots: int = Field(default=1, ge=1, le=64)
    """rounds this worker's model server runs at once (one slot process each; its GPU lock counts this many): 1
    for Ollama on one 8 GB card; the server's own parallelism for vLLM, `llama-server --parallel N` or
    `OLLAMA_NUM_PARALLEL`. Each slot costs the server a KV cache of `NUM_CTX` tokens (docs/operating.md)"""

    # Identity and access (agent.security.auth, agent_contract.policy): never "none" in compose.
    agent_auth: Literal["api_key", "trusted_header", "none"] = "api_key"
    """`api_key`, `trusted_header` (SSO proxy, with `TRUSTED_PROXIES`) or `none` (development only; compose never uses
    it)"""
    anonymous_role: str = "guest"
    """the role of every caller when `AGENT_AUTH=none`, and of SSO users in no group the policy knows"""
    agent_keys_file: Path | None = None
    """YAML `keys: [{name, role, sha256}]`, managed by `agent-admin keys` (unset: no key is valid)"""
    agent_policy_file: Path | None = None
    """YAML `roles: {role: [tool names or \"*\"]}`; unset: the shipped default (agent_contract/policy.yaml)"""
    trusted_proxies: str = ""
    """`trusted_header`: identity headers are believed only from these addresses/CIDRs (comma separated)"""
    allowed_origins: str = ""
    """`trusted_header`: browser pages allowed to call the API with the user's SSO session, as
    `scheme://host[:port]`, comma separated; a request carrying any other `Origin` gets 403 (empty: none)"""
    auth_user_header: str = "X-Forwarded-User"
    """`trusted_header`: the header naming the user"""
    auth_groups_header: str = "X-Forwarded-Groups"
    """`trusted_header`: the header listing the user's groups"""
    frontend_user_headers: str = "X-OpenWebUI-User-Email,X-OpenWebUI-User-Id"
    """a front-end key (`agent-admin keys add … --frontend`) names its end user in the first of these headers that
    is set (Open WebUI with `ENABLE_FORWARD_USER_INFO_HEADERS=true`); other callers' headers are ignored
    ([security.md](security.md#users-of-a-chat-front-end-open-webui)); ignored while `FRONTEND_JWT_SECRET` is set"""
    frontend_jwt_secret: SecretStr | None = None
    """set: a front-end key's end user is believed only from a signed token (Open WebUI's
    `FORWARD_USER_INFO_HEADER_JWT_SECRET`, the same value: HS256, issuer `open-webui`, unexpired) in
    `FRONTEND_JWT_HEADER`; plain user headers are then ignored ([open-webui.md](open-webui.md#signed-identity))"""
    frontend_jwt_secret_file: Path | None = None
    """a file holding `FRONTEND_JWT_SECRET`, re-read when it changes (compose: written by `secrets-init`)"""
    frontend_jwt_header: str = "X-OpenWebUI-User-Jwt"
    """the header carrying a front-end's signed user token"""
    frontend_jwt_max_age_seconds: int = Field(default=300, ge=1)
    """the longest a front-end's signed user token is accepted, from its `iat` (and the longest `exp - iat` it may
    claim): Open WebUI signs each request's token for 300 s; 10 s of clock skew are allowed beyond it"""
    rate_limit_per_minute: int = Field(default=30, ge=0)
    """chat requests per user per minute (`0` off)"""
    rate_limit_backend: Literal["auto", "redis", "memory"] = "auto"
    """`auto`: in Redis with the GPU queue, else in memory; `redis` or `memory` to choose"""

    # Tamper-evident audit log (agent.security.audit): one HMAC-chained JSON line per request, durable before the
    # response ends (records ending together share one fsync: agent.security.audit_commit).
    audit_dir: Path = Path("audit")
    """where the sealed audit log lives"""
    audit_key: SecretStr | None = None
    """the audit log's HMAC key"""
    audit_key_file: Path | None = None
    """a file holding the audit key (compose: a separate secret volume); unset with no `AUDIT_KEY`: a key generated
    beside the log, with a warning"""
    audit_question: Literal["text", "hash"] = "text"
    """`text` keeps the question (customer names pseudonymised); `hash` only its SHA-256"""
    audit_pseudonymize: bool = True
    """replace customer names by keyed pseudonyms in the audit log (`false`: names in clear, an operator decision)"""
    audit_retention_days: int = Field(default=365, ge=1)
    """rotated audit files older than this are deleted (each deletion recorded in the chain)"""
    audit_rotate_bytes: int = Field(default=64 * 1024 * 1024, ge=4096)
    """size that forces a rotation of the audit file"""
    pseudonym_key: SecretStr | None = None
    """key of the customer-name pseudonyms; unset: derived from the audit key"""
    pseudonym_key_file: Path | None = None
    """a file holding the pseudonym key"""

    grounding_mode: Literal["record", "warn", "withhold"] = "warn"
    """a figure in the answer not found in the tool results: `record` (trace, metric, audit only), `warn` (plus a
    warning line under the answer), `withhold` (answer replaced by the tool results; answer text is not
    streamed) — [grounding.md](grounding.md)"""
    answer_check_budget_seconds: float = Field(default=0.5, gt=0)
    """the answer (grounding) check's time per request, waiting for its thread included; past it the verdict is
    `skipped` (trace, audit and `agent_grounding_checks_total{status="skipped"}`) and the answer goes out unchecked"""

    # Client background tasks (agent.loop.tasks): Open WebUI's title/tags/follow-up requests and the like.
    client_task_pattern: str = r"\s*###\s*Task:"
    """regex at the start of the last user message that marks a front-end's background task (title, tags,
    follow-ups); empty: none ([api.md](api.md#client-background-tasks-titles-tags-follow-up-suggestions))"""
    client_tasks: Literal["model", "local", "off"] = "local"
    """`local`: answered at once without the GPU (a title from the question, no tags or follow-ups); `model`: one
    tool-less round below every user round, preempted by the next question, answered locally when the GPU is
    busy; `off`: answered empty at once
    ([measured](open-webui.md#background-tasks-titles-tags-follow-up-suggestions))"""
    client_task_wait_seconds: float = Field(default=3.0, ge=0)
    """a task that has not reached the GPU by then is answered locally"""
    client_task_max_tokens: int = Field(default=128, ge=1)
    """`num_predict` of a task round"""

    debug_capture_file: Path | None = None
    """opt-in: the last raw request is written there (mode 0600). It holds personal data: off in production"""
    log_level: str = "INFO"
    """structlog JSON logs on stdout"""

    @field_validator(
        "redis_username",
        "redis_password_file",
        "frontend_jwt_secret_file",
        "redis_tls_ca_file",
        "redis_tls_cert_file",
        "redis_tls_key_file",
        "round_signing_key_file",
        "round_verify_key_file",
        mode="before",
    )
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        """Compose passes `VAR=` for an unset `${VAR:-}`: that means "not set", never the path "."."""
        return None if value == "" else value

    def mcp_secret(self) -> str | None:
        """The bearer token for the MCP server: MCP_TOKEN, else the contents of MCP_TOKEN_FILE."""
        return read_secret(self.mcp_token, self.mcp_token_file, "MCP_TOKEN")

    def round_signing_secret(self) -> str:
        """ROUND_SIGNING_KEY or its file; agent-api in queue mode cannot enqueue a round without it."""
        key = read_secret(self.round_signing_key, self.round_signing_key_file, "ROUND_SIGNING_KEY")
        if not key:
            raise ValueError("ROUND_SIGNING_KEY_FILE (or ROUND_SIGNING_KEY) is unset: queue mode signs every round")
        return key

    def round_verify_secret(self) -> str:
        """ROUND_VERIFY_KEY or its file; agent-worker runs no round it cannot verify."""
        key = read_secret(self.round_verify_key, self.round_verify_key_file, "ROUND_VERIFY_KEY")
        if not key:
            raise ValueError("ROUND_VERIFY_KEY_FILE (or ROUND_VERIFY_KEY) is unset: a worker runs only signed rounds")
        return key

    def mcp_token_source(self) -> RotatingSecret:
        """The MCP token, re-read when MCP_TOKEN_FILE changes: a rotation reaches the running API."""
        return RotatingSecret(self.mcp_token, self.mcp_token_file, "MCP_TOKEN")

    def frontend_jwt_source(self) -> RotatingSecret:
        """The front-end token secret, re-read when FRONTEND_JWT_SECRET_FILE changes (a rotation needs no restart)."""
        return RotatingSecret(self.frontend_jwt_secret, self.frontend_jwt_secret_file, "FRONTEND_JWT_SECRET")

    def worker_host(self) -> str:
        """The GPU host this worker runs on, as its Redis user names it (`worker-NAME` → NAME; else `main`): the
        prefix of the keys only this host may write. The user in REDIS_URL wins over REDIS_USERNAME, as it does
        when the worker logs in."""
        user = unquote(urlsplit(self.redis_url).username or "") or self.redis_username or ""
        return worker_host_of(user) or MAIN_HOST

    def model_endpoint(self) -> str:
        """The model server's base URL, written with or without the `/v1` every OpenAI client puts in its base URL:
        one trailing `/v1` is dropped, as the agent adds the API's paths (`/v1/models`, `/api/chat`) itself."""
        url = (self.model_url or self.ollama_url).rstrip("/")
        return url.removesuffix("/v1")

    def model_headers(self) -> dict[str, str]:
        key = self.model_api_key.get_secret_value() if self.model_api_key else ""
        return {"Authorization": f"Bearer {key}"} if key else {}

    def round_options(self) -> dict[str, object]:
        """Ollama `options` for every round and for the worker's warm-up: identical, or the model reloads."""
        return {"temperature": self.temperature, "num_ctx": self.num_ctx}

    def served_models(self) -> list[str]:
        extras = [m.strip() for m in self.extra_models.split(",") if m.strip()]
        return [self.model_name, *[m for m in extras if m != self.model_name]]

    def think_value(self) -> bool | str | None:
        value = self.think.strip().lower()
        if value in ("", "unset", "none"):
            return None
        if value in ("true", "false"):
            return value == "true"
        return value

    def holds_back_think(self, model: str) -> bool:
        """Whether THINK_HOLDBACK_MODELS names `model`: an exclusion (`!…`) wins over any inclusion."""
        entries = [e.strip() for e in self.think_holdback_models.split(",") if e.strip()]
        excluded = any(_names_model(e[1:], model) for e in entries if e.startswith("!"))
        return not excluded and any(_names_model(e, model) for e in entries if not e.startswith("!"))


def _names_model(entry: str, model: str) -> bool:
    """A glob (`*`, `?`, `[`) matches the whole name; any other entry is a prefix, as the setting always was."""
    return fnmatchcase(model, entry) if any(c in entry for c in "*?[") else model.startswith(entry)


# Settings renamed for being engine-neutral: old environment name → new one. The old name still works.
MAIN_HOST = "main"  # the worker host of a worker logged in to Redis as anything but `worker-NAME`: the main server


def worker_host_of(redis_user: str) -> str | None:
    """The worker host a Redis user is (`worker-NAME` → NAME, as scripts/worker-host names them); None for any other."""
    return redis_user.removeprefix("worker-") if redis_user.startswith("worker-") else None


DEPRECATED_NAMES = {"OLLAMA_MODEL": "MODEL_NAME"}


def deprecation_notices(environ: Mapping[str, str]) -> list[str]:
    """One line per old setting name found in `environ` (the new name, when both are set, wins)."""
    names = {k.upper() for k, v in environ.items() if v}
    return [
        f"{old} is deprecated: use {new} (same meaning){'; ignored, since ' + new + ' is set' if new in names else ''}"
        for old, new in DEPRECATED_NAMES.items()
        if old in names
    ]


@lru_cache
def get_settings() -> Settings:
    """The process's settings, built once; an old setting name is reported here, so once per process."""
    for notice in deprecation_notices(os.environ):
        print(f"local-agent: {notice}", file=sys.stderr)
    return Settings()
