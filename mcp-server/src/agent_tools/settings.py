"""The MCP server's configuration: one Settings object read from the environment, reached via get_settings()."""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from agent_contract.secrets import RotatingSecret, SecretFileError, read_secret

# Loopback names plus the compose service name: the Host header a peer on the internal network sends.
DEFAULT_ALLOWED_HOSTS = [
    "127.0.0.1:*",
    "localhost:*",
    "[::1]:*",
    "mcp-server:*",
    "127.0.0.1",
    "localhost",
    "mcp-server",
]
MIN_TOKEN_LENGTH = 16
PLACEHOLDER_TOKENS = {"changeme", "change-me", "change_me", "secret", "token", "password", "xxx"}


class ConfigError(Exception):
    """A setting makes the server unsafe or unable to start; the message says which and how to fix it."""


def _split(value: object) -> object:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


class Settings(BaseSettings):
    """Every setting has a default that works on one machine with services on loopback; compose overrides."""

    # The docstring under each field is its description: docs/configuration.md is generated from them.
    model_config = SettingsConfigDict(
        env_file=None, extra="ignore", case_sensitive=False, use_attribute_docstrings=True
    )

    mcp_host: str = "127.0.0.1"
    """bind address (compose: `0.0.0.0`)"""
    mcp_port: int = Field(default=8001, ge=0, le=65535)
    """the tool server's port"""
    mcp_token: SecretStr | None = None
    """bearer secret (at least 16 characters; placeholders are refused). Without it (and without `MCP_TOKEN_FILE`) the
    server refuses to start (exit 2)"""
    mcp_token_file: Path | None = None
    """a file holding the token (docker secrets), read when `MCP_TOKEN` is unset"""
    mcp_allow_no_token: bool = False
    """local development only: serve `/mcp` without a token"""
    mcp_allowed_hosts: Annotated[list[str], NoDecode] = Field(default_factory=lambda: list(DEFAULT_ALLOWED_HOSTS))
    """`Host` values accepted on `/mcp` (comma list of `host[:port]`, each compared whole; `:*` = any port number); any
    other gets 421. DNS-rebinding protection is always on, including for a `0.0.0.0` bind"""
    mcp_allowed_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """browser `Origin`s accepted on `/mcp` (default: `http://` + each allowed host), compared whole like the hosts; any
    other gets 403. A request without `Origin` (every non-browser client) is accepted"""
    files_root: Path = Path("files")
    """the only folder the file tools can see (mount it read-only)"""
    data_dir: Path = Path("data")
    """writable: the notes store `notes.sqlite3` and the demo database `reports-demo.sqlite3`"""
    reports_db_url: str | None = None
    """unset: the SQLite demo database in `DATA_DIR`. `postgresql://user[:pw]@host:port/db`: PostgreSQL (use a
    read-only role). `sqlite:////abs/path.db`: another SQLite file"""
    mcp_timezone: str | None = None
    """the zone that decides what \"today\"/\"bugün\" means (else `TZ`, else UTC)"""
    tz: str | None = None
    """used when `MCP_TIMEZONE` is unset"""
    log_level: str = "INFO"
    """structlog JSON lines on stdout; tool arguments and results are never logged"""
    mcp_policy_file: Path | None = None
    """which tools each forwarded role may use (the agent's policy format, the same file as `AGENT_POLICY_FILE`);
    unset: the shipped policy"""
    mcp_require_identity: bool = True
    """refuse HTTP tool calls that carry no `X-Agent-Role` (the agent always forwards one); `false` only for direct
    development calls. Calls that carry an identity are always checked"""
    mcp_distractor_tools: bool = False
    """measurement only: add 39 distractor reports (50 tools in all) to the demo server, to measure tool retrieval
    (`scripts/bench-retrieval`, [tools.md](tools.md#tool-retrieval)); refused with `REPORTS_DB_URL`. They have no
    data: a call returns an error saying so"""
    mcp_request_read_timeout_seconds: float = Field(default=15.0, gt=0)
    """a request (headers and body) must arrive whole this many seconds after its first byte; slower ones are cut"""

    @field_validator("mcp_allowed_hosts", "mcp_allowed_origins", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        return _split(value)

    @field_validator("mcp_allowed_hosts")
    @classmethod
    def _never_empty(cls, value: list[str]) -> list[str]:
        # An empty list would make every request a 421; unset and empty both mean the defaults.
        return value or list(DEFAULT_ALLOWED_HOSTS)

    def timezone_name(self) -> str:
        """MCP_TIMEZONE, else TZ, else UTC: the zone that decides what "today" means."""
        return self.mcp_timezone or self.tz or "UTC"

    def zone(self) -> ZoneInfo:
        name = self.timezone_name().lstrip(":")
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ConfigError(f"MCP_TIMEZONE/TZ {name!r} is not a known time zone (e.g. Europe/Istanbul)") from exc

    def origins(self) -> list[str]:
        """Allowed origins: explicit MCP_ALLOWED_ORIGINS, else http:// + each allowed host."""
        return self.mcp_allowed_origins or [f"http://{host}" for host in self.mcp_allowed_hosts]

    def token(self) -> str | None:
        """The bearer secret from MCP_TOKEN or MCP_TOKEN_FILE (None when neither is set)."""
        try:
            return read_secret(self.mcp_token, self.mcp_token_file, "MCP_TOKEN")
        except SecretFileError as exc:
            raise ConfigError(str(exc)) from exc

    def checked_token(self) -> str | None:
        """The token the HTTP app must require; refuses to run open unless MCP_ALLOW_NO_TOKEN=true."""
        token = self.token()
        if token is None:
            if self.mcp_allow_no_token:
                return None
            raise ConfigError(
                "MCP_TOKEN is not set: the server refuses to start without a bearer token. "
                "Set MCP_TOKEN (or MCP_TOKEN_FILE), or MCP_ALLOW_NO_TOKEN=true for local development only."
            )
        if not _strong(token):
            raise ConfigError(f"MCP_TOKEN is too weak: use a random value of at least {MIN_TOKEN_LENGTH} characters")
        return token

    def token_source(self) -> Callable[[], str | None] | None:
        """What the HTTP app requires on each request (None: open, MCP_ALLOW_NO_TOKEN), following MCP_TOKEN_FILE
        while the server runs: a token rotated by secrets-init is required from the next request on. A file
        rotated to an empty or weak value refuses every call (never runs open)."""
        if self.checked_token() is None:
            return None
        try:
            source = RotatingSecret(self.mcp_token, self.mcp_token_file, "MCP_TOKEN")
        except SecretFileError as exc:
            raise ConfigError(str(exc)) from exc

        def current() -> str | None:
            token = source.get()
            return token if token and _strong(token) else None

        return current

    def checked_distractors(self) -> bool:
        """MCP_DISTRACTOR_TOOLS, refused outside the demo database: they must never reach a real tool list."""
        if self.mcp_distractor_tools and self.reports_db_url:
            raise ConfigError(
                "MCP_DISTRACTOR_TOOLS=true is for measuring on the demo database only; unset it or REPORTS_DB_URL"
            )
        return self.mcp_distractor_tools

    def demo_db_path(self) -> Path:
        return self.data_dir / "reports-demo.sqlite3"

    def notes_db_path(self) -> Path:
        return self.data_dir / "notes.sqlite3"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


def environ_summary() -> dict[str, str]:
    """Which variables are set (never their values): logged at start so a misconfiguration is visible."""
    names = [
        "MCP_HOST",
        "MCP_PORT",
        "MCP_TOKEN",
        "MCP_TOKEN_FILE",
        "MCP_ALLOW_NO_TOKEN",
        "MCP_ALLOWED_HOSTS",
        "FILES_ROOT",
        "DATA_DIR",
        "REPORTS_DB_URL",
        "MCP_TIMEZONE",
        "TZ",
        "MCP_POLICY_FILE",
        "MCP_REQUIRE_IDENTITY",
        "MCP_DISTRACTOR_TOOLS",
    ]
    return {name: ("set" if os.environ.get(name) else "unset") for name in names}


def _strong(token: str) -> bool:
    return len(token) >= MIN_TOKEN_LENGTH and token.lower() not in PLACEHOLDER_TOKENS
