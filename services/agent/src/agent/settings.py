"""The agent's configuration: one Settings object read from the environment, reached through get_settings()."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from agent_contract.secrets import read_secret


class Settings(BaseSettings):
    """Every setting has a default that works on one machine with services on loopback; compose overrides."""

    model_config = SettingsConfigDict(env_file=None, extra="ignore", case_sensitive=False)

    agent_host: str = "127.0.0.1"
    agent_port: int = 8000
    ollama_url: str = "http://127.0.0.1:11434"
    ollama_model: str = "qwen3:4b"
    # Other Ollama models the agent also serves by name (comma separated), e.g. "qwen2.5:3b".
    extra_models: str = ""
    # The model server this process (direct mode) or worker talks to: Ollama's /api/chat, or any
    # OpenAI-compatible /v1/chat/completions (vLLM, llama-server, LM Studio, TGI, SGLang) at MODEL_URL.
    model_protocol: Literal["ollama", "openai"] = "ollama"
    model_url: str | None = None  # None: OLLAMA_URL
    model_api_key: SecretStr | None = None  # sent as a bearer token to an OpenAI-compatible server
    # llama.cpp's prompt cache makes temperature-0 answers differ run to run: off unless asked for.
    model_cache_prompt: bool = False
    redis_url: str = "redis://127.0.0.1:6379/0"
    mcp_url: str = "http://127.0.0.1:8001/mcp"
    mcp_token: SecretStr | None = None
    mcp_token_file: Path | None = None

    max_tool_rounds: int = Field(default=5, ge=0, le=20)
    keep_client_system: bool = False
    temperature: float = 0.0
    # Context window sent on every round (and by the worker's warm-up): a different num_ctx reloads the model.
    num_ctx: int = 8192
    # "unset" sends no `think` field (Ollama's default: on for thinking models); "true"/"false" or a level otherwise.
    think: str = "unset"
    # Model name prefixes whose content may carry reasoning before a stray </think>: their text is held back
    # until the tag or the end of the round, so reasoning never streams as answer text.
    think_holdback_models: str = "qwen3,deepseek-r1,qwq"

    tool_timeout_seconds: float = 20.0
    tool_result_max_chars: int = 8000
    tools_cache_seconds: float = 60.0
    round_timeout_seconds: float = 120.0
    max_body_bytes: int = 1_000_000
    # a request (headers and body) must arrive whole this many seconds after its first byte; slower ones are cut
    request_read_timeout_seconds: float = Field(default=15.0, gt=0)
    max_messages: int = 200

    # GPU queue (agent.queue.client): "direct" calls Ollama from the API process, "queue" routes rounds through RQ.
    model_backend: Literal["direct", "queue"] = "queue"
    max_queue_depth: int = 32
    queue_timeout_seconds: float = 300.0
    worker_metrics_port: int = 9101
    # Where the worker's /metrics listens; compose sets 0.0.0.0 so Prometheus can scrape it.
    worker_metrics_host: str = "127.0.0.1"
    gpu_id: str = "gpu0"

    # Identity and access (agent.security.auth, agent_contract.policy): never "none" in compose.
    agent_auth: Literal["api_key", "trusted_header", "none"] = "api_key"
    # The role of every caller when AGENT_AUTH=none, and of SSO users in no group the policy knows.
    anonymous_role: str = "guest"
    agent_keys_file: Path | None = None
    agent_policy_file: Path | None = None  # None: the shipped default (agent_contract/policy.yaml)
    # trusted_header: identity headers are accepted only from these addresses/CIDRs (comma separated).
    trusted_proxies: str = ""
    auth_user_header: str = "X-Forwarded-User"
    auth_groups_header: str = "X-Forwarded-Groups"
    # A front-end key (`agent-admin keys add … --frontend`) names its end user in the first of these headers
    # that is set (Open WebUI with ENABLE_FORWARD_USER_INFO_HEADERS=true); other callers' headers are ignored.
    frontend_user_headers: str = "X-OpenWebUI-User-Email,X-OpenWebUI-User-Id"
    # Per-user chat requests per minute (0 = off); "auto" keeps the window in Redis with the GPU queue.
    rate_limit_per_minute: int = Field(default=30, ge=0)
    rate_limit_backend: Literal["auto", "redis", "memory"] = "auto"

    # Tamper-evident audit log (agent.security.audit): one HMAC-chained JSON line per request, fsync per record.
    audit_dir: Path = Path("audit")
    audit_key: SecretStr | None = None
    audit_key_file: Path | None = None
    audit_question: Literal["text", "hash"] = "text"
    audit_pseudonymize: bool = True
    audit_retention_days: int = Field(default=365, ge=1)
    audit_rotate_bytes: int = Field(default=64 * 1024 * 1024, ge=4096)
    pseudonym_key: SecretStr | None = None
    pseudonym_key_file: Path | None = None

    # What to do when the answer states a figure not found in the tool results (docs/grounding.md).
    grounding_mode: Literal["record", "warn", "withhold"] = "warn"

    # Client background tasks (agent.loop.tasks): Open WebUI's title/tags/follow-up requests and the like.
    # A regex matched at the start of the last user message; empty: never recognise a task.
    client_task_pattern: str = r"\s*###\s*Task:"
    # model: one tool-less round below every user round, answered locally when the GPU is busy;
    # local: always answered without the GPU; off: answered empty at once (the client keeps its defaults).
    client_tasks: Literal["model", "local", "off"] = "model"
    client_task_wait_seconds: float = Field(default=3.0, ge=0)  # then the GPU is busy: answer locally
    client_task_max_tokens: int = Field(default=128, ge=1)  # num_predict of a task round

    debug_capture_file: Path | None = None
    log_level: str = "INFO"

    def mcp_secret(self) -> str | None:
        """The bearer token for the MCP server: MCP_TOKEN, else the contents of MCP_TOKEN_FILE."""
        return read_secret(self.mcp_token, self.mcp_token_file, "MCP_TOKEN")

    def model_endpoint(self) -> str:
        return (self.model_url or self.ollama_url).rstrip("/")

    def model_headers(self) -> dict[str, str]:
        key = self.model_api_key.get_secret_value() if self.model_api_key else ""
        return {"Authorization": f"Bearer {key}"} if key else {}

    def round_options(self) -> dict[str, object]:
        """Ollama `options` for every round and for the worker's warm-up: identical, or the model reloads."""
        return {"temperature": self.temperature, "num_ctx": self.num_ctx}

    def served_models(self) -> list[str]:
        extras = [m.strip() for m in self.extra_models.split(",") if m.strip()]
        return [self.ollama_model, *[m for m in extras if m != self.ollama_model]]

    def think_value(self) -> bool | str | None:
        value = self.think.strip().lower()
        if value in ("", "unset", "none"):
            return None
        if value in ("true", "false"):
            return value == "true"
        return value

    def holds_back_think(self, model: str) -> bool:
        prefixes = [p.strip() for p in self.think_holdback_models.split(",") if p.strip()]
        return any(model.startswith(p) for p in prefixes)


@lru_cache
def get_settings() -> Settings:
    return Settings()
